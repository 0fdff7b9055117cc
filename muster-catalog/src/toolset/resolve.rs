//! Resolving a toolset against a catalogue snapshot: which tools each selector selects.

use std::collections::HashMap;

use muster_core::{ToolEntry, ToolKind, naming::WORKFLOW_TOOL_PREFIX};

use super::{InlineToolset, Presets, Rule, Selection, Selector, ToolsetError};
use crate::Catalog;

/// A toolset resolved against one snapshot.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The tools it selects.
    pub selection: Selection,
    /// The selectors (as declared) that selected nothing.
    pub unmatched: Vec<String>,
}

/// Resolves `toolset` against `catalog` with `presets`.
pub fn resolve(catalog: &Catalog, presets: &Presets, toolset: &InlineToolset) -> Result<Resolved, ToolsetError> {
    let mut resolver = Resolver {
        catalog,
        presets,
        memo: HashMap::new(),
    };
    let mut selection = Selection::none(catalog.tools().len());
    let mut unmatched = Vec::new();
    for (selector, declared) in toolset.selectors().iter().zip(toolset.declared()) {
        let selected = match selector {
            Selector::Preset(name) => {
                if presets.get(name).is_none() {
                    return Err(ToolsetError::UnknownPreset {
                        selectors: toolset.declared().to_vec(),
                        preset: name.clone(),
                        known: presets.names().to_vec(),
                    });
                }
                resolver.preset(name)
            }
            Selector::Server(name) => resolver.rule(&Rule::Server(name.clone())),
            Selector::Workflow(name) => resolver.rule(&Rule::Workflow(name.clone())),
            Selector::Tool(name) => resolver.rule(&Rule::Tool(name.clone())),
        };
        if selected.is_empty() {
            unmatched.push(declared.clone());
        }
        selection.union_with(&selected);
    }
    Ok(Resolved { selection, unmatched })
}

struct Resolver<'a> {
    catalog: &'a Catalog,
    presets: &'a Presets,
    memo: HashMap<String, Selection>,
}

impl Resolver<'_> {
    fn preset(&mut self, name: &str) -> Selection {
        if let Some(done) = self.memo.get(name) {
            return done.clone();
        }
        let len = self.catalog.tools().len();
        let Some(preset) = self.presets.get(name) else {
            return Selection::none(len);
        };
        let (include, exclude) = (preset.include.clone(), preset.exclude.clone());
        // Cycles are refused when presets are built; this guard keeps a bad set from recursing.
        self.memo.insert(name.to_owned(), Selection::none(len));
        let mut selection = Selection::none(len);
        for rule in &include {
            selection.union_with(&self.rule(rule));
        }
        for rule in &exclude {
            selection.subtract(&self.rule(rule));
        }
        self.memo.insert(name.to_owned(), selection.clone());
        selection
    }

    fn rule(&mut self, rule: &Rule) -> Selection {
        if let Rule::Preset(name) = rule {
            return self.preset(name);
        }
        let mut selection = Selection::none(self.catalog.tools().len());
        for (i, entry) in self.catalog.tools().iter().enumerate() {
            if matches_rule(self.catalog, entry, rule) {
                selection.insert(i);
            }
        }
        selection
    }
}

fn matches_rule(catalog: &Catalog, entry: &ToolEntry, rule: &Rule) -> bool {
    match rule {
        Rule::All => true,
        Rule::Tool(name) => entry.name() == name,
        Rule::Pattern(pattern) => pattern.matches(entry.name()),
        Rule::Server(name) => {
            entry.server.as_deref() == Some(name.as_str())
                || entry.family.as_ref().is_some_and(|f| f.members.contains_key(name))
        }
        Rule::Workflow(name) => {
            entry.kind == ToolKind::Workflow && entry.name().strip_prefix(WORKFLOW_TOOL_PREFIX) == Some(name.as_str())
        }
        Rule::ReadOnly => entry.is_read_only(),
        Rule::Label(label) => match (&entry.family, &entry.server) {
            (Some(family), _) => family
                .members
                .keys()
                .any(|m| catalog.server_labels(m).is_some_and(|l| label.matches(l))),
            (None, Some(server)) => catalog.server_labels(server).is_some_and(|l| label.matches(l)),
            (None, None) => label.matches(&entry.labels),
        },
        Rule::Preset(_) => false,
    }
}

/// Whether `toolset` selects the tool exposed as `name` (checked on that one tool only).
pub fn selects(
    catalog: &Catalog,
    presets: &Presets,
    toolset: &InlineToolset,
    name: &str,
) -> Result<bool, ToolsetError> {
    let Some(entry) = catalog.tool(name) else {
        return Ok(false);
    };
    let mut found = false;
    for selector in toolset.selectors() {
        let rule = match selector {
            Selector::Preset(p) => {
                if presets.get(p).is_none() {
                    return Err(ToolsetError::UnknownPreset {
                        selectors: toolset.declared().to_vec(),
                        preset: p.clone(),
                        known: presets.names().to_vec(),
                    });
                }
                Rule::Preset(p.clone())
            }
            Selector::Server(s) => Rule::Server(s.clone()),
            Selector::Workflow(w) => Rule::Workflow(w.clone()),
            Selector::Tool(t) => Rule::Tool(t.clone()),
        };
        found = found || entry_matches(catalog, presets, entry, &rule, 0);
    }
    Ok(found)
}

/// How deep preset composition is followed when checking one tool (cycles are refused when
/// presets are built; this bounds a bad set anyway).
const MAX_PRESET_DEPTH: usize = 32;

fn entry_matches(catalog: &Catalog, presets: &Presets, entry: &ToolEntry, rule: &Rule, depth: usize) -> bool {
    match rule {
        Rule::Preset(name) if depth < MAX_PRESET_DEPTH => presets.get(name).is_some_and(|p| {
            p.include
                .iter()
                .any(|r| entry_matches(catalog, presets, entry, r, depth + 1))
                && !p
                    .exclude
                    .iter()
                    .any(|r| entry_matches(catalog, presets, entry, r, depth + 1))
        }),
        Rule::Preset(_) => false,
        other => matches_rule(catalog, entry, other),
    }
}
