//! The `workflow_<name>` tools as a tower service: the table of workflows, the service that runs
//! them, and what they add to a catalogue.
//!
//! - [`WorkflowTable`]: the compiled workflows by name. [`apply`](WorkflowTable::apply) compiles
//!   first and refuses an invalid definition with its validation errors (nothing changes then);
//!   [`assess`](WorkflowTable::assess) says which workflows can run against a catalogue's tools
//!   ([`Availability`]: every tool they name present, nested `workflow_<other>` steps available
//!   in turn, cycles tolerated; read-only when every tool they name is, a cycle is not), and
//!   [`entries`](WorkflowTable::entries) what they contribute to it (the input schema from
//!   `spec.args`, the labels, the derived `readOnlyHint`);
//! - [`WorkflowTools`]: a [`ToolService`](muster_core::ToolService) serving `workflow_<name>`
//!   calls of a table's workflows through a [`WorkflowEngine`](crate::engine::WorkflowEngine)
//!   over any inner tool service;
//! - [`LateBoundTools`]: the handle to give the engine when the steps are to call a stack that
//!   contains the workflow service itself (a gateway's whole stack). It is bound once that stack
//!   is built and holds it weakly, so the stack does not keep itself alive.
//!
//! One workflow, served over a tool service of the process:
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{BoxToolService, CallContext, ToolCall, ToolError};
//! use muster_workflow::{engine::WorkflowEngine, tools::{Applied, WorkflowTable, WorkflowTools}};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use serde_json::json;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The tools the steps call: one answering `{"text": <its text argument, upper-cased>}`.
//! let tools = BoxToolService::new(tower::service_fn(|call: ToolCall| async move {
//!     let text = call.arguments["text"].as_str().unwrap_or_default().to_uppercase();
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(json!({"text": text}).to_string())]).into())
//! }));
//! let table = Arc::new(WorkflowTable::new());
//! let shout = serde_json::from_value(json!({
//!     "metadata": {"name": "shout"},
//!     "spec": {
//!         "args": {"who": {"type": "string", "required": true}},
//!         "steps": [{"id": "up", "tool": "x_text_upper", "args": {"text": "hello {{ .input.who }}"}}],
//!         "output": {"said": "{{ .results.up.text }}"}
//!     }
//! }))?;
//! assert_eq!(table.apply(shout).map_err(|e| e.to_string())?, Applied::Added);
//! let workflows = WorkflowTools::new(Arc::clone(&table), WorkflowEngine::new(tools));
//!
//! let args = json!({"who": "world"}).as_object().cloned().unwrap_or_default();
//! let call = ToolCall::new("workflow_shout", args, CallContext::default());
//! let result = workflows.oneshot(call).await?.into_result()?;
//! assert_eq!(result.structured_content, Some(json!({"said": "HELLO WORLD"})));
//! # Ok(()) }
//! ```
//!
//! When the steps call a stack that contains the workflow service (so that a step may run
//! another workflow, and every layer of the stack applies to steps as to callers), the engine
//! calls a [`LateBoundTools`], and the stack is bound to it once built. Serve calls with what
//! [`bind`](LateBoundTools::bind) answers: it keeps the stack alive, the handle does not.
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolError};
//! use muster_workflow::{engine::WorkflowEngine, tools::{LateBoundTools, WorkflowTable, WorkflowTools}};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use serde_json::json;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let table = Arc::new(WorkflowTable::new());
//! for (name, tool) in [("inner", "x_hello"), ("outer", "workflow_inner")] {
//!     let steps = json!([{"id": "only", "tool": tool}]);
//!     let workflow = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"steps": steps}}))?;
//!     table.apply(workflow).map_err(|e| e.to_string())?;
//! }
//! let steps = LateBoundTools::new();
//! let workflows = WorkflowTools::new(table, WorkflowEngine::new(BoxToolService::new(steps.clone())));
//! let hello = tower::service_fn(|_call: ToolCall| async {
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text("hello")]).into())
//! });
//! // The stack: workflow_<name> to the workflows, anything else to `hello`.
//! let stack = steps.bind(BoxToolService::new(tower::service_fn(move |call: ToolCall| {
//!     let (workflows, hello) = (workflows.clone(), hello);
//!     async move {
//!         if call.name.starts_with("workflow_") { workflows.oneshot(call).await } else { hello.oneshot(call).await }
//!     }
//! })));
//! let call = ToolCall::new("workflow_outer", JsonObject::new(), CallContext::default());
//! let result = stack.clone().oneshot(call).await?.into_result()?;
//! assert_eq!(result.is_error, Some(false));
//!
//! drop(stack); // the last holder: the stack, and the workflow service in it, are dropped
//! assert!(!steps.is_live());
//! # Ok(()) }
//! ```

mod availability;
mod entry;
mod late_bound;
mod service;
mod table;

#[cfg(test)]
mod tests;

pub use self::{
    availability::Availability,
    entry::entry,
    late_bound::LateBoundTools,
    service::WorkflowTools,
    table::{Applied, WorkflowEntries, WorkflowTable},
};
