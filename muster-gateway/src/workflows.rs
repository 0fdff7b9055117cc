//! Workflows in the gateway: what it adds around the `workflow_<name>` tools of
//! [`muster_workflow::tools`] (the table, the service, availability and catalogue entries).
//!
//! - [`GatewayWorkflows`] is the workflow service the dispatcher routes `workflow_<name>` calls
//!   to (`Dispatcher::with_workflows`). Its engine's steps call the gateway's own tool stack in
//!   the caller's context (session, identity, cancellation), except the caller's toolset: a
//!   toolset decides which workflows a caller may run, and a workflow it allows runs its steps
//!   whole (the read-only preset admits only workflows whose every step is read-only);
//! - `unavailable` is the refusal of a defined workflow that lacks a tool;
//! - the execution records of a config directory are opened with the runs a crash cut off
//!   marked failed, and pruned on their retention;
//! - [`EventObserver`] writes each run's step events into the gateway's event log.

use std::{
    path::Path,
    sync::Arc,
    task::{Context, Poll},
};

use chrono::Utc;
use muster_workflow::record::{
    ExecutionStore, FsExecutionStore, INTERRUPTED_ERROR, RETENTION_GC_INTERVAL, RecordError,
};
use tokio_util::sync::CancellationToken;

use futures::future::BoxFuture;
use muster_core::{BoxToolService, ToolCall, ToolError, ToolOutput};
use muster_workflow::{
    engine::{RunEvent, RunEventKind, RunObserver, WorkflowEngine},
    tools::{LateBoundTools, WorkflowTable, WorkflowTools},
};
use tower::{Service, ServiceExt};

use crate::events::{Event, EventDetails, EventLog, reasons};

/// The `workflow_<name>` tools as a gateway runs them: the workflows of a table, whose steps call
/// the gateway's whole tool stack, bound once that stack is built ([`GatewayWorkflows::bind`]).
///
/// A call is refused before anything runs while the stack is gone (the gateway is shutting
/// down: [`LateBoundTools::reachable`]). The caller's toolset does not pass to the steps: it
/// decided whether the caller may run the workflow, and a workflow it allows runs its steps
/// whole. Clones share the table, the engine and the binding.
///
/// ```
/// use std::sync::Arc;
/// use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall};
/// use muster_gateway::workflows::GatewayWorkflows;
/// use muster_workflow::{record::MemoryExecutionStore, tools::WorkflowTable};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let workflows = GatewayWorkflows::new(Arc::new(WorkflowTable::new()), Arc::new(MemoryExecutionStore::new()));
/// let call = ToolCall::new("workflow_nightly", JsonObject::new(), CallContext::default());
/// // Not bound to a stack yet: refused before anything runs.
/// assert!(workflows.clone().oneshot(call).await.is_err());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct GatewayWorkflows {
    tools: WorkflowTools,
    steps: LateBoundTools,
}

impl GatewayWorkflows {
    /// The workflows of `table`, their runs recorded in `executions`.
    pub fn new(table: Arc<WorkflowTable>, executions: Arc<dyn ExecutionStore>) -> Self {
        Self::with_engine(table, |engine| engine.with_store(executions))
    }

    /// The workflows of `table`, run by an engine that `configure` finishes (its store, its
    /// observers) from one whose steps call the stack bound later.
    pub fn with_engine(table: Arc<WorkflowTable>, configure: impl FnOnce(WorkflowEngine) -> WorkflowEngine) -> Self {
        let steps = LateBoundTools::new();
        let engine = configure(WorkflowEngine::new(BoxToolService::new(steps.clone())));
        Self {
            tools: WorkflowTools::new(table, engine),
            steps,
        }
    }

    /// Binds the tool stack the steps call (the gateway's whole stack, this service inside it,
    /// so that a step is treated like a client's call), and answers the stack to serve calls with.
    ///
    /// Serve every call through the answer, not through `stack`: every clone of the answer
    /// keeps the stack alive, while the steps hold it only weakly (the stack holds this
    /// service). When the last clone is dropped the stack goes, with no cycle to break; a
    /// workflow called after that is refused as the gateway shutting down.
    #[must_use = "serve calls through the stack answered: it is what keeps the stack alive"]
    pub fn bind(&self, stack: BoxToolService) -> BoxToolService {
        self.steps.bind(stack)
    }
}

impl Service<ToolCall> for GatewayWorkflows {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut call: ToolCall) -> Self::Future {
        if let Err(refused) = self.steps.reachable() {
            return Box::pin(std::future::ready(Err(refused)));
        }
        call.ctx.toolset = None;
        call.ctx.extensions.remove::<muster_catalog::toolset::DeclaredToolset>();
        Box::pin(self.tools.clone().oneshot(call))
    }
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
