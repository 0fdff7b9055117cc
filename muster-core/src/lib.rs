//! # muster-core
//!
//! The shared model of muster for Rust: what every other crate of the family speaks.
//!
//! - [`entry`]: catalogue entries for tools, resources and prompts, as the gateway exposes them.
//! - [`naming`]: the exposed-name rules (`x_<prefix>_<tool>`, `core_*`, `workflow_<name>`).
//! - [`call`]: the one abstraction, a tool call as a tower [`Service`](tower::Service):
//!   [`ToolCall`], [`CallContext`] and [`ToolService`].
//! - [`output`]: [`ToolOutput`], what a call returns: a result built in the process, or a
//!   downstream's passed on as it came.
//! - [`error`]: [`ToolError`] and the one table mapping it to JSON-RPC errors.
//! - [`crd`]: the CRD-compatible resources (MCPServer, Workflow, WorkflowExecution) and their
//!   validation.
//! - [`config`]: the `config.yaml` types.
//!
//! Anything that runs tool calls is a [`ToolService`]; a tower layer over one decides about
//! calls (the toolset, sign-in, limits), and [`BoxToolService`] erases a composed stack's type:
//!
//! ```
//! use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolError};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), ToolError> {
//! // A tool: any Service<ToolCall>, here a closure that answers the session it runs in.
//! let whoami = tower::service_fn(|call: ToolCall| async move {
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(call.ctx.session.to_string())]).into())
//! });
//! // A stack over it: tower's concurrency limit here; muster's layers compose the same way.
//! let tools = BoxToolService::new(ServiceBuilder::new().concurrency_limit(8).service(whoami));
//! let call = ToolCall::new("core_whoami", JsonObject::new(), CallContext::default());
//! let result = tools.oneshot(call).await?.into_result()?;
//! assert_eq!(result.content[0].as_text().map(|t| t.text.as_str()), Some("default"));
//! # Ok(()) }
//! ```
//!
//! Exposed names follow one set of rules:
//!
//! ```
//! use muster_core::naming::NameRules;
//!
//! let names = NameRules::default();
//! assert_eq!(names.server_tool("kubernetes", "get_pods"), "x_kubernetes_get_pods");
//! assert_eq!(names.workflow_tool("deploy-webapp"), "workflow_deploy-webapp");
//! ```

pub mod call;
pub mod compact;
pub mod complete;
pub mod config;
pub mod crd;
pub mod entry;
pub mod error;
pub mod fs;
pub mod naming;
pub mod output;
pub mod router;

pub use call::{
    BoxToolService, CallContext, Principal, ProgressSink, ProgressUpdate, SessionId, ToolCall, ToolService,
};
pub use compact::{CompactTool, SchemaText};
pub use entry::{FamilyRoute, PromptEntry, ResourceEntry, ToolEntry, ToolKind};
pub use error::ToolError;
pub use naming::NameRules;
pub use output::ToolOutput;

/// A JSON object, as tool arguments travel (re-exported from rmcp's model).
pub use rmcp::model::JsonObject;

/// A boxed error, for the failures of arbitrary inner services.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
