//! # muster-upstream
//!
//! The downstream side of an MCP gateway: one MCP client connection to each downstream
//! server, with what it offers, and the ways its calls go out.
//!
//! [`UpstreamConnection::connect`] starts a stdio server as a child process (`command`, `args`,
//! `env`) or reaches a remote one over streamable HTTP or legacy HTTP+SSE (`url`, `headers`),
//! performs the MCP
//! handshake and reads the server's tools, resources and prompts, following pagination cursors.
//! Every operation is bounded by the server's `spec.timeout`; a tool call that reports progress
//! may run up to `spec.progress.maxDuration`, each progress notification restarting `timeout`.
//! During a call the downstream's progress, logging, sampling and elicitation reach the calling
//! client ([`ClientPeer`], [`progress`]); a call the caller cancels is cancelled downstream. A streamable-HTTP
//! server that forgets the session is re-initialized by the transport. A remote server's
//! connections go only where its [`Egress`] allows ([`egress`]).
//!
//! rmcp does the handshake, the lists and everything but tool calls. A `tools/call` to a stdio
//! or streamable-HTTP server of a revision with an `initialize` handshake goes on a call lane
//! past rmcp's client service loop (`lane`, `stdio::lane`, `http_lane`), with the same outcomes.
//!
//! ```no_run
//! # async fn demo(server: &muster_core::crd::MCPServer) -> Result<(), Box<dyn std::error::Error>> {
//! use muster_upstream::{Egress, UpstreamConnection};
//!
//! let conn = UpstreamConnection::connect(server, None, Egress::Open).await?;
//! println!("{} tools", conn.tools().len());
//! # Ok(()) }
//! ```
//!
//! - [`UpstreamError`]: why a connection could not be made; a server that requires
//!   authorization, answered an HTTP status or could not be reached is a variant of its own.
//! - [`egress`]: where a remote server's connections may go.
//! - [`limits`]: how many calls run at once, per server and per session.
//! - [`progress`], [`ClientPeer`]: a call's progress, logging, sampling and elicitation,
//!   relayed to the caller in order.
//!
//! Inside, not public: the legacy HTTP+SSE client transport (`sse`; rmcp has none), and the
//! streamable-HTTP client that reads a `tools/call` answer without rmcp's per-event overhead
//! (`call_answers`).
//! - [`supervision`]: the backoff between connection attempts and the health-check interval.
//! - [`in_task_wakes`]: polling a connection from the task that waits on it, its wakes handled in the task.
//! - [`headers`]: the streamable-HTTP transport's header names.

mod answer_text;
mod busy;
mod call_answers;
pub mod egress;
mod error;
pub mod headers;
mod http_lane;
pub mod in_task_wakes;
mod lane;
pub mod limits;
pub mod progress;
mod relay;
mod schemas;
mod sse;
mod stdio;
pub mod supervision;
#[cfg(feature = "otel")]
pub mod trace_context;
pub(crate) mod transport;

use std::{sync::Arc, time::Duration};

use muster_core::{
    CallContext, CompactTool, ToolError, ToolOutput,
    crd::{MCPServer, ServerType},
};
use rmcp::{
    Peer, RoleClient, ServiceExt,
    model::{
        CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, CompleteRequestParams,
        CompleteResult, GetPromptRequestParams, GetPromptResult, Implementation, JsonObject, Prompt,
        ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate, ServerResult,
        SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::{PeerRequestOptions, ServiceError},
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use egress::{Egress, LinkLocalRefused};
pub use error::UpstreamError;
pub use relay::{ClientPeer, ListChanged, UpstreamClient};
pub use transport::TransportError;

use http_lane::{HttpLane, SessionRecord};
use lane::{CallBudget, Failure, Reading};
use progress::ProgressInOrder;
use relay::CallRelay;
use stdio::lane::StdioLane;

use crate::{
    busy::Busy,
    limits::{CallLimiter, CallSlot},
};

/// A live MCP connection to one downstream server, with what it offered.
#[derive(Debug)]
pub struct UpstreamConnection {
    server: String,
    timeout: Duration,
    max_duration: Duration,
    peer: Peer<RoleClient>,
    /// The `tools/call` lane past rmcp's service loop, on stdio or streamable HTTP.
    lane: Option<Lane>,
    cancel: CancellationToken,
    closed: watch::Receiver<Option<String>>,
    relay: CallRelay,
    /// The requests in flight (shared by the refreshed copies).
    busy: Arc<Busy>,
    limiter: Option<Arc<CallLimiter>>,
    tools: Vec<CompactTool>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
}

/// A connection's call lane ([`lane`]).
#[derive(Debug, Clone)]
enum Lane {
    Stdio(Arc<StdioLane>),
    Http(Arc<HttpLane>),
}

/// What a server offers: its tools, resources, resource templates and prompts.
type Lists = (Vec<CompactTool>, Vec<Resource>, Vec<ResourceTemplate>, Vec<Prompt>);

impl UpstreamConnection {
    /// Connects to `server`, on connections `egress` allows ([`Egress::of`] the definition),
    /// and reads what it offers. Its `list_changed` notifications are sent to `changes`, when
    /// given.
    pub async fn connect(
        server: &MCPServer,
        changes: Option<mpsc::UnboundedSender<ListChanged>>,
        egress: Egress,
    ) -> Result<Self, UpstreamError> {
        let name = server.metadata.name.clone();
        let timeout = Duration::from_secs(u64::from(server.spec.timeout.max(1)));
        let max_duration = server
            .spec
            .progress
            .as_ref()
            .map_or(Duration::from_secs(3600), |p| {
                Duration::from_secs(u64::from(p.max_duration))
            })
            .max(timeout);
        let relay = CallRelay::default();
        let client = UpstreamClient::new(relay.clone(), changes);
        // A stdio server runs in a process group of its own, ended with the connection.
        let mut process_group = None;
        let mut stdio_lane = None;
        let mut stdio_start = None;
        let mut http_lane = None;
        let handshake = async {
            let remote = server.spec.server_type.is_some_and(ServerType::is_remote);
            let shown_url = server.spec.url.as_deref().filter(|_| remote).map(shown);
            let init = |e| UpstreamError::of_handshake(e, shown_url.as_deref());
            match server.spec.server_type {
                Some(ServerType::Stdio) | None => {
                    let (child, stderr) = transport::stdio(&name, &server.spec)?;
                    process_group = child.id();
                    stdio_lane = Some(child.lane());
                    stdio_start = Some((stderr, child.exit_status()));
                    client
                        .serve(ProgressInOrder::new(child, relay.clone()))
                        .await
                        .map_err(init)
                }
                Some(ServerType::StreamableHttp) => {
                    let record = Arc::new(SessionRecord::default());
                    let (to_rmcp, injected) = mpsc::unbounded_channel();
                    let transport = transport::streamable_http(&server.spec, &record, egress)?;
                    http_lane = Some((record, to_rmcp));
                    client
                        .serve(ProgressInOrder::new(transport, relay.clone()).with_injected(injected))
                        .await
                        .map_err(init)
                }
                Some(ServerType::Sse) => client
                    .serve(ProgressInOrder::new(
                        transport::sse(&server.spec, egress)?,
                        relay.clone(),
                    ))
                    .await
                    .map_err(init),
                Some(other) => Err(TransportError::UnsupportedType(other.to_string()).into()),
            }
        };
        let failed = match tokio::time::timeout(timeout, handshake).await {
            Ok(Ok(service)) => Ok(service),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(UpstreamError::Timeout {
                what: "MCP initialize",
                after: timeout,
            }),
        };
        let service = match failed {
            Ok(service) => service,
            Err(cause) => {
                transport::end_process_group(process_group);
                return Err(match stdio_start {
                    // A process that did not start says why: how it ended, what it wrote.
                    Some((stderr, status)) if !matches!(cause, UpstreamError::Transport(_)) => {
                        // Its stderr ends when it exits: by then the status is known, unless
                        // it still runs (an initialize that timed out).
                        let stderr = stderr.lines(Duration::from_millis(500)).await;
                        UpstreamError::StdioStart {
                            cause: Box::new(cause),
                            status: status.get().copied(),
                            stderr,
                        }
                    }
                    _ => cause,
                });
            }
        };
        let peer = service.peer().clone();
        // From 2026-07-28 each request carries client context in its `_meta`, which rmcp adds.
        // Without a lane, the HTTP session record is dropped here, and rmcp's posts go unrecorded.
        let takes_lane = peer.peer_info().is_some_and(|i| i.protocol_version.has_initialize());
        let lane = match (stdio_lane, http_lane) {
            _ if !takes_lane => None,
            (Some(lane), _) => Some(Lane::Stdio(lane)),
            (None, Some((record, to_rmcp))) => Some(Lane::Http(Arc::new(HttpLane::new(
                egress,
                record,
                to_rmcp,
                relay.clone(),
            )))),
            (None, None) => None,
        };
        let cancel = CancellationToken::new();
        let (closed_tx, closed) = watch::channel(None);
        let service_cancel = service.cancellation_token();
        let close_requested = cancel.clone();
        let server_name = name.clone();
        tokio::spawn(async move {
            let waiting = service.waiting();
            tokio::pin!(waiting);
            let reason = tokio::select! {
                quit = &mut waiting => match quit {
                    Ok(reason) => format!("connection closed ({reason:?})"),
                    Err(e) => format!("connection task failed: {e}"),
                },
                () = close_requested.cancelled() => {
                    service_cancel.cancel();
                    let _ = waiting.await;
                    "closed by the gateway".to_owned()
                }
            };
            // The server's process is ended by now; whatever it started goes with it.
            transport::end_process_group(process_group);
            tracing::debug!(server = %server_name, %reason, "upstream connection ended");
            let _ = closed_tx.send(Some(reason));
        });
        let mut conn = Self {
            server: name,
            timeout,
            max_duration,
            peer,
            lane,
            cancel,
            closed,
            relay,
            busy: Arc::default(),
            limiter: None,
            tools: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            prompts: Vec::new(),
        };
        if let Err(e) = conn.refresh().await {
            conn.cancel.cancel();
            return Err(e);
        }
        Ok(conn)
    }

    /// Reads the server's tools, resources and prompts again (all pages).
    pub async fn refresh(&mut self) -> Result<(), UpstreamError> {
        let (tools, resources, templates, prompts) = self.fetch_lists().await?;
        self.tools = tools;
        self.resources = resources;
        self.templates = templates;
        self.prompts = prompts;
        Ok(())
    }

    /// A copy of this connection's lists refreshed from the server, sharing the connection.
    pub async fn refreshed(&self) -> Result<Self, UpstreamError> {
        let (tools, resources, templates, prompts) = self.fetch_lists().await?;
        Ok(Self {
            server: self.server.clone(),
            timeout: self.timeout,
            max_duration: self.max_duration,
            peer: self.peer.clone(),
            lane: self.lane.clone(),
            cancel: self.cancel.clone(),
            closed: self.closed.clone(),
            relay: self.relay.clone(),
            busy: Arc::clone(&self.busy),
            limiter: self.limiter.clone(),
            tools,
            resources,
            templates,
            prompts,
        })
    }

    async fn fetch_lists(&self) -> Result<Lists, UpstreamError> {
        let caps = self
            .peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let tools = if caps.tools.is_some() {
            let tools = self
                .bounded("tools/list", self.peer.list_all_tools())
                .await?
                .map_err(|source| UpstreamError::List { what: "tools", source })?;
            schemas::SCHEMAS.compact_tools(tools)
        } else {
            Vec::new()
        };
        let resources = if caps.resources.is_some() {
            self.bounded("resources/list", self.peer.list_all_resources())
                .await?
                .map_err(|source| UpstreamError::List {
                    what: "resources",
                    source,
                })?
        } else {
            Vec::new()
        };
        // Templates are optional even for a server with resources: one that refuses the list
        // has none.
        let templates = if caps.resources.is_some() {
            self.bounded("resources/templates/list", self.peer.list_all_resource_templates())
                .await?
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let prompts = if caps.prompts.is_some() {
            self.bounded("prompts/list", self.peer.list_all_prompts())
                .await?
                .map_err(|source| UpstreamError::List {
                    what: "prompts",
                    source,
                })?
        } else {
            Vec::new()
        };
        Ok((tools, resources, templates, prompts))
    }

    async fn bounded<T>(&self, what: &'static str, fut: impl Future<Output = T>) -> Result<T, UpstreamError> {
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| UpstreamError::Timeout {
                what,
                after: self.timeout,
            })
    }

    /// Bounds the requests in flight to the server by `limiter` (shared by every connection to
    /// the same server): a call, read or prompt takes one of its slots first.
    pub fn with_limiter(mut self, limiter: Arc<CallLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// One of the server's slots, waiting in its queue (the caller may cancel the wait).
    async fn slot(&self, ctx: &CallContext) -> Result<Option<CallSlot>, ToolError> {
        let Some(limiter) = &self.limiter else {
            return Ok(None);
        };
        tokio::select! {
            slot = limiter.acquire() => slot.map(Some),
            () = ctx.cancellation.cancelled() => Err(ToolError::Cancelled),
        }
    }

    /// The MCPServer's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tools the server offered, under its own names (their schemas as compact text).
    pub fn tools(&self) -> &[CompactTool] {
        &self.tools
    }

    /// The resources the server offered.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The prompts the server offered.
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    /// The server's self-description from the handshake (name, version), when it gave one.
    pub fn server_info(&self) -> Option<Implementation> {
        self.peer.peer_info().and_then(|i| i.server_info.clone())
    }

    /// Whether the connection is closed (the process exited, the transport failed).
    pub fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    /// Resolves when the connection closes, with why.
    pub async fn closed(&self) -> String {
        let mut closed = self.closed.clone();
        loop {
            if let Some(reason) = closed.borrow_and_update().clone() {
                return reason;
            }
            if closed.changed().await.is_err() {
                return "connection closed".to_owned();
            }
        }
    }

    /// An MCP ping, within the server's timeout.
    pub async fn ping(&self) -> Result<(), String> {
        match tokio::time::timeout(
            self.timeout,
            self.peer.send_request(ClientRequest::PingRequest(Default::default())),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("ping failed: {e}")),
            Err(_) => Err(format!("ping timed out after {}s", self.timeout.as_secs())),
        }
    }

    /// Calls the server's tool `tool` (its own name) with `arguments`. The call is bounded by
    /// `timeout`, restarted by each progress notification up to `progress.maxDuration`, and by
    /// the caller's deadline and cancellation; its progress, logging, sampling and elicitation
    /// reach the caller.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let _busy = self.busy.enter();
        let _slot = self.slot(ctx).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // The call's trace context goes down in `_meta` (SEP-414), and over streamable HTTP as
        // `traceparent` headers too, so the downstream's spans join the caller's trace.
        #[cfg(feature = "otel")]
        if let Some(meta) = crate::trace_context::request_meta(&tracing::Span::current()) {
            params.meta = Some(meta);
        }
        let remaining = ctx
            .deadline
            .map(|d| d.saturating_duration_since(std::time::Instant::now()));
        let budget = CallBudget {
            idle: self.timeout,
            max_total: remaining.map_or(self.max_duration, |r| r.min(self.max_duration)),
        };
        let client = ctx.extensions.get::<ClientPeer>().cloned();
        match &self.lane {
            Some(Lane::Stdio(lane)) => return self.call_on_stdio_lane(lane, params, budget, client, ctx).await,
            Some(Lane::Http(lane)) => {
                match lane
                    .call(
                        &mut params,
                        budget,
                        ctx.progress.clone(),
                        client.clone(),
                        &ctx.cancellation,
                        Reading::of(ctx),
                    )
                    .await
                {
                    Err(Failure::Fallback) => {}
                    outcome => return outcome.map_err(|failure| self.lane_failure(failure)),
                }
            }
            None => {}
        }
        // Boxed: rmcp's request machinery is large, and it is the way of a session's first call
        // and of fallbacks, not of the lanes' calls, whose futures would carry it.
        Box::pin(self.call_through_rmcp(params, budget, client, ctx)).await
    }

    /// A call sent through rmcp's client: a downstream without a lane, or a call its lane
    /// turned back ([`Failure::Fallback`]).
    async fn call_through_rmcp(
        &self,
        params: CallToolRequestParams,
        budget: CallBudget,
        client: Option<ClientPeer>,
        ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(budget.idle)
            .reset_timeout_on_progress()
            .with_max_total_timeout(budget.max_total);
        let handle = self
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.service_error(e))?;
        let _in_flight = self
            .relay
            .register(handle.progress_token.clone(), ctx.progress.clone(), client);
        let (id, peer) = (handle.id.clone(), handle.peer.clone());
        let response = tokio::select! {
            response = handle.await_response() => response,
            () = ctx.cancellation.cancelled() => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), Some("cancelled by the client".to_owned())))
                    .await;
                return Err(ToolError::Cancelled);
            }
        };
        match response {
            Ok(ServerResult::CallToolResult(result)) => Ok(result.into()),
            Ok(other) => Err(self.unexpected_answer(format!("{other:?}"))),
            Err(ServiceError::Timeout { timeout }) => Err(ToolError::Timeout { after: timeout }),
            Err(e) => Err(self.service_error(e)),
        }
    }

    /// A call on a stdio server's lane ([`stdio::lane`]): the same outcomes as through rmcp.
    async fn call_on_stdio_lane(
        &self,
        lane: &Arc<StdioLane>,
        params: CallToolRequestParams,
        budget: CallBudget,
        client: Option<ClientPeer>,
        ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let outcome = async {
            let mut call = lane.prepare(ctx.progress.clone(), Reading::of(ctx))?;
            // Registered before it is written: a sampling request the call causes finds its client.
            // Its progress goes through the lane.
            let _in_flight = self.relay.register(call.token().clone(), None, client);
            call.send(params).await?;
            call.answer(budget, &ctx.cancellation).await
        };
        outcome.await.map_err(|failure| self.lane_failure(failure))
    }

    /// A lane call's failure as the error rmcp's path gives for it.
    fn lane_failure(&self, failure: Failure) -> ToolError {
        match failure {
            Failure::Refused(error) => ToolError::Downstream {
                server: self.server.clone(),
                error,
            },
            Failure::Unreadable(e) => self.unexpected_answer(e.to_string()),
            Failure::Send(source) => ToolError::Transport {
                server: self.server.clone(),
                source,
            },
            Failure::Lost(why) => ToolError::Transport {
                server: self.server.clone(),
                source: why.into(),
            },
            // Only the HTTP lane falls back, and not to here.
            Failure::Closed | Failure::Fallback => self.service_error(ServiceError::TransportClosed),
            Failure::TimedOut(after) => ToolError::Timeout { after },
            Failure::Cancelled => ToolError::Cancelled,
        }
    }

    fn unexpected_answer(&self, answer: String) -> ToolError {
        ToolError::Transport {
            server: self.server.clone(),
            source: format!("unexpected answer to tools/call: {answer}").into(),
        }
    }

    /// Reads the server's resource `uri` (its own URI).
    pub async fn read_resource(&self, uri: &str, ctx: &CallContext) -> Result<ReadResourceResult, ToolError> {
        let params = ReadResourceRequestParams::new(uri);
        let result = self.run(ctx, self.peer.read_resource(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    /// Its resource templates.
    pub fn resource_templates(&self) -> &[ResourceTemplate] {
        &self.templates
    }

    /// Asks the server to complete an argument (`completion/complete`), `params` naming the
    /// server's own prompt or template.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
        ctx: &CallContext,
    ) -> Result<CompleteResult, ToolError> {
        let result = self.run(ctx, self.peer.complete(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    /// Subscribes `client` (the calling session's) to updates of resource `uri` (the server's own
    /// URI): the server is asked once, and each `notifications/resources/updated` reaches every
    /// subscriber.
    pub async fn subscribe(&self, uri: &str, client: ClientPeer, ctx: &CallContext) -> Result<(), ToolError> {
        if self.relay.add_subscriber(uri, ctx.session.as_str(), client) {
            #[allow(deprecated, reason = "the legacy protocols' subscription is what downstreams serve")]
            let asked = self.peer.subscribe(SubscribeRequestParams::new(uri));
            if let Err(e) = self.run(ctx, asked).await?.map_err(|e| self.service_error(e)) {
                self.relay.remove_subscriber(uri, ctx.session.as_str());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Ends the calling session's subscription to `uri`; the server is told once nobody is
    /// subscribed.
    pub async fn unsubscribe(&self, uri: &str, ctx: &CallContext) -> Result<(), ToolError> {
        if self.relay.remove_subscriber(uri, ctx.session.as_str()) {
            #[allow(deprecated, reason = "the legacy protocols' subscription is what downstreams serve")]
            let asked = self.peer.unsubscribe(UnsubscribeRequestParams::new(uri));
            self.run(ctx, asked).await?.map_err(|e| self.service_error(e))?;
        }
        Ok(())
    }

    /// Gets the server's prompt `name` (its own name) with string arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        ctx: &CallContext,
    ) -> Result<GetPromptResult, ToolError> {
        let mut params = GetPromptRequestParams::new(name);
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let result = self.run(ctx, self.peer.get_prompt(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    async fn run<T>(&self, ctx: &CallContext, fut: impl Future<Output = T>) -> Result<T, ToolError> {
        let _busy = self.busy.enter();
        let _slot = self.slot(ctx).await?;
        let budget = match ctx.deadline {
            Some(deadline) => self
                .timeout
                .min(deadline.saturating_duration_since(std::time::Instant::now())),
            None => self.timeout,
        };
        tokio::select! {
            // Dropping the request future makes rmcp send notifications/cancelled downstream.
            () = ctx.cancellation.cancelled() => Err(ToolError::Cancelled),
            r = tokio::time::timeout(budget, fut) => r.map_err(|_| ToolError::Timeout { after: budget }),
        }
    }

    fn service_error(&self, e: ServiceError) -> ToolError {
        match e {
            ServiceError::McpError(error) => ToolError::Downstream {
                server: self.server.clone(),
                error,
            },
            ServiceError::Timeout { timeout } => ToolError::Timeout { after: timeout },
            other => ToolError::Transport {
                server: self.server.clone(),
                source: Box::new(other),
            },
        }
    }

    /// Closes the connection (a stdio server's process is stopped).
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// Closes the connection once the requests it carries have ended, or after `grace` at
    /// the latest: for a connection that was just replaced (a session's fresh grant), so that
    /// its calls in flight finish instead of being cut. New requests should no longer reach
    /// it. Outside a tokio runtime it closes at once.
    pub fn close_when_idle(&self, grace: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.close();
            return;
        };
        if self.busy.count() == 0 {
            self.close();
            return;
        }
        let (busy, cancel) = (Arc::clone(&self.busy), self.cancel.clone());
        runtime.spawn(async move {
            let _ = tokio::time::timeout(grace, busy.idle()).await;
            cancel.cancel();
        });
    }

    /// The longest a request on this connection may run (`progress.maxDuration`).
    pub fn max_duration(&self) -> Duration {
        self.max_duration
    }
}

/// `url` as errors show it: without user info, query or fragment (where credentials live).
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => sse::redact(&parsed),
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

/// A shared connection.
pub type SharedConnection = Arc<UpstreamConnection>;

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
