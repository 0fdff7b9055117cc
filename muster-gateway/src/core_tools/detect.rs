//! `core_mcpserver_detect`: which MCP transport a remote URL speaks.
//!
//! [`detect`] probes the URL the way the MCP specification tells a client to find out
//! (2025-03-26, "Backwards Compatibility"):
//!
//! 1. **Streamable HTTP.** `POST` an `initialize` request accepting `application/json` and
//!    `text/event-stream`. A 2xx whose body (JSON, or the first matching SSE event) is the
//!    JSON-RPC response to it means `streamable-http`; `serverName` and `serverVersion` come
//!    from its `serverInfo`. If the server issued an `Mcp-Session-Id`, the session is ended
//!    with a `DELETE` so the probe leaves nothing behind.
//! 2. **HTTP+SSE** (the legacy transport), when the first probe did not settle it. `GET` with
//!    `Accept: text/event-stream`; an `endpoint` event on the stream means `sse`.
//!
//! A `401` to either probe sets `requiresAuth` (the `WWW-Authenticate` challenge is quoted in
//! `detail`); without credentials the transport stays `unknown`. A server that cannot be
//! connected to is `reachable: false`. Redirects are not followed (the detail names the
//! target). Detection never fails: whatever happens, including the overall timeout, the
//! answer is a [`DetectResult`], with `transport: unknown` and a `detail` saying why.
//!
//! ```no_run
//! # async fn run() -> Result<(), serde_json::Error> {
//! use std::collections::BTreeMap;
//! use muster_gateway::core_tools::detect::{DEFAULT_TIMEOUT, DetectedTransport, detect};
//!
//! let result = detect("https://mcp.example.com/mcp", &BTreeMap::new(), DEFAULT_TIMEOUT).await;
//! if result.transport == DetectedTransport::StreamableHttp {
//!     println!("{} {}", result.server_name.as_deref().unwrap_or("?"), result.detail);
//! }
//! // {"url":"https://mcp.example.com/mcp","transport":"streamable-http","reachable":true,
//! //  "requiresAuth":false,"serverName":"example-server","serverVersion":"1.4.2",
//! //  "detail":"initialize handshake succeeded over streamable-http"}
//! println!("{}", serde_json::to_string(&result)?);
//! # Ok(()) }
//! ```

use std::{collections::BTreeMap, time::Duration};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use reqwest::{Client, Response, Url};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::upstream::Egress;

/// The overall budget of a detection when the caller names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The protocol version the probe's `initialize` asks for: the one that introduced streamable
/// HTTP, which every streamable-HTTP server understands (the server answers with its own).
const PROBE_PROTOCOL_VERSION: &str = "2025-03-26";

/// The most bytes read from a probe's answer.
const MAX_BODY: usize = 256 * 1024;

/// The most time spent ending the probe's session.
const DELETE_BUDGET: Duration = Duration::from_secs(2);

/// The transport a URL speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DetectedTransport {
    /// MCP streamable HTTP.
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// The legacy MCP HTTP+SSE transport.
    #[serde(rename = "sse")]
    Sse,
    /// Not established: unreachable, protected, or not an MCP endpoint.
    #[serde(rename = "unknown")]
    Unknown,
}

impl DetectedTransport {
    /// The spelling on the wire: `streamable-http`, `sse` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
            Self::Unknown => "unknown",
        }
    }
}

/// The answer of `core_mcpserver_detect`, serialized exactly as documented.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DetectResult {
    /// The probed endpoint, as given.
    pub url: String,
    /// `streamable-http`, `sse` or `unknown`.
    pub transport: DetectedTransport,
    /// Whether the server answered a probe at the HTTP level.
    pub reachable: bool,
    /// Whether a probe was answered with a 401 challenge.
    pub requires_auth: bool,
    /// The server's name from a completed handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The server's version from a completed handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// Why this verdict, for people.
    pub detail: String,
}

impl DetectResult {
    fn unknown(url: &str, reachable: bool, requires_auth: bool, detail: String) -> Self {
        Self {
            url: url.to_owned(),
            transport: DetectedTransport::Unknown,
            reachable,
            requires_auth,
            server_name: None,
            server_version: None,
            detail,
        }
    }
}

/// Probes `url` for its MCP transport, sending `headers` with every request, within `timeout`
/// in all. Never fails; see the [module documentation](self).
pub async fn detect(url: &str, headers: &BTreeMap<String, String>, timeout: Duration) -> DetectResult {
    detect_resolving(url, headers, timeout, Egress::Open).await
}

/// As [`detect`], on connections `egress` allows (its names resolved at each connection).
pub(crate) async fn detect_resolving(
    url: &str,
    headers: &BTreeMap<String, String>,
    timeout: Duration,
    egress: Egress,
) -> DetectResult {
    let url = url.trim();
    let parsed = match Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() => parsed,
        Ok(_) => {
            return DetectResult::unknown(
                url,
                false,
                false,
                "the URL must be an http or https URL with a host".into(),
            );
        }
        Err(e) => return DetectResult::unknown(url, false, false, format!("the URL does not parse: {e}")),
    };
    let headers = match header_map(headers) {
        Ok(headers) => headers,
        Err(detail) => return DetectResult::unknown(url, false, false, detail),
    };
    let mut builder = Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .user_agent(concat!("muster/", env!("CARGO_PKG_VERSION")));
    if let Some(resolver) = egress.resolver() {
        builder = builder.dns_resolver(resolver);
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(e) => {
            return DetectResult::unknown(
                url,
                false,
                false,
                format!("cannot build an HTTP client: {}", innermost(&e)),
            );
        }
    };

    let mut probe = Probe::new(url);
    let finished = tokio::time::timeout(timeout, probe.run(&client, &parsed, &headers)).await;
    if let Some(verdict) = probe.verdict.take() {
        return verdict;
    }
    if finished.is_err() {
        probe.notes.push(format!("no answer within {timeout:?}"));
    }
    probe.conclude()
}

/// What the probes have found so far.
struct Probe {
    url: String,
    reachable: bool,
    requires_auth: bool,
    challenge: Option<String>,
    unreachable: Option<String>,
    notes: Vec<String>,
    verdict: Option<DetectResult>,
}

impl Probe {
    fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            reachable: false,
            requires_auth: false,
            challenge: None,
            unreachable: None,
            notes: Vec::new(),
            verdict: None,
        }
    }

    async fn run(&mut self, client: &Client, url: &Url, headers: &HeaderMap) {
        if self.streamable_http(client, url, headers).await.is_break() {
            return;
        }
        self.sse(client, url, headers).await;
    }

    /// The `POST initialize` probe. Breaks when it settled the verdict or nothing answers.
    async fn streamable_http(&mut self, client: &Client, url: &Url, headers: &HeaderMap) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        let mut request_headers = headers.clone();
        request_headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        request_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROBE_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "muster", "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let response = match client
            .post(url.clone())
            .headers(request_headers)
            .body(body.to_string())
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) if e.is_connect() || e.is_timeout() => {
                self.unreachable = Some(innermost(&e));
                return Break(());
            }
            Err(e) => {
                self.notes.push(format!("POST initialize failed: {}", innermost(&e)));
                return Continue(());
            }
        };
        self.reachable = true;
        let status = response.status();
        if !status.is_success() {
            self.note_status("POST initialize", &response);
            return Continue(());
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = content_type(&response);
        let answer = if content_type.starts_with("application/json") {
            read_json_answer(response).await
        } else if content_type.starts_with("text/event-stream") {
            read_sse_answer(response).await
        } else {
            None
        };
        let Some(answer) = answer else {
            let shown = if content_type.is_empty() {
                "no content type"
            } else {
                content_type.as_str()
            };
            self.notes.push(format!(
                "POST initialize answered {status} with {shown}, not an MCP response"
            ));
            return Continue(());
        };
        let mut verdict = DetectResult {
            url: self.url.clone(),
            transport: DetectedTransport::StreamableHttp,
            reachable: true,
            requires_auth: false,
            server_name: None,
            server_version: None,
            detail: String::new(),
        };
        let protocol_version = match answer {
            Handshake::Completed {
                name,
                version,
                protocol_version,
            } => {
                verdict.server_name = name;
                verdict.server_version = version;
                verdict.detail = "initialize handshake succeeded over streamable-http".into();
                protocol_version
            }
            Handshake::Refused(message) => {
                verdict.detail =
                    format!("the server answered the initialize over streamable-http with an error: {message}");
                None
            }
        };
        self.verdict = Some(verdict);
        if let Some(session) = session {
            let version = protocol_version.unwrap_or_else(|| PROBE_PROTOCOL_VERSION.to_owned());
            end_session(client, url, headers, &session, &version).await;
        }
        Break(())
    }

    /// The `GET text/event-stream` probe.
    async fn sse(&mut self, client: &Client, url: &Url, headers: &HeaderMap) {
        let mut request_headers = headers.clone();
        request_headers.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        let response = match client.get(url.clone()).headers(request_headers).send().await {
            Ok(response) => response,
            Err(e) => {
                self.notes.push(format!("GET event stream failed: {}", innermost(&e)));
                return;
            }
        };
        self.reachable = true;
        if !response.status().is_success() {
            self.note_status("GET event stream", &response);
            return;
        }
        let status = response.status();
        let content_type = content_type(&response);
        if !content_type.starts_with("text/event-stream") {
            let shown = if content_type.is_empty() {
                "no content type"
            } else {
                content_type.as_str()
            };
            self.notes.push(format!(
                "GET event stream answered {status} with {shown}, not an event stream"
            ));
            return;
        }
        match read_endpoint_event(response).await {
            Some(endpoint) => {
                self.verdict = Some(DetectResult {
                    url: self.url.clone(),
                    transport: DetectedTransport::Sse,
                    reachable: true,
                    requires_auth: false,
                    server_name: None,
                    server_version: None,
                    detail: format!(
                        "the event stream announced its message endpoint ({endpoint}): the HTTP+SSE transport"
                    ),
                });
            }
            None => self
                .notes
                .push("GET answered an event stream that sent no endpoint event".into()),
        }
    }

    /// Records a non-2xx answer: the 401 challenge, the redirect target, or the status.
    fn note_status(&mut self, probe: &str, response: &Response) {
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            self.requires_auth = true;
            if self.challenge.is_none() {
                self.challenge = response
                    .headers()
                    .get(header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| shorten(v, 300));
            }
        }
        let mut note = format!("{probe} answered {status}");
        if status.is_redirection()
            && let Some(location) = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok())
        {
            note.push_str(&format!(
                " (redirect to {}; probe that URL instead)",
                shorten(location, 300)
            ));
        }
        self.notes.push(note);
    }

    /// The verdict when neither probe settled one.
    fn conclude(self) -> DetectResult {
        if !self.reachable {
            let mut detail = match &self.unreachable {
                Some(error) => format!("the server could not be reached: {error}"),
                None => "the server did not answer".to_owned(),
            };
            if !self.notes.is_empty() {
                detail = format!("{detail}; {}", self.notes.join("; "));
            }
            return DetectResult::unknown(&self.url, false, false, detail);
        }
        if self.requires_auth {
            let challenge = self
                .challenge
                .as_deref()
                .map(|c| format!(" (WWW-Authenticate: {c})"))
                .unwrap_or_default();
            return DetectResult::unknown(
                &self.url,
                true,
                true,
                format!(
                    "the server requires authorization{challenge}: {}; the transport can be confirmed once signed in",
                    self.notes.join("; ")
                ),
            );
        }
        DetectResult::unknown(
            &self.url,
            true,
            false,
            format!("no MCP transport detected: {}", self.notes.join("; ")),
        )
    }
}

/// What the server answered the probe's `initialize`.
enum Handshake {
    /// A result: the server's name, version and protocol version when it gave them.
    Completed {
        name: Option<String>,
        version: Option<String>,
        protocol_version: Option<String>,
    },
    /// A JSON-RPC error, with its message.
    Refused(String),
}

/// Reads the answer to the probe from a JSON message (or batch) of JSON-RPC.
fn handshake(message: &Value) -> Option<Handshake> {
    if let Value::Array(batch) = message {
        return batch.iter().find_map(handshake);
    }
    if message.get("jsonrpc")?.as_str()? != "2.0" || message.get("id")? != &json!(1) {
        return None;
    }
    if let Some(result) = message.get("result") {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let info = result.get("serverInfo");
        return Some(Handshake::Completed {
            name: text(info.and_then(|i| i.get("name"))),
            version: text(info.and_then(|i| i.get("version"))),
            protocol_version: text(result.get("protocolVersion")),
        });
    }
    let error = message.get("error")?;
    let text = error
        .get("message")
        .and_then(Value::as_str)
        .map(|m| shorten(m, 300))
        .unwrap_or_else(|| shorten(&error.to_string(), 300));
    Some(Handshake::Refused(text))
}

async fn read_json_answer(response: Response) -> Option<Handshake> {
    let body = read_capped(response).await;
    handshake(&serde_json::from_slice(&body).ok()?)
}

async fn read_sse_answer(mut response: Response) -> Option<Handshake> {
    let mut parser = SseParser::default();
    let mut read = 0;
    while read < MAX_BODY {
        let chunk = response.chunk().await.ok()??;
        read += chunk.len();
        for event in parser.push(&chunk) {
            if let Some(answer) = serde_json::from_str(&event.data).ok().as_ref().and_then(handshake) {
                return Some(answer);
            }
        }
    }
    None
}

async fn read_endpoint_event(mut response: Response) -> Option<String> {
    let mut parser = SseParser::default();
    let mut read = 0;
    while read < MAX_BODY {
        let chunk = response.chunk().await.ok()??;
        read += chunk.len();
        if let Some(event) = parser.push(&chunk).into_iter().find(|e| e.event == "endpoint") {
            return Some(shorten(event.data.trim(), 300));
        }
    }
    None
}

/// The body, at most [`MAX_BODY`] bytes of it.
async fn read_capped(mut response: Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body
}

/// Ends the probe's session, within [`DELETE_BUDGET`]; the outcome does not matter.
async fn end_session(client: &Client, url: &Url, headers: &HeaderMap, session: &str, protocol_version: &str) {
    let mut request_headers = headers.clone();
    let (Ok(session), Ok(version)) = (HeaderValue::from_str(session), HeaderValue::from_str(protocol_version)) else {
        return;
    };
    request_headers.insert(HeaderName::from_static("mcp-session-id"), session);
    request_headers.insert(HeaderName::from_static("mcp-protocol-version"), version);
    let delete = client.delete(url.clone()).headers(request_headers).send();
    match tokio::time::timeout(DELETE_BUDGET, delete).await {
        Ok(Ok(response)) => tracing::debug!(status = %response.status(), "ended the detection probe's session"),
        Ok(Err(e)) => tracing::debug!(error = %innermost(&e), "could not end the detection probe's session"),
        Err(_) => tracing::debug!("ending the detection probe's session timed out"),
    }
}

/// The caller's headers as a header map; the error names the header (never its value).
fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header_name =
            HeaderName::try_from(name.as_str()).map_err(|_| format!("the header name {name:?} is not valid"))?;
        let header_value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of the header {name:?} is not valid"))?;
        map.insert(header_name, header_value);
    }
    Ok(map)
}

fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The innermost cause of an error: `Connection refused (os error 111)` rather than
/// `error sending request for url (...)`.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// One server-sent event: its `event` name (default `message`) and its `data` lines joined.
#[derive(Debug, Default, PartialEq)]
struct SseEvent {
    event: String,
    data: String,
}

/// An incremental parser of a `text/event-stream` body.
#[derive(Debug, Default)]
struct SseParser {
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds `chunk`; returns the events it completed.
    fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A \r\n pair is one line ending; a lone \r at the end of the chunk waits for more.
            let width = match (self.pending[end], self.pending.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                (b'\r', None) => break,
                _ => 1,
            };
            let line: Vec<u8> = self.pending.drain(..end + width).take(end).collect();
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    events.push(SseEvent {
                        event: self.event.take().unwrap_or_else(|| "message".into()),
                        data,
                    });
                }
                self.event = None;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((&line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.event = Some(value.to_owned()),
                "data" => match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests;
