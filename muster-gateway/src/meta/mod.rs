//! The meta-tools server: the rmcp [`ServerHandler`](rmcp::ServerHandler) an MCP client talks to.
//!
//! By default it offers exactly the 13 meta-tools
//! ([`definitions`](muster_catalog::meta::definitions)), answered by
//! [`MetaService`] over the registry: the ten discovery meta-tools by the catalogue service
//! ([`Discovery`]) over the session's catalogue, with the registry's sign-in state as its hooks
//! (`catalogue_hooks`), which also scopes the other three; `call_tool` through the gateway's
//! [`ToolService`](muster_core::ToolService) stack, its result in the documented
//! [`envelope`](muster_catalog::meta::envelope); `get_resource` and `get_prompt` from the
//! session's connection to the server that exposes the entry. A call of a tool the request does
//! not see is answered by `unseen` (a sign-in link, why the server is unavailable). Every
//! failure a client can fix is an error result naming what is wrong.
//!
//! Around those, this handler adds what the gateway does for every request: native exposure
//! (`native`), the `auth://status` resource, URL elicitation of calls that need a sign-in,
//! the session's call slots, metrics and the change notifications each session follows
//! (`server`).

mod catalogue_hooks;
pub mod in_front;
mod native;
mod server;
mod unseen;

use std::sync::Arc;

use muster_catalog::{
    CatalogSource,
    discovery::{Discovery, RequestView},
    meta::{
        MetaService, MetaTool, ProgressRelay, progress_notification, progress_to_peer, request_context,
        session_of_request,
    },
};
use muster_core::{BoxToolService, CallContext, JsonObject, Principal, ProgressSink, SessionId, call::ProgressUpdate};
use muster_upstream::limits::CallLimits;
use rmcp::{
    RoleServer,
    model::{CallToolResult, ProgressNotification, ServerJsonRpcMessage, ServerNotification},
    service::RequestContext,
};

use catalogue_hooks::{RegistryEntries, RegistryHooks};
use in_front::{AdmitsSessions, CallStream};
use unseen::RegistryUnseen;

use crate::{
    auth::{DownstreamAuth, elicitation::SignInWaiter},
    metrics::{CallTarget, GatewayMetrics, Outcome},
    registry::Registry,
    upstream::ClientPeer,
};

const INSTRUCTIONS: &str = "muster aggregates many MCP servers. Only the meta-tools are callable directly: \
find tools with filter_tools or list_tools, read one with describe_tool, run it with call_tool.";

/// The MCP server a client talks to: the 13 meta-tools over the registry's catalogue.
///
/// Every client session is served by a clone, which shares one set of parts: a clone is one
/// reference count, and the session's service task holds a pointer, not the parts.
#[derive(Clone)]
pub struct MetaTools {
    shared: Arc<Shared>,
}

/// What every session's [`MetaTools`] shares.
#[derive(Clone)]
struct Shared {
    registry: Arc<Registry>,
    /// Sign-in by link and single sign-on, when the meta-tools take part in them.
    auth: Option<DownstreamAuth>,
    /// Where the meta-tools' calls, and calls refused before the tool stack, are counted.
    metrics: Arc<GatewayMetrics>,
    /// Cancelled when a shutdown's deadline ends the calls still running.
    calls_ended: tokio_util::sync::CancellationToken,
    /// Each session's call slots (`aggregator.limits.maxConcurrentCallsPerSession`).
    session_limits: Arc<CallLimits>,
    /// What a call retried after its person accepted to sign in waits on (sign-in by link).
    sign_in_waiter: Option<Arc<dyn SignInWaiter>>,
    /// Answers the meta-tools: discovery over the registry's catalogue (which scopes every
    /// request), `call_tool` through the tool stack, resources and prompts from the servers.
    meta: MetaService<RegistryHooks, RegistryHooks>,
    /// The answer of a call of a tool the request does not see.
    unseen: Arc<RegistryUnseen>,
    /// Where an HTTP session is admitted once rmcp set it up, for its calls to be answered
    /// in front of rmcp ([`in_front`]).
    sessions: Option<Arc<dyn AdmitsSessions>>,
}

/// The meta-tools over `registry`'s catalogue, running `call_tool` through `tools`, taking part
/// in sign-in with `auth`: the registry's hooks, its connections' resources and prompts, and
/// its answers for tools a request does not see.
fn meta_service(
    registry: &Arc<Registry>,
    auth: Option<DownstreamAuth>,
    tools: BoxToolService,
    unseen: &Arc<RegistryUnseen>,
) -> MetaService<RegistryHooks, RegistryHooks> {
    let hooks = RegistryHooks {
        registry: Arc::clone(registry),
        auth,
    };
    let source: Arc<dyn CatalogSource> = Arc::clone(registry) as _;
    let discovery = Discovery::new(source, Arc::clone(registry.presets()))
        .with_names(registry.names().clone())
        .with_auth_hints(hooks.clone())
        .with_on_request(hooks);
    MetaService::new(discovery, tools)
        .with_entries(Arc::new(RegistryEntries(Arc::clone(registry))))
        .with_unseen(Arc::clone(unseen) as _)
}

impl std::fmt::Debug for MetaTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaTools").finish_non_exhaustive()
    }
}

impl MetaTools {
    /// Meta-tools over `registry`, running `call_tool` through `tools`, their calls counted in
    /// metrics of their own until [`MetaTools::with_metrics`].
    pub fn new(registry: Arc<Registry>, tools: BoxToolService) -> Self {
        let metrics = Arc::new(GatewayMetrics::new());
        let unseen = Arc::new(RegistryUnseen::new(Arc::clone(&registry), None, Arc::clone(&metrics)));
        let session_limits = Arc::new(CallLimits::new(registry.config().aggregator.limits));
        Self {
            shared: Arc::new(Shared {
                meta: meta_service(&registry, None, tools, &unseen),
                unseen,
                registry,
                auth: None,
                metrics,
                calls_ended: tokio_util::sync::CancellationToken::new(),
                session_limits,
                sign_in_waiter: None,
                sessions: None,
            }),
        }
    }

    /// The parts, to change while building (copied first if a clone shares them).
    fn parts(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.shared)
    }

    /// Counts the meta-tools' calls, and the calls refused before they reach the tool stack
    /// (a tool the request does not see), in `metrics`: the gateway's, served at `/metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<GatewayMetrics>) -> Self {
        self.parts().metrics = metrics;
        self.rebuild();
        self
    }

    /// Ends every call still running once `token` is cancelled (a shutdown's deadline): each
    /// answers that the gateway shut down before it finished.
    #[must_use]
    pub fn with_calls_ended(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.parts().calls_ended = token;
        self
    }

    /// Limits each session's calls with `limits` (by default, limiters of its own as
    /// `aggregator.limits` read now says): share them between the meta-tools of several
    /// transports for one limit across them.
    #[must_use]
    pub fn with_session_limits(mut self, limits: Arc<CallLimits>) -> Self {
        self.parts().session_limits = limits;
        self
    }

    /// Builds the meta-tools' service again over what this holds now (the sign-in services,
    /// the metrics), keeping its tool stack.
    fn rebuild(&mut self) {
        let parts = self.parts();
        parts.unseen = Arc::new(RegistryUnseen::new(
            Arc::clone(&parts.registry),
            parts.auth.clone(),
            Arc::clone(&parts.metrics),
        ));
        parts.meta = meta_service(
            &parts.registry,
            parts.auth.clone(),
            parts.meta.tools().clone(),
            &parts.unseen,
        );
    }

    /// Takes part in signing people in to downstream servers: each request first connects the
    /// session to what the caller's identity unlocks (single sign-on servers, held grants);
    /// `list_tools` and `filter_tools` name the servers a sign-in would unlock; a call of a
    /// tool behind a sign-in is answered with a link (URL elicitation, -32042 or
    /// `auth_required`, as the client's protocol version calls for), and its retry waits for
    /// the sign-in to complete.
    #[must_use]
    pub fn with_auth(mut self, auth: DownstreamAuth) -> Self {
        let parts = self.parts();
        parts.sign_in_waiter = auth.sign_in_waiter(&parts.registry);
        parts.auth = Some(auth);
        self.rebuild();
        self
    }

    /// Admits each HTTP session to `table` once it is initialized
    /// ([`in_front`]).
    #[must_use]
    pub fn with_session_table(mut self, table: Arc<impl AdmitsSessions + 'static>) -> Self {
        self.parts().sessions = Some(table);
        self
    }

    /// Runs meta-tool `name` with `args` in `ctx`. `None` when `name` is not a meta-tool.
    ///
    /// A [`DeclaredToolset`](muster_catalog::toolset::DeclaredToolset) in `ctx.extensions`
    /// scopes the call: discovery reads the catalogue intersected with it, and an invalid one
    /// is the answer of every meta-tool.
    ///
    /// Counted in the metrics as a call of kind `meta`.
    pub async fn call(&self, name: &str, args: JsonObject, ctx: CallContext) -> Option<CallToolResult> {
        let tool = MetaTool::from_name(name)?;
        let started = std::time::Instant::now();
        let result = self.shared.meta.answer(tool, args, ctx).await;
        self.shared.metrics.record_call(
            &CallTarget::meta(tool.name()),
            Outcome::answered(result.is_error == Some(true)),
            started.elapsed(),
        );
        Some(result)
    }

    /// The catalogue the request sees: the session's (after connecting what the caller's
    /// identity unlocks: held grants, single sign-on servers), narrowed by the request's
    /// toolset. The refusal when the toolset is invalid.
    pub(crate) async fn scoped(&self, ctx: &CallContext) -> Result<RequestView, String> {
        self.shared
            .meta
            .discovery()
            .request_view(ctx)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The context of a meta-tool call: [`request_context`]'s (the declared toolset, the protocol
/// version and the cancellation of the request), with the caller the front door authenticated
/// as its principal and its session ([`session_of`]), and the client's peer.
///
/// When the request asked for progress, reports go to the client in order: on the call's own
/// stream when it is answered in front of rmcp ([`CallStream`]), else through the returned
/// [`ProgressRelay`], whose [`ProgressRelay::flush`] waits until every report of the call went
/// out, so none arrives after the result.
pub fn call_context(ctx: &RequestContext<RoleServer>) -> (CallContext, Option<ProgressRelay>) {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let mut call_ctx = request_context(ctx);
    if let Some(claims) = parts.and_then(|p| p.extensions.get::<muster_auth::jwt::Claims>()) {
        call_ctx.session = session_of(parts);
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
        if !claims.groups.is_empty() {
            principal = principal.with_groups(claims.groups.iter().cloned());
        }
        call_ctx = call_ctx.with_principal(principal);
        if let Some(bearer) = parts.and_then(|p| p.extensions.get::<muster_auth::resource::ValidatedBearer>()) {
            call_ctx.extensions.insert(bearer.clone());
        }
    }
    let mut relay = None;
    match (ctx.extensions.get::<CallStream>(), ctx.meta.get_progress_token()) {
        // A call answered in front of rmcp: its own stream carries its progress, in order,
        // and is drained before the answer; no task needed.
        (Some(stream), Some(token)) => {
            let stream = stream.clone();
            call_ctx = call_ctx.with_progress(ProgressSink::new(move |update: ProgressUpdate| {
                stream.send(ServerJsonRpcMessage::notification(
                    ServerNotification::ProgressNotification(ProgressNotification::new(progress_notification(
                        &token, update,
                    ))),
                ));
            }));
        }
        _ => {
            if let Some((sink, forwarder)) = progress_to_peer(ctx) {
                call_ctx = call_ctx.with_progress(sink);
                relay = Some(forwarder);
            }
        }
    }
    call_ctx.extensions.insert(ClientPeer(ctx.peer.clone()));
    (call_ctx, relay)
}

/// The one resource the gateway serves itself: the caller's sign-in state.
pub const AUTH_STATUS_URI: &str = "auth://status";

/// The session a request belongs to. For a caller the front door authenticated, the session is
/// its principal (issuer, subject, authorized party or else audience, actor chain), not the
/// token nor the transport session, so a refreshed token or a new connection of the same
/// person through the same client keeps its sign-ins; otherwise it is the MCP transport session
/// ([`session_of_request`]).
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
    session_of_request(parts)
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
        let gateway = crate::Gateway::with_options(
            MusterConfig::default(),
            Vec::new(),
            Vec::new(),
            crate::GatewayOptions::default(),
        )
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
