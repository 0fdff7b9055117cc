//! The registry's side of the read seam ([`crate::definitions`]): what a definition source says
//! changed ([`DefinitionChange`]), or everything it holds ([`DefinitionSnapshot`]), applied to
//! the server table and the workflow table. Only the definitions that changed are touched, and
//! each definition's dropped fields are told as a Warning event when it takes effect anew or
//! they differ from the ones told last.

use std::{collections::BTreeSet, sync::Arc};

use muster_core::crd::FieldWarning;

use super::{Applied, Registry};
use crate::{
    definitions::{ChangeSummary, DefinitionChange, DefinitionSnapshot},
    events::{Event, EventQuery, EventType, KIND_MCP_SERVER, KIND_WORKFLOW, reasons},
};

impl Registry {
    /// Applies the changes a definition source saw, in order: a server added or changed
    /// (re)connects, a removed one stops, a workflow whose definition does not compile is left
    /// out (and logged); a definition applied as it is in force already changes nothing.
    pub fn apply_changes(self: &Arc<Self>, changes: impl IntoIterator<Item = DefinitionChange>) -> ChangeSummary {
        let mut summary = ChangeSummary::default();
        // Told once every change is applied, as one reading's warnings are.
        let mut dropped: Vec<(&'static str, String, Vec<FieldWarning>, bool)> = Vec::new();
        for change in changes {
            match change {
                DefinitionChange::ServerApplied(server) => {
                    let name = server.definition.metadata.name.clone();
                    let applied = self.apply_server(server.definition);
                    match applied {
                        Applied::Added => summary.added.push(name.clone()),
                        Applied::Updated => summary.updated.push(name.clone()),
                        _ => {}
                    }
                    let changed = applied != Applied::Unchanged;
                    if changed {
                        tracing::debug!(server = %name, origin = %server.origin, "from its source");
                    }
                    dropped.push((KIND_MCP_SERVER, name, server.dropped_fields, changed));
                }
                DefinitionChange::ServerRemoved { name, origin } => {
                    if self.remove_server(&name) {
                        tracing::debug!(server = %name, %origin, "removed at its source");
                        summary.removed.push(name);
                    }
                }
                DefinitionChange::WorkflowApplied(workflow) => {
                    let name = workflow.definition.metadata.name.clone();
                    let changed = match self.apply_workflow(workflow.definition) {
                        Ok(changed) => changed,
                        // A source that compiles workflows as it reads them (the config
                        // directory does) sees this only for one that changed between the two.
                        Err(errors) => {
                            tracing::warn!(workflow = %name, origin = %workflow.origin, "workflow left out: {}", errors.to_lines().join("; "));
                            false
                        }
                    };
                    if changed {
                        summary.workflows_changed += 1;
                        tracing::debug!(workflow = %name, origin = %workflow.origin, "from its source");
                    }
                    dropped.push((KIND_WORKFLOW, name, workflow.dropped_fields, changed));
                }
                DefinitionChange::WorkflowRemoved { name, origin } => {
                    if self.remove_workflow(&name) {
                        tracing::debug!(workflow = %name, %origin, "removed at its source");
                        summary.workflows_changed += 1;
                    }
                }
            }
        }
        for (kind, name, warnings, changed) in dropped {
            let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
            self.report_dropped_fields(kind, &name, &warnings, changed);
        }
        summary
    }

    /// Makes the registry hold what `snapshot` holds: its definitions applied (only those that
    /// changed are touched), every other server and workflow removed, except those the snapshot
    /// keeps on their last good definition ([`ChangeSummary::kept`] names those servers).
    pub fn apply_snapshot(self: &Arc<Self>, snapshot: DefinitionSnapshot) -> ChangeSummary {
        let wanted: BTreeSet<&str> = snapshot
            .servers
            .iter()
            .map(|s| s.definition.metadata.name.as_str())
            .collect();
        let mut kept = Vec::new();
        let mut server_removals = Vec::new();
        for (name, _) in self.server_states() {
            if wanted.contains(name.as_str()) {
                continue;
            }
            if snapshot.kept_servers.contains(&name) {
                kept.push(name);
            } else {
                server_removals.push(DefinitionChange::server_removed(name, snapshot.origin.clone()));
            }
        }
        let wanted: BTreeSet<&str> = snapshot
            .workflows
            .iter()
            .map(|w| w.definition.metadata.name.as_str())
            .collect();
        let workflow_removals: Vec<DefinitionChange> = self
            .workflows
            .list()
            .iter()
            .map(|w| w.workflow().metadata.name.clone())
            .filter(|name| !wanted.contains(name.as_str()) && !snapshot.kept_workflows.contains(name))
            .map(|name| DefinitionChange::workflow_removed(name, snapshot.origin.clone()))
            .collect();
        let changes: Vec<DefinitionChange> = snapshot
            .servers
            .into_iter()
            .map(DefinitionChange::ServerApplied)
            .chain(server_removals)
            .chain(snapshot.workflows.into_iter().map(DefinitionChange::WorkflowApplied))
            .chain(workflow_removals)
            .collect();
        let mut summary = self.apply_changes(changes);
        summary.kept = kept;
        summary
    }

    /// Emits the `MCPServerFieldsDropped` or `WorkflowFieldsDropped` event of definition
    /// `kind`/`name` for `warnings` (none when there are none), when `changed` says the
    /// definition took effect anew or the warnings differ from the ones its last such event
    /// told: a definition read again unchanged is not told again, one whose only change is in
    /// the fields it drops is.
    pub(crate) fn report_dropped_fields(&self, kind: &'static str, name: &str, warnings: &[String], changed: bool) {
        if warnings.is_empty() || (!changed && self.last_dropped_fields(kind, name).as_deref() == Some(warnings)) {
            return;
        }
        if let Some(event) = Event::fields_dropped(kind, name, warnings) {
            self.emit(event);
        }
    }

    /// The dropped fields the newest `*FieldsDropped` event of `kind`/`name` told.
    fn last_dropped_fields(&self, kind: &str, name: &str) -> Option<Vec<String>> {
        let query = EventQuery::new()
            .with_resource_type(kind)
            .with_resource_name(name)
            .with_event_type(EventType::Warning)
            .with_limit(100);
        self.events
            .query(&query)
            .into_iter()
            .find(|e| e.reason == reasons::MCP_SERVER_FIELDS_DROPPED || e.reason == reasons::WORKFLOW_FIELDS_DROPPED)
            .map(|e| e.data.warnings)
    }
}

#[cfg(test)]
mod tests;
