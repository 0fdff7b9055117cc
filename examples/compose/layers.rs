//! The tower layer of the compose example, written the way any muster layer is: a `Layer`
//! (configuration, cheap to clone) that wraps a `ToolService` into a `Service<ToolCall>` of its
//! own.
//!
//! [`AuditLayer`] records every call with its outcome: a layer of your own that decides nothing,
//! it only watches. (A tool of your own is not a layer: it is a named service of the
//! dispatcher, `Dispatcher::with_tool`.)

use std::{
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use muster::core::{SessionId, ToolCall, ToolError, ToolOutput};
use tower::{Layer, Service};

/// One call, as [`AuditLayer`] saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AuditRecord {
    /// The exposed name of the tool.
    pub(crate) tool: String,
    /// The session it was called in.
    pub(crate) session: SessionId,
    /// `ok`, `tool error` (the tool ran and reported an error) or the refusal.
    pub(crate) outcome: String,
    /// How long it took.
    pub(crate) took: Duration,
}

/// Where [`AuditLayer`] keeps its records (shared by every clone).
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditLog(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditLog {
    /// Every record so far, oldest first.
    pub(crate) fn records(&self) -> Vec<AuditRecord> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn push(&self, record: AuditRecord) {
        tracing::info!(tool = %record.tool, session = %record.session, outcome = %record.outcome, took_ms = record.took.as_millis() as u64, "tool call");
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(record);
    }
}

/// Records every call that passes through, with its outcome and duration, in an [`AuditLog`].
#[derive(Debug, Clone)]
pub(crate) struct AuditLayer {
    log: AuditLog,
}

impl AuditLayer {
    /// Records into `log`.
    pub(crate) fn new(log: AuditLog) -> Self {
        Self { log }
    }
}

impl<S> Layer<S> for AuditLayer {
    type Service = Audit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Audit {
            inner,
            log: self.log.clone(),
        }
    }
}

/// The service of [`AuditLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Audit<S> {
    inner: S,
    log: AuditLog,
}

impl<S> Service<ToolCall> for Audit<S>
where
    S: Service<ToolCall, Response = ToolOutput, Error = ToolError>,
    S::Future: Send + 'static,
{
    type Response = ToolOutput;
    // The layer adds no failure of its own, so it keeps the inner error type.
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let (tool, session) = (call.name.clone(), call.ctx.session.clone());
        let log = self.log.clone();
        let started = Instant::now();
        let answer = self.inner.call(call);
        Box::pin(async move {
            let result = answer.await;
            let outcome = match &result {
                Ok(output) if output.is_error() => "tool error".to_owned(),
                Ok(_) => "ok".to_owned(),
                Err(e) => e.to_string(),
            };
            log.push(AuditRecord {
                tool,
                session,
                outcome,
                took: started.elapsed(),
            });
            result
        })
    }
}
