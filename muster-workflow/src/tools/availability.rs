//! Which workflows can run against a catalogue, and which are read-only.
//!
//! A workflow is available when every tool it names is in the catalogue; a `workflow_<other>`
//! step counts as present when that other workflow is defined and available in turn (a cycle is
//! tolerated: the workflow on the cycle counts as present). It is read-only when every tool it
//! names declares `readOnlyHint: true`, nested workflows included; a cycle is not read-only.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use muster_core::{NameRules, ToolEntry};

use crate::engine::CompiledWorkflow;

/// Whether a workflow can run now, and what it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Availability {
    /// Every tool it names is in the catalogue (nested workflows available in turn).
    pub available: bool,
    /// The tools it names that are missing, in name order.
    pub missing: Vec<String>,
    /// Every tool it names (nested workflows' too) is read-only, and there is no cycle.
    pub read_only: bool,
}

/// The availability of every one of `workflows`, given `tools`: the entry of each tool of the
/// catalogue other than the workflows' own.
pub(super) fn assess<'c>(
    workflows: &BTreeMap<String, Arc<CompiledWorkflow>>,
    tools: impl Fn(&str) -> Option<&'c ToolEntry>,
) -> BTreeMap<String, Availability> {
    let mut walk = Walk {
        workflows,
        tools: &tools,
        done: HashMap::new(),
        visiting: Vec::new(),
    };
    workflows.keys().map(|name| (name.clone(), walk.assess(name))).collect()
}

/// A depth-first walk through the workflows' nesting, remembering each verdict.
struct Walk<'w, 'c, F: Fn(&str) -> Option<&'c ToolEntry>> {
    workflows: &'w BTreeMap<String, Arc<CompiledWorkflow>>,
    tools: &'w F,
    done: HashMap<String, Availability>,
    visiting: Vec<String>,
}

impl<'c, F: Fn(&str) -> Option<&'c ToolEntry>> Walk<'_, 'c, F> {
    fn assess(&mut self, name: &str) -> Availability {
        if let Some(done) = self.done.get(name) {
            return done.clone();
        }
        let Some(workflow) = self.workflows.get(name) else {
            return Availability {
                available: false,
                missing: Vec::new(),
                read_only: false,
            };
        };
        self.visiting.push(name.to_owned());
        let mut missing = Vec::new();
        let mut read_only = true;
        for tool in workflow.referenced_tools() {
            match NameRules::workflow_of(tool).filter(|w| self.workflows.contains_key(*w)) {
                Some(nested) if self.visiting.iter().any(|v| v == nested) => read_only = false,
                Some(nested) => {
                    let inner = self.assess(nested);
                    if !inner.available {
                        missing.push(tool.clone());
                    }
                    read_only &= inner.read_only;
                }
                None => match (self.tools)(tool) {
                    Some(entry) => read_only &= entry.is_read_only(),
                    None => {
                        missing.push(tool.clone());
                        read_only = false;
                    }
                },
            }
        }
        self.visiting.pop();
        let availability = Availability {
            available: missing.is_empty(),
            missing,
            read_only,
        };
        self.done.insert(name.to_owned(), availability.clone());
        availability
    }
}
