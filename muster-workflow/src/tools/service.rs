//! [`WorkflowTools`]: the tower service of the `workflow_<name>` tools.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{NameRules, ToolCall, ToolError, ToolOutput};
use tower::Service;

use super::WorkflowTable;
use crate::engine::WorkflowEngine;

/// Serves `workflow_<name>` calls: looks workflow `<name>` up in the table and runs it with the
/// engine (whose tool service its steps call, whose store records the run and whose observer
/// hears its events), in the caller's context. Answers the run's result
/// ([`RunOutcome::into_call_result`](crate::engine::RunOutcome::into_call_result)): a failed
/// run is a result with `isError`, not an `Err`.
///
/// Refused with [`ToolError::NotFound`] when the name is not `workflow_<name>` or no workflow
/// has that name, and with [`ToolError::InvalidArguments`] when the arguments do not fit
/// `spec.args` (nothing runs then). Clones share the table and the engine.
#[derive(Debug, Clone)]
pub struct WorkflowTools {
    table: Arc<WorkflowTable>,
    engine: Arc<WorkflowEngine>,
}

impl WorkflowTools {
    /// The tools of the workflows in `table`, run by `engine`.
    pub fn new(table: Arc<WorkflowTable>, engine: WorkflowEngine) -> Self {
        Self {
            table,
            engine: Arc::new(engine),
        }
    }

    /// The table of workflows served.
    pub fn table(&self) -> &Arc<WorkflowTable> {
        &self.table
    }

    /// The engine that runs them.
    pub fn engine(&self) -> &WorkflowEngine {
        &self.engine
    }
}

impl Service<ToolCall> for WorkflowTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let workflow = NameRules::workflow_of(&call.name).and_then(|name| self.table.get(name));
        let engine = Arc::clone(&self.engine);
        Box::pin(async move {
            let workflow = workflow.ok_or_else(|| ToolError::not_found(&call.name))?;
            let outcome = engine.run(&workflow, call.arguments, call.ctx).await?;
            Ok(outcome.into_call_result().into())
        })
    }
}
