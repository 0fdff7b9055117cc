//! Workflow execution records: where each run of a workflow is remembered, and the answers of
//! the `core_workflow_execution_list` and `core_workflow_execution_get` tools.
//!
//! A record is a [`WorkflowExecution`](muster_core::crd::WorkflowExecution) named by the
//! execution UUID. An [`ExecutionStore`] keeps them:
//!
//! - [`FsExecutionStore`] — standalone mode: one file per run under
//!   `<config_dir>/workflow_executions/<sanitized-id>.yaml`, holding the indented JSON Go
//!   muster writes (snake_case keys: `execution_id`, `workflow_name`, `started_at`, …), so the
//!   folder is shared with Go muster both ways. A file in the `WorkflowExecution` document shape
//!   (`apiVersion`/`kind`/`metadata`/`spec`) also loads. Writes are atomic.
//! - [`MemoryExecutionStore`] — for embedding and tests.
//!
//! Every stored copy goes through the payload guard ([`guard_payload`]): a record whose JSON is
//! over [`MAX_EXECUTION_PAYLOAD_BYTES`] has its big inputs and results replaced by
//! [`TRUNCATION_MARKER`] and is flagged `truncated`. Retention ([`ExecutionStore::prune`],
//! every [`RETENTION_GC_INTERVAL`]) keeps [`RETENTION_MAX_AGE_DAYS`] days and at most
//! [`RETENTION_MAX_COUNT`] records. After a restart, [`ExecutionStore::recover_interrupted`]
//! marks runs a crash cut off as failed.
//!
//! The stores are synchronous; [`FsExecutionStore`] blocks on file I/O, so from async code
//! call it inside `tokio::task::spawn_blocking`.
//!
//! ```
//! use chrono::Utc;
//! use muster_core::crd::{ExecutionStatus, WorkflowExecution, WorkflowExecutionSpec};
//! use muster_workflow::record::{ExecutionStore, FsExecutionStore, execution_list_result};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let config = tempfile::tempdir()?;
//! let store = FsExecutionStore::open(config.path())?;
//! store.recover_interrupted(Utc::now())?;
//!
//! let mut spec = WorkflowExecutionSpec::started("deploy", Utc::now());
//! spec.status = ExecutionStatus::Completed;
//! store.put(&WorkflowExecution::new("0b6f6f2e-5d7c-4a55-9d0e-6f4c1f1f3a11", spec))?;
//!
//! let args = serde_json::json!({"workflow_name": "deploy", "limit": 10});
//! let page = execution_list_result(&store, args.as_object().expect("an object"))?;
//! assert_eq!(page["total"], 1);
//! assert_eq!(page["executions"][0]["status"], "completed");
//! # Ok(())
//! # }
//! ```

mod format;
mod guard;
mod query;
mod store;

#[cfg(test)]
mod tests;

pub use guard::{MAX_EXECUTION_PAYLOAD_BYTES, OMITTED_STEP_ID, TRUNCATION_MARKER, guard_payload};
pub use query::{
    DEFAULT_LIST_LIMIT, ExecutionPage, ExecutionQuery, ExecutionSummary, StatusFilter, execution_get_result,
    execution_list_result,
};
pub use store::{
    EXECUTIONS_DIR, ExecutionStore, FsExecutionStore, INTERRUPTED_ERROR, MemoryExecutionStore, RETENTION_GC_INTERVAL,
    RETENTION_MAX_AGE_DAYS, RETENTION_MAX_COUNT, RecordError, Result, expired, interrupted, sanitize_id,
};

impl From<muster_core::fs::WriteError> for RecordError {
    fn from(e: muster_core::fs::WriteError) -> Self {
        RecordError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        }
    }
}
