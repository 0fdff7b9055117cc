//! The Go-compatible JSON shape of a record: what the filesystem holds and what
//! `core_workflow_execution_get` answers.
//!
//! Go muster (`internal/api/types.go`) marshals its flat execution struct with snake_case keys
//! (`execution_id`, `workflow_name`, `started_at`, …), indented, into
//! `workflow_executions/<sanitized-id>.yaml`. This module converts between that shape and the
//! [`WorkflowExecution`] resource, so files written by either implementation read in the other.

use chrono::{DateTime, Utc};
use muster_core::crd::{ExecutionStatus, WorkflowExecution, WorkflowExecutionSpec, WorkflowExecutionStep};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One record in the Go JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordDoc {
    pub(crate) execution_id: String,
    pub(crate) workflow_name: String,
    pub(crate) status: ExecutionStatus,
    pub(crate) started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub(crate) duration_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) steps: Option<Vec<StepDoc>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) truncated: bool,
}

/// One step in the Go JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepDoc {
    pub(crate) step_id: String,
    #[serde(default)]
    pub(crate) tool: String,
    pub(crate) status: ExecutionStatus,
    pub(crate) started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub(crate) duration_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stored_as: Option<String>,
}

impl RecordDoc {
    /// The Go shape of `execution` (steps always present, possibly empty).
    pub(crate) fn from_execution(execution: &WorkflowExecution) -> Self {
        let spec = &execution.spec;
        Self {
            execution_id: execution.metadata.name.clone(),
            workflow_name: spec.workflow_name.clone(),
            status: spec.status,
            started_at: spec.started_at,
            completed_at: spec.completed_at,
            duration_ms: spec.duration_ms,
            input: spec.input.clone(),
            result: spec.result.clone(),
            error: spec.error.clone(),
            steps: Some(spec.steps.iter().map(StepDoc::from_step).collect()),
            truncated: spec.truncated,
        }
    }

    /// The resource this document describes, labelled from its spec.
    pub(crate) fn into_execution(self) -> WorkflowExecution {
        let spec = WorkflowExecutionSpec {
            workflow_name: self.workflow_name,
            status: self.status,
            started_at: self.started_at,
            completed_at: self.completed_at,
            duration_ms: self.duration_ms,
            input: self.input,
            result: self.result,
            error: self.error,
            truncated: self.truncated,
            steps: self
                .steps
                .unwrap_or_default()
                .into_iter()
                .map(StepDoc::into_step)
                .collect(),
        };
        WorkflowExecution::new(self.execution_id, spec)
    }
}

impl StepDoc {
    pub(crate) fn from_step(step: &WorkflowExecutionStep) -> Self {
        Self {
            step_id: step.step_id.clone(),
            tool: step.tool.clone(),
            status: step.status,
            started_at: step.started_at,
            completed_at: step.completed_at,
            duration_ms: step.duration_ms,
            input: step.input.clone(),
            result: step.result.clone(),
            error: step.error.clone(),
            stored_as: step.stored_as.clone(),
        }
    }

    fn into_step(self) -> WorkflowExecutionStep {
        WorkflowExecutionStep {
            step_id: self.step_id,
            tool: self.tool,
            status: self.status,
            started_at: self.started_at,
            completed_at: self.completed_at,
            duration_ms: self.duration_ms,
            input: self.input,
            result: self.result,
            error: self.error,
            stored_as: self.stored_as,
        }
    }
}

/// Reads a record file: the Go shape first, then a `WorkflowExecution` document (as
/// `kubectl get wfe -o json` prints one), so either kind of file dropped in the folder loads.
pub(crate) fn parse_record(bytes: &[u8]) -> Result<WorkflowExecution, serde_json::Error> {
    match serde_json::from_slice::<RecordDoc>(bytes) {
        Ok(doc) => Ok(doc.into_execution()),
        Err(go_shape_error) => match serde_json::from_slice::<WorkflowExecution>(bytes) {
            Ok(execution) if !execution.metadata.name.is_empty() => Ok(relabel(execution)),
            _ => Err(go_shape_error),
        },
    }
}

/// `execution` with its workflow and status labels matching its spec.
pub(crate) fn relabel(mut execution: WorkflowExecution) -> WorkflowExecution {
    let labels = &mut execution.metadata.labels;
    labels.insert(
        muster_core::crd::WORKFLOW_LABEL.to_owned(),
        execution.spec.workflow_name.clone(),
    );
    labels.insert(
        muster_core::crd::WORKFLOW_STATUS_LABEL.to_owned(),
        execution.spec.status.as_str().to_owned(),
    );
    execution
}
