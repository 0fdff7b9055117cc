//! The 13 meta-tools over any catalogue and any tool service: [`MetaService`] answers them, and
//! [`MetaServer`] serves them as an MCP server (rmcp's [`ServerHandler`](rmcp::ServerHandler)).
//!
//! - The ten discovery meta-tools (`list_tools`, `filter_tools`, `describe_tool`,
//!   `list_core_tools`, and the same for resources and prompts) are the catalogue service's
//!   ([`Discovery`](crate::discovery::Discovery)) over any [`CatalogSource`](crate::CatalogSource).
//! - `call_tool` runs the named tool through any [`ToolService`](muster_core::ToolService) and
//!   wraps its result in the documented [`envelope`]. A name the request's catalogue does not
//!   show is refused (outside the toolset, or not found); an [`UnseenTools`] hook may answer it
//!   otherwise (a gateway answers with a sign-in link, or why a server is down).
//! - `get_resource` and `get_prompt` read from the server that exposes the entry through an
//!   [`EntryReader`]; without one, no server is connected.
//!
//! [`definitions`] are the 13 tools as `tools/list` shows them.
//!
//! ```
//! use std::sync::Arc;
//!
//! use muster_catalog::{
//!     Catalog, CatalogSource,
//!     discovery::Discovery,
//!     meta::{MetaServer, MetaService},
//!     toolset::Presets,
//! };
//! use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolEntry, ToolError, ToolOutput};
//! use rmcp::model::{CallToolResult, ContentBlock, Tool};
//! use serde_json::{Value, json};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A catalogue of one tool, and the service that runs it.
//! let mut builder = Catalog::builder();
//! let tool = Tool::new("greet", "Greet someone by name.", Arc::new(JsonObject::new()));
//! builder.push_tool(ToolEntry::downstream("x_hello_greet", "hello", tool));
//! let catalog = Arc::new(builder.build());
//! let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
//! let tools = BoxToolService::new(tower::service_fn(|call: ToolCall| async move {
//!     let who = call.arguments.get("who").and_then(Value::as_str).unwrap_or("world").to_owned();
//!     Ok::<_, ToolError>(ToolOutput::from(CallToolResult::success(vec![ContentBlock::text(format!("hello, {who}"))])))
//! }));
//! let meta = MetaService::new(Discovery::new(source, Arc::new(Presets::default())), tools);
//!
//! // filter_tools finds the tool; call_tool runs it, its result in the envelope.
//! let text = |output: ToolOutput| output.into_result().unwrap().content[0].as_text().unwrap().text.clone();
//! let call = |name: &str, args: Value| {
//!     ToolCall::new(name, args.as_object().cloned().unwrap(), CallContext::default())
//! };
//! let found = text(meta.clone().oneshot(call("filter_tools", json!({"query": "greet someone"}))).await.unwrap());
//! assert!(found.contains("x_hello_greet"));
//! let called = text(
//!     meta.clone().oneshot(call("call_tool", json!({"name": "x_hello_greet", "arguments": {"who": "Ada"}}))).await.unwrap(),
//! );
//! let envelope: Value = serde_json::from_str(&called).unwrap();
//! assert_eq!(envelope["content"][0]["text"], "hello, Ada");
//! assert_eq!(envelope["tool"]["server"], "hello");
//!
//! // The same, as an MCP server (serve it over stdio or streamable HTTP with rmcp).
//! let _server = MetaServer::new(meta);
//! # }
//! ```

mod definitions;
mod envelope;
mod hooks;
mod server;
mod service;

pub use definitions::{MetaTool, definitions};
pub use envelope::{DispatchedTool, TOOL_META_KEY, content_summary, envelope};
pub use hooks::{EntryError, EntryReader, Unseen, UnseenTools};
pub use server::{
    MetaServer, ProgressRelay, progress_notification, progress_to_peer, request_context, session_of_request,
};
pub use service::MetaService;

#[cfg(test)]
mod tests;
