//! The workflow engine: runs a [`CompiledWorkflow`] through a [`ToolService`](muster_core::ToolService)
//! stack, recording the run.
//!
//! Every step's tool call (and every condition tool) goes through the service the engine was
//! built with, in the caller's [`CallContext`]: in a gateway that is the same stack a client's
//! `call_tool` goes through, so toolsets, routing and cancellation apply to each step as they
//! apply to the caller. A step may itself call `workflow_<other>`; nesting is bounded
//! ([`MAX_NESTING`]) so a cycle fails instead of recursing forever.
//!
//! What a run does, as documented for the Workflow resource:
//! - the input is the arguments with defaults applied and types checked ([`prepare_input`]);
//! - steps run in order: a tool call (optionally following pages, then reshaped by `jq`), a
//!   `forEach` loop (up to 50 iterations at once, results in item order, one nested level), or
//!   a `parallel` group; a `condition` may skip a step;
//! - a failing step stops the run unless it allows failure; then the `onFailure` handlers run,
//!   best effort;
//! - the response is the default document (`execution_id`, `workflow`, `status`, `input`,
//!   `steps`) or the workflow's `output` template rendered with types preserved;
//! - an [`ExecutionStore`] receives the record when the run starts (`inprogress`) and when it
//!   ends, and a [`RunObserver`] hears every step event.
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{BoxToolService, CallContext, ToolCall, ToolError};
//! use muster_workflow::engine::{CompiledWorkflow, WorkflowEngine};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use serde_json::json;
//!
//! # tokio_test_block_on(async {
//! // A tool service that echoes its arguments back as JSON text.
//! let tools = BoxToolService::new(tower::service_fn(|call: ToolCall| async move {
//!     let text = serde_json::Value::Object(call.arguments).to_string();
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(text)]).into())
//! }));
//! let workflow = serde_json::from_value(json!({
//!     "metadata": {"name": "hello"},
//!     "spec": {
//!         "args": {"who": {"type": "string", "required": true}},
//!         "steps": [{"id": "greet", "tool": "echo", "args": {"text": "hello {{ .input.who }}"}}],
//!         "output": {"said": "{{ .results.greet.text }}"}
//!     }
//! }))?;
//! let workflow = CompiledWorkflow::compile(workflow).expect("valid");
//! let engine = WorkflowEngine::new(tools);
//! let args = json!({"who": "world"}).as_object().cloned().unwrap_or_default();
//! let outcome = engine.run(&workflow, args, CallContext::default()).await?;
//! assert_eq!(outcome.response, json!({"said": "hello world"}));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod condition;
mod input;
mod plan;
mod response;
mod run;
mod steps;

#[cfg(test)]
mod tests;

use std::{fmt, sync::Arc};

use chrono::Utc;
use muster_core::{
    BoxToolService, CallContext, JsonObject, ToolError,
    crd::{ExecutionStatus, WorkflowExecution, WorkflowExecutionSpec},
};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

pub use self::{
    input::{DEBUG_ARG, prepare_input},
    plan::CompiledWorkflow,
    response::result_value,
};
use crate::record::ExecutionStore;

/// The `_meta` key under which a workflow tool's result names its execution
/// (`{"id": ..., "status": ...}`), so the record can be found even when an output template
/// shapes the document.
pub const EXECUTION_META_KEY: &str = "muster.giantswarm.io/execution";

/// How deep `workflow_<name>` steps may nest before a run is refused (a cycle ends here).
pub const MAX_NESTING: usize = 8;

/// What happened in a run, as a [`RunObserver`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunEventKind {
    /// The run began.
    ExecutionStarted,
    /// The run completed.
    ExecutionCompleted,
    /// The run failed.
    ExecutionFailed,
    /// A step's condition was evaluated (`passed` says how).
    ConditionEvaluated,
    /// A step was skipped by its condition.
    StepSkipped,
    /// A step began.
    StepStarted,
    /// A step completed.
    StepCompleted,
    /// A step failed.
    StepFailed,
}

/// One event of a run.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RunEvent<'a> {
    /// What happened.
    pub kind: RunEventKind,
    /// The workflow.
    pub workflow: &'a str,
    /// The execution.
    pub execution_id: &'a str,
    /// The step, for step events.
    pub step_id: Option<&'a str>,
    /// The step's tool (or a condition's source: `template`, `from_step:<id>`, a tool).
    pub tool: Option<&'a str>,
    /// The error, for failures.
    pub error: Option<&'a str>,
    /// The condition's verdict, for [`RunEventKind::ConditionEvaluated`].
    pub passed: Option<bool>,
    /// How long the step or run took, when it ended.
    pub duration_ms: Option<i64>,
}

/// Hears the events of every run (the gateway writes them to its event log).
pub trait RunObserver: Send + Sync + fmt::Debug {
    /// Called synchronously as things happen; keep it quick.
    fn on_event(&self, event: &RunEvent<'_>);
}

/// The result of a run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunOutcome {
    /// The execution's id (a UUID).
    pub execution_id: String,
    /// Completed or failed.
    pub status: ExecutionStatus,
    /// The document returned to the caller.
    pub response: Value,
    /// Whether the caller should see an error result.
    pub is_error: bool,
}

impl RunOutcome {
    /// The tool result: the response as one JSON text, mirrored as structured content, with
    /// the execution under `_meta` ([`EXECUTION_META_KEY`]).
    pub fn into_call_result(self) -> CallToolResult {
        let text = self.response.to_string();
        let mut result = if self.is_error {
            CallToolResult::error(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text)])
        };
        if self.response.is_object() {
            result.structured_content = Some(self.response);
        }
        let mut meta = rmcp::model::MetaObject::default();
        meta.0.insert(
            EXECUTION_META_KEY.to_owned(),
            serde_json::json!({"id": self.execution_id, "status": self.status.as_str()}),
        );
        result.meta = Some(meta);
        result
    }
}

/// How deep the current call is nested in workflow runs (kept in the call's extensions).
#[derive(Debug, Clone, Copy, Default)]
struct Nesting(usize);

/// Runs workflows through a tool service, recording each run.
#[derive(Clone)]
pub struct WorkflowEngine {
    tools: BoxToolService,
    store: Option<Arc<dyn ExecutionStore>>,
    observer: Option<Arc<dyn RunObserver>>,
}

impl fmt::Debug for WorkflowEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkflowEngine")
            .field("store", &self.store)
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

impl WorkflowEngine {
    /// An engine whose steps call `tools`; runs are not recorded.
    pub fn new(tools: BoxToolService) -> Self {
        Self {
            tools,
            store: None,
            observer: None,
        }
    }

    /// Records every run in `store`.
    pub fn with_store(mut self, store: Arc<dyn ExecutionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Reports every run's events to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The record store, when runs are recorded.
    pub fn store(&self) -> Option<&Arc<dyn ExecutionStore>> {
        self.store.as_ref()
    }

    /// Runs `workflow` with `arguments` in the caller's `ctx`.
    ///
    /// Refused before anything runs (no record) when the arguments do not fit `spec.args`
    /// or nesting is too deep. Otherwise the outcome says how the run ended; a failed run is
    /// an outcome with `is_error`, not an `Err`.
    pub async fn run(
        &self,
        workflow: &CompiledWorkflow,
        arguments: JsonObject,
        mut ctx: CallContext,
    ) -> Result<RunOutcome, ToolError> {
        let (input, debug) =
            prepare_input(&workflow.workflow.spec.args, arguments).map_err(ToolError::invalid_arguments)?;
        let depth = ctx.extensions.get::<Nesting>().copied().unwrap_or_default().0 + 1;
        if depth > MAX_NESTING {
            return Err(ToolError::invalid_arguments(format!(
                "workflow {} is nested more than {MAX_NESTING} levels deep (does a workflow call itself?)",
                workflow.name()
            )));
        }
        ctx.extensions.insert(Nesting(depth));

        let execution_id = uuid::Uuid::new_v4().to_string();
        let clock = std::time::Instant::now();
        let mut spec = WorkflowExecutionSpec::started(workflow.name(), Utc::now());
        spec.input = Some(Value::Object(input.clone()));
        let mut record = WorkflowExecution::new(&execution_id, spec);
        self.persist(&record).await;

        let run = run::Run::new(self, workflow, &execution_id, ctx, debug, Value::Object(input), clock);
        run.notify(&run.event(RunEventKind::ExecutionStarted));
        let finished = run.execute(&mut record, self).await;
        let outcome = run.finish(record, finished, self).await;
        Ok(outcome)
    }

    /// Writes `record` to the store, if any; a store error is logged, never fatal to a run.
    async fn persist(&self, record: &WorkflowExecution) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let record = record.clone();
        let id = record.metadata.name.clone();
        let written = tokio::task::spawn_blocking(move || store.put(&record)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(execution_id = %id, error = %e, "cannot store workflow execution record"),
            Err(e) => tracing::warn!(execution_id = %id, error = %e, "workflow execution record writer failed"),
        }
    }
}
