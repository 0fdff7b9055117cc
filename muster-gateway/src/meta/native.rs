//! Native exposure (`aggregator.exposure: native | both`): the aggregated tools, resources and
//! prompts in the plain MCP lists, called and read directly, through the same catalogue views
//! as the meta-tools: the session's catalogue (its sign-ins and single sign-on connections
//! included), narrowed by the request's toolset, with the same sign-in answers.
//!
//! Lists are paged with cursors ([`NATIVE_PAGE`] items a page; the cursor is the offset of the
//! next page). With `prefixMode: never` downstream names are exposed unchanged.

use std::sync::Arc;

use muster_core::{CallContext, JsonObject, ToolCall, ToolError};
use rmcp::{
    ErrorData as McpError,
    model::{CallToolResult, GetPromptResult, Prompt, ReadResourceResult, Resource, Tool},
};
use tower::ServiceExt;

use super::{MetaTools, Scoped, error_result};

/// Items per page of a native list.
pub(crate) const NATIVE_PAGE: usize = 100;

/// The page of `items` starting at `cursor` (an offset), and the cursor of the next one.
pub(crate) fn page<T>(items: Vec<T>, cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), McpError> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&offset| offset <= items.len())
            .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let end = (start + NATIVE_PAGE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items.into_iter().skip(start).take(end - start).collect(), next))
}

impl MetaTools {
    /// The tools the request sees, as the catalogue exposes them.
    pub(crate) fn native_tools(scoped: &Scoped) -> Vec<Tool> {
        scoped.view.tools().map(|e| e.tool.clone()).collect()
    }

    /// The resources the request sees.
    pub(crate) fn native_resources(scoped: &Scoped) -> Vec<Resource> {
        scoped.view.resources().map(|e| e.resource.clone()).collect()
    }

    /// The prompts the request sees.
    pub(crate) fn native_prompts(scoped: &Scoped) -> Vec<Prompt> {
        scoped.view.prompts().map(|e| e.prompt.clone()).collect()
    }

    /// Calls aggregated tool `name` directly: its own result, not the `call_tool` envelope. A
    /// tool the request does not see is refused as `call_tool` refuses it (outside the toolset,
    /// a sign-in answer, why single sign-on failed); `None` when nobody knows it.
    pub(crate) async fn native_call(
        &self,
        scoped: &Scoped,
        name: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Option<CallToolResult> {
        if scoped.view.tool(name).is_none() {
            if let Some(toolset) = &scoped.declared
                && scoped.view.hides_tool(name)
            {
                return Some(error_result(
                    ToolError::OutsideToolset {
                        name: name.to_owned(),
                        selectors: toolset.declared().to_vec(),
                    }
                    .to_string(),
                ));
            }
            if let Some(answer) = self.sign_in_answer(name, &ctx).await {
                return Some(answer);
            }
            if let Some(reason) = self.sso_failure(name, &ctx) {
                return Some(error_result(reason));
            }
            return self
                .registry
                .unavailable_tool(name)
                .map(|e| error_result(e.to_string()));
        }
        Some(
            match self
                .tools
                .clone()
                .oneshot(ToolCall::new(name.to_owned(), arguments, ctx))
                .await
            {
                Ok(result) => result,
                Err(e) => error_result(e.to_string()),
            },
        )
    }

    /// Reads aggregated resource `uri` directly, through the session's connection to its server
    /// when it has one.
    pub(crate) async fn native_read(
        &self,
        scoped: &Scoped,
        uri: &str,
        ctx: &CallContext,
    ) -> Result<ReadResourceResult, McpError> {
        let entry = scoped
            .view
            .resources()
            .find(|e| e.uri() == uri)
            .cloned()
            .ok_or_else(|| McpError::resource_not_found(format!("resource {uri:?} not found"), None))?;
        let conn = self
            .registry
            .connection_for(&ctx.session, &entry.server)
            .ok_or_else(|| McpError::internal_error(format!("server {} is not connected", entry.server), None))?;
        conn.read_resource(&entry.server_uri, ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("Failed to read resource {uri}: {e}"), None))
    }

    /// Gets aggregated prompt `name` directly.
    pub(crate) async fn native_prompt(
        &self,
        scoped: &Scoped,
        name: &str,
        arguments: Option<JsonObject>,
        ctx: &CallContext,
    ) -> Result<GetPromptResult, McpError> {
        let entry = Arc::clone(
            scoped
                .view
                .prompt(name)
                .ok_or_else(|| McpError::invalid_params(format!("prompt {name:?} not found"), None))?,
        );
        let conn = self
            .registry
            .connection_for(&ctx.session, &entry.server)
            .ok_or_else(|| McpError::internal_error(format!("server {} is not connected", entry.server), None))?;
        conn.get_prompt(&entry.server_prompt, arguments, ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("Failed to get prompt {name}: {e}"), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let items: Vec<usize> = (0..250).collect();
        let (first, next) = page(items.clone(), None).expect("first page");
        assert_eq!((first.len(), next.as_deref()), (100, Some("100")));
        let (second, next) = page(items.clone(), next.as_deref()).expect("second page");
        assert_eq!((second[0], next.as_deref()), (100, Some("200")));
        let (last, next) = page(items.clone(), next.as_deref()).expect("last page");
        assert_eq!((last.len(), next), (50, None));
        assert!(page(items.clone(), Some("nope")).is_err());
        assert!(page(items, Some("999")).is_err());
    }
}
