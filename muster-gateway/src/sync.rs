//! Applying what the config directory holds now to a running registry: servers and workflows
//! added, changed or removed, each touched only if its definition changed. A file that no longer
//! loads keeps the definition it last held in force.

use std::{collections::BTreeSet, sync::Arc};

use serde::Serialize;

use crate::{
    config_dir::{LoadWarning, LoadedConfig},
    events::{Event, EventQuery, EventType, KIND_MCP_SERVER, KIND_WORKFLOW, reasons},
    registry::{Applied, Registry, Sources},
};

/// What a sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SyncSummary {
    /// Servers added.
    pub added: Vec<String>,
    /// Servers whose definition changed (they reconnected).
    pub updated: Vec<String>,
    /// Servers removed.
    pub removed: Vec<String>,
    /// Servers kept on their last good definition because their file no longer loads.
    pub kept: Vec<String>,
    /// Workflows added, changed or removed.
    pub workflows_changed: usize,
}

/// Makes `registry` match `loaded`.
pub fn apply(registry: &Arc<Registry>, loaded: &LoadedConfig) -> SyncSummary {
    let previous = registry.sources();
    let bad_files: BTreeSet<&std::path::Path> = loaded.problems.iter().map(|p| p.file.as_path()).collect();
    let mut summary = SyncSummary::default();

    // Servers whose file no longer loads keep their last good definition.
    let kept_servers: BTreeSet<String> = previous
        .servers
        .iter()
        .filter(|(file, _)| bad_files.contains(file.as_path()))
        .map(|(_, name)| name.clone())
        .collect();
    let wanted: BTreeSet<&str> = loaded.servers.iter().map(|s| s.metadata.name.as_str()).collect();
    let mut applied = BTreeSet::new();
    for server in &loaded.servers {
        let name = server.metadata.name.clone();
        match registry.apply_server(server.clone()) {
            Applied::Added => summary.added.push(name.clone()),
            Applied::Updated => summary.updated.push(name.clone()),
            _ => continue,
        }
        applied.insert((KIND_MCP_SERVER, name));
    }
    for view in registry.servers() {
        let name = &view.definition.metadata.name;
        if wanted.contains(name.as_str()) {
            continue;
        }
        if kept_servers.contains(name) {
            summary.kept.push(name.clone());
        } else if registry.remove_server(name) {
            summary.removed.push(name.clone());
        }
    }

    let kept_workflows: BTreeSet<String> = previous
        .workflows
        .iter()
        .filter(|(file, _)| bad_files.contains(file.as_path()))
        .map(|(_, name)| name.clone())
        .collect();
    let wanted: BTreeSet<&str> = loaded.workflows.iter().map(|w| w.metadata.name.as_str()).collect();
    for workflow in &loaded.workflows {
        match registry.apply_workflow(workflow.clone()) {
            Ok(true) => {
                summary.workflows_changed += 1;
                applied.insert((KIND_WORKFLOW, workflow.metadata.name.clone()));
            }
            Ok(false) => {}
            // The loader compiles workflows too, so this is a definition that changed between
            // the two reads; it is left out and said so.
            Err(errors) => tracing::warn!(
                workflow = %workflow.metadata.name,
                "workflow left out: {}",
                errors.to_lines().join("; ")
            ),
        }
    }
    for workflow in registry.workflows() {
        let name = &workflow.metadata.name;
        if !wanted.contains(name.as_str()) && !kept_workflows.contains(name) && registry.remove_workflow(name) {
            summary.workflows_changed += 1;
        }
    }

    let mut sources = Sources {
        servers: loaded.server_files.clone(),
        workflows: loaded.workflow_files.clone(),
    };
    for (file, name) in previous.servers {
        if kept_servers.contains(&name) {
            sources.servers.insert(file, name);
        }
    }
    for (file, name) in previous.workflows {
        if kept_workflows.contains(&name) {
            sources.workflows.insert(file, name);
        }
    }
    registry.set_sources(sources);
    report_dropped_fields(registry, &loaded.warnings, |kind, name| {
        applied.contains(&(kind, name.to_owned()))
    });
    summary
}

/// Emits one `MCPServerFieldsDropped` or `WorkflowFieldsDropped` event per definition that
/// `warnings` name, when `changed` says the definition took effect anew or its dropped fields
/// differ from the ones its last such event reported: a file read again unchanged is not
/// reported again, a file whose only change is in the fields it drops is.
pub(crate) fn report_dropped_fields(
    registry: &Registry,
    warnings: &[LoadWarning],
    changed: impl Fn(&'static str, &str) -> bool,
) {
    let mut by_definition: std::collections::BTreeMap<(&'static str, &str), Vec<String>> = Default::default();
    for w in warnings {
        by_definition
            .entry((w.kind, w.name.as_str()))
            .or_default()
            .push(w.warning.to_string());
    }
    for ((kind, name), warnings) in by_definition {
        if !changed(kind, name) && last_reported(registry, kind, name).as_ref() == Some(&warnings) {
            continue;
        }
        if let Some(event) = Event::fields_dropped(kind, name, &warnings) {
            registry.emit(event);
        }
    }
}

/// The dropped fields the newest `*FieldsDropped` event of `kind`/`name` reported.
fn last_reported(registry: &Registry, kind: &str, name: &str) -> Option<Vec<String>> {
    let query = EventQuery::new()
        .with_resource_type(kind)
        .with_resource_name(name)
        .with_event_type(EventType::Warning)
        .with_limit(100);
    registry
        .events()
        .query(&query)
        .into_iter()
        .find(|e| e.reason == reasons::MCP_SERVER_FIELDS_DROPPED || e.reason == reasons::WORKFLOW_FIELDS_DROPPED)
        .map(|e| e.data.warnings)
}
