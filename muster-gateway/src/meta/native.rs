//! Native exposure (`aggregator.exposure: native | both`): the aggregated tools, resources and
//! prompts in the plain MCP lists, called and read directly, through the same catalogue views
//! as the meta-tools: the session's catalogue (its sign-ins and single sign-on connections
//! included), narrowed by the request's toolset, with the same sign-in answers.
//!
//! Lists are paged with cursors ([`NATIVE_PAGE`] items a page; the cursor is the offset of the
//! next page). With `prefixMode: never` downstream names are exposed unchanged.

use std::sync::Arc;

use muster_core::{CallContext, JsonObject, ToolCall, ToolError, ToolOutput};
use rmcp::{
    ErrorData as McpError,
    model::{
        CallToolResult, CompleteRequestParams, CompleteResult, GetPromptResult, Prompt, ReadResourceResult, Reference,
        Resource, ResourceTemplate, Tool,
    },
};
use tower::ServiceExt;

use muster_catalog::discovery::{RequestView, error_answer};

use super::{MetaTools, unseen::Refusal};
use crate::metrics::{CallTarget, Outcome};
use crate::upstream::SharedConnection;

/// Items per page of a native list.
pub(crate) const NATIVE_PAGE: usize = 100;

/// The page of `items` starting at `cursor` (an offset), and the cursor of the next one.
pub(crate) fn page<T>(items: Vec<T>, cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), McpError> {
    let (range, next) = page_range(items.len(), cursor)?;
    Ok((items.into_iter().skip(range.start).take(range.len()).collect(), next))
}

/// The positions of the page of `len` items starting at `cursor`, and the cursor of the next.
pub(crate) fn page_range(
    len: usize,
    cursor: Option<&str>,
) -> Result<(std::ops::Range<usize>, Option<String>), McpError> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&offset| offset <= len)
            .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let end = (start + NATIVE_PAGE).min(len);
    let next = (end < len).then(|| end.to_string());
    Ok((start..end, next))
}

impl MetaTools {
    /// The page at `cursor` of the tools `tools/list` answers: the meta-tools first when
    /// exposed, then the aggregated tools the request sees. Only the page's tools are made
    /// whole (their schemas parsed from the catalogue's text).
    pub(crate) fn listed_tools(
        meta: &[Tool],
        scoped: Option<&RequestView>,
        cursor: Option<&str>,
    ) -> Result<(Vec<Tool>, Option<String>), McpError> {
        let native = scoped.map_or(0, |s| s.view.tool_count());
        let (range, next) = page_range(meta.len() + native, cursor)?;
        let tools = meta
            .iter()
            .cloned()
            .chain(
                scoped
                    .into_iter()
                    .flat_map(|s| s.view.tools().map(|e| e.tool.to_tool())),
            )
            .skip(range.start)
            .take(range.len())
            .collect();
        Ok((tools, next))
    }

    /// The resources the request sees.
    pub(crate) fn native_resources(scoped: &RequestView) -> Vec<Resource> {
        scoped.view.resources().map(|e| e.resource.clone()).collect()
    }

    /// The prompts the request sees.
    pub(crate) fn native_prompts(scoped: &RequestView) -> Vec<Prompt> {
        scoped.view.prompts().map(|e| e.prompt.clone()).collect()
    }

    /// Calls aggregated tool `name` directly: its own result, not the `call_tool` envelope. A
    /// tool the request does not see is refused as `call_tool` refuses it (outside the toolset,
    /// a sign-in answer, why single sign-on failed); `None` when nobody knows it.
    pub(crate) async fn native_call(
        &self,
        scoped: &RequestView,
        name: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Option<ToolOutput> {
        if scoped.view.tool(name).is_none() {
            let started = std::time::Instant::now();
            let (outcome, answer) = self.refuse_native(scoped, name, &ctx).await;
            // A name nobody knows is counted by the caller, which answers it.
            if answer.is_some() {
                let target = CallTarget::of(scoped.view.catalog(), name, &arguments);
                self.shared.metrics.record_call(&target, outcome, started.elapsed());
            }
            return answer.map(Into::into);
        }
        Some(
            match self
                .shared
                .meta
                .tools()
                .clone()
                .oneshot(ToolCall::new(name.to_owned(), arguments, ctx))
                .await
            {
                Ok(output) => output,
                Err(e) => error_answer(e.to_string()).into(),
            },
        )
    }

    /// The answer to a native call of `name`, which the request does not see, and its outcome.
    async fn refuse_native(
        &self,
        scoped: &RequestView,
        name: &str,
        ctx: &CallContext,
    ) -> (Outcome, Option<CallToolResult>) {
        if let Some(toolset) = &scoped.declared
            && scoped.view.hides_tool(name)
        {
            let refusal = ToolError::OutsideToolset {
                name: name.to_owned(),
                selectors: toolset.declared().to_vec(),
            };
            return (Outcome::OutsideToolset, Some(error_answer(refusal.to_string())));
        }
        match self.shared.unseen.refusal(name, ctx).await {
            Some(Refusal::SignIn(answer)) => (Outcome::AuthRequired, Some(answer)),
            Some(Refusal::SingleSignOn(reason)) => (Outcome::Unavailable, Some(error_answer(reason))),
            Some(Refusal::Unavailable(e)) => (Outcome::of_error(&e), Some(error_answer(e.to_string()))),
            None => (Outcome::NotFound, None),
        }
    }

    /// The resource templates of the servers the session reaches, with their servers.
    pub(crate) fn native_templates(&self, ctx: &CallContext) -> Vec<(String, ResourceTemplate)> {
        self.shared
            .registry
            .servers()
            .into_iter()
            .filter_map(|view| {
                let name = view.definition.metadata.name;
                let conn = self.shared.registry.connection_for(&ctx.session, &name)?;
                Some(
                    conn.resource_templates()
                        .iter()
                        .map(|t| (name.clone(), t.clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .collect()
    }

    /// The connection that serves resource `uri` and the server's own URI for it: a listed
    /// resource's server, else the server with a template `uri` matches.
    pub(crate) fn resource_owner(
        &self,
        scoped: &RequestView,
        uri: &str,
        ctx: &CallContext,
    ) -> Result<(SharedConnection, String), McpError> {
        let (server, server_uri) = match scoped.view.resources().find(|e| e.uri() == uri) {
            Some(entry) => (entry.server.clone(), entry.server_uri.clone()),
            None => self
                .native_templates(ctx)
                .into_iter()
                .find(|(_, t)| template_matches(&t.uri_template, uri))
                .map(|(server, _)| (server, uri.to_owned()))
                .ok_or_else(|| McpError::resource_not_found(format!("resource {uri:?} not found"), None))?,
        };
        let conn = self
            .shared
            .registry
            .connection_for(&ctx.session, &server)
            .ok_or_else(|| McpError::internal_error(format!("server {server} is not connected"), None))?;
        Ok((conn, server_uri))
    }

    /// Reads aggregated resource `uri` directly (a listed one, or one of a server's templates),
    /// through the session's connection to its server when it has one.
    pub(crate) async fn native_read(
        &self,
        scoped: &RequestView,
        uri: &str,
        ctx: &CallContext,
    ) -> Result<ReadResourceResult, McpError> {
        let (conn, server_uri) = self.resource_owner(scoped, uri, ctx)?;
        conn.read_resource(&server_uri, ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("Failed to read resource {uri}: {e}"), None))
    }

    /// Completes an argument of an aggregated prompt or resource template at its server.
    pub(crate) async fn native_complete(
        &self,
        scoped: &RequestView,
        mut request: CompleteRequestParams,
        ctx: &CallContext,
    ) -> Result<CompleteResult, McpError> {
        let server = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let entry = scoped
                    .view
                    .prompt(&prompt.name)
                    .ok_or_else(|| McpError::invalid_params(format!("prompt {:?} not found", prompt.name), None))?;
                prompt.name = entry.server_prompt.clone();
                entry.server.clone()
            }
            Reference::Resource(template) => self
                .native_templates(ctx)
                .into_iter()
                .find(|(_, t)| t.uri_template == template.uri)
                .map(|(server, _)| server)
                .ok_or_else(|| {
                    McpError::invalid_params(format!("resource template {:?} not found", template.uri), None)
                })?,
            _ => return Err(McpError::invalid_params("unknown completion reference", None)),
        };
        let conn = self
            .shared
            .registry
            .connection_for(&ctx.session, &server)
            .ok_or_else(|| McpError::internal_error(format!("server {server} is not connected"), None))?;
        conn.complete(request, ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("completion failed at {server}: {e}"), None))
    }

    /// Gets aggregated prompt `name` directly.
    pub(crate) async fn native_prompt(
        &self,
        scoped: &RequestView,
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
            .shared
            .registry
            .connection_for(&ctx.session, &entry.server)
            .ok_or_else(|| McpError::internal_error(format!("server {} is not connected", entry.server), None))?;
        conn.get_prompt(&entry.server_prompt, arguments, ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("Failed to get prompt {name}: {e}"), None))
    }
}

/// Whether `uri` is one of the URIs RFC 6570 template `template` describes (level 1: each
/// `{var}` stands for a non-empty run of characters other than `/`; `{+var}` for any).
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    fn matches(parts: &[&str], literal_first: bool, rest: &str) -> bool {
        let Some((head, tail)) = parts.split_first() else {
            return rest.is_empty();
        };
        if literal_first {
            return rest.strip_prefix(head).is_some_and(|r| matches(tail, false, r));
        }
        // `head` is a variable: take one or more characters, then match the rest.
        let reserved = head.starts_with('+');
        (1..=rest.len())
            .filter(|&n| rest.is_char_boundary(n))
            .take_while(|&n| reserved || !rest[..n].contains('/'))
            .any(|n| matches(tail, true, &rest[n..]))
    }
    // Split into alternating literal / variable parts: "a{x}b{y}" -> ["a", "x", "b", "y", ""].
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        parts.push(&rest[..open]);
        parts.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    parts.push(rest);
    matches(&parts, true, uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_match_the_templates_that_describe_them() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/1/2/data"
        ));
        assert!(!template_matches("test://template/{id}/data", "test://template//data"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c"));
        assert!(template_matches("demo://{a}-{b}", "demo://x-y"));
        assert!(!template_matches("demo://static", "demo://other"));
        assert!(template_matches("demo://static", "demo://static"));
    }

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
