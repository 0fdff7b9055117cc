//! The meta-tools server: the rmcp [`ServerHandler`](rmcp::ServerHandler) an MCP client talks to.
//!
//! Natively it offers exactly the 13 meta-tools ([`definitions`]). The ten discovery meta-tools
//! are answered by the catalogue service ([`Discovery`]) over the session's catalogue, with the
//! registry's sign-in state as its hooks (`catalogue_hooks`); the catalogue service also
//! scopes the other three. `call_tool` runs the named tool through the gateway's
//! [`ToolService`](muster_core::ToolService) stack and wraps the result in the documented
//! [`envelope`]; `get_resource` and `get_prompt` read from the server that exposes the entry.
//! Every failure a client can fix is an error result naming what is wrong.

mod catalogue_hooks;
mod definitions;
mod envelope;
pub mod in_front;
mod native;
mod server;

use std::sync::Arc;

use muster_catalog::{
    CatalogSource, View,
    discovery::{Discovery, RequestView, error_answer, json_answer},
    prompts, resources,
    tools::Scope,
    toolset::DeclaredToolset,
};
use muster_core::{
    BoxToolService, CallContext, JsonObject, Principal, ProgressSink, SessionId, ToolCall, ToolError, ToolOutput,
    call::ProgressUpdate,
};
use rmcp::{
    RoleServer,
    model::{
        CallToolResult, ContentBlock, ProgressNotification, ProgressNotificationParam, ResourceContents,
        ServerJsonRpcMessage, ServerNotification,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use tower::ServiceExt;

use catalogue_hooks::RegistryHooks;
pub use definitions::{MetaTool, definitions};
pub use envelope::{DispatchedTool, TOOL_META_KEY, content_summary, envelope};
use in_front::{AdmitsSessions, CallStream};

use crate::{
    auth::{DownstreamAuth, elicitation::SignInWaiter},
    metrics::{CallTarget, Outcome},
    registry::Registry,
    upstream::ClientPeer,
};

const INSTRUCTIONS: &str = "muster aggregates many MCP servers. Only the meta-tools are callable directly: \
find tools with filter_tools or list_tools, read one with describe_tool, run it with call_tool.";

/// The MCP server a client talks to: the 13 meta-tools over the registry's catalogue.
#[derive(Clone)]
pub struct MetaTools {
    registry: Arc<Registry>,
    /// Sign-in by link and single sign-on, when the meta-tools take part in them.
    auth: Option<DownstreamAuth>,
    /// What a call retried after its person accepted to sign in waits on (sign-in by link).
    sign_in_waiter: Option<Arc<dyn SignInWaiter>>,
    /// Answers the discovery meta-tools, and scopes every request.
    discovery: Discovery<RegistryHooks, RegistryHooks>,
    tools: BoxToolService,
    /// Where an HTTP session is admitted once rmcp set it up, for its calls to be answered
    /// in front of rmcp ([`in_front`]).
    sessions: Option<Arc<dyn AdmitsSessions>>,
}

/// The catalogue service over `registry`'s catalogue, its hooks taking part in sign-in with
/// `auth`.
fn discovery(registry: &Arc<Registry>, auth: Option<DownstreamAuth>) -> Discovery<RegistryHooks, RegistryHooks> {
    let hooks = RegistryHooks {
        registry: Arc::clone(registry),
        auth,
    };
    let source: Arc<dyn CatalogSource> = Arc::clone(registry) as _;
    Discovery::new(source, Arc::clone(registry.presets()))
        .with_names(registry.names().clone())
        .with_auth_hints(hooks.clone())
        .with_on_request(hooks)
}

impl std::fmt::Debug for MetaTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaTools").finish_non_exhaustive()
    }
}

impl MetaTools {
    /// Meta-tools over `registry`, running `call_tool` through `tools`.
    pub fn new(registry: Arc<Registry>, tools: BoxToolService) -> Self {
        Self {
            discovery: discovery(&registry, None),
            registry,
            auth: None,
            sign_in_waiter: None,
            tools,
            sessions: None,
        }
    }

    /// Takes part in signing people in to downstream servers: each request first connects the
    /// session to what the caller's identity unlocks (single sign-on servers, held grants);
    /// `list_tools` and `filter_tools` name the servers a sign-in would unlock; a call of a
    /// tool behind a sign-in is answered with a link (URL elicitation, -32042 or
    /// `auth_required`, as the client's protocol version calls for), and its retry waits for
    /// the sign-in to complete.
    #[must_use]
    pub fn with_auth(mut self, auth: DownstreamAuth) -> Self {
        self.discovery = discovery(&self.registry, Some(auth.clone()));
        self.sign_in_waiter = auth.sign_in_waiter(&self.registry);
        self.auth = Some(auth);
        self
    }

    /// Admits each HTTP session to `table` once it is initialized
    /// ([`in_front`]).
    #[must_use]
    pub fn with_session_table(mut self, table: Arc<impl AdmitsSessions + 'static>) -> Self {
        self.sessions = Some(table);
        self
    }

    /// Runs meta-tool `name` with `args` in `ctx`. `None` when `name` is not a meta-tool.
    ///
    /// A [`DeclaredToolset`] in `ctx.extensions` scopes the call: discovery reads the catalogue
    /// intersected with it, and an invalid one is the answer of every meta-tool.
    ///
    /// Counted in the metrics as a call of kind `meta`.
    pub async fn call(&self, name: &str, args: JsonObject, ctx: CallContext) -> Option<CallToolResult> {
        let tool = MetaTool::from_name(name)?;
        let started = std::time::Instant::now();
        let result = self.run_meta(tool, args, ctx).await;
        self.registry.metrics().record_call(
            &CallTarget::meta(tool.name()),
            Outcome::answered(result.is_error == Some(true)),
            started.elapsed(),
        );
        Some(result)
    }

    async fn run_meta(&self, tool: MetaTool, args: JsonObject, ctx: CallContext) -> CallToolResult {
        if let Some(discovery) = tool.discovery() {
            return self.discovery.answer(discovery, &args, &ctx).await;
        }
        let request = match self.scoped(&ctx).await {
            Ok(request) => request,
            Err(refusal) => return error_answer(refusal),
        };
        let scope = request.scope(self.discovery.presets());
        let view = &request.view;
        match tool {
            // Boxed: large, and call_tool's future should not carry them.
            MetaTool::GetResource => Box::pin(self.get_resource(view, &args, scope, &ctx)).await,
            MetaTool::GetPrompt => Box::pin(self.get_prompt(view, &args, scope, &ctx)).await,
            // call_tool: the other meta-tools are the catalogue service's, answered above.
            _ => self.call_tool(view, args, scope, ctx).await,
        }
    }

    async fn call_tool(&self, view: &View, mut args: JsonObject, scope: Scope<'_>, ctx: CallContext) -> CallToolResult {
        let name = match args.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            _ => return error_answer("name argument is required"),
        };
        let arguments = match args.remove("arguments") {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(a)) => a,
            Some(_) => return error_answer("arguments must be a JSON object"),
        };
        let Some(entry) = view.tool(&name) else {
            let started = std::time::Instant::now();
            let target = CallTarget::of(view.catalog(), &name, &arguments);
            let (outcome, result) = match scope.declared {
                Some(toolset) if view.hides_tool(&name) => (
                    Outcome::OutsideToolset,
                    error_answer(
                        ToolError::OutsideToolset {
                            name,
                            selectors: toolset.declared().to_vec(),
                        }
                        .to_string(),
                    ),
                ),
                _ => self.refuse_unseen(&name, &ctx).await,
            };
            self.registry.metrics().record_call(&target, outcome, started.elapsed());
            return result;
        };
        let dispatched = DispatchedTool::of(entry, &arguments);
        // The envelope reads the typed result: a downstream's is read as one where it arrives.
        let call = ToolCall::new(name, arguments, ctx.reading_typed_result());
        let called = self.tools.clone().oneshot(call).await;
        match called.and_then(ToolOutput::into_result) {
            Ok(result) => envelope(result, &dispatched),
            Err(e @ ToolError::OutsideToolset { .. }) => error_answer(e.to_string()),
            Err(e) => error_answer(format!("Tool execution failed: {e}")),
        }
    }

    /// The answer to a call of `name`, which the session's catalogue does not have: a sign-in
    /// answer, why single sign-on failed, its server's state, or that no such tool exists.
    async fn refuse_unseen(&self, name: &str, ctx: &CallContext) -> (Outcome, CallToolResult) {
        if let Some(answer) = self.sign_in_answer(name, ctx).await {
            return (Outcome::AuthRequired, answer);
        }
        if let Some(reason) = self.sso_failure(name, ctx) {
            return (
                Outcome::Unavailable,
                error_answer(format!("Tool execution failed: {reason}")),
            );
        }
        let error = self
            .registry
            .unavailable_tool(name)
            .unwrap_or_else(|| ToolError::not_found(name));
        (
            Outcome::of_error(&error),
            error_answer(format!("Tool execution failed: {error}")),
        )
    }

    /// The catalogue the request sees: the session's (after connecting what the caller's
    /// identity unlocks: held grants, single sign-on servers), narrowed by the request's
    /// toolset. The refusal when the toolset is invalid.
    pub(crate) async fn scoped(&self, ctx: &CallContext) -> Result<RequestView, String> {
        self.discovery.request_view(ctx).await.map_err(|e| e.to_string())
    }

    /// Why the session could not reach the single sign-on server tool `name` belongs to, when
    /// its last attempt failed (an exchange refused, a forwarded token rejected).
    fn sso_failure(&self, name: &str, ctx: &CallContext) -> Option<String> {
        let auth = self.auth.as_ref()?;
        self.registry.servers().into_iter().find_map(|view| {
            let definition = &view.definition;
            let prefix = definition
                .spec
                .tool_prefix
                .as_deref()
                .unwrap_or(&definition.metadata.name);
            let head = self.registry.names().server_tool(prefix, "");
            (!head.is_empty() && name.starts_with(&head) && name.len() > head.len())
                .then(|| auth.sso().failure(&ctx.session, &definition.metadata.name))
                .flatten()
                .map(|reason| {
                    format!(
                        "{name} is served with your own identity, which {} did not accept: {reason}",
                        definition.metadata.name
                    )
                })
        })
    }

    /// The `auth_required` answer of a call to a tool of a server the session has not signed in
    /// to: an error result whose text and structured content carry the sign-in link.
    async fn sign_in_answer(&self, name: &str, ctx: &CallContext) -> Option<CallToolResult> {
        let service = self.auth.as_ref()?.sign_in()?;
        let hint = self
            .registry
            .servers_requiring_auth(&ctx.session, None)
            .into_iter()
            .find(|h| {
                let head = self
                    .registry
                    .names()
                    .server_tool(h.tool_prefix.as_deref().unwrap_or(&h.name), "");
                !head.is_empty() && name.starts_with(&head) && name.len() > head.len()
            })?;
        let link = match Box::pin(service.login(&self.registry, ctx, &hint.name, false)).await {
            Ok(link) => link,
            Err(e) => return Some(error_answer(format!("Tool execution failed: {e}"))),
        };
        let url = link["authUrl"].as_str().unwrap_or_default().to_owned();
        let answer = json!({
            "status": "auth_required",
            "server": hint.name,
            "tool": name,
            "authUrl": url,
            "auth_tool": "core_auth_login",
        });
        let mut result = error_answer(format!(
            "{name} needs you to sign in to {}: open {url} and call the tool again once you are signed in.",
            hint.name
        ));
        result.structured_content = Some(answer);
        Some(result)
    }

    async fn get_resource(
        &self,
        view: &View,
        args: &JsonObject,
        scope: Scope<'_>,
        ctx: &CallContext,
    ) -> CallToolResult {
        let entry = match resources::find_resource(view, args, scope) {
            Ok(e) => Arc::clone(e),
            Err(e) => return error_answer(e.to_string()),
        };
        let Some(conn) = self.registry.connection_for(&ctx.session, &entry.server) else {
            return error_answer(format!("server {} is not connected", entry.server));
        };
        match conn.read_resource(&entry.server_uri, ctx).await {
            Ok(read) => {
                let text: Vec<String> = read
                    .contents
                    .iter()
                    .map(|c| match c {
                        ResourceContents::TextResourceContents { text, .. } => text.clone(),
                        ResourceContents::BlobResourceContents { blob, .. } => {
                            format!("[Binary data: {} bytes]", base64_decoded_len(blob))
                        }
                        _ => String::new(),
                    })
                    .collect();
                CallToolResult::success(vec![ContentBlock::text(text.join("\n"))])
            }
            Err(e) => error_answer(format!("Failed to read resource {}: {e}", entry.uri())),
        }
    }

    async fn get_prompt(&self, view: &View, args: &JsonObject, scope: Scope<'_>, ctx: &CallContext) -> CallToolResult {
        let entry = match prompts::find_prompt(view, args, scope) {
            Ok(e) => Arc::clone(e),
            Err(e) => return error_answer(e.to_string()),
        };
        let arguments = match args.get("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(
                map.iter()
                    .map(|(k, v)| {
                        let s = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (k.clone(), Value::String(s))
                    })
                    .collect::<JsonObject>(),
            ),
            Some(_) => return error_answer("arguments must be a JSON object"),
        };
        let Some(conn) = self.registry.connection_for(&ctx.session, &entry.server) else {
            return error_answer(format!("server {} is not connected", entry.server));
        };
        match conn.get_prompt(&entry.server_prompt, arguments, ctx).await {
            Ok(prompt) => {
                let messages: Vec<Value> = prompt
                    .messages
                    .iter()
                    .map(|m| json!({"role": m.role, "content": content_summary(&m.content)}))
                    .collect();
                json_answer(&messages)
            }
            Err(e) => error_answer(format!("Failed to get prompt {}: {e}", entry.name())),
        }
    }
}

fn base64_decoded_len(blob: &str) -> usize {
    let trimmed = blob.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// The context of a meta-tool call: the session, the declared toolset (from the request's
/// extensions, else its header), the protocol version and the cancellation of the request.
///
/// When the request asked for progress, reports go to the client in order: on the call's own
/// stream when it is answered in front of rmcp ([`CallStream`]), else through the returned
/// [`ProgressRelay`], whose [`ProgressRelay::flush`] waits until every report of the call went
/// out, so none arrives after the result.
pub fn call_context(ctx: &RequestContext<RoleServer>) -> (CallContext, Option<ProgressRelay>) {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let session = session_of(parts);
    let mut call_ctx = CallContext::for_session(session).with_cancellation(ctx.ct.clone());
    if let Some(claims) = parts.and_then(|p| p.extensions.get::<muster_auth::jwt::Claims>()) {
        let mut principal = Principal::new(claims.sub.clone()).with_issuer(claims.iss.clone());
        if let Some(email) = &claims.email {
            principal = principal.with_email(email.clone());
        }
        if let Some(party) = claims.azp.as_ref().or(claims.client_id.as_ref()) {
            principal = principal.with_authorized_party(party.clone());
        }
        if let Some(actor) = &claims.act {
            principal = principal.with_actor(actor.to_string());
        }
        call_ctx = call_ctx.with_principal(principal);
        if let Some(bearer) = parts.and_then(|p| p.extensions.get::<muster_auth::resource::ValidatedBearer>()) {
            call_ctx.extensions.insert(bearer.clone());
        }
    }
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
    let mut relay = None;
    if let Some(token) = ctx.meta.get_progress_token() {
        let notification = move |update: ProgressUpdate| {
            let mut params = ProgressNotificationParam::new(token.clone(), update.progress);
            if let Some(total) = update.total {
                params = params.with_total(total);
            }
            if let Some(message) = update.message {
                params = params.with_message(message);
            }
            params
        };
        let sink = match ctx.extensions.get::<CallStream>().cloned() {
            // A call answered in front of rmcp: its own stream carries its progress, in order,
            // and is drained before the answer; no task needed.
            Some(stream) => ProgressSink::new(move |update: ProgressUpdate| {
                stream.send(ServerJsonRpcMessage::notification(
                    ServerNotification::ProgressNotification(ProgressNotification::new(notification(update))),
                ));
            }),
            None => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressUpdate>();
                let peer = ctx.peer.clone();
                let forwarder = tokio::spawn(async move {
                    while let Some(update) = rx.recv().await {
                        let _ = peer.notify_progress(notification(update)).await;
                    }
                });
                relay = Some(ProgressRelay { forwarder });
                ProgressSink::new(move |update: ProgressUpdate| {
                    let _ = tx.send(update);
                })
            }
        };
        call_ctx = call_ctx.with_progress(sink);
    }
    call_ctx.extensions.insert(ClientPeer(ctx.peer.clone()));
    (call_ctx, relay)
}

/// The one resource the gateway serves itself: the caller's sign-in state.
pub const AUTH_STATUS_URI: &str = "auth://status";

/// The session a request belongs to. For a caller the front door authenticated, the session is
/// its principal (issuer, subject, authorized party or else audience, actor chain), not the
/// token nor the transport session, so a refreshed token or a new connection of the same
/// person through the same client keeps its sign-ins; otherwise it is the MCP transport session.
pub fn session_of(parts: Option<&http::request::Parts>) -> SessionId {
    if let Some(claims) = parts.and_then(|p| p.extensions.get::<muster_auth::jwt::Claims>()) {
        use sha2::{Digest, Sha256};
        let party = claims
            .azp
            .clone()
            .or_else(|| claims.client_id.clone())
            .unwrap_or_else(|| claims.aud.join(" "));
        let actor = claims.act.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let mut digest = Sha256::new();
        for part in [&claims.iss, &claims.sub, &party, &actor] {
            digest.update(part.as_bytes());
            digest.update([0]);
        }
        let hex: String = digest.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
        return SessionId::new(format!("principal-{hex}"));
    }
    match parts {
        Some(parts) => parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map_or_else(SessionId::anonymous, SessionId::new),
        None => SessionId::default(),
    }
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

#[cfg(test)]
mod future_size {
    use super::*;
    use muster_core::config::MusterConfig;

    /// What a call's future carries is copied into each box on its way (rmcp's handler, the
    /// tool stack) and allocated per call: rare, heavy branches (sign-ins, core tools,
    /// workflows, resources and prompts) are boxed where they are awaited. Before that, the
    /// future below was over 16 KB (the dispatcher's is checked in `crate::dispatch`).
    #[test]
    fn a_calls_futures_stay_small() {
        let gateway = crate::Gateway::with_options(MusterConfig::default(), Vec::new(), Vec::new(), Default::default())
            .expect("a gateway");
        let meta = gateway.meta_tools();
        let ctx = CallContext::default();
        let limit = 6 * 1024;
        let call = meta.call("call_tool", JsonObject::new(), ctx.clone());
        assert!(
            std::mem::size_of_val(&call) < limit,
            "MetaTools::call: {} bytes",
            std::mem::size_of_val(&call)
        );
    }
}
