//! Workflows in the gateway: the `workflow_<name>` tools, running them, and their events.
//!
//! - [`assess`] decides, for the current catalogue, which workflows are available (every tool
//!   they name is there, nested `workflow_<other>` steps included, cycles tolerated) and which
//!   are read-only (every tool they name declares `readOnlyHint: true`; a cycle is not);
//! - [`entry`] turns each available one into its catalogue entry: the input schema from
//!   `spec.args`, the labels under `_meta`, the derived `readOnlyHint`;
//! - `run` executes one through the engine, whose steps call the gateway's own tool stack in
//!   the caller's context (session, identity, cancellation), except the caller's toolset: a
//!   toolset decides which workflows a caller may run, and a workflow it allows runs its steps
//!   whole (the read-only preset admits only workflows whose every step is read-only);
//! - [`EventObserver`] writes each run's step events into the gateway's event log.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    sync::Arc,
};

use chrono::Utc;
use muster_workflow::record::{
    ExecutionStore, FsExecutionStore, INTERRUPTED_ERROR, RETENTION_GC_INTERVAL, RecordError,
};
use tokio_util::sync::CancellationToken;

use muster_core::{NameRules, ToolCall, ToolEntry, ToolError, ToolKind, crd::ArgType};
use muster_workflow::engine::{CompiledWorkflow, RunEvent, RunEventKind, RunObserver};
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::{
    events::{Event, EventDetails, EventLog, reasons},
    registry::Registry,
};

/// Whether a workflow can run now, and what it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// Every tool it names is in the catalogue (nested workflows available in turn).
    pub available: bool,
    /// The tools it names that are missing, in name order.
    pub missing: Vec<String>,
    /// Every tool it names (nested workflows' too) is read-only, and there is no cycle.
    pub read_only: bool,
}

/// The availability of every workflow, given the tools of the catalogue without workflows.
pub fn assess<'c>(
    workflows: &BTreeMap<String, Arc<CompiledWorkflow>>,
    base: impl Fn(&str) -> Option<&'c ToolEntry>,
) -> BTreeMap<String, Availability> {
    let mut walk = Walk {
        workflows,
        base: &base,
        done: HashMap::new(),
        visiting: Vec::new(),
    };
    workflows.keys().map(|name| (name.clone(), walk.assess(name))).collect()
}

struct Walk<'w, 'c, F: Fn(&str) -> Option<&'c ToolEntry>> {
    workflows: &'w BTreeMap<String, Arc<CompiledWorkflow>>,
    base: &'w F,
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
                None => match (self.base)(tool) {
                    Some(entry) => {
                        read_only &= entry.is_read_only();
                    }
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

/// The catalogue entry of workflow `workflow`'s tool.
pub fn entry(names: &NameRules, workflow: &CompiledWorkflow, read_only: bool) -> ToolEntry {
    let spec = &workflow.workflow().spec;
    let description = spec
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| format!("Run workflow {}", workflow.name()));
    let mut tool = Tool::new(
        names.workflow_tool(workflow.name()),
        description,
        Arc::new(input_schema(workflow)),
    );
    if read_only {
        tool = tool.with_annotations(ToolAnnotations::new().read_only(true));
    }
    ToolEntry::builtin(ToolKind::Workflow, tool).with_labels(workflow.workflow().metadata.labels.clone())
}

/// The input schema of a workflow's tool, from `spec.args`.
fn input_schema(workflow: &CompiledWorkflow) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, arg) in &workflow.workflow().spec.args {
        let mut property = Map::new();
        if let Some(kind) = arg.arg_type {
            property.insert("type".into(), Value::String(kind.as_str().into()));
            if kind == ArgType::Array {
                property.insert("items".into(), json!({}));
            }
        }
        if let Some(description) = &arg.description {
            property.insert("description".into(), Value::String(description.clone()));
        }
        if let Some(default) = &arg.default {
            property.insert("default".into(), default.clone());
        }
        if arg.required && arg.default.is_none() {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name.clone(), Value::Object(property));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema
}

/// Runs the workflow behind tool `call.name`.
pub(crate) async fn run(registry: &Arc<Registry>, call: ToolCall) -> Result<CallToolResult, ToolError> {
    let name = NameRules::workflow_of(&call.name).ok_or_else(|| ToolError::not_found(&call.name))?;
    let workflow = registry
        .compiled_workflow(name)
        .ok_or_else(|| ToolError::not_found(&call.name))?;
    let engine = registry.workflow_engine().ok_or_else(|| ToolError::ServerUnavailable {
        server: "muster".to_owned(),
        reason: "the gateway is shutting down".to_owned(),
    })?;
    let mut ctx = call.ctx;
    ctx.toolset = None;
    ctx.extensions.remove::<muster_catalog::toolset::DeclaredToolset>();
    let outcome = engine.run(&workflow, call.arguments, ctx).await?;
    Ok(outcome.into_call_result())
}

/// The refusal of a defined workflow that cannot run now.
pub(crate) fn unavailable(name: &str, missing: &[String]) -> ToolError {
    ToolError::invalid_arguments(format!(
        "workflow {name} is not available (missing required tools: {})",
        missing.join(", ")
    ))
}

/// Opens the execution records of config directory `dir` and marks the runs a previous
/// process left `inprogress` as failed (each with a `WorkflowExecutionFailed` event).
pub(crate) fn open_executions(dir: &Path, events: &EventLog) -> Result<Arc<dyn ExecutionStore>, RecordError> {
    let store = FsExecutionStore::open(dir)?;
    for id in store.recover_interrupted(Utc::now())? {
        let workflow = store
            .get(&id)
            .ok()
            .flatten()
            .map(|r| r.spec.workflow_name)
            .unwrap_or_default();
        tracing::warn!(execution_id = %id, workflow = %workflow, "{INTERRUPTED_ERROR}");
        events.emit(
            Event::workflow(
                &workflow,
                reasons::WORKFLOW_EXECUTION_FAILED,
                format!("Workflow {workflow} execution {id} failed: {INTERRUPTED_ERROR}"),
            )
            .with_details(
                EventDetails::default()
                    .with_execution_id(&id)
                    .with_error(INTERRUPTED_ERROR),
            ),
        );
    }
    Ok(Arc::new(store))
}

/// Applies the records' retention now and then every [`RETENTION_GC_INTERVAL`] until `stop`.
pub(crate) fn spawn_retention(store: Arc<dyn ExecutionStore>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(RETENTION_GC_INTERVAL);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let store = Arc::clone(&store);
            match tokio::task::spawn_blocking(move || store.prune(Utc::now())).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(removed = n, "pruned workflow execution records"),
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot prune workflow execution records"),
                Err(e) => tracing::warn!(error = %e, "workflow execution retention failed"),
            }
        }
    });
}

/// Writes the events of workflow runs into the gateway's event log, with muster's messages.
#[derive(Debug, Clone)]
pub struct EventObserver {
    events: EventLog,
}

impl EventObserver {
    /// An observer writing to `events`.
    pub fn new(events: EventLog) -> Self {
        Self { events }
    }
}

impl RunObserver for EventObserver {
    fn on_event(&self, e: &RunEvent<'_>) {
        let workflow = e.workflow;
        let step = e.step_id.unwrap_or_default();
        let error = e.error.unwrap_or("unknown error");
        let (reason, message) = match e.kind {
            RunEventKind::ExecutionStarted => (
                reasons::WORKFLOW_EXECUTION_STARTED,
                format!("Workflow {workflow} execution {} started", e.execution_id),
            ),
            RunEventKind::ExecutionCompleted => (
                reasons::WORKFLOW_EXECUTION_COMPLETED,
                format!(
                    "Workflow {workflow} execution {} completed in {}ms",
                    e.execution_id,
                    e.duration_ms.unwrap_or_default()
                ),
            ),
            RunEventKind::ExecutionFailed => (
                reasons::WORKFLOW_EXECUTION_FAILED,
                format!("Workflow {workflow} execution failed: {error}"),
            ),
            RunEventKind::ConditionEvaluated => (
                reasons::WORKFLOW_STEP_CONDITION_EVALUATED,
                format!(
                    "Workflow {workflow} step {step} condition ({}) evaluated to {}",
                    e.tool.unwrap_or("condition"),
                    e.passed.unwrap_or_default()
                ),
            ),
            RunEventKind::StepSkipped => (
                reasons::WORKFLOW_STEP_SKIPPED,
                format!("Workflow {workflow} step {step} skipped: its condition was not met"),
            ),
            RunEventKind::StepStarted => (
                reasons::WORKFLOW_STEP_STARTED,
                match e.tool {
                    Some(tool) => format!("Workflow {workflow} step {step} started (tool: {tool})"),
                    None => format!("Workflow {workflow} step {step} started"),
                },
            ),
            RunEventKind::StepCompleted => (
                reasons::WORKFLOW_STEP_COMPLETED,
                format!("Workflow {workflow} step {step} completed successfully"),
            ),
            RunEventKind::StepFailed => (
                reasons::WORKFLOW_STEP_FAILED,
                format!("Workflow {workflow} step {step} failed: {error}"),
            ),
            _ => return,
        };
        let mut details = EventDetails::default().with_execution_id(e.execution_id);
        if let Some(step) = e.step_id {
            details = details.with_step_id(step);
        }
        if let Some(tool) = e.tool {
            details = details.with_tool(tool);
        }
        if let Some(error) = e.error {
            details = details.with_error(error);
        }
        self.events
            .emit(Event::workflow(workflow, reason, message).with_details(details));
    }
}
