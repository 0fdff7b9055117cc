//! The call lane over streamable HTTP: a `tools/call` to an HTTP downstream posted and answered
//! from the calling task, past rmcp's client worker and service loop.
//!
//! Through rmcp, a call to an HTTP downstream goes from the calling task to the connection's
//! service loop (a channel), to the transport's worker (another), to a task of its own that
//! posts it, and its answer comes back the same three hops, with rmcp's bookkeeping at each.
//! The lane posts the call itself, in the session rmcp opened, and reads the response, JSON or
//! an SSE stream, in the calling task: 18.5% fewer gateway instructions a call through an HTTP
//! downstream (callgrind, 320.4k to 261.2k).
//!
//! It keeps what rmcp's path gave a call ([`super::lane`] holds what it shares with the stdio
//! lane):
//! - **The session.** [`SessionRecord`] keeps the session of the messages rmcp posts (its URL,
//!   `mcp-session-id`, `mcp-protocol-version`, bearer and configured headers), recorded by
//!   [`super::call_answers::FastCallAnswers`] from each post that succeeded. Until rmcp has
//!   posted in a session, and whenever the server turns the lane's request away with a 4xx (an
//!   expired session, a sign-in needed, a request it will not take), the call goes through rmcp
//!   instead ([`Failure::Fallback`]), which re-initializes, asks for a sign-in or fails as it
//!   does.
//! - **What else the stream carries.** The call's progress notifications reach its sink and
//!   restart its wait; its log lines are relayed before the answer behind them is read; anything
//!   else (a sampling or elicitation request, another notification) is handed to rmcp as if read
//!   by its transport ([`super::progress::ProgressInOrder::with_injected`]), which answers it.
//! - **Timeouts and cancellation**, as on stdio: rmcp's reasons in `notifications/cancelled`,
//!   posted in the call's session, also for a call whose future is dropped.
//! - **A broken stream** is resumed with a GET carrying `Last-Event-ID`, as rmcp would.
//! - **The connection** goes back to the pool: the stream's end is read after the answer. Plain
//!   HTTP goes on connections of the lane's own, past reqwest's layers, which the calling task
//!   drives itself ([`driven`]); HTTPS, and everything while a proxy is configured, through
//!   reqwest ([`sender`]).
//!
//! A 5xx answer fails the call (the server may have run it; it is not sent again), with the
//! JSON-RPC error it carries when it carries one; so does a 429 (sent again through rmcp, it would
//! only add to the load the server refuses), with its `Retry-After`. A 202 to a request is not an
//! answer. Only servers of protocol revisions with an `initialize` handshake take the lane: later
//! ones expect client context in each request's `_meta` and standard headers, which rmcp adds.
//!
//! ```ignore
//! let result = lane.call(&mut params, budget, ctx.progress.clone(), client, &ctx.cancellation).await?;
//! ```

// Logging is deprecated by the newest MCP revision (SEP-2577), but older servers still log.
#![allow(deprecated)]

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::FutureExt;
use http::{
    HeaderMap, HeaderName, HeaderValue, StatusCode,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE},
};
use muster_core::{ProgressSink, ToolOutput};
use rmcp::model::{CallToolRequestParams, LoggingMessageNotificationParam, ProgressToken, ServerJsonRpcMessage};
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

use bytes::Bytes;
use http_body_util::{BodyDataStream, BodyExt};
use sender::{ResponseBody, Senders};

use super::{
    egress::Egress,
    lane::{CallBudget, CallRequestLine, Clock, Failure, Read, Reading, cancelled, lane_id, read},
    progress::ProgressHook,
    relay::{CallRelay, ClientPeer, progress_update},
    sse::{DEFAULT_MAX_EVENT_SIZE, EventStream},
};
use crate::headers::{LAST_EVENT_ID, SESSION_ID};

/// The largest JSON answer read (rmcp's default).
const MAX_JSON_ANSWER: usize = 16 * 1024 * 1024;
/// The most of an error response's body kept for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How many times a broken stream is resumed.
const MAX_RESUMES: u32 = 3;
/// The wait before resuming a broken stream.
const RESUME_DELAY: Duration = Duration::from_millis(250);
/// How long the rest of a stream whose answer was read may take to end, read in the background.
const DRAIN: Duration = Duration::from_secs(10);

const PROGRESS_TOKEN: &str = "progressToken";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";
/// What a post accepts, as rmcp's.
const ACCEPTED_TYPES: &str = "text/event-stream, application/json";

/// The session an HTTP downstream's connection is in, as rmcp last posted in it.
#[derive(Debug)]
struct HttpSession {
    uri: http::Uri,
    /// Whether its requests go on the lane's plain-HTTP pool ([`sender::plain_http`]).
    plain: bool,
    /// The session's headers, and those of a post.
    headers: HeaderMap,
    post_headers: HeaderMap,
}

impl HttpSession {
    /// A request to the server in the session, with `headers`.
    fn request(&self, method: http::Method, headers: &HeaderMap, body: Bytes) -> http::Request<Bytes> {
        let mut request = http::Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers.clone();
        request
    }

    /// A post of `body` (one JSON-RPC message) in the session.
    fn post(&self, body: Vec<u8>) -> http::Request<Bytes> {
        self.request(http::Method::POST, &self.post_headers, Bytes::from(body))
    }
}

/// The session rmcp posts in, recorded for the lane; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct SessionRecord(Mutex<Option<Arc<HttpSession>>>);

impl SessionRecord {
    /// Records a post of rmcp's that succeeded: to `uri`, in session `id`, with bearer `auth`
    /// and `headers` (the configured ones and `mcp-protocol-version`).
    pub(crate) fn note(
        &self,
        uri: &str,
        id: Option<&str>,
        auth: Option<&str>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let Ok(uri) = http::Uri::try_from(uri) else {
            return;
        };
        let mut map = HeaderMap::with_capacity(headers.len() + 2);
        for (name, value) in headers {
            map.insert(name.clone(), value.clone());
        }
        if let Some(Ok(mut value)) = auth.map(|token| HeaderValue::try_from(format!("Bearer {token}"))) {
            value.set_sensitive(true);
            map.insert(AUTHORIZATION, value);
        }
        if let Some(Ok(value)) = id.map(HeaderValue::try_from) {
            map.insert(SESSION_ID, value);
        }
        let mut post_headers = map.clone();
        post_headers.insert(ACCEPT, HeaderValue::from_static(ACCEPTED_TYPES));
        post_headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
        let session = Arc::new(HttpSession {
            plain: sender::plain_http(&uri),
            uri,
            headers: map,
            post_headers,
        });
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
    }

    fn current(&self) -> Option<Arc<HttpSession>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The calls of one streamable-HTTP connection; see the [module docs](self).
pub(crate) struct HttpLane {
    senders: Senders,
    session: Arc<SessionRecord>,
    to_rmcp: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    relay: CallRelay,
    next: AtomicU64,
}

impl fmt::Debug for HttpLane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpLane").finish_non_exhaustive()
    }
}

impl HttpLane {
    /// A lane posting in the session `session` records, on connections `egress` allows
    /// ([`sender`]); what it does not take goes to rmcp through `to_rmcp`, log lines through
    /// `relay`.
    pub(crate) fn new(
        egress: Egress,
        session: Arc<SessionRecord>,
        to_rmcp: mpsc::UnboundedSender<ServerJsonRpcMessage>,
        relay: CallRelay,
    ) -> Self {
        Self {
            senders: Senders::new(egress),
            session,
            to_rmcp,
            relay,
            next: AtomicU64::new(1),
        }
    }

    /// The lane with `senders` (a test sends through reqwest alone).
    #[cfg(test)]
    fn with_senders(mut self, senders: Senders) -> Self {
        self.senders = senders;
        self
    }

    /// Calls the tool `params` name, within `budget` and until `cancel`; its progress goes to
    /// `progress`, the server's requests during the call to `client`. On
    /// [`Failure::Fallback`] nothing ran and `params` are as they were: the call goes to rmcp.
    pub(crate) async fn call(
        &self,
        params: &mut CallToolRequestParams,
        budget: CallBudget,
        progress: Option<ProgressSink>,
        client: Option<ClientPeer>,
        cancel: &CancellationToken,
        reading: Reading,
    ) -> Result<ToolOutput, Failure> {
        let Some(session) = self.session.current() else {
            tracing::debug!("no session recorded yet for the HTTP lane; the call goes through rmcp");
            return Err(Failure::Fallback);
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = lane_id(n);
        let token = ProgressToken(id.clone());
        // The call's token goes in its `_meta` for the request written, and out again: on a
        // fallback rmcp sends `params` with a token of its own.
        let before = params.meta.get_or_insert_default().remove(PROGRESS_TOKEN);
        params.meta.get_or_insert_default().set_progress_token(token.clone());
        let body = serde_json::to_vec(&CallRequestLine::new(&id, params));
        let meta = params.meta.get_or_insert_default();
        match before {
            Some(before) => meta.insert(PROGRESS_TOKEN.to_owned(), before),
            None => meta.remove(PROGRESS_TOKEN),
        };
        let body = body.map_err(|e| Failure::Send(e.into()))?;
        #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
        let mut request = session.post(body);
        #[cfg(feature = "otel")]
        request.headers_mut().extend(crate::trace_context::call_headers(params));
        // Registered before it is sent: a sampling request the call causes finds its client.
        let _in_flight = self.relay.register(token, None, client);
        let mut call = Outstanding {
            lane: self,
            session,
            n,
            clock: Clock::start(budget),
            progressed: None,
            progress,
            reading,
            done: false,
        };
        let answer = call.run(request, cancel).await;
        call.done = true;
        answer
    }
}

/// A call posted and not yet answered: dropped while it waits, it is cancelled downstream.
struct Outstanding<'a> {
    lane: &'a HttpLane,
    session: Arc<HttpSession>,
    n: u64,
    clock: Clock,
    progressed: Option<Instant>,
    progress: Option<ProgressSink>,
    reading: Reading,
    /// Answered, refused or already cancelled: nothing to tell the server.
    done: bool,
}

impl Outstanding<'_> {
    async fn run(&mut self, request: http::Request<Bytes>, cancel: &CancellationToken) -> Result<ToolOutput, Failure> {
        let sent = self.lane.senders.send(self.session.plain, request);
        let response = match self.bounded(sent, cancel).await? {
            Ok(response) => response,
            Err(e) => {
                // Not taken (the connection failed): nothing to cancel.
                self.done = true;
                return Err(Failure::Send(e));
            }
        };
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            // Sending it again through rmcp would only add to the load the server refuses.
            self.done = true;
            let retry = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(|after| format!(" (retry after {after})"))
                .unwrap_or_default();
            return Err(Failure::Lost(format!("HTTP {status}{retry}")));
        }
        if status.is_client_error() || status.is_redirection() {
            // Turned away before it ran: rmcp sends it, and does what the status asks.
            tracing::debug!(%status, "a call on the HTTP lane was turned away; it goes through rmcp");
            self.done = true;
            return Err(Failure::Fallback);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Err(Failure::Lost(format!(
                "the server answered the call with {status} and no result"
            )));
        }
        if !status.is_success() {
            let body = self.bounded(read_body(response, MAX_ERROR_BODY), cancel).await?;
            return Err(match read(&body, self.reading_of()) {
                Read::Answer(m, Err(refused)) if m == self.n => refused,
                _ => Failure::Lost(format!("HTTP {status}: {}", String::from_utf8_lossy(&body))),
            });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with(EVENT_STREAM) {
            return self.stream(response, cancel).await;
        }
        if !content_type.starts_with(JSON) {
            return Err(Failure::Lost(format!(
                "the answer's content type is {content_type:?}, neither {JSON} nor {EVENT_STREAM}"
            )));
        }
        let body = self.bounded(read_body(response, MAX_JSON_ANSWER + 1), cancel).await?;
        if body.len() > MAX_JSON_ANSWER {
            return Err(Failure::Lost(format!(
                "the answer is larger than {MAX_JSON_ANSWER} bytes"
            )));
        }
        match read(&body, self.reading_of()) {
            Read::Answer(m, answer) if m == self.n => answer.and_then(|found| found.output(self.reading)),
            _ => Err(Failure::Lost(format!(
                "the server's JSON answer is not the call's: {}",
                String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)])
            ))),
        }
    }

    /// Reads the call's SSE stream to its answer, resuming it when it breaks.
    async fn stream(
        &mut self,
        response: http::Response<ResponseBody>,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, Failure> {
        let mut events = EventStream::new(BodyDataStream::new(response.into_body()), DEFAULT_MAX_EVENT_SIZE);
        let mut resumes = 0;
        loop {
            let broken = match self.bounded(events.next(), cancel).await? {
                Ok(Some(event)) => {
                    if event.event == "message"
                        && !event.data.is_empty()
                        && let Some(answer) = self.take(&event.data).await
                    {
                        finish_in_background(async move { while let Ok(Some(_)) = events.next().await {} });
                        return answer;
                    }
                    continue;
                }
                Ok(None) => "the stream ended before the answer".to_owned(),
                Err(e) => format!("the stream broke before the answer: {e}"),
            };
            let Some(last) = events.last_id().map(str::to_owned) else {
                return Err(Failure::Lost(broken));
            };
            if resumes == MAX_RESUMES {
                return Err(Failure::Lost(format!("{broken}, and was resumed {MAX_RESUMES} times")));
            }
            resumes += 1;
            self.bounded(tokio::time::sleep(RESUME_DELAY), cancel).await?;
            let resumed = self.resume(&last, cancel).await?;
            events = EventStream::new(BodyDataStream::new(resumed.into_body()), DEFAULT_MAX_EVENT_SIZE);
        }
    }

    /// The call's stream again, from after event `last`.
    async fn resume(
        &mut self,
        last: &str,
        cancel: &CancellationToken,
    ) -> Result<http::Response<ResponseBody>, Failure> {
        let last = HeaderValue::try_from(last).map_err(|e| Failure::Lost(format!("event id {last:?}: {e}")))?;
        let mut headers = self.session.headers.clone();
        headers.insert(ACCEPT, HeaderValue::from_static(EVENT_STREAM));
        headers.insert(LAST_EVENT_ID, last);
        let request = self.session.request(http::Method::GET, &headers, Bytes::new());
        let sent = self.lane.senders.send(self.session.plain, request);
        let response = self
            .bounded(sent, cancel)
            .await?
            .map_err(|e| Failure::Lost(format!("resuming the stream failed: {e}")))?;
        if !response.status().is_success() {
            return Err(Failure::Lost(format!(
                "resuming the stream failed: HTTP {}",
                response.status()
            )));
        }
        Ok(response)
    }

    /// How [`read`] reads the result of an answer to lane call `n`: as this call says when it
    /// is this call's.
    fn reading_of(&self) -> impl Fn(u64) -> Reading + use<> {
        let (call, reading) = (self.n, self.reading);
        move |n| if n == call { reading } else { Reading::Passed }
    }

    /// Takes one message of the stream: the call's answer, when it is; its progress and log
    /// lines are relayed, anything else goes to rmcp.
    async fn take(&mut self, data: &str) -> Option<Result<ToolOutput, Failure>> {
        match read(data.as_bytes(), self.reading_of()) {
            Read::Answer(m, answer) if m == self.n => return Some(answer.and_then(|found| found.output(self.reading))),
            Read::Progress(m, params) if m == self.n => {
                self.progressed = Some(Instant::now());
                if let Some(sink) = &self.progress {
                    sink.report(progress_update(&params));
                }
                return None;
            }
            Read::Notification(method, params) if method == "notifications/message" => {
                if let Ok(params) = serde_json::from_str::<LoggingMessageNotificationParam>(params.get()) {
                    self.lane.relay.logging(&params).await;
                    return None;
                }
            }
            _ => {}
        }
        match serde_json::from_str::<ServerJsonRpcMessage>(data) {
            Ok(message) => {
                let _ = self.lane.to_rmcp.send(message);
            }
            Err(e) => tracing::debug!(error = %e, "a message on a call's stream that is not MCP, skipped"),
        }
        None
    }

    /// `work`, unless the call is cancelled or a timeout runs out first (the server is then
    /// told).
    async fn bounded<T>(&mut self, work: impl Future<Output = T>, cancel: &CancellationToken) -> Result<T, Failure> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return Ok(out),
                () = cancel.cancelled() => {
                    self.stop("cancelled by the client");
                    return Err(Failure::Cancelled);
                }
                () = tokio::time::sleep_until(self.clock.due(self.progressed)) => {
                    if let Some((after, reason)) = self.clock.expired(self.progressed) {
                        self.stop(reason);
                        return Err(Failure::TimedOut(after));
                    }
                }
            }
        }
    }

    /// Stops waiting and tells the server, posting `notifications/cancelled` in the call's
    /// session from a task of its own.
    fn stop(&mut self, reason: &str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let Ok(body) = serde_json::to_vec(&cancelled(self.n, reason)) else {
            return;
        };
        let request = self.session.post(body);
        let (senders, plain) = (self.lane.senders.clone(), self.session.plain);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(DRAIN, senders.send(plain, request)).await;
            });
        }
    }
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.stop("the gateway stopped waiting for the call");
    }
}

/// Up to `max` bytes of `response`'s body.
async fn read_body(response: http::Response<ResponseBody>, max: usize) -> Vec<u8> {
    let mut body = response.into_body();
    let mut read = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let room = max.saturating_sub(read.len());
        read.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if read.len() >= max {
            break;
        }
    }
    read
}

/// Runs `work` (reading the rest of a response, so its connection can be used again): to its
/// end at once when it can, otherwise in a task of its own, for at most [`DRAIN`].
pub(crate) fn finish_in_background(work: impl Future<Output = ()> + Send + 'static) {
    let mut work = Box::pin(work);
    if work.as_mut().now_or_never().is_none() {
        tokio::spawn(async move {
            let _ = tokio::time::timeout(DRAIN, work).await;
        });
    }
}

mod driven;
mod sender;
#[cfg(test)]
mod tests;
