//! The meta-tools as an MCP server (rmcp's [`ServerHandler`]): what `tools/list`,
//! `resources/list` and `prompts/list` show and what calls reach, by `aggregator.exposure`.
//!
//! - `meta` (the default): the 13 meta-tools, and the `auth://status` resource.
//! - `native`: the aggregated tools, resources and prompts themselves ([`super::native`]), and
//!   `auth://status`.
//! - `both`: the meta-tools first, then the aggregated ones.
//!
//! Whichever the tool, a call that needs a sign-in is answered by the client's protocol version:
//! `tools/call` runs through the URL elicitation layer's logic ([`crate::auth::elicitation`]).

#![allow(
    deprecated,
    reason = "logging/setLevel and resource subscriptions are what clients of the current protocols send"
)]

use muster_catalog::discovery::RequestView;
use muster_core::{CallContext, JsonObject, ToolCall, ToolOutput, complete::MarkComplete};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
        ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::{NotificationContext, RequestContext},
};

use std::future::Future;

use tracing::{Instrument, Span, field::Empty};

use super::in_front::{AnswersCalls, CallAnswer};
use super::{AUTH_STATUS_URI, INSTRUCTIONS, MetaTools, call_context, native::page, session_of};
use crate::{
    auth::elicitation::{Elicited, SignInRetry, elicit},
    metrics::{CallTarget, Outcome, REQUEST_SPAN, log_session},
};
use muster_catalog::meta::{MetaTool, definitions};

impl MetaTools {
    fn exposure(&self) -> muster_core::config::Exposure {
        self.shared.registry.exposure()
    }

    /// The call context of `ctx` and the catalogue it sees.
    async fn scoped_request(&self, ctx: &RequestContext<RoleServer>) -> Result<(CallContext, RequestView), McpError> {
        let (call_ctx, _) = call_context(ctx);
        let scoped = self
            .scoped(&call_ctx)
            .await
            .map_err(|e| McpError::invalid_params(e, None))?;
        Ok((call_ctx, scoped))
    }

    /// Runs tool `name` as the exposure allows: a meta-tool, or an aggregated tool directly.
    async fn run(&self, name: &str, args: JsonObject, ctx: CallContext) -> Result<ToolOutput, McpError> {
        let exposure = self.exposure();
        let started = std::time::Instant::now();
        if exposure.meta() && MetaTool::from_name(name).is_some() {
            if let Some(result) = self.call(name, args, ctx).await {
                return Ok(result.into());
            }
        } else if exposure.native() {
            let scoped = self.scoped(&ctx).await.map_err(|e| McpError::invalid_params(e, None))?;
            if let Some(result) = self.native_call(&scoped, name, args, ctx).await {
                return Ok(result);
            }
        }
        self.shared
            .metrics
            .record_call(&CallTarget::unknown(), Outcome::NotFound, started.elapsed());
        Err(McpError::invalid_params(
            if exposure.native() {
                format!("unknown tool {name:?}")
            } else {
                format!(
                    "unknown tool {name:?}: only the meta-tools are callable directly; run other tools with call_tool"
                )
            },
            None,
        ))
    }
}

const NATIVE_INSTRUCTIONS: &str = "muster aggregates many MCP servers: their tools, resources and prompts are \
listed and callable here directly.";

fn auth_status_resource() -> Resource {
    Resource::new(AUTH_STATUS_URI, "auth-status")
        .with_title("Your sign-in state")
        .with_description(
            "Your sign-in state on every MCP server (the document core_auth_status answers): \
             which servers need you to sign in (core_auth_login), which you are signed in to, \
             and which use your muster sign-in.",
        )
        .with_mime_type("application/json")
}

/// What an MCP request names, as its span records it.
#[derive(Debug, Clone, Copy)]
enum Subject<'a> {
    Tool(&'a str),
    Uri(&'a str),
    Prompt(&'a str),
}

/// The span of one MCP request: its method, the session (as [`log_session`] shows it), what it
/// names (`tool`, `uri` or `prompt`, written with the span: recorded afterwards, each field cost
/// every layer a second pass) and, once answered, its `outcome` (`ok`, `tool_error`,
/// `input_required`, `task` or `error`). With the `otel` feature, a `traceparent` header of the
/// HTTP request makes it a child of the caller's trace.
fn request_span(method: &'static str, subject: Subject<'_>, ctx: &RequestContext<RoleServer>) -> Span {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let (tool, uri, prompt) = match subject {
        Subject::Tool(name) => (Some(name), None, None),
        Subject::Uri(uri) => (None, Some(uri), None),
        Subject::Prompt(name) => (None, None, Some(name)),
    };
    let span = tracing::info_span!(
        REQUEST_SPAN,
        method,
        session = %log_session(&session_of(parts)),
        tool,
        uri,
        prompt,
        outcome = Empty,
    );
    #[cfg(feature = "otel")]
    crate::metrics::otel::adopt_remote_parent(&span, parts.map(|p| &p.headers));
    span
}

/// Runs `handler` in `span`, recording how it was answered.
async fn traced<T>(
    span: Span,
    handler: impl Future<Output = Result<T, McpError>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, McpError> {
    let result = handler.instrument(span.clone()).await;
    let answered = match &result {
        Ok(value) => outcome(value),
        Err(_) => "error",
    };
    span.record("outcome", answered);
    // Entering the span costs its layers even when the events inside are off.
    if tracing::level_enabled!(tracing::Level::DEBUG) {
        span.in_scope(|| match &result {
            Ok(_) => tracing::debug!(outcome = answered, "request answered"),
            Err(e) => tracing::debug!(outcome = answered, code = e.code.0, error = %e.message, "request failed"),
        });
    }
    result
}

fn call_outcome(answered: &Elicited) -> &'static str {
    match answered {
        Elicited::Output(output) => Outcome::answered(output.is_error()).as_str(),
        Elicited::Challenged(CallToolResponse::Complete(result)) => {
            Outcome::answered(result.is_error == Some(true)).as_str()
        }
        Elicited::Challenged(CallToolResponse::InputRequired(_)) => "input_required",
        Elicited::Challenged(_) => "task",
    }
}

/// Calls answered in front of rmcp pass a downstream's result on as it came, when the client
/// reads it the same way.
impl AnswersCalls for MetaTools {
    async fn answer_call(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallAnswer, McpError> {
        let ClientRequest::CallToolRequest(request) = request else {
            // Boxed: rmcp's dispatch of every request is large, and a call's future would carry it.
            return Box::pin(rmcp::Service::handle_request(self, request, ctx))
                .await
                .map(CallAnswer::Typed);
        };
        Ok(match self.traced_call_tool(request.params, ctx).await? {
            Elicited::Output(output) if output.passes_to_legacy_clients() => CallAnswer::Passed(output),
            answered => CallAnswer::Typed(answered.into_response().into()),
        })
    }
}

fn cursor(request: Option<&PaginatedRequestParams>) -> Option<&str> {
    request.and_then(|r| r.cursor.as_deref())
}

/// The handlers behind [`ServerHandler`], each boxed there so that the request dispatch stays
/// small on the stack (calls nest deeply: a workflow's steps run through the whole stack again).
impl MetaTools {
    async fn handle_list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let exposure = self.exposure();
        let meta = if exposure.meta() { definitions() } else { &[] };
        let scoped = if exposure.native() {
            Some(self.scoped_request(&ctx).await?.1)
        } else {
            None
        };
        let (items, next) = Self::listed_tools(meta, scoped.as_ref(), cursor(request.as_ref()))?;
        let mut result = ListToolsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    /// `tools/call` in its span, as rmcp's handler and the calls answered in front of it
    /// ([`AnswersCalls`]) both answer it.
    async fn traced_call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Elicited, McpError> {
        let span = request_span("tools/call", Subject::Tool(&request.name), &ctx);
        traced(span, Box::pin(self.handle_call_tool(request, ctx)), call_outcome).await
    }

    async fn handle_call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Elicited, McpError> {
        let (call_ctx, progress) = call_context(&ctx);
        let retry = request.request_state.map(|state| SignInRetry {
            request_state: Some(state),
            input_responses: request.input_responses,
        });
        let call = ToolCall::new(request.name, request.arguments.unwrap_or_default(), call_ctx);
        // A sign-in retry waits before the call takes one of the session's call slots.
        let answered = elicit(
            call,
            retry.as_ref(),
            self.shared.sign_in_waiter.as_deref(),
            |call| async move {
                let _slot = self
                    .shared
                    .session_limits
                    .session_slot(&call.ctx.session)
                    .await
                    .map_err(McpError::from)?;
                tokio::select! {
                    result = self.run(&call.name, call.arguments, call.ctx) => result,
                    () = self.shared.calls_ended.cancelled() => Err(McpError::new(
                        muster_core::error::BUSY,
                        "the gateway shut down before the call finished (aggregator.limits.shutdownTimeoutSeconds ran out)",
                        None,
                    )),
                }
            },
            || (ctx.protocol_version(), ctx.client_capabilities()),
        )
        .await;
        if let Some(progress) = progress {
            progress.flush().await;
        }
        answered
    }

    async fn handle_list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources = vec![auth_status_resource()];
        if self.exposure().native() {
            let (_, scoped) = self.scoped_request(&ctx).await?;
            resources.extend(Self::native_resources(&scoped));
        }
        let (items, next) = page(resources, cursor(request.as_ref()))?;
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn handle_read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let (call_ctx, _) = call_context(&ctx);
        if request.uri != AUTH_STATUS_URI {
            if self.exposure().native() {
                let scoped = self
                    .scoped(&call_ctx)
                    .await
                    .map_err(|e| McpError::invalid_params(e, None))?;
                return self
                    .native_read(&scoped, &request.uri, &call_ctx)
                    .await
                    .map(|read| read.completed().into());
            }
            return Err(McpError::resource_not_found(
                format!(
                    "resource {:?} not found: muster serves {AUTH_STATUS_URI} itself; read the servers' resources with get_resource",
                    request.uri
                ),
                None,
            ));
        }
        if let Some(auth) = &self.shared.auth {
            auth.adopt(&self.shared.registry, &call_ctx).await;
        }
        let sign_in = self.shared.auth.as_ref().and_then(|a| a.sign_in());
        let status = crate::auth::status_document(&self.shared.registry, sign_in, &call_ctx, false).await;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(status.to_string(), AUTH_STATUS_URI).with_mime_type("application/json"),
        ])
        .into())
    }

    async fn handle_list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let templates = if self.exposure().native() {
            let (call_ctx, _) = call_context(&ctx);
            self.native_templates(&call_ctx)
                .into_iter()
                .map(|(_, template)| template)
                .collect()
        } else {
            Vec::new()
        };
        let (items, next) = page(templates, cursor(request.as_ref()))?;
        let mut result = ListResourceTemplatesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn handle_complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        if !self.exposure().native() {
            return Err(McpError::invalid_params(
                "completion is served with exposure native or both",
                None,
            ));
        }
        let (call_ctx, scoped) = self.scoped_request(&ctx).await?;
        self.native_complete(&scoped, request, &call_ctx)
            .await
            .map(MarkComplete::completed)
    }

    async fn handle_subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (call_ctx, scoped) = self.scoped_request(&ctx).await?;
        let (conn, uri) = self.resource_owner(&scoped, &request.uri, &call_ctx)?;
        conn.subscribe(&uri, crate::upstream::ClientPeer(ctx.peer.clone()), &call_ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("subscribing to {} failed: {e}", request.uri), None))
    }

    async fn handle_unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (call_ctx, scoped) = self.scoped_request(&ctx).await?;
        let (conn, uri) = self.resource_owner(&scoped, &request.uri, &call_ctx)?;
        conn.unsubscribe(&uri, &call_ctx)
            .await
            .map_err(|e| McpError::internal_error(format!("unsubscribing from {} failed: {e}", request.uri), None))
    }

    async fn handle_list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        if !self.exposure().native() {
            return Ok(ListPromptsResult::with_all_items(Vec::new()));
        }
        let (_, scoped) = self.scoped_request(&ctx).await?;
        let (items, next) = page(Self::native_prompts(&scoped), cursor(request.as_ref()))?;
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn handle_get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if !self.exposure().native() {
            return Err(McpError::invalid_params(
                format!(
                    "prompt {:?} not found: get the servers' prompts with get_prompt",
                    request.name
                ),
                None,
            ));
        }
        let (call_ctx, scoped) = self.scoped_request(&ctx).await?;
        self.native_prompt(&scoped, &request.name, request.arguments, &call_ctx)
            .await
            .map(|prompt| prompt.completed().into())
    }
}

impl ServerHandler for MetaTools {
    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed();
        let native = self.exposure().native();
        let mut capabilities = if native {
            builder.enable_prompts().enable_prompts_list_changed().build()
        } else {
            builder.build()
        };
        // Downstream log messages are relayed during calls.
        capabilities.logging = Some(Default::default());
        if native {
            capabilities.completions = Some(Default::default());
            if let Some(resources) = capabilities.resources.as_mut() {
                resources.subscribe = Some(true);
            }
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("muster", env!("CARGO_PKG_VERSION")))
            .with_instructions(if native && !self.exposure().meta() {
                NATIVE_INSTRUCTIONS
            } else {
                INSTRUCTIONS
            })
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        let parts = ctx.extensions.get::<http::request::Parts>();
        if let Some(parts) = parts
            && let Some(table) = &self.shared.sessions
        {
            table.admit(parts, ctx.peer.clone());
        }
        follow_changes(self.shared.registry.changes(), session_of(parts), ctx.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Box::pin(self.handle_list_tools(request, ctx)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.traced_call_tool(request, ctx).await.map(Elicited::into_response)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Box::pin(self.handle_list_resources(request, ctx)).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let span = request_span("resources/read", Subject::Uri(&request.uri), &ctx);
        traced(span, Box::pin(self.handle_read_resource(request, ctx)), |_| "ok").await
    }

    #[allow(
        deprecated,
        reason = "logging/setLevel is what clients of the current protocols send"
    )]
    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Downstream servers keep their own levels (their connections are shared); the messages
        // they send during a call are relayed as they come.
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Box::pin(self.handle_list_resource_templates(request, ctx)).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Box::pin(self.handle_complete(request, ctx)).await
    }

    #[allow(deprecated, reason = "the legacy protocols' subscriptions, which downstreams serve")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.handle_subscribe(request, ctx)).await
    }

    #[allow(deprecated, reason = "the legacy protocols' subscriptions, which downstreams serve")]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.handle_unsubscribe(request, ctx)).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Box::pin(self.handle_list_prompts(request, ctx)).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let span = request_span("prompts/get", Subject::Prompt(&request.name), &ctx);
        traced(span, Box::pin(self.handle_get_prompt(request, ctx)), |_| "ok").await
    }
}

/// Tells the client `peer` of `session` what changes concern it, until it is gone: its lists
/// (`notifications/{tools,resources,prompts}/list_changed`) and its completed URL elicitations
/// (`notifications/elicitation/complete`).
fn follow_changes(bus: &crate::registry::ChangeBus, session: muster_core::SessionId, peer: rmcp::Peer<RoleServer>) {
    use tokio::sync::broadcast::error::RecvError;

    let alive = peer.clone();
    let mut changes = bus.subscribe(&session, move || !alive.is_transport_closed());
    tokio::spawn(async move {
        loop {
            let change = match changes.recv().await {
                Ok(change) => change,
                // Behind: some changes were missed, so every list may have changed.
                Err(RecvError::Lagged(_)) => crate::registry::Change::Lists,
                Err(RecvError::Closed) => break,
            };
            if peer.is_transport_closed() {
                break;
            }
            if !change.concerns(&session) {
                continue;
            }
            // Boxed: the task waits on the bus far longer than it sends, and a future is as
            // large as its largest state (the notifications), for as long as the session lives.
            Box::pin(tell(&peer, change)).await;
        }
    });
}

/// Sends `peer` the notifications that tell it of `change`.
async fn tell(peer: &rmcp::Peer<RoleServer>, change: crate::registry::Change) {
    match change {
        crate::registry::Change::ElicitationComplete { elicitation_id, .. } => {
            let notification =
                rmcp::model::ServerNotification::CustomNotification(rmcp::model::CustomNotification::new(
                    "notifications/elicitation/complete",
                    Some(serde_json::json!({"elicitationId": elicitation_id})),
                ));
            let _ = peer.send_notification(notification).await;
        }
        _ => {
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_resource_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
    }
}
