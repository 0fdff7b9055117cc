//! [`MetaServer`]: a [`MetaService`] served as an MCP server (rmcp's [`ServerHandler`]), and
//! [`request_context`], the call context of an MCP request.

use std::sync::Arc;

use muster_core::{CallContext, ProgressSink, SessionId, ToolCall, ToolOutput, call::ProgressUpdate, config::Exposure};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
        ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use tower::ServiceExt;

use super::{MetaService, MetaTool, definitions};
use crate::{
    discovery::{AuthHints, OnRequest},
    toolset::DeclaredToolset,
};

const INSTRUCTIONS: &str = "Only the meta-tools are callable directly: find tools with filter_tools or \
list_tools, read one with describe_tool, run it with call_tool.";

/// An MCP server answering `tools/list` and `tools/call` with a [`MetaService`]: by default the
/// 13 meta-tools; with [`Exposure::Native`] the catalogue's tools themselves, called directly
/// through the meta service's tool service; with [`Exposure::Both`], both.
///
/// Each request's [`CallContext`] is [`request_context`]'s (its session, its declared toolset,
/// the client's protocol version and the request's cancellation) unless
/// [`MetaServer::with_call_context`] says otherwise; a call that asked for progress has its
/// reports relayed to the client before its result.
///
/// See the [module docs](super) for an example.
pub struct MetaServer<A = (), R = ()> {
    meta: MetaService<A, R>,
    exposure: Exposure,
    info: Implementation,
    instructions: String,
    context: Arc<ContextOf>,
}

/// What makes the call context of a request, and the relay of its progress reports.
type ContextOf = dyn Fn(&RequestContext<RoleServer>) -> (CallContext, Option<ProgressRelay>) + Send + Sync;

impl<A, R> Clone for MetaServer<A, R> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            exposure: self.exposure,
            info: self.info.clone(),
            instructions: self.instructions.clone(),
            context: Arc::clone(&self.context),
        }
    }
}

impl<A, R> std::fmt::Debug for MetaServer<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaServer")
            .field("exposure", &self.exposure)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl<A, R> MetaServer<A, R> {
    /// The meta-tools of `meta` as an MCP server, named `muster-catalog`.
    pub fn new(meta: MetaService<A, R>) -> Self {
        Self {
            meta,
            exposure: Exposure::Meta,
            info: Implementation::new("muster-catalog", env!("CARGO_PKG_VERSION")),
            instructions: INSTRUCTIONS.to_owned(),
            context: Arc::new(|ctx: &RequestContext<RoleServer>| match progress_to_peer(ctx) {
                Some((sink, relay)) => (request_context(ctx).with_progress(sink), Some(relay)),
                None => (request_context(ctx), None),
            }),
        }
    }

    /// Makes each request's call context with `context` (and the relay of its progress
    /// reports, flushed before the result), instead of [`request_context`] and
    /// [`progress_to_peer`]: a gateway adds the caller its front door authenticated.
    #[must_use]
    pub fn with_call_context(
        mut self,
        context: impl Fn(&RequestContext<RoleServer>) -> (CallContext, Option<ProgressRelay>) + Send + Sync + 'static,
    ) -> Self {
        self.context = Arc::new(context);
        self
    }

    /// Lists and calls the catalogue's tools directly ([`Exposure::Native`]), or both them and
    /// the meta-tools ([`Exposure::Both`]).
    #[must_use]
    pub fn with_exposure(mut self, exposure: Exposure) -> Self {
        self.exposure = exposure;
        self
    }

    /// The name and version the server gives in `initialize`.
    #[must_use]
    pub fn with_server_info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// The instructions the server gives in `initialize`.
    #[must_use]
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }
}

impl<A: AuthHints, R: OnRequest> MetaServer<A, R> {
    async fn listed(&self, ctx: &RequestContext<RoleServer>) -> Result<Vec<Tool>, McpError> {
        let mut tools = if self.exposure.meta() {
            definitions().to_vec()
        } else {
            Vec::new()
        };
        if self.exposure.native() {
            let seen = self
                .meta
                .discovery()
                .request_view(&(self.context)(ctx).0)
                .await
                .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
            tools.extend(seen.view.tools().map(|entry| entry.tool.to_tool()));
        }
        Ok(tools)
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ToolOutput, McpError> {
        let (call_ctx, relay) = (self.context)(&ctx);
        let arguments = request.arguments.unwrap_or_default();
        let meta_tool = MetaTool::from_name(&request.name).filter(|_| self.exposure.meta());
        let answered = match meta_tool {
            Some(tool) => Ok(self.meta.answer(tool, arguments, call_ctx).await.into()),
            // Through the whole stack; a refusal (unknown tool, outside the toolset, server
            // down) is a JSON-RPC error from muster-core's one table.
            None if self.exposure.native() => {
                let call = ToolCall::new(request.name.to_string(), arguments, call_ctx);
                self.meta.tools().clone().oneshot(call).await.map_err(McpError::from)
            }
            None => Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}: only the meta-tools are callable directly; run other tools with call_tool",
                    request.name
                ),
                None,
            )),
        };
        if let Some(relay) = relay {
            relay.flush().await;
        }
        answered
    }
}

impl<A: AuthHints, R: OnRequest> ServerHandler for MetaServer<A, R> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.info.clone())
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.listed(&ctx).await?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let output = Box::pin(self.call(request, ctx)).await?;
        Ok(output.into_result().map_err(McpError::from)?.into())
    }
}

/// The call context of an MCP request: its session ([`session_of_request`]), its declared
/// toolset (a [`DeclaredToolset`] in the HTTP request's extensions, else its
/// `X-muster-Toolset` header), the client's protocol version and the request's cancellation.
/// The HTTP request's parts are in it as extensions when rmcp served it over HTTP.
pub fn request_context(ctx: &RequestContext<RoleServer>) -> CallContext {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let mut call_ctx = CallContext::for_session(session_of_request(parts)).with_cancellation(ctx.ct.clone());
    let declared = parts.and_then(|p| {
        p.extensions
            .get::<DeclaredToolset>()
            .cloned()
            .or_else(|| DeclaredToolset::from_headers(&p.headers))
    });
    if let Some(declared) = declared {
        if let Ok(toolset) = &declared.0 {
            call_ctx = call_ctx.with_toolset(toolset.declared_shared());
        }
        call_ctx.extensions.insert(declared);
    }
    if let Some(info) = ctx.peer.peer_info() {
        call_ctx = call_ctx.with_protocol_version(info.protocol_version.clone());
    }
    call_ctx
}

/// The MCP transport session of a request: its `Mcp-Session-Id`, else the anonymous session of
/// an HTTP request without one; the default session when the request did not come over HTTP
/// (stdio: one client).
pub fn session_of_request(parts: Option<&http::request::Parts>) -> SessionId {
    match parts {
        Some(parts) => parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map_or_else(SessionId::anonymous, SessionId::new),
        None => SessionId::default(),
    }
}

/// When the request asked for progress: the sink its reports go to, and the relay that sends
/// them to the client in order through its peer.
pub fn progress_to_peer(ctx: &RequestContext<RoleServer>) -> Option<(ProgressSink, ProgressRelay)> {
    let token = ctx.meta.get_progress_token()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressUpdate>();
    let peer = ctx.peer.clone();
    let forwarder = tokio::spawn(async move {
        while let Some(update) = rx.recv().await {
            let _ = peer.notify_progress(progress_notification(&token, update)).await;
        }
    });
    let sink = ProgressSink::new(move |update: ProgressUpdate| {
        let _ = tx.send(update);
    });
    Some((sink, ProgressRelay { forwarder }))
}

/// The notification of progress report `update` of the request with progress token `token`.
pub fn progress_notification(token: &rmcp::model::ProgressToken, update: ProgressUpdate) -> ProgressNotificationParam {
    let mut params = ProgressNotificationParam::new(token.clone(), update.progress);
    if let Some(total) = update.total {
        params = params.with_total(total);
    }
    if let Some(message) = update.message {
        params = params.with_message(message);
    }
    params
}

/// The in-order forwarding of one call's progress reports to its client.
#[derive(Debug)]
pub struct ProgressRelay {
    forwarder: tokio::task::JoinHandle<()>,
}

impl ProgressRelay {
    /// Waits (a bounded time) until every report of the call went out. Call it once the call's
    /// context, and with it every copy of the progress sink, is gone.
    pub async fn flush(self) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.forwarder).await;
    }
}
