//! One run: the top-level steps in order, onFailure on a fatal stop, then the response and
//! the final record.

use std::{collections::HashMap, time::Instant};

use chrono::Utc;
use muster_core::{
    BoxToolService, CallContext, JsonObject, ToolCall, ToolOutput,
    call::ProgressUpdate,
    crd::{ExecutionStatus, WorkflowExecution, WorkflowExecutionStep},
};
use serde_json::{Map, Value};
use tower::ServiceExt;

use super::{
    CompiledWorkflow, RunEvent, RunEventKind, RunObserver, RunOutcome, WorkflowEngine,
    plan::Body,
    response::{DefaultResponse, StepMeta, StepStatus, error_text, result_value},
};
use crate::template::Context;

/// How often a long run's record is rewritten with its steps so far.
pub(crate) const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// What the steps of a run leave behind: response entries and record entries, in order.
#[derive(Debug, Default)]
pub(crate) struct Trail {
    pub(crate) metas: Vec<StepMeta>,
    pub(crate) records: Vec<WorkflowExecutionStep>,
}

impl Trail {
    pub(crate) fn append(&mut self, other: Trail) {
        self.metas.extend(other.metas);
        self.records.extend(other.records);
    }
}

/// How the steps ended.
pub(crate) struct Finished {
    scope: Context,
    trail: Trail,
    failure: Option<String>,
}

/// The state of one run shared by its steps.
pub(crate) struct Run<'a> {
    tools: BoxToolService,
    observer: Option<&'a dyn RunObserver>,
    pub(crate) workflow: &'a CompiledWorkflow,
    pub(crate) execution_id: &'a str,
    pub(crate) ctx: CallContext,
    pub(crate) debug: bool,
    pub(crate) input: Value,
    /// Whether the run is recorded (step results are kept for the record only then).
    pub(crate) recorded: bool,
    started: Instant,
}

impl<'a> Run<'a> {
    pub(crate) fn new(
        engine: &'a WorkflowEngine,
        workflow: &'a CompiledWorkflow,
        execution_id: &'a str,
        ctx: CallContext,
        debug: bool,
        input: Value,
        started: Instant,
    ) -> Self {
        // Steps read their tools' typed results.
        let ctx = ctx.reading_typed_result();
        Self {
            tools: engine.tools.clone(),
            observer: engine.observer.as_deref(),
            workflow,
            execution_id,
            ctx,
            debug,
            input,
            recorded: engine.store.is_some(),
            started,
        }
    }

    /// An event of this run, to fill in and [`Run::notify`].
    pub(crate) fn event(&self, kind: RunEventKind) -> RunEvent<'_> {
        RunEvent {
            kind,
            workflow: self.workflow.name(),
            execution_id: self.execution_id,
            step_id: None,
            tool: None,
            error: None,
            passed: None,
            duration_ms: None,
        }
    }

    pub(crate) fn notify(&self, event: &RunEvent<'_>) {
        if let Some(observer) = self.observer {
            observer.on_event(event);
        }
    }

    /// Calls `tool` with `args` through the engine's service in the caller's context: the
    /// result as JSON, or the error text (an error result counts as a failure).
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<Value, String> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => JsonObject::new(),
            other => return Err(format!("arguments must render to an object, not {other}")),
        };
        let call = ToolCall::new(tool, arguments, self.ctx.clone());
        match self.tools.clone().oneshot(call).await.and_then(ToolOutput::into_result) {
            Ok(result) if result.is_error == Some(true) => Err(error_text(&result)),
            Ok(result) => Ok(result_value(&result)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs the steps in order; on a fatal failure, the onFailure handlers. With a store, the
    /// record's steps so far are written after a step when [`CHECKPOINT_INTERVAL`] has passed
    /// since the last write, so a crash loses at most that much of a long run's history.
    pub(crate) async fn execute(&self, record: &mut WorkflowExecution, engine: &WorkflowEngine) -> Finished {
        let mut scope = Context::with_input(&self.input);
        let mut trail = Trail::default();
        let mut failure = None;
        let mut checkpoint = Instant::now();
        let total = self.workflow.steps.len();
        for (i, step) in self.workflow.steps.iter().enumerate() {
            if self.ctx.cancellation.is_cancelled() {
                failure = Some("execution cancelled by the caller".to_owned());
                break;
            }
            if let Some(progress) = &self.ctx.progress {
                progress.report(
                    ProgressUpdate::new(i as f64, Some(total as f64)).with_message(format!("step {}", step.id)),
                );
            }
            let outcome = self.step(step, &mut scope, &mut trail, None).await;
            if engine.store.is_some() && checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
                record.spec.steps.clone_from(&trail.records);
                engine.persist(record).await;
                checkpoint = Instant::now();
            }
            if outcome.status == StepStatus::Failed && !step.allow_failure {
                failure = Some(format!(
                    "step {} failed: {}",
                    step.id,
                    outcome.error.as_deref().unwrap_or("unknown error")
                ));
                break;
            }
        }
        if failure.is_some() {
            for handler in &self.workflow.on_failure {
                // Best effort: a handler's failure is recorded and the next one runs.
                self.step(handler, &mut scope, &mut trail, None).await;
            }
        }
        Finished { scope, trail, failure }
    }

    /// The response and the final record of a run that ended as `finished`.
    pub(crate) async fn finish(
        &self,
        mut record: WorkflowExecution,
        finished: Finished,
        engine: &WorkflowEngine,
    ) -> RunOutcome {
        let Finished {
            scope,
            mut trail,
            failure,
        } = finished;
        let output = match (&failure, &self.workflow.output) {
            (None, Some(template)) => Some(template.render(&scope)),
            _ => None,
        };
        if matches!(output, Some(Err(_))) && !self.debug {
            // A failed output shows every step's result: the ones not kept for the response are
            // read back from the results, for steps that ran once (a loop's sub-steps ran many
            // times and only their records hold each run).
            let mut runs: HashMap<&str, usize> = HashMap::new();
            for meta in &trail.metas {
                *runs.entry(meta.id.as_str()).or_default() += 1;
            }
            let once: Vec<String> = runs
                .into_iter()
                .filter(|(_, n)| *n == 1)
                .map(|(id, _)| id.to_owned())
                .collect();
            for meta in &mut trail.metas {
                if meta.result.is_none() && once.contains(&meta.id) {
                    meta.result = scope.result(&meta.id);
                }
            }
        }
        let mut default = DefaultResponse {
            execution_id: self.execution_id,
            workflow: self.workflow.name(),
            status: "completed",
            input: &self.input,
            steps: &trail.metas,
            all_results: self.debug,
            merge: None,
            error: None,
            template_vars: &self.workflow.template_vars,
        };
        let (response, error) = match &failure {
            Some(error) => {
                default.status = "failed";
                default.error = Some(error);
                (default.to_json(), Some(error.clone()))
            }
            None => match output {
                Some(rendered) => match rendered {
                    Ok(rendered) if self.debug => {
                        let mut doc = default.to_json();
                        if let Value::Object(map) = &mut doc {
                            map.insert("output".into(), rendered);
                        }
                        (doc, None)
                    }
                    Ok(rendered) => (rendered, None),
                    Err(e) => {
                        let message = format!("output template: {e}");
                        default.all_results = true;
                        let mut doc = default.to_json();
                        if let Value::Object(map) = &mut doc {
                            map.insert("output_error".into(), Value::String(message.clone()));
                        }
                        (doc, Some(message))
                    }
                },
                None => {
                    let last = self.last_result(&scope);
                    default.merge = last.as_ref();
                    (default.to_json(), None)
                }
            },
        };
        let status = if error.is_some() {
            ExecutionStatus::Failed
        } else {
            ExecutionStatus::Completed
        };
        let spec = &mut record.spec;
        let now = Utc::now();
        spec.status = status;
        spec.completed_at = Some(now);
        spec.duration_ms = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        spec.steps = trail.records;
        match &error {
            Some(error) => spec.error = Some(error.clone()),
            None => spec.result = Some(response.clone()),
        }
        record.metadata.labels.insert(
            muster_core::crd::WORKFLOW_STATUS_LABEL.to_owned(),
            status.as_str().to_owned(),
        );
        let duration = spec.duration_ms;
        engine.persist(&record).await;
        let mut event = self.event(if error.is_some() {
            RunEventKind::ExecutionFailed
        } else {
            RunEventKind::ExecutionCompleted
        });
        event.error = error.as_deref();
        event.duration_ms = Some(duration);
        self.notify(&event);
        RunOutcome {
            execution_id: self.execution_id.to_owned(),
            status,
            response,
            is_error: error.is_some(),
        }
    }

    /// The last step's result when it is merged into the default response: a plain tool
    /// step without the output flag whose result is an object.
    fn last_result(&self, scope: &Context) -> Option<Map<String, Value>> {
        let last = self.workflow.steps.last()?;
        if last.output || !matches!(last.body, Body::Tool(_)) {
            return None;
        }
        match scope.result(&last.id)? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }
}
