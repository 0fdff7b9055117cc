//! The workflow table: the compiled workflows a service runs, by name.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock, RwLockReadGuard},
};

use muster_core::{
    NameRules, ToolEntry,
    crd::{ValidationErrors, Workflow},
};

use super::{
    availability::{self, Availability},
    entry::entry,
};
use crate::engine::CompiledWorkflow;

/// What [`WorkflowTable::apply`] did.
pub use muster_core::crd::Applied;

/// The workflows' part of one catalogue: the entry of each available workflow, and the
/// availability of every one ([`WorkflowTable::entries`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WorkflowEntries {
    /// The `workflow_<name>` entry of each available workflow, in name order.
    pub entries: Vec<ToolEntry>,
    /// Every workflow's availability, by name.
    pub availability: BTreeMap<String, Availability>,
}

/// The compiled workflows, by name. Thread-safe: reads (one per workflow call) take a read
/// lock and clone an `Arc`; [`apply`](Self::apply) compiles before it takes the write lock.
#[derive(Debug, Default)]
pub struct WorkflowTable {
    workflows: RwLock<BTreeMap<String, Arc<CompiledWorkflow>>>,
}

impl WorkflowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces `workflow` under its `metadata.name`, compiling it first. Refused with
    /// every rule it breaks (a template or jq program that does not compile included), and then
    /// nothing changes.
    pub fn apply(&self, workflow: Workflow) -> Result<Applied, ValidationErrors> {
        Ok(self.apply_compiled(Arc::new(CompiledWorkflow::compile(workflow)?)))
    }

    /// Adds or replaces a workflow compiled already (its
    /// [warnings](CompiledWorkflow::warnings) read first, say) under its name.
    pub fn apply_compiled(&self, compiled: Arc<CompiledWorkflow>) -> Applied {
        let mut workflows = self.workflows.write().unwrap_or_else(|e| e.into_inner());
        let applied = match workflows.get(compiled.name()) {
            Some(p)
                if p.workflow().spec == compiled.workflow().spec
                    && p.workflow().metadata == compiled.workflow().metadata =>
            {
                return Applied::Unchanged;
            }
            Some(_) => Applied::Updated,
            None => Applied::Added,
        };
        workflows.insert(compiled.name().to_owned(), compiled);
        applied
    }

    /// Removes workflow `name`, answering it; `None` when none has that name.
    pub fn remove(&self, name: &str) -> Option<Arc<CompiledWorkflow>> {
        self.workflows.write().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// Workflow `name`.
    pub fn get(&self, name: &str) -> Option<Arc<CompiledWorkflow>> {
        self.read().get(name).cloned()
    }

    /// Every workflow, in name order.
    pub fn list(&self) -> Vec<Arc<CompiledWorkflow>> {
        self.read().values().cloned().collect()
    }

    /// How many workflows there are.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The availability of every workflow as of a catalogue whose tools (other than the
    /// workflows' own) `tools` looks up by exposed name.
    pub fn assess<'c>(&self, tools: impl Fn(&str) -> Option<&'c ToolEntry>) -> BTreeMap<String, Availability> {
        availability::assess(&self.read(), tools)
    }

    /// What these workflows add to a catalogue whose other tools `tools` looks up by exposed
    /// name: the availability of every workflow ([`WorkflowTable::assess`]) and the
    /// [`entry`](super::entry) of each available one, its name given by `names`.
    pub fn entries<'c>(&self, names: &NameRules, tools: impl Fn(&str) -> Option<&'c ToolEntry>) -> WorkflowEntries {
        let workflows = self.read();
        let availability = availability::assess(&workflows, tools);
        let entries = workflows
            .iter()
            .filter_map(|(name, workflow)| {
                let a = availability.get(name).filter(|a| a.available)?;
                Some(entry(names, workflow, a.read_only))
            })
            .collect();
        WorkflowEntries { entries, availability }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Arc<CompiledWorkflow>>> {
        self.workflows.read().unwrap_or_else(|e| e.into_inner())
    }
}
