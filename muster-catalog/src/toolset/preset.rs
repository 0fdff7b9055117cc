//! Toolset presets: named, reusable toolsets from `config.yaml` `toolsetPresets`, and the
//! built-in `read-only`, `none` and `full`.
//!
//! ```yaml
//! toolsetPresets:
//!   observability:
//!     description: Read metrics and logs
//!     include:
//!       - server: prometheus
//!       - pattern: "x_loki_*"
//!       - label: agent-platform.giantswarm.io/tool-group=observability
//!     exclude:
//!       - tool: x_prometheus_delete_series
//!   safe-ops:
//!     include:
//!       - preset: observability
//!       - readOnly: true
//! ```
//!
//! Each rule sets exactly one of `tool`, `pattern`, `server`, `workflow`, `readOnly: true`,
//! `preset` (in `include` only) or `label` (`k=v`, `k`, or `k=`). A preset is the union of its
//! includes minus the union of its excludes. Presets are checked when the gateway starts: a
//! redefined built-in, a rule with no key or several, a bad glob, `readOnly: false`, a preset in
//! `exclude`, an unknown composed preset or a composition cycle stops it, naming the preset.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::ToolsetError;
use crate::pattern::NamePattern;

/// The built-in presets, in the order they are listed.
pub const BUILT_IN_PRESETS: [&str; 3] = ["read-only", "none", "full"];

/// One preset as `config.yaml` writes it (the type is muster-core's, which documents
/// `toolsetPresets`).
pub use muster_core::config::ToolsetPresetConfig as PresetConfig;
/// One include or exclude rule as `config.yaml` writes it: exactly one key is set.
pub use muster_core::config::ToolsetRuleConfig as RuleConfig;

/// A label rule: a key, and the value it must have (any value when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRule {
    /// The label key.
    pub key: String,
    /// The value required, when the rule names one (`k=` requires the empty value).
    pub value: Option<String>,
}

impl LabelRule {
    /// Parses `k=v`, `k` or `k=`.
    pub fn parse(text: &str) -> Option<Self> {
        let (key, value) = match text.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_owned())),
            None => (text.trim(), None),
        };
        (!key.is_empty()).then(|| Self {
            key: key.to_owned(),
            value,
        })
    }

    /// Whether `labels` satisfy the rule.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match (labels.get(&self.key), &self.value) {
            (Some(_), None) => true,
            (Some(v), Some(want)) => v == want,
            (None, _) => false,
        }
    }
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub enum Rule {
    /// Every tool (the built-in `full`).
    All,
    /// One exposed name.
    Tool(String),
    /// A glob on the exposed name.
    Pattern(NamePattern),
    /// Every tool of a server.
    Server(String),
    /// One workflow's tool.
    Workflow(String),
    /// Every read-only tool.
    ReadOnly,
    /// Another preset.
    Preset(String),
    /// Tools whose labels (a workflow's own, a server tool's server's) match.
    Label(LabelRule),
}

/// A compiled preset.
#[derive(Debug, Clone)]
pub struct Preset {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Whether muster defines it.
    pub built_in: bool,
    /// Include rules.
    pub include: Vec<Rule>,
    /// Exclude rules.
    pub exclude: Vec<Rule>,
}

/// A preset as `filter_tools` lists it (`presets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PresetSummary {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Whether muster defines it.
    pub built_in: bool,
}

/// Every preset a gateway knows: the built-ins and the configured ones.
#[derive(Debug, Clone)]
pub struct Presets {
    presets: HashMap<String, Preset>,
    order: Vec<String>,
}

impl Default for Presets {
    fn default() -> Self {
        let built_in = [
            (
                "read-only",
                "Every tool annotated read-only (readOnlyHint: true)",
                vec![Rule::ReadOnly],
            ),
            ("none", "No tools", Vec::new()),
            ("full", "Every tool", vec![Rule::All]),
        ];
        let mut presets = HashMap::new();
        let mut order = Vec::new();
        for (name, description, include) in built_in {
            order.push(name.to_owned());
            presets.insert(
                name.to_owned(),
                Preset {
                    name: name.to_owned(),
                    description: description.to_owned(),
                    built_in: true,
                    include,
                    exclude: Vec::new(),
                },
            );
        }
        Self { presets, order }
    }
}

impl Presets {
    /// The built-ins plus `config.yaml`'s `toolsetPresets` (raw JSON per preset), checked.
    pub fn from_config(configured: &BTreeMap<String, Value>) -> Result<Self, ToolsetError> {
        let mut presets = Self::default();
        let mut raw = BTreeMap::new();
        for (name, value) in configured {
            let bad = |reason: String| ToolsetError::BadPreset {
                preset: name.clone(),
                reason,
            };
            if BUILT_IN_PRESETS.contains(&name.as_str()) {
                return Err(bad("built-in presets cannot be redefined".into()));
            }
            let config: PresetConfig = serde_json::from_value(value.clone()).map_err(|e| bad(e.to_string()))?;
            raw.insert(name.clone(), config);
        }
        for (name, config) in &raw {
            let bad = |reason: String| ToolsetError::BadPreset {
                preset: name.clone(),
                reason,
            };
            let include = compile_rules(&config.include, "include", true).map_err(bad)?;
            let exclude = compile_rules(&config.exclude, "exclude", false).map_err(bad)?;
            for rule in &include {
                if let Rule::Preset(other) = rule
                    && !raw.contains_key(other)
                    && !BUILT_IN_PRESETS.contains(&other.as_str())
                {
                    return Err(bad(format!("includes unknown preset {other:?}")));
                }
            }
            presets.order.push(name.clone());
            presets.presets.insert(
                name.clone(),
                Preset {
                    name: name.clone(),
                    description: config.description.clone(),
                    built_in: false,
                    include,
                    exclude,
                },
            );
        }
        presets.check_cycles()?;
        Ok(presets)
    }

    /// The preset called `name`.
    pub fn get(&self, name: &str) -> Option<&Preset> {
        self.presets.get(name)
    }

    /// The names of every preset: built-ins first, then configured ones by name.
    pub fn names(&self) -> &[String] {
        &self.order
    }

    /// Every preset as `filter_tools` lists it.
    pub fn summaries(&self) -> Vec<PresetSummary> {
        self.order
            .iter()
            .filter_map(|n| self.presets.get(n))
            .map(|p| PresetSummary {
                name: p.name.clone(),
                description: p.description.clone(),
                built_in: p.built_in,
            })
            .collect()
    }

    fn check_cycles(&self) -> Result<(), ToolsetError> {
        fn visit<'a>(presets: &'a Presets, name: &'a str, path: &mut Vec<&'a str>) -> Result<(), ToolsetError> {
            if let Some(start) = path.iter().position(|n| *n == name) {
                let mut cycle: Vec<&str> = path[start..].to_vec();
                cycle.push(name);
                return Err(ToolsetError::BadPreset {
                    preset: path[start].to_owned(),
                    reason: format!("composition cycle: {}", cycle.join(" -> ")),
                });
            }
            let Some(preset) = presets.get(name) else { return Ok(()) };
            path.push(name);
            for rule in &preset.include {
                if let Rule::Preset(next) = rule {
                    visit(presets, next, path)?;
                }
            }
            path.pop();
            Ok(())
        }
        for name in &self.order {
            visit(self, name, &mut Vec::new())?;
        }
        Ok(())
    }
}

const RULE_KEYS: &str = "tool, pattern, server, workflow, readOnly, preset or label";

fn compile_rules(rules: &[RuleConfig], list: &str, is_include: bool) -> Result<Vec<Rule>, String> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| compile_rule(r, is_include).map_err(|reason| format!("{list}[{i}]: {reason}")))
        .collect()
}

fn compile_rule(rule: &RuleConfig, is_include: bool) -> Result<Rule, String> {
    let set: Vec<&str> = [
        ("tool", rule.tool.is_some()),
        ("pattern", rule.pattern.is_some()),
        ("server", rule.server.is_some()),
        ("workflow", rule.workflow.is_some()),
        ("readOnly", rule.read_only.is_some()),
        ("preset", rule.preset.is_some()),
        ("label", rule.label.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    match set.as_slice() {
        [] => return Err(format!("a rule sets no key; set exactly one of {RULE_KEYS}")),
        [_] => {}
        several => {
            return Err(format!(
                "a rule sets {}; set exactly one of {RULE_KEYS}",
                several.join(" and ")
            ));
        }
    }
    let non_empty = |key: &str, v: &str| {
        if v.is_empty() {
            Err(format!("{key} must not be empty"))
        } else {
            Ok(v.to_owned())
        }
    };
    Ok(match rule {
        RuleConfig { tool: Some(t), .. } => Rule::Tool(non_empty("tool", t)?),
        RuleConfig { pattern: Some(p), .. } => Rule::Pattern(NamePattern::new(p, true).map_err(|e| e.to_string())?),
        RuleConfig { server: Some(s), .. } => Rule::Server(non_empty("server", s)?),
        RuleConfig { workflow: Some(w), .. } => Rule::Workflow(non_empty("workflow", w)?),
        RuleConfig {
            read_only: Some(true), ..
        } => Rule::ReadOnly,
        RuleConfig {
            read_only: Some(false), ..
        } => return Err("readOnly must be true".into()),
        RuleConfig { preset: Some(p), .. } if is_include => Rule::Preset(non_empty("preset", p)?),
        RuleConfig { preset: Some(_), .. } => return Err("preset composes presets in include only".into()),
        RuleConfig { label: Some(l), .. } => {
            Rule::Label(LabelRule::parse(l).ok_or_else(|| format!("label {l:?} must be k=v, k or k="))?)
        }
        _ => return Err(format!("a rule sets no key; set exactly one of {RULE_KEYS}")),
    })
}
