//! Transports to downstream servers: a child process over stdio, streamable HTTP, or the legacy
//! HTTP+SSE transport.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock},
    time::Duration,
};

use muster_core::crd::MCPServerSpec;
use rmcp::transport::{
    ConfigureCommandExt, StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{
    call_answers::FastCallAnswers,
    egress::{Egress, LinkLocalRefused},
    http_lane::SessionRecord,
    sse::{SseClientConfig, SseClientTransport, SseTransportError},
    stdio::StdioTransport,
};

/// Why a transport could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A stdio server has no command.
    #[error("a stdio server needs a command")]
    MissingCommand,
    /// The command did not start.
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// A remote server has no URL.
    #[error("a remote server needs a url")]
    MissingUrl,
    /// A header name or value is not valid HTTP.
    #[error("header {name:?} is not a valid HTTP header")]
    InvalidHeader {
        /// The header's name.
        name: String,
    },
    /// A server type this version cannot connect to.
    #[error("server type {0} is not supported")]
    UnsupportedType(String),
    /// The legacy HTTP+SSE transport could not be set up (an invalid url, ...).
    #[error(transparent)]
    Sse(#[from] SseTransportError),
    /// The server's URL is an address its [`Egress`] refuses.
    #[error(transparent)]
    Refused(#[from] LinkLocalRefused),
}

/// A child process speaking MCP on stdin/stdout; its stderr goes to the log (at `debug`), and
/// its last lines are kept in the returned [`StderrTail`] to say why it did not start.
pub(super) fn stdio(server: &str, spec: &MCPServerSpec) -> Result<(StdioTransport, StderrTail), TransportError> {
    let command = spec
        .command
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or(TransportError::MissingCommand)?;
    let program = if command == muster_core::crd::SELF_COMMAND {
        std::env::current_exe().map_err(|source| TransportError::Spawn {
            command: command.to_owned(),
            source,
        })?
    } else {
        std::path::PathBuf::from(command)
    };
    let cmd = tokio::process::Command::new(program).configure(|c| {
        c.args(&spec.args).envs(&spec.env);
        // Its own process group: what the server starts can be ended with it, and a Ctrl-C
        // meant for the gateway reaches the server only through the gateway's shutdown.
        #[cfg(unix)]
        c.process_group(0);
    });
    let (process, stderr) = StdioTransport::spawn(cmd).map_err(|source| TransportError::Spawn {
        command: command.to_owned(),
        source,
    })?;
    let tail = StderrTail::default();
    if let Some(stderr) = stderr {
        let server = server.to_owned();
        let kept = tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "muster::upstream::stderr", server = %server, "{line}");
                kept.push(line);
            }
            kept.close();
        });
    } else {
        tail.close();
    }
    Ok((process, tail))
}

/// The last [`StderrTail::LINES`] lines a stdio server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail {
    inner: Arc<TailInner>,
}

#[derive(Debug, Default)]
struct TailInner {
    lines: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// Set once stderr has been read to its end.
    closed: tokio::sync::Notify,
    is_closed: std::sync::atomic::AtomicBool,
}

impl StderrTail {
    /// How many lines are kept.
    pub(super) const LINES: usize = 10;
    /// The longest line kept, in bytes (a longer one is cut).
    const LINE_BYTES: usize = 400;

    fn push(&self, mut line: String) {
        if line.len() > Self::LINE_BYTES {
            let mut end = Self::LINE_BYTES;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push('…');
        }
        let mut lines = self.inner.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == Self::LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn close(&self) {
        self.inner.is_closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.closed.notify_waiters();
    }

    /// The lines kept, once stderr has ended or `wait` has passed (a child that exited has
    /// usually closed it; one still running has not).
    pub(super) async fn lines(&self, wait: Duration) -> Vec<String> {
        let closed = self.inner.closed.notified();
        if !self.inner.is_closed.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = tokio::time::timeout(wait, closed).await;
        }
        self.inner
            .lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Ends every process left in the process group of a stdio server whose own process has ended
/// or is ending (what it started and did not stop: a shell's children, `npx`'s node). `None`
/// (not a stdio server) does nothing.
pub(super) fn end_process_group(group: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = group
        .and_then(|g| i32::try_from(g).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // ESRCH: nobody is left in it, the usual case.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// How long an idle connection to a streamable-HTTP server is kept for the next request: under
/// the 5 s after which Node's and uvicorn's servers close an idle connection by default, so a
/// request rarely goes out on a connection the server is closing.
pub(crate) const POOL_IDLE: Duration = Duration::from_secs(4);

/// How many redirects a request follows at most.
const MAX_REDIRECTS: usize = 10;

/// The shared client of [`Egress::Open`] connections.
static HTTP_CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| build_http_client(Egress::Open));
/// The shared client of [`Egress::NoLinkLocal`] connections: a pool of its own, so that no
/// connection one opened unrefused is reused by the other.
static HTTP_CLIENT_NO_LINK_LOCAL: LazyLock<reqwest::Client> = LazyLock::new(|| build_http_client(Egress::NoLinkLocal));

fn build_http_client(egress: Egress) -> reqwest::Client {
    let mut builder =
        reqwest::Client::builder()
            .pool_idle_timeout(POOL_IDLE)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let keeps_body = matches!(
                    attempt.status(),
                    reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
                );
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                if !keeps_body || !same_origin {
                    attempt.stop()
                } else if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
                } else {
                    attempt.follow()
                }
            }));
    if let Some(resolver) = egress.resolver() {
        builder = builder.dns_resolver(resolver);
    }
    builder.build().unwrap_or_default()
}

/// The HTTP client every streamable-HTTP connection of `egress` shares: one pool of kept-alive
/// connections, and only same-origin 307/308 redirects followed (a cross-origin one would replay
/// the server's headers elsewhere; a 301/302/303 would lose the message).
///
/// rmcp's default client keeps no idle connection, so every request to a downstream opened a
/// TCP connection of its own (one per tool call, measured: 540 connections for 520 calls). rmcp
/// reads each POST's event stream to its end after the answer, which is what lets a
/// connection go back to the pool without the stall that made rmcp turn pooling off.
pub(crate) fn http_client(egress: Egress) -> reqwest::Client {
    match egress {
        Egress::Open => HTTP_CLIENT.clone(),
        Egress::NoLinkLocal => HTTP_CLIENT_NO_LINK_LOCAL.clone(),
    }
}

/// The HTTP client of streamable-HTTP connections: with the `otel` feature, one that sends
/// each message's W3C trace context as headers ([`crate::trace_context::TraceContextClient`]).
/// Either way, a `tools/call`'s answer is read by [`FastCallAnswers`].
#[cfg(not(feature = "otel"))]
type HttpClient = FastCallAnswers<reqwest::Client>;
#[cfg(feature = "otel")]
type HttpClient = FastCallAnswers<crate::trace_context::TraceContextClient>;

/// A streamable-HTTP client with the server's headers, held to `egress`, recording its session
/// in `record` for the HTTP call lane.
pub(super) fn streamable_http(
    spec: &MCPServerSpec,
    record: &Arc<SessionRecord>,
    egress: Egress,
) -> Result<StreamableHttpClientTransport<HttpClient>, TransportError> {
    let url = spec
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or(TransportError::MissingUrl)?;
    // A URL that does not parse fails in rmcp, which says so; a literal is refused here.
    if let Ok(parsed) = url::Url::parse(url) {
        egress.check_url(&parsed)?;
    }
    let mut headers = HashMap::with_capacity(spec.headers.len());
    for (name, value) in &spec.headers {
        let invalid = || TransportError::InvalidHeader { name: name.clone() };
        let header_name = http::HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
        let header_value = http::HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        headers.insert(header_name, header_value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    #[cfg(not(feature = "otel"))]
    let client = FastCallAnswers::new(http_client(egress));
    #[cfg(feature = "otel")]
    let client = FastCallAnswers::new(crate::trace_context::TraceContextClient::with_client(http_client(
        egress,
    )));
    let transport = StreamableHttpClientTransport::with_client(client.recording(record), config);
    Ok(transport)
}

/// A legacy HTTP+SSE client with the server's headers, held to `egress`. The wait for the stream's `endpoint` event
/// gets four fifths of the server's timeout, so that its error, clearer, wins over the handshake's.
pub(super) fn sse(spec: &MCPServerSpec, egress: Egress) -> Result<SseClientTransport, TransportError> {
    let url = spec
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or(TransportError::MissingUrl)?;
    let mut headers = http::HeaderMap::with_capacity(spec.headers.len());
    for (name, value) in &spec.headers {
        let invalid = || TransportError::InvalidHeader { name: name.clone() };
        let header_name = http::HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
        let header_value = http::HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        headers.insert(header_name, header_value);
    }
    let timeout = Duration::from_secs(u64::from(spec.timeout.max(1)));
    let config = SseClientConfig::new(url)?
        .with_headers(headers)
        .with_connect_timeout(timeout.mul_f64(0.8))
        .with_request_timeout(timeout)
        .with_egress(egress);
    Ok(SseClientTransport::new(config)?)
}
