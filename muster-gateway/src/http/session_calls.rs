//! `tools/call` on an established session, answered in front of rmcp's streamable-HTTP service.
//!
//! rmcp's [`StreamableHttpService`](rmcp::transport::StreamableHttpService) parses every POST
//! as a whole `ClientRequest` (a flattened, buffered parse of the whole body) and hands it to
//! the session's service task, which hands it to the handler and routes the answer back through
//! the session manager: about a third of the gateway's own work on a call through it.
//! [`SessionCalls`] sits in front of it and answers the one request an agent sends most,
//! `tools/call` on a session that already exists, itself: it reads the body's envelope, parses
//! the call's params alone, runs them through the same handler ([`MetaTools`](crate::meta::MetaTools)) as rmcp would,
//! and writes the answer (and the call's progress, in order) as the request's SSE stream.
//! Everything else goes to rmcp unchanged: initialize, notifications, the other methods, GET and
//! DELETE, and any request that the rules below do not clear.
//!
//! A request is answered here only when rmcp would have accepted it the same way:
//!
//! - Its session is one rmcp set up and still runs: the session is admitted
//!   ([`SessionTable::admit`]) from the `notifications/initialized` POST that rmcp already
//!   validated, and dropped once its transport closes.
//! - Every header rmcp's checks read (`Host`, `Origin`, `Accept`, `Content-Type`,
//!   `MCP-Protocol-Version`) is byte for byte the one rmcp validated on that POST, so the
//!   DNS-rebinding, media-type and version checks give the same verdict without being redone.
//! - The session uses a protocol of the `initialize` era (before 2026-07-28), and the request
//!   names no protocol version of its own in `_meta` (which would ask for rmcp's per-request
//!   negotiation), and it carries none of the 2026-07-28 standard headers (`Mcp-Method`,
//!   `Mcp-Name`).
//! - rmcp has seen the session within [`TOUCH_INTERVAL`]: the session manager ends a session
//!   after five idle minutes, and calls answered here are no events to it, so a call after a
//!   quiet minute goes to rmcp and keeps the session alive.
//!
//! The stream is resumable as rmcp's are: it is primed and its events have ids. A `GET` with the
//! `Last-Event-ID` of one of them gets the rest, while the call runs and for a minute after it
//! ended, also when its answer went out (the client may have lost the bytes after they left the
//! gateway); see `replay.rs`. The ids are of the gateway's own form (`call-N-I`); a `GET` naming
//! one is answered here, any other goes to rmcp. A `notifications/cancelled` for a call answered
//! here is taken here too, and cancels it; so does a `DELETE` of its session, once rmcp accepted
//! it. That `DELETE` is answered 204 No Content where rmcp says 202 Accepted (the session is
//! gone, not pending, and the MCP Python SDK counts 202 as a failed end).
//!
//! `Front::new` (in `http.rs`) wires it: one `SessionTable` goes both to `SessionCalls` and,
//! through `MetaTools::with_session_table`, to the handler that admits each session.

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::{
    body::{Body, Bytes, HttpBody},
    response::{IntoResponse, Response},
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use rmcp::{
    Peer, RoleServer,
    model::{
        CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ProtocolVersion, RequestId,
        ServerJsonRpcMessage,
    },
    service::RequestContext,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use answer::Outgoing;

use crate::meta::in_front::{AdmitsSessions, AnswersCalls, CallAnswer, CallStream, Queued};

/// How long after rmcp last saw a session its calls may still be answered here. Well under the
/// five minutes after which the session manager ends an idle session.
pub(crate) const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

/// How often an SSE comment keeps a long call's stream open through proxies (rmcp's interval).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long a call's response head waits for the call's first event (its answer, mostly), so
/// that both go out in one write; a call that has sent nothing by then gets its head with an SSE
/// comment. A write less a call took about 7% off the gateway's CPU a call through a stdio
/// downstream (10 sessions, alternated runs).
const HEAD_WAIT: Duration = Duration::from_millis(100);

pub(crate) use muster_upstream::headers::{LAST_EVENT_ID, SESSION_ID};
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The headers whose values rmcp's checks of a POST read.
const VALIDATED: [HeaderName; 5] = [
    header::HOST,
    header::ORIGIN,
    header::ACCEPT,
    header::CONTENT_TYPE,
    HeaderName::from_static(PROTOCOL_VERSION),
];
/// The 2026-07-28 standard headers: a request with one goes to rmcp, which checks them.
const STANDARD: [HeaderName; 2] = [
    HeaderName::from_static("mcp-method"),
    HeaderName::from_static("mcp-name"),
];

/// The sessions whose calls [`SessionCalls`] may answer, by transport session id.
#[derive(Debug)]
pub(crate) struct SessionTable {
    sessions: RwLock<HashMap<Arc<str>, Arc<LiveSession>>>,
    started: Instant,
    touch_interval_ms: u64,
}

impl Default for SessionTable {
    fn default() -> Self {
        Self {
            sessions: RwLock::default(),
            started: Instant::now(),
            touch_interval_ms: millis(TOUCH_INTERVAL),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// One admitted session.
#[derive(Debug)]
struct LiveSession {
    peer: Peer<RoleServer>,
    /// The validated values of [`VALIDATED`].
    headers: HeaderMap,
    /// The calls answered here and still running, to cancel by request id.
    calls: Mutex<HashMap<RequestId, CancellationToken>>,
    /// When rmcp last saw a request of this session (milliseconds since the table started).
    touched: AtomicU64,
    /// The streams of its calls, for a client that lost one to resume it.
    replays: Arc<replay::Replays>,
}

impl AdmitsSessions for SessionTable {
    fn admit(&self, parts: &http::request::Parts, peer: Peer<RoleServer>) {
        SessionTable::admit(self, parts, peer);
    }
}

impl SessionTable {
    /// A table whose sessions go to rmcp once per `interval` ([`TOUCH_INTERVAL`] by default):
    /// keep it well under the session manager's idle timeout.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn with_touch_interval(mut self, interval: Duration) -> Self {
        self.touch_interval_ms = millis(interval);
        self
    }

    /// Milliseconds since the table was made.
    fn now(&self) -> u64 {
        millis(self.started.elapsed())
    }

    /// Admits the session of `parts`, a POST rmcp accepted on it (the handler calls this from
    /// `notifications/initialized`). Sessions of the 2026-07-28 protocol, or of a request without
    /// a session id or a `Host` header, are not admitted.
    pub(crate) fn admit(&self, parts: &http::request::Parts, peer: Peer<RoleServer>) {
        let Some(id) = parts.headers.get(SESSION_ID).and_then(|v| v.to_str().ok()) else {
            return;
        };
        if !parts.headers.contains_key(header::HOST) || !legacy_version(&parts.headers) {
            return;
        }
        let mut headers = HeaderMap::new();
        for name in VALIDATED {
            for value in parts.headers.get_all(&name) {
                // A copy: the request's value shares the connection's read buffer, which the
                // session would otherwise keep alive.
                if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
                    headers.append(name.clone(), value);
                }
            }
        }
        let session = Arc::new(LiveSession {
            peer,
            headers,
            calls: Mutex::default(),
            touched: AtomicU64::new(self.now()),
            replays: Arc::default(),
        });
        let mut sessions = self.sessions.write().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| !s.peer.is_transport_closed());
        sessions.insert(Arc::from(id), session);
    }

    /// Forgets session `id` (one rmcp ended) and cancels its calls still running, as rmcp
    /// cancels the requests of a session that ends.
    fn forget(&self, id: &str) {
        let forgotten = self.sessions.write().unwrap_or_else(|e| e.into_inner()).remove(id);
        if let Some(session) = forgotten {
            for (_, call) in session.calls.lock().unwrap_or_else(|e| e.into_inner()).drain() {
                call.cancel();
            }
        }
    }

    /// The admitted, open session of `headers`.
    fn session_of(&self, headers: &HeaderMap) -> Option<Arc<LiveSession>> {
        let id = headers.get(SESSION_ID)?.to_str().ok()?;
        let session = self
            .sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()?;
        if session.peer.is_transport_closed() {
            self.sessions.write().unwrap_or_else(|e| e.into_inner()).remove(id);
            return None;
        }
        Some(session)
    }
}

/// Whether `headers` name no protocol version, or one before 2026-07-28 (the `initialize` era;
/// ISO dates compare as text).
fn legacy_version(headers: &HeaderMap) -> bool {
    match headers.get(PROTOCOL_VERSION) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|v| {
            v < ProtocolVersion::V_2026_07_28.as_str() && v < ProtocolVersion::STANDARD_HEADERS.as_str()
        }),
    }
}

impl LiveSession {
    /// Whether a `GET` with `headers` passes rmcp's checks of one (its host, origin and protocol
    /// version as the admitted POST's, and an `Accept` of SSE).
    fn resumes(&self, headers: &HeaderMap) -> bool {
        let sse = headers
            .get_all(header::ACCEPT)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")));
        sse && self.same(
            headers,
            &[header::HOST, header::ORIGIN, HeaderName::from_static(PROTOCOL_VERSION)],
        )
    }

    /// Whether a request with `headers` passes rmcp's checks as the admitted POST did.
    fn validates(&self, headers: &HeaderMap) -> bool {
        self.same(headers, &VALIDATED)
    }

    /// Whether `headers` have the admitted POST's values of `names`, and none of the 2026-07-28
    /// standard headers.
    fn same(&self, headers: &HeaderMap, names: &[HeaderName]) -> bool {
        names
            .iter()
            .all(|name| headers.get_all(name).iter().eq(self.headers.get_all(name).iter()))
            && STANDARD.iter().all(|name| !headers.contains_key(name))
    }
}

/// The tower service answering `tools/call` on admitted sessions with `handler`, in front of
/// `inner` (rmcp's streamable HTTP service over the same handler).
#[derive(Clone)]
pub(crate) struct SessionCalls<S, H> {
    /// Shared: axum clones the service for every request, and rmcp's is costly to clone (its
    /// config and handles), so it is cloned only for a request that goes to it.
    inner: Arc<S>,
    handler: Arc<H>,
    table: Arc<SessionTable>,
    max_body_bytes: usize,
}

impl<S, H> std::fmt::Debug for SessionCalls<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCalls").finish_non_exhaustive()
    }
}

impl<S, H> SessionCalls<S, H> {
    /// Answers calls on the sessions of `table` with `handler`, and passes the rest to `inner`.
    /// A body over `max_body_bytes` goes to `inner` (which refuses it). The handler admits each
    /// session to `table` ([`SessionTable::admit`]) when it is initialized, as
    /// [`MetaTools`](crate::meta::MetaTools) does.
    pub(crate) fn new(inner: S, handler: Arc<H>, table: Arc<SessionTable>, max_body_bytes: usize) -> Self {
        Self {
            inner: Arc::new(inner),
            handler,
            table,
            max_body_bytes,
        }
    }
}

/// The parts of a JSON-RPC message that decide where it goes.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a str>,
    id: Option<RequestId>,
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// What a POST on an admitted session is.
enum Routed {
    /// A call to answer here.
    Call(RequestId, CallToolRequestParams),
    /// A cancellation of a call answered here: its token.
    Cancelled(CancellationToken),
    /// Anything else: for rmcp.
    Other,
}

impl Routed {
    fn of(body: &[u8], session: &LiveSession) -> Self {
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(body) else {
            return Self::Other;
        };
        if envelope.jsonrpc != Some("2.0") {
            return Self::Other;
        }
        match (envelope.method.as_deref(), envelope.id, envelope.params) {
            (Some("tools/call"), Some(id), Some(params)) => {
                match serde_json::from_str::<CallToolRequestParams>(params.get()) {
                    // A request naming its own protocol version asks for rmcp's negotiation.
                    Ok(params) if params.meta.as_ref().is_none_or(|m| m.protocol_version().is_none()) => {
                        Self::Call(id, params)
                    }
                    _ => Self::Other,
                }
            }
            (Some("notifications/cancelled"), None, Some(params)) => {
                match serde_json::from_str::<CancelledNotificationParam>(params.get()) {
                    Ok(CancelledNotificationParam {
                        request_id: Some(id), ..
                    }) => session
                        .calls
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&id)
                        .cloned()
                        .map_or(Self::Other, Self::Cancelled),
                    _ => Self::Other,
                }
            }
            _ => Self::Other,
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S, H, B> tower::Service<Request<Body>> for SessionCalls<S, H>
where
    H: AnswersCalls + Send + Sync + 'static,
    S: tower::Service<Request<Body>, Response = http::Response<B>, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture;

    /// Always ready: a request for rmcp waits for its service's readiness when it is passed on.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let session = match *request.method() {
            Method::POST => self.table.session_of(request.headers()),
            Method::DELETE => {
                return Box::pin(end_session(S::clone(&self.inner), request, Arc::clone(&self.table)));
            }
            Method::GET => {
                // A client resuming the stream of a call answered here.
                let headers = request.headers();
                let resumed = headers.get(LAST_EVENT_ID).and_then(|v| v.to_str().ok());
                if let Some((n, after)) = resumed.and_then(replay::replay_event_id)
                    && let Some(session) = self.table.session_of(headers)
                    && session.resumes(headers)
                {
                    let response = replay::resume(&session.replays, n, after, KEEP_ALIVE);
                    return Box::pin(std::future::ready(Ok(response)));
                }
                None
            }
            _ => None,
        };
        let Some(session) = session else {
            return Box::pin(forward(S::clone(&self.inner), request));
        };
        let inner = Arc::clone(&self.inner);
        let (handler, now, max) = (Arc::clone(&self.handler), self.table.now(), self.max_body_bytes);
        let touch_interval = self.table.touch_interval_ms;
        Box::pin(async move {
            let fresh = now.saturating_sub(session.touched.load(Ordering::Relaxed)) < touch_interval;
            if !fresh || !session.validates(request.headers()) {
                return touched(&*inner, request, &session, now).await;
            }
            let (parts, body) = request.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, max).await else {
                // Over the limit or unreadable: rmcp answers that (and the body is gone).
                return touched(&*inner, Request::from_parts(parts, Body::empty()), &session, now).await;
            };
            match Routed::of(&bytes, &session) {
                Routed::Call(id, params) => {
                    tracing::trace!(%id, tool = %params.name, "tools/call answered in front of rmcp");
                    Ok(answer(handler, session, parts, id, params).await)
                }
                Routed::Cancelled(call) => {
                    call.cancel();
                    Ok(StatusCode::ACCEPTED.into_response())
                }
                Routed::Other => touched(&*inner, Request::from_parts(parts, Body::from(bytes)), &session, now).await,
            }
        })
    }
}

async fn forward<S, B>(mut inner: S, request: Request<Body>) -> Result<Response, Infallible>
where
    S: tower::Service<Request<Body>, Response = http::Response<B>, Error = Infallible>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let response = tower::ServiceExt::ready(&mut inner).await?.call(request).await?;
    Ok(response.map(Body::new))
}

/// Passes a session's end to rmcp. Once rmcp accepted it, the session is forgotten here, its
/// calls still running here are cancelled, and the answer is 204 No Content.
async fn end_session<S, B>(inner: S, request: Request<Body>, table: Arc<SessionTable>) -> Result<Response, Infallible>
where
    S: tower::Service<Request<Body>, Response = http::Response<B>, Error = Infallible>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let id = request
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut response = forward(inner, request).await?;
    if response.status().is_success() {
        if let Some(id) = id {
            table.forget(&id);
        }
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
    }
    Ok(response)
}

/// Forwards `request` to (a clone of) rmcp's service, noting that rmcp saw `session` now.
async fn touched<S, B>(
    inner: &S,
    request: Request<Body>,
    session: &LiveSession,
    now: u64,
) -> Result<Response, Infallible>
where
    S: tower::Service<Request<Body>, Response = http::Response<B>, Error = Infallible> + Clone,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    session.touched.fetch_max(now, Ordering::Relaxed);
    forward(inner.clone(), request).await
}

/// Answers the call with its SSE stream ([`CallBody`]), once the stream's first event is there.
async fn answer<H: AnswersCalls + Send + Sync + 'static>(
    handler: Arc<H>,
    session: Arc<LiveSession>,
    parts: http::request::Parts,
    id: RequestId,
    mut params: CallToolRequestParams,
) -> Response {
    let (messages, outbox) = mpsc::unbounded_channel::<Queued>();
    let mut ctx = RequestContext::new(id.clone(), session.peer.clone());
    session
        .calls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.clone(), ctx.ct.clone());
    ctx.meta = params.meta.take().unwrap_or_default();
    ctx.extensions.insert(parts);
    ctx.extensions.insert(CallStream::new(messages));
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let replays = Arc::clone(&session.replays);
    let call = Box::pin(async move {
        let answer = handler
            .answer_call(request, ctx)
            .await
            .and_then(CallAnswer::for_legacy_client);
        session.calls.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        match answer {
            Ok(CallAnswer::Typed(result)) => Outgoing::Message(ServerJsonRpcMessage::response(result, id)),
            Ok(CallAnswer::Passed(output)) => Outgoing::Passed(id, output),
            Err(error) => Outgoing::Message(ServerJsonRpcMessage::error(error, Some(id))),
        }
    });
    let mut body = CallBody::new(call, outbox, replays);
    // The head goes out with the first event: by HEAD_WAIT, there is one (a comment at least).
    body.first = futures::StreamExt::next(&mut body).await.and_then(Result::ok);
    replay::sse_response(Body::from_stream(body))
}

type CallFuture = Pin<Box<dyn Future<Output = Outgoing> + Send>>;

/// The SSE stream of a call answered in front: a priming event, the call's progress as it
/// reports it, then its answer, each with its id ([`replay`]), and a comment every
/// [`KEEP_ALIVE`] while nothing else is sent.
///
/// The call runs as the body is polled, by the connection's task, so its answer reaches the
/// client without a hop between tasks. When the client goes before the stream's end, the call is
/// handed to a task of its own and runs to its end, as under rmcp, its events going on into its
/// replay for the client to resume.
struct CallBody {
    events: CallEvents,
    /// What went out (for a client that loses the stream to resume it).
    sent: replay::Sent,
    replays: Arc<replay::Replays>,
    /// Whether the priming event went out.
    primed: bool,
    /// Whether the stream reached its end (the answer went out).
    finished: bool,
    /// The first event, read before the response's head was sent.
    first: Option<Bytes>,
    keep_alive: Pin<Box<tokio::time::Sleep>>,
}

impl CallBody {
    /// The stream of `call`, whose progress comes on `outbox`, kept in a replay of `replays`.
    fn new(call: CallFuture, outbox: mpsc::UnboundedReceiver<Queued>, replays: Arc<replay::Replays>) -> Self {
        Self {
            events: CallEvents {
                call: Some(call),
                answer: None,
                outbox,
            },
            sent: replay::Sent::new(&replays),
            replays,
            primed: false,
            finished: false,
            first: None,
            keep_alive: Box::pin(tokio::time::sleep(HEAD_WAIT)),
        }
    }
}

/// What a call sends on its stream, in order: its progress, then its answer.
struct CallEvents {
    call: Option<CallFuture>,
    /// The answer, held until the progress reported before it has gone out.
    answer: Option<Outgoing>,
    outbox: mpsc::UnboundedReceiver<Queued>,
}

impl CallEvents {
    /// The next message; `None` once the answer went.
    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outgoing>> {
        if let Some(answer) = self.answer.take() {
            // The call's context, and every sender with it, is gone: what is queued is all.
            return Poll::Ready(Some(match self.outbox.try_recv() {
                Ok(progress) => {
                    self.answer = Some(answer);
                    Outgoing::Message(*progress)
                }
                Err(_) => answer,
            }));
        }
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(Some(progress)) = self.outbox.poll_recv(cx) {
            return Poll::Ready(Some(Outgoing::Message(*progress)));
        }
        if let Poll::Ready(answer) = call.as_mut().poll(cx) {
            self.call = None;
            self.answer = Some(answer);
            return self.poll_message(cx);
        }
        Poll::Pending
    }
}

impl futures::Stream for CallBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        match this.events.poll_message(cx) {
            Poll::Ready(Some(message)) => {
                let event = this.sent.event(&message, this.primed);
                this.primed = true;
                return Poll::Ready(Some(Ok(event)));
            }
            Poll::Ready(None) => {
                this.finished = true;
                // Kept for a client that loses the answer's bytes after they left.
                std::mem::take(&mut this.sent).finish(&this.replays);
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if this.keep_alive.as_mut().poll(cx).is_ready() {
            this.keep_alive.as_mut().reset(tokio::time::Instant::now() + KEEP_ALIVE);
            let comment = b":\n\n";
            if !this.primed {
                this.primed = true;
                return Poll::Ready(Some(Ok(this.sent.primed(comment))));
            }
            return Poll::Ready(Some(Ok(Bytes::from_static(comment))));
        }
        Poll::Pending
    }
}

impl Drop for CallBody {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // The client went before the stream's end: the call runs on, and when the client had
        // an event id (the stream was primed), the rest goes into a replay it can resume.
        let mut events = CallEvents {
            call: self.events.call.take(),
            answer: self.events.answer.take(),
            outbox: std::mem::replace(&mut self.events.outbox, mpsc::unbounded_channel().1),
        };
        let sent = std::mem::take(&mut self.sent);
        let replay = self.primed.then(|| sent.abandon(&self.replays));
        let replays = Arc::clone(&self.replays);
        runtime.spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| events.poll_message(cx)).await {
                if let Some(replay) = &replay {
                    replay.push(&message);
                }
            }
            if let Some(replay) = replay {
                replays.end(&replay);
            }
        });
    }
}

mod answer;
mod replay;
#[cfg(test)]
mod tests;
