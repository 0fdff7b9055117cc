//! Workflow executions in the metrics: [`MeteredObserver`] counts and times each run as it ends,
//! [`CountingStore`] counts the errors of the execution record store.

use std::{fmt, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use muster_core::crd::{ExecutionStatus, WorkflowExecution};
use muster_workflow::{
    engine::{RunEvent, RunEventKind, RunObserver},
    record::{ExecutionPage, ExecutionQuery, ExecutionStore, Result},
};

use super::GatewayMetrics;

/// A [`RunObserver`] that records each finished run in the metrics
/// (`muster_workflow_executions_total{workflow,status}` and
/// `muster_workflow_execution_duration_seconds{workflow}`), then hands every event on.
pub struct MeteredObserver {
    metrics: Arc<GatewayMetrics>,
    inner: Option<Arc<dyn RunObserver>>,
}

impl MeteredObserver {
    /// Records runs in `metrics` and passes the events on to `inner`, when given.
    pub fn new(metrics: Arc<GatewayMetrics>, inner: Option<Arc<dyn RunObserver>>) -> Self {
        Self { metrics, inner }
    }
}

impl fmt::Debug for MeteredObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredObserver")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl RunObserver for MeteredObserver {
    fn on_event(&self, event: &RunEvent<'_>) {
        let status = match event.kind {
            RunEventKind::ExecutionCompleted => Some(ExecutionStatus::Completed),
            RunEventKind::ExecutionFailed => Some(ExecutionStatus::Failed),
            _ => None,
        };
        if let Some(status) = status {
            let elapsed = Duration::from_millis(event.duration_ms.and_then(|ms| u64::try_from(ms).ok()).unwrap_or(0));
            self.metrics.record_execution(event.workflow, status.as_str(), elapsed);
        }
        if let Some(inner) = &self.inner {
            inner.on_event(event);
        }
    }
}

/// An [`ExecutionStore`] that counts every error of the store it wraps in
/// `muster_workflow_execution_store_errors_total`.
pub struct CountingStore {
    inner: Arc<dyn ExecutionStore>,
    metrics: Arc<GatewayMetrics>,
}

impl CountingStore {
    /// Counts the errors of `inner` in `metrics`.
    pub fn new(inner: Arc<dyn ExecutionStore>, metrics: Arc<GatewayMetrics>) -> Self {
        Self { inner, metrics }
    }

    fn counted<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.metrics.record_store_error();
        }
        result
    }
}

impl fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl ExecutionStore for CountingStore {
    fn put(&self, execution: &WorkflowExecution) -> Result<()> {
        self.counted(self.inner.put(execution))
    }

    fn get(&self, execution_id: &str) -> Result<Option<WorkflowExecution>> {
        self.counted(self.inner.get(execution_id))
    }

    fn list(&self, query: &ExecutionQuery) -> Result<ExecutionPage> {
        self.counted(self.inner.list(query))
    }

    fn delete(&self, execution_id: &str) -> Result<bool> {
        self.counted(self.inner.delete(execution_id))
    }

    fn prune(&self, now: DateTime<Utc>) -> Result<usize> {
        self.counted(self.inner.prune(now))
    }

    fn recover_interrupted(&self, now: DateTime<Utc>) -> Result<Vec<String>> {
        self.counted(self.inner.recover_interrupted(now))
    }
}
