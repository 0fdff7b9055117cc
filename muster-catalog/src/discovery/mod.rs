//! The catalogue service: the ten discovery meta-tools answered over any
//! [`CatalogSource`](crate::CatalogSource).
//!
//! [`Discovery`] answers `list_tools` (paged), `filter_tools`, `describe_tool`,
//! `list_core_tools`, `list_resources`, `filter_resources`, `describe_resource`, `list_prompts`,
//! `filter_prompts` and `describe_prompt` ([`DiscoveryTool`]) as the meta-tools answer them: a
//! [`CallToolResult`] whose one text block is the JSON page, or an error result whose text is
//! the documented message. It reads the catalogue the call's session sees
//! ([`CatalogSource::catalog_for`](crate::CatalogSource::catalog_for)) narrowed by the call's
//! declared toolset (a [`DeclaredToolset`](crate::toolset::DeclaredToolset) in the call's
//! extensions, else `CallContext::toolset`); an invalid toolset is the answer of every one of
//! them.
//!
//! It is a tower [`Service<ToolCall>`](tower::Service) answering
//! [`ToolOutput`](muster_core::ToolOutput), so layers compose over it as over any tool service
//! (a call of another name is `ToolError::NotFound`), and [`Discovery::answer`] is the same
//! answer as a plain async method.
//!
//! What the catalogue alone does not know comes in through two hooks, no-ops by default:
//! - [`AuthHints`]: the servers a sign-in would unlock for a session (`servers_requiring_auth`
//!   on `list_tools` and `filter_tools`, and from them, the presets and the name rules,
//!   `toolset_requiring_auth` for a request that declared a toolset);
//! - [`OnRequest`]: work done before a request's catalogue is read (a gateway connects what the
//!   caller's identity unlocks, so the session's catalogue has those tools).
//!
//! ```
//! use std::sync::Arc;
//!
//! use muster_catalog::{Catalog, CatalogSource, discovery::Discovery, toolset::Presets};
//! use muster_core::{CallContext, JsonObject, ToolCall, ToolEntry};
//! use rmcp::model::Tool;
//! use serde_json::{Value, json};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut builder = Catalog::builder();
//! for (name, description) in [
//!     ("get_pods", "List the pods of a namespace."),
//!     ("delete_pod", "Delete one pod."),
//!     ("get_logs", "Read the logs of a pod's container."),
//! ] {
//!     let tool = Tool::new(name, description, Arc::new(JsonObject::new()));
//!     builder.push_tool(ToolEntry::downstream(format!("x_k8s_{name}"), "k8s", tool));
//! }
//! let catalog = Arc::new(builder.build());
//! let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
//! let discovery = Discovery::new(source, Arc::new(Presets::default()));
//!
//! // Each answer is the meta-tool's result: one text block holding the JSON page.
//! let page = |output: muster_core::ToolOutput| -> Value {
//!     let result = output.into_result().unwrap();
//!     assert_ne!(result.is_error, Some(true));
//!     serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap()
//! };
//! let call = |name: &str, args: Value| {
//!     ToolCall::new(name, args.as_object().cloned().unwrap_or_default(), CallContext::default())
//! };
//!
//! let listed = page(discovery.clone().oneshot(call("list_tools", json!({"limit": 2}))).await.unwrap());
//! assert_eq!((listed["total"].as_u64(), listed["truncated"].as_bool()), (Some(3), Some(true)));
//! assert_eq!(listed["tools"][0]["name"], "x_k8s_get_pods");
//!
//! let found = page(discovery.oneshot(call("filter_tools", json!({"query": "container logs"}))).await.unwrap());
//! assert_eq!(found["tools"][0]["name"], "x_k8s_get_logs");
//! # }
//! ```

mod hooks;
mod service;
mod toolset_hints;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

pub use hooks::{AuthHints, OnRequest};
pub use service::{Discovery, RequestView};

/// One discovery meta-tool: what [`Discovery`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DiscoveryTool {
    /// `list_tools`: one page of the caller's catalogue.
    ListTools,
    /// `filter_tools`: pattern, description, labels, a ranked query, an inline toolset.
    FilterTools,
    /// `describe_tool`: one tool's detail.
    DescribeTool,
    /// `list_core_tools`: every core tool.
    ListCoreTools,
    /// `list_resources`.
    ListResources,
    /// `filter_resources`.
    FilterResources,
    /// `describe_resource`.
    DescribeResource,
    /// `list_prompts`.
    ListPrompts,
    /// `filter_prompts`.
    FilterPrompts,
    /// `describe_prompt`.
    DescribePrompt,
}

impl DiscoveryTool {
    /// Every discovery meta-tool.
    pub const ALL: [Self; 10] = [
        Self::ListTools,
        Self::FilterTools,
        Self::DescribeTool,
        Self::ListCoreTools,
        Self::ListResources,
        Self::FilterResources,
        Self::DescribeResource,
        Self::ListPrompts,
        Self::FilterPrompts,
        Self::DescribePrompt,
    ];

    /// The meta-tool's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ListTools => "list_tools",
            Self::FilterTools => "filter_tools",
            Self::DescribeTool => "describe_tool",
            Self::ListCoreTools => "list_core_tools",
            Self::ListResources => "list_resources",
            Self::FilterResources => "filter_resources",
            Self::DescribeResource => "describe_resource",
            Self::ListPrompts => "list_prompts",
            Self::FilterPrompts => "filter_prompts",
            Self::DescribePrompt => "describe_prompt",
        }
    }

    /// The discovery meta-tool called `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }
}

/// A meta-tool's answer: `value` as the JSON text of one content block.
pub fn json_answer<T: Serialize + ?Sized>(value: &T) -> CallToolResult {
    match serde_json::to_string(value) {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => error_answer(format!("internal error: {e}")),
    }
}

/// A meta-tool's refusal: an error result whose one text block is `message`.
pub fn error_answer(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[cfg(test)]
mod tests {
    use super::DiscoveryTool;

    #[test]
    fn every_discovery_tool_is_found_by_its_name_and_no_other_name_is() {
        for tool in DiscoveryTool::ALL {
            assert_eq!(DiscoveryTool::from_name(tool.name()), Some(tool));
        }
        for other in ["call_tool", "get_resource", "get_prompt", "LIST_TOOLS", ""] {
            assert_eq!(DiscoveryTool::from_name(other), None, "{other}");
        }
    }
}
