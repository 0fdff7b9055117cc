//! A client of the legacy MCP HTTP+SSE transport (protocol 2024-11-05), as an rmcp transport.
//!
//! rmcp 3 has clients for stdio and streamable HTTP only; servers that still speak the older
//! transport are reached with [`SseClientTransport`]. The protocol:
//!
//! 1. `GET <url>` (`Accept: text/event-stream`) opens a Server-Sent Events stream. Its first event
//!    is `event: endpoint` whose data is the URL to POST messages to, relative to the stream's URL
//!    or absolute; it usually carries a session id in its query.
//! 2. Every client message is POSTed as JSON to that endpoint; the server answers `202 Accepted`.
//! 3. Every server message (responses, notifications, server-to-client requests) arrives on the GET
//!    stream as an `event: message` whose data is the JSON-RPC message.
//!
//! The transport connects lazily, on the first message sent (the MCP `initialize`), so creating it
//! does no I/O and needs no runtime; `client.serve(transport)` works as with rmcp's own transports.
//! The custom headers go on the GET and on every POST. Everything is bounded: the GET's response
//! and its `endpoint` event must arrive within the connect timeout, each POST within the request
//! timeout, and one SSE event may not exceed the maximum event size. An endpoint on another origin
//! than the stream's URL is refused (it would receive the custom headers, often credentials), and
//! redirects are followed only within the origin. When the stream ends or fails, the transport ends
//! and rmcp sees the connection closed. POSTs are not serialized: like rmcp's streamable-HTTP client,
//! concurrent sends are concurrent requests. URLs in errors and logs carry no query, fragment or
//! user info (where tokens and session ids live).
//!
//! ```ignore
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use crate::sse::{SseClientConfig, SseClientTransport};
//! use rmcp::ServiceExt;
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert("x-api-key", http::HeaderValue::from_static("demo"));
//! let config = SseClientConfig::new("http://127.0.0.1:3001/sse")?
//!     .with_headers(headers)
//!     .with_connect_timeout(Duration::from_secs(10));
//! let client = ().serve(SseClientTransport::new(config)?).await?;
//! let tools = client.list_all_tools().await?;
//! println!("{} tools", tools.len());
//! client.cancel().await?;
//! # Ok(()) }
//! ```

use std::{
    borrow::Cow,
    collections::VecDeque,
    fmt,
    pin::Pin,
    sync::{Arc, PoisonError},
    time::Duration,
};

use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use reqwest::Url;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    service::RoleClient,
    transport::Transport,
};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::egress::{Egress, LinkLocalRefused};

/// The default bound of the GET's response plus its `endpoint` event.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound of one POST.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound of one SSE event (its data plus its current line), in bytes.
pub(crate) const DEFAULT_MAX_EVENT_SIZE: usize = 16 * 1024 * 1024;

/// How many received messages wait for the client before the stream is read no further.
const INBOUND_CAPACITY: usize = 64;
/// How much of a refused POST's body goes into the error.
const MAX_ERROR_BODY: usize = 512;
/// How long the body of a refused answer is read for its error.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(1);
/// How many redirects one request follows (within the origin).
const MAX_REDIRECTS: usize = 10;

/// What a non-SSE answer to the stream's GET most likely means.
pub(crate) const NOT_AN_SSE_STREAM: &str = "not an SSE stream; is it a legacy HTTP+SSE (2024-11-05) endpoint? \
     (streamable-HTTP servers need type: streamable-http)";

/// Why the legacy SSE transport failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseTransportError {
    /// The server URL is not an absolute http(s) URL.
    #[error("invalid sse url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given (without its query).
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The URL's host is an address its [`Egress`] refuses.
    #[error(transparent)]
    Refused(#[from] LinkLocalRefused),
    /// The GET failed before any response.
    #[error("GET {url} failed: {source}")]
    Connect {
        /// The stream's URL.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The GET got no response within the connect timeout.
    #[error("GET {url} got no response within {}s", after.as_secs_f32())]
    ConnectTimeout {
        /// The stream's URL.
        url: String,
        /// The connect timeout.
        after: Duration,
    },
    /// The GET or a POST was refused for want of authorization: a 401, or a 403 with a
    /// `WWW-Authenticate` challenge (insufficient scope).
    #[error("{url} requires authorization (HTTP {status}){}", crate::answer_text::challenge_text(.challenge.as_deref()))]
    AuthRequired {
        /// The URL refused (the stream's, or the endpoint's).
        url: String,
        /// 401, or 403.
        status: StatusCode,
        /// The `WWW-Authenticate` challenge, when the answer carried one.
        challenge: Option<String>,
    },
    /// The GET was answered with a non-success status.
    #[error("GET {url} answered {status}{}, {NOT_AN_SSE_STREAM}", crate::answer_text::said_text(.said))]
    Status {
        /// The stream's URL.
        url: String,
        /// The status.
        status: StatusCode,
        /// The start of the answer's body, trimmed.
        said: String,
    },
    /// The GET was answered with something else than `text/event-stream`.
    #[error(
        "GET {url} answered content-type {content_type:?}, not text/event-stream; is it a legacy HTTP+SSE \
         (2024-11-05) endpoint? (streamable-HTTP servers need type: streamable-http)"
    )]
    NotEventStream {
        /// The stream's URL.
        url: String,
        /// The content type received (empty when none).
        content_type: String,
    },
    /// The stream sent no `endpoint` event within the connect timeout.
    #[error(
        "the SSE stream of {url} sent no `endpoint` event within {}s; is it a legacy HTTP+SSE (2024-11-05) server?",
        after.as_secs_f32()
    )]
    NoEndpoint {
        /// The stream's URL.
        url: String,
        /// The connect timeout.
        after: Duration,
    },
    /// The stream ended before its `endpoint` event.
    #[error("the SSE stream of {url} ended before its `endpoint` event")]
    ClosedBeforeEndpoint {
        /// The stream's URL.
        url: String,
    },
    /// The `endpoint` event's data is not a URL.
    #[error("the `endpoint` event's data {endpoint:?} is not a valid URL: {reason}")]
    InvalidEndpoint {
        /// The event's data (without its query).
        endpoint: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The endpoint is on another origin than the stream; it would get the custom headers.
    #[error("refused the `endpoint` {endpoint}: it is not on the origin of the SSE stream {url}")]
    CrossOriginEndpoint {
        /// The resolved endpoint.
        endpoint: String,
        /// The stream's URL.
        url: String,
    },
    /// Reading the SSE stream failed.
    #[error("reading the SSE stream failed: {0}")]
    Stream(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// One SSE event exceeded the maximum size.
    #[error("an SSE event exceeded the maximum size of {max} bytes")]
    EventTooLarge {
        /// The bound.
        max: usize,
    },
    /// A message could not be encoded as JSON.
    #[error("cannot encode the message: {0}")]
    Encode(#[source] serde_json::Error),
    /// A POST failed before any response (or timed out).
    #[error("POST {endpoint} failed: {source}")]
    Post {
        /// The endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// A POST was answered with a non-success status.
    #[error("POST {endpoint} answered {status}{}", crate::answer_text::said_text(.body))]
    PostStatus {
        /// The endpoint.
        endpoint: String,
        /// The status.
        status: StatusCode,
        /// The start of the answer's body.
        body: String,
    },
    /// Connecting failed before; the transport does not retry.
    #[error("the SSE connection failed: {0}")]
    ConnectFailed(String),
    /// The transport was closed, or its stream ended.
    #[error("the SSE transport is closed")]
    Closed,
}

/// Where and how [`SseClientTransport`] connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub(crate) struct SseClientConfig {
    /// The URL of the SSE stream (an absolute http or https URL).
    pub url: Url,
    /// Headers sent on the GET and on every POST.
    pub headers: HeaderMap,
    /// Bound of the GET's response plus its `endpoint` event.
    pub connect_timeout: Duration,
    /// Bound of one POST.
    pub request_timeout: Duration,
    /// Bound of one SSE event, in bytes.
    pub max_event_size: usize,
    /// Where its connections may go.
    pub egress: Egress,
}

impl SseClientConfig {
    /// A configuration for the SSE stream at `url`, with no headers and the default bounds.
    pub(crate) fn new(url: &str) -> Result<Self, SseTransportError> {
        let invalid = |reason: String| SseTransportError::InvalidUrl {
            url: url.split(['?', '#']).next().unwrap_or_default().to_owned(),
            reason,
        };
        let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid(format!("scheme {:?} is not http or https", parsed.scheme())));
        }
        if parsed.host().is_none() {
            return Err(invalid("no host".to_owned()));
        }
        Ok(Self {
            url: parsed,
            headers: HeaderMap::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_event_size: DEFAULT_MAX_EVENT_SIZE,
            egress: Egress::Open,
        })
    }

    /// Sends `headers` on the GET and on every POST.
    pub(crate) fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// Bounds the GET's response plus its `endpoint` event.
    pub(crate) fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds each POST.
    pub(crate) fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Holds its connections to `egress` (the GET's and every POST's).
    pub(crate) fn with_egress(mut self, egress: Egress) -> Self {
        self.egress = egress;
        self
    }
}

/// An rmcp client transport over the legacy HTTP+SSE transport; see the [module docs](self).
///
/// It connects on the first message sent. Dropping or closing it ends the GET stream.
pub(crate) struct SseClientTransport {
    shared: Arc<Shared>,
    inbound: mpsc::Receiver<ServerJsonRpcMessage>,
    _shutdown_on_drop: DropGuard,
}

impl fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("url", &self.shared.display_url)
            .finish_non_exhaustive()
    }
}

impl SseClientTransport {
    /// A transport for `config`; no I/O happens until the first message is sent.
    pub(crate) fn new(config: SseClientConfig) -> Result<Self, SseTransportError> {
        config.egress.check_url(&config.url)?;
        let origin = config.url.origin();
        let mut builder = reqwest::Client::builder();
        if let Some(resolver) = config.egress.resolver() {
            builder = builder.dns_resolver(resolver);
        }
        let client = builder
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else if attempt.url().origin() == origin {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            }))
            .build()
            .map_err(SseTransportError::Client)?;
        let (inbound_tx, inbound) = mpsc::channel(INBOUND_CAPACITY);
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            display_url: redact(&config.url),
            client,
            config,
            conn: tokio::sync::Mutex::new(Conn::Idle),
            inbound_tx: std::sync::Mutex::new(Some(inbound_tx)),
            shutdown: shutdown.clone(),
            ended: CancellationToken::new(),
        });
        Ok(Self {
            shared,
            inbound,
            _shutdown_on_drop: shutdown.drop_guard(),
        })
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseTransportError;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let shared = self.shared.clone();
        let body = serde_json::to_vec(&item).map_err(SseTransportError::Encode);
        async move {
            let body = body?;
            let endpoint = shared.endpoint().await?;
            shared.post(&endpoint, body).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.inbound.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.shutdown.cancel();
        self.shared.take_inbound_tx();
        self.inbound.close();
        Ok(())
    }
}

/// The state shared by the transport, its send futures and its reader task.
#[derive(Debug)]
struct Shared {
    config: SseClientConfig,
    display_url: String,
    client: reqwest::Client,
    conn: tokio::sync::Mutex<Conn>,
    /// Handed to the reader task when connected; dropped when connecting fails or on close.
    inbound_tx: std::sync::Mutex<Option<mpsc::Sender<ServerJsonRpcMessage>>>,
    /// Cancelled by close() and by dropping the transport.
    shutdown: CancellationToken,
    /// Cancelled when the reader task ends (the stream ended or failed).
    ended: CancellationToken,
}

#[derive(Debug)]
enum Conn {
    Idle,
    Open(Url),
    Failed(String),
}

impl Shared {
    fn take_inbound_tx(&self) -> Option<mpsc::Sender<ServerJsonRpcMessage>> {
        self.inbound_tx.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn is_closed(&self) -> bool {
        self.shutdown.is_cancelled() || self.ended.is_cancelled()
    }

    /// The POST endpoint, connecting first when not yet connected.
    async fn endpoint(self: &Arc<Self>) -> Result<Url, SseTransportError> {
        if self.is_closed() {
            return Err(SseTransportError::Closed);
        }
        let mut conn = self.conn.lock().await;
        let endpoint = match &*conn {
            Conn::Open(endpoint) => endpoint.clone(),
            Conn::Failed(reason) => return Err(SseTransportError::ConnectFailed(reason.clone())),
            Conn::Idle => {
                let opened = tokio::select! {
                    opened = self.open() => opened,
                    () = self.shutdown.cancelled() => Err(SseTransportError::Closed),
                };
                match opened {
                    Ok(endpoint) => {
                        *conn = Conn::Open(endpoint.clone());
                        endpoint
                    }
                    Err(e) => {
                        tracing::debug!(url = %self.display_url, error = %e, "sse connect failed");
                        *conn = Conn::Failed(e.to_string());
                        self.take_inbound_tx();
                        return Err(e);
                    }
                }
            }
        };
        drop(conn);
        if self.is_closed() {
            return Err(SseTransportError::Closed);
        }
        Ok(endpoint)
    }

    /// Opens the GET stream, waits for its `endpoint` event and starts the reader task.
    async fn open(self: &Arc<Self>) -> Result<Url, SseTransportError> {
        let url = &self.config.url;
        let after = self.config.connect_timeout;
        let deadline = tokio::time::Instant::now() + after;
        let mut headers = self.config.headers.clone();
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let request = self.client.get(url.clone()).headers(headers).send();
        let response = tokio::time::timeout_at(deadline, request)
            .await
            .map_err(|_| SseTransportError::ConnectTimeout {
                url: self.display_url.clone(),
                after,
            })?
            .map_err(|source| SseTransportError::Connect {
                url: self.display_url.clone(),
                source,
            })?;
        if let Some(refused) = auth_refusal(&self.display_url, &response) {
            return Err(refused);
        }
        let status = response.status();
        if !status.is_success() {
            return Err(SseTransportError::Status {
                url: self.display_url.clone(),
                status,
                said: error_body(response).await,
            });
        }
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if !essence.eq_ignore_ascii_case("text/event-stream") {
            return Err(SseTransportError::NotEventStream {
                url: self.display_url.clone(),
                content_type,
            });
        }
        // Redirects stay within the origin, so the final URL is the base of a relative endpoint.
        let base = response.url().clone();
        let mut events = EventStream::new(response.bytes_stream(), self.config.max_event_size);
        let mut early = VecDeque::new();
        let endpoint = loop {
            let event = tokio::time::timeout_at(deadline, events.next()).await.map_err(|_| {
                SseTransportError::NoEndpoint {
                    url: self.display_url.clone(),
                    after,
                }
            })??;
            match event {
                None => {
                    return Err(SseTransportError::ClosedBeforeEndpoint {
                        url: self.display_url.clone(),
                    });
                }
                Some(event) if event.event == "endpoint" => break resolve_endpoint(url, &base, &event.data)?,
                Some(event) => early.push_back(event),
            }
        };
        // Events before the endpoint (unusual) are still delivered, first.
        early.append(&mut events.ready);
        events.ready = early;
        let inbound_tx = self.take_inbound_tx().ok_or(SseTransportError::Closed)?;
        tracing::debug!(url = %self.display_url, endpoint = %redact(&endpoint), "sse stream open");
        tokio::spawn(read_stream(
            events,
            inbound_tx,
            self.shutdown.clone(),
            self.ended.clone(),
            self.display_url.clone(),
        ));
        Ok(endpoint)
    }

    /// POSTs one JSON message to the endpoint.
    async fn post(&self, endpoint: &Url, body: Vec<u8>) -> Result<(), SseTransportError> {
        let display = || redact(endpoint);
        let mut headers = self.config.headers.clone();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let response = self
            .client
            .post(endpoint.clone())
            .headers(headers)
            .body(body)
            .timeout(self.config.request_timeout)
            .send()
            .await
            .map_err(|source| SseTransportError::Post {
                endpoint: display(),
                source,
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        if let Some(refused) = auth_refusal(&display(), &response) {
            return Err(refused);
        }
        Err(SseTransportError::PostStatus {
            endpoint: display(),
            status,
            body: error_body(response).await,
        })
    }
}

/// The refusal `response` is when it asks for authorization: a 401, or a 403 with a challenge.
fn auth_refusal(url: &str, response: &reqwest::Response) -> Option<SseTransportError> {
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty());
    let status = response.status();
    (status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN && challenge.is_some()).then(|| {
        SseTransportError::AuthRequired {
            url: url.to_owned(),
            status,
            challenge,
        }
    })
}

/// The start of a refused answer's body, as text: what arrives of it within
/// [`ERROR_BODY_WAIT`] (a refusal may come with a stream that does not end).
async fn error_body(mut response: reqwest::Response) -> String {
    let deadline = tokio::time::Instant::now() + ERROR_BODY_WAIT;
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            Ok(Ok(None) | Err(_)) | Err(_) => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    crate::answer_text::trimmed(&String::from_utf8_lossy(&body))
}

/// Reads the stream until it ends, fails or the transport shuts down, handing messages to the
/// transport's receiver; then ends the transport.
async fn read_stream<S, B, E>(
    mut events: EventStream<S>,
    inbound_tx: mpsc::Sender<ServerJsonRpcMessage>,
    shutdown: CancellationToken,
    ended: CancellationToken,
    url: String,
) where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    let _ended = ended.drop_guard();
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return,
            next = events.next() => next,
        };
        let event = match next {
            Ok(Some(event)) => event,
            Ok(None) => {
                tracing::info!(%url, "the SSE stream ended; the transport is closed");
                return;
            }
            Err(e) => {
                tracing::warn!(%url, error = %e, "the SSE stream failed; the transport is closed");
                return;
            }
        };
        if event.event != "message" {
            tracing::debug!(%url, event = %event.event, "ignored an SSE event");
            continue;
        }
        let message = match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(%url, error = %e, "ignored an SSE message that is not a JSON-RPC message");
                continue;
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            sent = inbound_tx.send(message) => if sent.is_err() { return },
        }
    }
}

/// Resolves the `endpoint` event's `data` against `base` (the stream's final URL) and refuses it
/// unless it is an http(s) URL on the origin of `url` (the configured stream URL).
fn resolve_endpoint(url: &Url, base: &Url, data: &str) -> Result<Url, SseTransportError> {
    let raw = data.trim();
    let invalid = |reason: String| SseTransportError::InvalidEndpoint {
        endpoint: raw.split(['?', '#']).next().unwrap_or_default().to_owned(),
        reason,
    };
    if raw.is_empty() {
        return Err(invalid("it is empty".to_owned()));
    }
    let endpoint = base.join(raw).map_err(|e| invalid(e.to_string()))?;
    let origin = url.origin();
    if !matches!(endpoint.scheme(), "http" | "https") || !origin.is_tuple() || endpoint.origin() != origin {
        return Err(SseTransportError::CrossOriginEndpoint {
            endpoint: redact(&endpoint),
            url: redact(url),
        });
    }
    Ok(endpoint)
}

/// A URL without user info, query and fragment, for errors and logs.
pub(crate) fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The event type; `message` when the event named none.
    pub(crate) event: Cow<'static, str>,
    /// The data lines, joined with `\n`.
    pub(crate) data: String,
    /// The last event id seen so far, if any.
    pub(crate) id: Option<String>,
}

/// An incremental parser of the `text/event-stream` format (the WHATWG HTML "server-sent events"
/// parsing rules): lines end with CRLF, LF or CR, possibly split across chunks; `:` starts a
/// comment; `data` lines accumulate; a blank line dispatches the event when it has data.
#[derive(Debug)]
struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    bom_checked: bool,
    event: String,
    data: String,
    id: Option<String>,
    max_event_size: usize,
}

impl SseParser {
    fn new(max_event_size: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            bom_checked: false,
            event: String::new(),
            data: String::new(),
            id: None,
            max_event_size,
        }
    }

    /// Parses `chunk`, appending each event it completes to `out`. A line that is whole in
    /// the chunk is read where it lies; only a line split across chunks is copied.
    fn feed(&mut self, mut chunk: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseTransportError> {
        while !chunk.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    chunk = &chunk[1..];
                    continue;
                }
            }
            let Some(end) = memchr::memchr2(b'\r', b'\n', chunk) else {
                self.line.extend_from_slice(chunk);
                return self.check_size(self.line.len());
            };
            self.after_cr = chunk[end] == b'\r';
            let (line, rest) = (&chunk[..end], &chunk[end + 1..]);
            chunk = rest;
            if self.line.is_empty() {
                self.check_size(line.len())?;
                self.take_line(line, out)?;
            } else {
                let mut buffer = std::mem::take(&mut self.line);
                buffer.extend_from_slice(line);
                self.check_size(buffer.len())?;
                let taken = self.take_line(&buffer, out);
                buffer.clear();
                self.line = buffer;
                taken?;
            }
        }
        Ok(())
    }

    /// Whether a line of `line` bytes fits in the event with the data read so far.
    fn check_size(&self, line: usize) -> Result<(), SseTransportError> {
        if line.saturating_add(self.data.len()) > self.max_event_size {
            return Err(SseTransportError::EventTooLarge {
                max: self.max_event_size,
            });
        }
        Ok(())
    }

    /// Takes one whole `line` (without its end).
    fn take_line(&mut self, mut line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseTransportError> {
        if !self.bom_checked {
            self.bom_checked = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
        } else if line[0] != b':' {
            let (field, value) = match memchr::memchr(b':', line) {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            let value = String::from_utf8_lossy(value);
            match field {
                b"event" => self.event = value.into_owned(),
                b"data" => {
                    // With its line end: one allocation for the usual one-line event.
                    self.data.reserve(value.len() + 1);
                    self.data.push_str(&value);
                    self.data.push('\n');
                    self.check_size(0)?;
                }
                b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
                // `retry` only matters to a reconnecting client; unknown fields are ignored.
                _ => {}
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        out.push_back(SseEvent {
            event: if event.is_empty() {
                Cow::Borrowed("message")
            } else {
                Cow::Owned(event)
            },
            data,
            id: self.id.clone(),
        });
    }
}

/// The events of a byte stream.
pub(crate) struct EventStream<S> {
    body: Pin<Box<S>>,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
}

impl<S, B, E> EventStream<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    pub(crate) fn new(body: S, max_event_size: usize) -> Self {
        Self {
            body: Box::pin(body),
            parser: SseParser::new(max_event_size),
            ready: VecDeque::new(),
        }
    }

    /// The last event id the stream gave, even on an event with no data (a priming event).
    pub(crate) fn last_id(&self) -> Option<&str> {
        self.parser.id.as_deref()
    }

    /// The next event; `None` when the stream ended (an unfinished event is dropped).
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, SseTransportError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.parser.feed(chunk.as_ref(), &mut self.ready)?,
                Some(Err(e)) => return Err(SseTransportError::Stream(Box::new(e))),
                None => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{convert::Infallible, sync::Mutex, time::Instant};

    use axum::{
        Router,
        body::Body,
        extract::State,
        response::Response,
        routing::{get, post},
    };
    use serde_json::{Value, json};

    use super::*;

    fn event(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.to_owned().into(),
            data: data.to_owned(),
            id: id.map(str::to_owned),
        }
    }

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new(DEFAULT_MAX_EVENT_SIZE);
        let mut out = VecDeque::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out).expect("parses");
        }
        out.into_iter().collect()
    }

    fn parse(text: &str) -> Vec<SseEvent> {
        parse_chunks(&[text.as_bytes()])
    }

    #[test]
    fn parses_fields_comments_and_multi_line_data() {
        let events = parse(
            ": a comment\nevent: endpoint\ndata: /message?sessionId=1\n\n\
             id: 7\ndata: first\ndata:second\ndata:  indented\n\n\
             event: message\ndata: {\"a\": 1}\n\n",
        );
        assert_eq!(
            events,
            [
                event("endpoint", "/message?sessionId=1", None),
                event("message", "first\nsecond\n indented", Some("7")),
                event("message", "{\"a\": 1}", Some("7")),
            ]
        );
    }

    #[test]
    fn crlf_cr_and_lf_line_endings_are_equivalent() {
        let lf = "event: endpoint\ndata: /m\n\n: c\ndata: a\ndata: b\n\n";
        let expected = [event("endpoint", "/m", None), event("message", "a\nb", None)];
        assert_eq!(parse(lf), expected);
        assert_eq!(parse(&lf.replace('\n', "\r\n")), expected);
        assert_eq!(parse(&lf.replace('\n', "\r")), expected);
    }

    #[test]
    fn chunk_boundaries_do_not_change_the_events() {
        let text = "\u{feff}event: endpoint\r\ndata: /m?s=\u{e9}\u{1f600}\r\n\r\n: ping\r\nid: 1\r\ndata: x\r\ndata: y\r\n\r\n";
        let bytes = text.as_bytes();
        let whole = parse_chunks(&[bytes]);
        assert_eq!(
            whole,
            [
                event("endpoint", "/m?s=\u{e9}\u{1f600}", None),
                event("message", "x\ny", Some("1"))
            ]
        );
        for split in 0..=bytes.len() {
            assert_eq!(
                parse_chunks(&[&bytes[..split], &bytes[split..]]),
                whole,
                "split at {split}"
            );
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_chunks(&singles), whole);
    }

    #[test]
    fn a_crlf_split_across_chunks_ends_one_line() {
        let events = parse_chunks(&[b"data: a\r", b"\n", b"\r", b"\ndata: b\n\n"]);
        assert_eq!(events, [event("message", "a", None), event("message", "b", None)]);
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_empty_data_is() {
        // A blank line with no data resets the event type and dispatches nothing.
        assert_eq!(parse("event: x\n\ndata: y\n\n"), [event("message", "y", None)]);
        // A `data` field without a value (with or without the colon) is an empty line of data.
        assert_eq!(parse("data\n\n"), [event("message", "", None)]);
        assert_eq!(parse("data:\n\n"), [event("message", "", None)]);
        assert_eq!(parse("data:\ndata:\n\n"), [event("message", "\n", None)]);
    }

    #[test]
    fn retry_unknown_fields_and_ids_with_nul_are_ignored() {
        assert_eq!(
            parse("retry: 10\nfoo: bar\nid: a\0b\ndata: x\n\n"),
            [event("message", "x", None)]
        );
        assert_eq!(
            parse("id: 1\ndata: x\n\nid\ndata: y\n\n")[1],
            event("message", "y", Some(""))
        );
    }

    #[test]
    fn an_event_larger_than_the_bound_is_an_error() {
        let mut out = VecDeque::new();
        let mut parser = SseParser::new(16);
        let unterminated = parser.feed(b"data: 0123456789abcdef", &mut out);
        assert!(
            matches!(unterminated, Err(SseTransportError::EventTooLarge { max: 16 })),
            "{unterminated:?}"
        );
        let mut parser = SseParser::new(16);
        let accumulated = parser.feed(b"data: 0123456\ndata: 7890123\ndata: x\n", &mut out);
        assert!(
            matches!(accumulated, Err(SseTransportError::EventTooLarge { .. })),
            "{accumulated:?}"
        );
        let mut parser = SseParser::new(16);
        parser
            .feed(b"data: 0123456789\n\ndata: 0123456789\n\n", &mut out)
            .expect("two events within the bound");
        assert_eq!(out.len(), 2);
    }

    #[tokio::test]
    async fn an_unfinished_event_is_dropped_when_the_stream_ends() {
        let chunks: Vec<Result<&[u8], std::io::Error>> = vec![Ok(b"data: done\n\n"), Ok(b"data: cut")];
        let mut events = EventStream::new(futures::stream::iter(chunks), 1024);
        assert_eq!(events.next().await.expect("ok"), Some(event("message", "done", None)));
        assert_eq!(events.next().await.expect("ok"), None);

        let failing: Vec<Result<&[u8], std::io::Error>> = vec![Err(std::io::Error::other("reset"))];
        let mut events = EventStream::new(futures::stream::iter(failing), 1024);
        let error = events.next().await.expect_err("fails");
        assert!(error.to_string().contains("reset"), "{error}");
    }

    fn url(s: &str) -> Url {
        Url::parse(s).expect("url")
    }

    #[test]
    fn endpoints_resolve_against_the_stream_url() {
        let sse = url("http://127.0.0.1:3001/sse");
        let resolve = |data: &str| resolve_endpoint(&sse, &sse, data).map(|u| u.to_string());
        assert_eq!(
            resolve("/message?sessionId=abc").expect("ok"),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            resolve(" message?sessionId=abc\n").expect("ok"),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            resolve("http://127.0.0.1:3001/m/x?s=1").expect("ok"),
            "http://127.0.0.1:3001/m/x?s=1"
        );
        let nested = url("https://mcp.example.com/api/v1/sse");
        assert_eq!(
            resolve_endpoint(&nested, &nested, "messages/?session_id=9")
                .expect("ok")
                .to_string(),
            "https://mcp.example.com/api/v1/messages/?session_id=9"
        );
        assert_eq!(
            resolve_endpoint(&nested, &nested, "https://mcp.example.com:443/messages/")
                .expect("ok")
                .to_string(),
            "https://mcp.example.com/messages/"
        );
    }

    #[test]
    fn endpoints_on_another_origin_are_refused() {
        let sse = url("http://127.0.0.1:3001/sse?token=secret");
        for data in [
            "http://127.0.0.2:3001/message",
            "http://127.0.0.1:3002/message",
            "https://127.0.0.1:3001/message",
            "//evil.example/message?sessionId=1",
            "http://evil.example/message",
            "file:///etc/passwd",
            "data:text/plain,hi",
        ] {
            let refused = resolve_endpoint(&sse, &sse, data);
            assert!(
                matches!(refused, Err(SseTransportError::CrossOriginEndpoint { .. })),
                "{data}: {refused:?}"
            );
            let message = refused.map(|_| ()).expect_err("refused").to_string();
            assert!(!message.contains("secret"), "{message}");
        }
        assert!(matches!(
            resolve_endpoint(&sse, &sse, " \n"),
            Err(SseTransportError::InvalidEndpoint { .. })
        ));
        assert!(matches!(
            resolve_endpoint(&sse, &sse, "http://[::1"),
            Err(SseTransportError::InvalidEndpoint { .. })
        ));
    }

    #[test]
    fn configs_need_an_http_url_and_errors_hide_queries() {
        assert!(SseClientConfig::new("http://127.0.0.1:3001/sse").is_ok());
        for bad in [
            "not a url",
            "ftp://127.0.0.1/sse?token=secret",
            "unix:/tmp/sock?token=secret",
        ] {
            let error = SseClientConfig::new(bad).expect_err(bad).to_string();
            assert!(error.starts_with("invalid sse url"), "{error}");
            assert!(!error.contains("secret"), "{error}");
        }
        assert_eq!(
            redact(&url("https://user:pw@h.example:8443/p/sse?token=secret#f")),
            "https://h.example:8443/p/sse"
        );
    }

    // --- against an in-process HTTP server ---------------------------------------------------------

    #[derive(Debug, Clone)]
    struct Recorded {
        method: String,
        uri: String,
        headers: HeaderMap,
        body: String,
    }

    struct MockOptions {
        first: &'static str,
        content_type: &'static str,
        get_status: StatusCode,
        post_status: StatusCode,
    }

    impl Default for MockOptions {
        fn default() -> Self {
            Self {
                first: "event: endpoint\ndata: /message?sessionId=abc\n\n",
                content_type: "text/event-stream",
                get_status: StatusCode::OK,
                post_status: StatusCode::ACCEPTED,
            }
        }
    }

    struct MockState {
        options: MockOptions,
        requests: Mutex<Vec<Recorded>>,
        pushes: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    }

    /// An SSE server on a loopback port: GET /sse answers `first` then whatever `push` sends;
    /// POST /message is recorded.
    struct Mock {
        sse_url: String,
        state: Arc<MockState>,
        push: mpsc::UnboundedSender<String>,
    }

    impl Mock {
        async fn start(options: MockOptions) -> Self {
            let (push, pushes) = mpsc::unbounded_channel();
            let state = Arc::new(MockState {
                options,
                requests: Mutex::new(Vec::new()),
                pushes: Mutex::new(Some(pushes)),
            });
            let app = Router::new()
                .route("/sse", get(mock_get))
                .route("/message", post(mock_post))
                .with_state(state.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            Self {
                sse_url: format!("http://{addr}/sse"),
                state,
                push,
            }
        }

        fn requests(&self) -> Vec<Recorded> {
            self.state.requests.lock().expect("lock").clone()
        }

        fn transport(&self, configure: impl FnOnce(SseClientConfig) -> SseClientConfig) -> SseClientTransport {
            let config = configure(SseClientConfig::new(&self.sse_url).expect("config"));
            SseClientTransport::new(config).expect("transport")
        }
    }

    async fn record(state: &MockState, request: axum::extract::Request) {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
        state.requests.lock().expect("lock").push(Recorded {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }

    async fn mock_get(State(state): State<Arc<MockState>>, request: axum::extract::Request) -> Response {
        record(&state, request).await;
        let pushes = state.pushes.lock().expect("lock").take();
        let first = futures::stream::iter([Ok::<_, Infallible>(state.options.first.to_owned())]);
        let rest = futures::stream::unfold(pushes, |pushes| async move {
            let mut pushes = pushes?;
            let chunk = pushes.recv().await?;
            Some((Ok(chunk), Some(pushes)))
        });
        Response::builder()
            .status(state.options.get_status)
            .header(header::CONTENT_TYPE, state.options.content_type)
            .body(Body::from_stream(first.chain(rest)))
            .expect("response")
    }

    async fn mock_post(State(state): State<Arc<MockState>>, request: axum::extract::Request) -> Response {
        record(&state, request).await;
        let status = state.options.post_status;
        let body = if status.is_success() {
            "Accepted"
        } else {
            "no such session"
        };
        Response::builder()
            .status(status)
            .body(Body::from(body))
            .expect("response")
    }

    fn message(value: Value) -> ClientJsonRpcMessage {
        serde_json::from_value(value).expect("a client message")
    }

    fn ping(id: u32) -> ClientJsonRpcMessage {
        message(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
    }

    async fn receive(transport: &mut SseClientTransport) -> Option<Value> {
        let received = tokio::time::timeout(Duration::from_secs(5), transport.receive())
            .await
            .expect("in time");
        received.map(|m| serde_json::to_value(m).expect("json"))
    }

    #[tokio::test]
    async fn a_session_posts_to_the_endpoint_with_the_headers_and_receives_the_stream() {
        let mock = Mock::start(MockOptions {
            first: ": hello\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n\
                    event: endpoint\ndata: /message?sessionId=abc\n\n",
            ..MockOptions::default()
        })
        .await;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_static("k1"));
        let mut transport = mock.transport(|c| c.with_headers(headers));

        transport
            .send(ping(1))
            .await
            .expect("the first send connects and posts");
        transport
            .send(message(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ))
            .await
            .expect("a second post");
        let requests = mock.requests();
        assert_eq!(requests.len(), 3, "{requests:?}");
        let get = &requests[0];
        assert_eq!((get.method.as_str(), get.uri.as_str()), ("GET", "/sse"));
        assert_eq!(get.headers["x-api-key"], "k1");
        assert_eq!(get.headers[header::ACCEPT], "text/event-stream");
        for post in &requests[1..] {
            assert_eq!(
                (post.method.as_str(), post.uri.as_str()),
                ("POST", "/message?sessionId=abc")
            );
            assert_eq!(post.headers["x-api-key"], "k1");
            assert_eq!(post.headers[header::CONTENT_TYPE], "application/json");
        }
        let posted: Value = serde_json::from_str(&requests[1].body).expect("json body");
        assert_eq!(posted, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));

        // An event sent before the endpoint still arrives, first.
        let early = receive(&mut transport).await.expect("the early notification");
        assert_eq!(early["method"], "notifications/tools/list_changed");
        // Split across chunks, with CRLF, a comment and a message that is not JSON-RPC (skipped).
        for chunk in [
            ": keepalive\r\n\r\nevent: message\r\ndata: not json\r\n\r\nevent: mess",
            "age\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,",
            "\"result\":{}}\r\n\r\n",
        ] {
            mock.push.send(chunk.to_owned()).expect("push");
        }
        let response = receive(&mut transport).await.expect("the ping response");
        assert_eq!(response, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));

        // The stream ending ends the transport.
        drop(mock.push);
        assert_eq!(receive(&mut transport).await, None);
        let after = transport.send(ping(2)).await;
        assert!(matches!(after, Err(SseTransportError::Closed)), "{after:?}");
    }

    #[tokio::test]
    async fn a_stream_without_an_endpoint_fails_within_the_connect_timeout() {
        let mock = Mock::start(MockOptions {
            first: ": connected\n\nevent: ready\ndata: x\n\n",
            ..MockOptions::default()
        })
        .await;
        let mut transport = mock.transport(|c| c.with_connect_timeout(Duration::from_millis(300)));
        let started = Instant::now();
        let error = transport.send(ping(1)).await.expect_err("no endpoint");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(error, SseTransportError::NoEndpoint { .. }), "{error:?}");
        assert!(
            error.to_string().contains("sent no `endpoint` event within 0.3s"),
            "{error}"
        );
        assert_eq!(receive(&mut transport).await, None, "the transport ended");
        let again = transport.send(ping(2)).await.expect_err("no retry");
        assert!(matches!(again, SseTransportError::ConnectFailed(_)), "{again:?}");
        assert_eq!(mock.requests().len(), 1, "one GET, no POST");
    }

    #[tokio::test]
    async fn a_stream_that_ends_before_its_endpoint_fails() {
        let mock = Mock::start(MockOptions {
            first: ": bye\n\n",
            ..MockOptions::default()
        })
        .await;
        let mut transport = mock.transport(|c| c);
        drop(mock.push);
        let error = transport.send(ping(1)).await.expect_err("closed");
        assert!(
            matches!(error, SseTransportError::ClosedBeforeEndpoint { .. }),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn an_endpoint_on_another_origin_is_refused_before_any_post() {
        let mock = Mock::start(MockOptions {
            first: "event: endpoint\ndata: http://127.0.0.2:9/message?sessionId=abc\n\n",
            ..MockOptions::default()
        })
        .await;
        let mut transport = mock.transport(|c| c);
        let error = transport.send(ping(1)).await.expect_err("refused");
        assert!(
            matches!(error, SseTransportError::CrossOriginEndpoint { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("http://127.0.0.2:9/message"), "{error}");
        assert!(!error.to_string().contains("sessionId"), "{error}");
        assert_eq!(mock.requests().len(), 1, "no POST");
    }

    #[tokio::test]
    async fn an_answer_that_is_not_an_sse_stream_is_refused() {
        let mock = Mock::start(MockOptions {
            content_type: "application/json",
            ..MockOptions::default()
        })
        .await;
        let error = mock.transport(|c| c).send(ping(1)).await.expect_err("refused");
        assert!(matches!(error, SseTransportError::NotEventStream { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("\"application/json\", not text/event-stream"),
            "{error}"
        );

        let mock = Mock::start(MockOptions {
            get_status: StatusCode::METHOD_NOT_ALLOWED,
            ..MockOptions::default()
        })
        .await;
        let error = mock.transport(|c| c).send(ping(1)).await.expect_err("refused");
        assert!(matches!(
            error,
            SseTransportError::Status {
                status: StatusCode::METHOD_NOT_ALLOWED,
                ..
            }
        ));
        // What it said is read for a moment only: this refusal's body does not end.
        assert!(
            error.to_string().contains(
                "answered 405 Method Not Allowed: event: endpoint data: /message?sessionId=abc, not an SSE stream"
            ),
            "{error}"
        );

        let mut transport = SseClientTransport::new(SseClientConfig::new("http://127.0.0.1:9/sse").expect("config"))
            .expect("transport");
        let error = transport.send(ping(1)).await.expect_err("nothing listens on port 9");
        assert!(matches!(error, SseTransportError::Connect { .. }), "{error:?}");
    }

    #[tokio::test]
    async fn a_refused_post_is_a_transport_error() {
        let mock = Mock::start(MockOptions {
            post_status: StatusCode::NOT_FOUND,
            ..MockOptions::default()
        })
        .await;
        let error = mock.transport(|c| c).send(ping(1)).await.expect_err("refused");
        assert!(
            matches!(
                error,
                SseTransportError::PostStatus {
                    status: StatusCode::NOT_FOUND,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .ends_with("/message answered 404 Not Found: no such session"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn closing_the_transport_ends_its_stream() {
        let mock = Mock::start(MockOptions::default()).await;
        let mut transport = mock.transport(|c| c);
        transport.send(ping(1)).await.expect("connected");
        transport.close().await.expect("closed");
        assert_eq!(receive(&mut transport).await, None);
        // The server sees the GET stream go away.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !mock.push.is_closed() {
            assert!(Instant::now() < deadline, "the GET stream is still open");
            mock.push.send(": ping\n\n".to_owned()).ok();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let after = transport.send(ping(2)).await;
        assert!(matches!(after, Err(SseTransportError::Closed)), "{after:?}");
    }
}
