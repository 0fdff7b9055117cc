//! `core_whoami`: the custom core tool of the compose example. A tool of your own is any
//! [`ToolService`](muster::core::ToolService) (here a closure through `tower::service_fn`) and a
//! catalogue entry that describes it; it sees the call's whole context.

use std::sync::Arc;

use muster::core::{BoxToolService, JsonObject, ToolCall, ToolEntry, ToolError, ToolKind};
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use serde_json::json;

/// The exposed name.
pub(crate) const NAME: &str = "core_whoami";

/// Its catalogue entry: a core tool, read-only, without arguments.
pub(crate) fn entry() -> ToolEntry {
    let schema: JsonObject = json!({"type": "object", "properties": {}})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let tool = Tool::new(
        NAME,
        "Who is calling: the MCP session, the signed-in principal and the request's toolset.",
        Arc::new(schema),
    )
    .with_annotations(ToolAnnotations::new().read_only(true));
    ToolEntry::builtin(ToolKind::Core, tool)
}

/// The tool itself.
pub(crate) fn service() -> BoxToolService {
    BoxToolService::new(tower::service_fn(|call: ToolCall| async move {
        let ctx = &call.ctx;
        let answer = json!({
            "session": ctx.session.as_str(),
            "principal": ctx.principal.as_ref().map(|p| json!({"subject": p.subject, "issuer": p.issuer})),
            "toolset": ctx.toolset.as_deref(),
        });
        Ok::<_, ToolError>(CallToolResult::structured(answer).into())
    }))
}
