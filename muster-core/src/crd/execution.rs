//! The `WorkflowExecution` resource: the durable, immutable record of one workflow run.
//!
//! muster writes and prunes these records; nobody authors them. They have no status.
//! Unlike the other kinds, the spec of a record accepts unknown fields, so a record
//! written by a newer muster still reads.

use std::fmt;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{API_VERSION, ObjectMeta, is_false};

/// Label holding the name of the workflow a record belongs to.
pub const WORKFLOW_LABEL: &str = "muster.giantswarm.io/workflow";
/// Label holding the status of the run a record describes.
pub const WORKFLOW_STATUS_LABEL: &str = "muster.giantswarm.io/status";

/// A `WorkflowExecution` document: `apiVersion`, `kind`, `metadata` (named by the
/// execution UUID) and `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecution {
    /// Always `muster.giantswarm.io/v1alpha1` ([`API_VERSION`]).
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `WorkflowExecution` ([`WorkflowExecution::KIND`]).
    #[serde(default = "execution_kind")]
    pub kind: String,
    /// Named by the execution UUID; labelled with `muster.giantswarm.io/workflow`
    /// ([`WORKFLOW_LABEL`]) and `muster.giantswarm.io/status` ([`WORKFLOW_STATUS_LABEL`]).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The record.
    pub spec: WorkflowExecutionSpec,
}

fn api_version() -> String {
    API_VERSION.to_owned()
}

fn execution_kind() -> String {
    WorkflowExecution::KIND.to_owned()
}

impl WorkflowExecution {
    /// The `kind` of the resource.
    pub const KIND: &'static str = "WorkflowExecution";

    /// A record named `execution_id`, labelled with its workflow and status.
    pub fn new(execution_id: impl Into<String>, spec: WorkflowExecutionSpec) -> Self {
        let mut metadata = ObjectMeta::named(execution_id);
        metadata
            .labels
            .insert(WORKFLOW_LABEL.to_owned(), spec.workflow_name.clone());
        metadata
            .labels
            .insert(WORKFLOW_STATUS_LABEL.to_owned(), spec.status.as_str().to_owned());
        Self {
            api_version: api_version(),
            kind: execution_kind(),
            metadata,
            spec,
        }
    }
}

/// Status of a run or of one of its steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ExecutionStatus {
    /// Still running.
    #[default]
    InProgress,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
}

impl ExecutionStatus {
    /// The spelling in a document: `inprogress`, `completed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "inprogress",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The record of one workflow run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecutionSpec {
    /// Name of the workflow that ran.
    pub workflow_name: String,
    /// Status of the run.
    pub status: ExecutionStatus,
    /// When the run began.
    #[serde(deserialize_with = "super::time::deserialize")]
    pub started_at: DateTime<Utc>,
    /// When the run finished; unset while in progress.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at: Option<DateTime<Utc>>,
    /// Duration of the run in milliseconds.
    #[serde(default)]
    pub duration_ms: i64,
    /// Arguments passed to the workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Final result; unset on failure and while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Error message; set only on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when oversized payloads were replaced by a truncation marker.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// One record per step that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<WorkflowExecutionStep>,
}

impl WorkflowExecutionSpec {
    /// A record of a run of `workflow_name` that began at `started_at` and is in progress.
    pub fn started(workflow_name: impl Into<String>, started_at: DateTime<Utc>) -> Self {
        Self {
            workflow_name: workflow_name.into(),
            status: ExecutionStatus::InProgress,
            started_at,
            completed_at: None,
            duration_ms: 0,
            input: None,
            result: None,
            error: None,
            truncated: false,
            steps: Vec::new(),
        }
    }
}

/// The record of one step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecutionStep {
    /// Id of the step.
    pub step_id: String,
    /// Tool the step called.
    #[serde(default)]
    pub tool: String,
    /// Status of the step.
    pub status: ExecutionStatus,
    /// When the step began.
    #[serde(deserialize_with = "super::time::deserialize")]
    pub started_at: DateTime<Utc>,
    /// When the step finished.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at: Option<DateTime<Utc>>,
    /// Duration of the step in milliseconds.
    #[serde(default)]
    pub duration_ms: i64,
    /// Arguments the tool was called with, after templating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Result of the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Error message of a failed step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Name the result was stored under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_as: Option<String>,
}
