//! The request guard of `/mcp`: refuses what the MCP service should never parse, and counts the
//! requests in flight so that a shutdown can let them finish.
//!
//! - A `Host` outside `aggregator.allowedHosts` gets 403 naming the key
//!   ([`HostCheck`](super::request_head::HostCheck)).
//! - A body over `aggregator.limits.maxRequestBodyBytes` gets 413; one whose arrays and objects
//!   nest deeper than `maxJsonDepth` gets 400. Both answer a JSON-RPC error naming the limit,
//!   and nothing reaches the MCP service (a deep document would otherwise cost a recursive parse
//!   and, passed on, every hop's parse after it).
//! - An `initialize` (a POST without a session id) while `aggregator.limits.maxSessions`
//!   sessions are open gets 503 with a JSON-RPC error naming the limit, before a session is made.
//! - A body the MCP service cannot read as a JSON-RPC message (it answers 415 with a plain-text
//!   serde message) gets 400 with a JSON-RPC error: a parse error (-32700) when it is not JSON,
//!   an invalid request (-32600) when it is JSON but no JSON-RPC message. Checked only after the
//!   service refused it, so a good request is parsed once.
//! - A request naming a session (`Mcp-Session-Id`) that this gateway does not hold gets 404
//!   with a JSON-RPC error (-32001), as the streamable-HTTP transport says: the session ended,
//!   or another replica holds it, and the client starts a new one. rmcp answers 404 itself to a
//!   POST or GET of an unknown session, but accepts a DELETE of one; checked here, all three get
//!   the same answer before the body is read.
//! - Once a shutdown begins ([`Drain::begin`]), new requests get 503 while the ones in flight
//!   finish; [`Drain::settled`] resolves when none is left (a response counts until its body
//!   has been sent or dropped).

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use axum::{
    body::{Body, Bytes, HttpBody},
    extract::Request,
    response::{IntoResponse, Response},
};
use http::{Method, StatusCode, header};
use hyper::body::{Frame, SizeHint};
use serde_json::json;
use tokio::sync::Notify;
use tower::{Layer, Service, ServiceExt as _};

use crate::http::{session_calls::SESSION_ID, sessions::Sessions};

/// What the guard enforces; as a tower [`Layer`], the guard itself ([`Guarded`]).
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// `maxRequestBodyBytes`.
    pub max_body_bytes: usize,
    /// `maxJsonDepth`.
    pub max_json_depth: usize,
    /// The requests in flight, and whether a shutdown has begun.
    pub drain: Arc<Drain>,
    /// The open sessions and `maxSessions`, when the guard bounds them and answers 404 for a
    /// session not among them.
    pub sessions: Option<(Sessions, usize)>,
    /// `allowedHosts`, when the guard checks the `Host` (else nothing is refused for it).
    pub hosts: Option<super::request_head::HostCheck>,
}

/// The requests in flight of a gateway's `/mcp`, and whether it is shutting down.
#[derive(Debug, Default)]
pub struct Drain {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Drain {
    /// Refuses new requests from now on (503); those in flight go on.
    pub fn begin(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.idle.notify_waiters();
    }

    /// Whether a shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Requests whose response has not been sent yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves when no request is in flight.
    pub async fn settled(&self) {
        loop {
            let notified = self.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }

    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(self))
    }
}

/// One request in flight; dropping it counts it out.
struct InFlight(Arc<Drain>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl<S> Layer<S> for Guard {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Guarded {
            guard: self.clone(),
            inner,
        }
    }
}

/// A service behind the [`Guard`]: what the guard lets through reaches `S`.
#[derive(Debug, Clone)]
pub(crate) struct Guarded<S> {
    guard: Guard,
    inner: S,
}

impl<S> Service<Request> for Guarded<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    /// Always ready: the request waits for the inner service's readiness in its future.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Box::pin(guarded(self.guard.clone(), self.inner.clone(), request))
    }
}

/// Refuses `request` as the [module docs](self) say, or answers it with `inner`.
async fn guarded<S>(guard: Guard, inner: S, request: Request) -> Result<Response, Infallible>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    if guard.drain.is_draining() {
        return Ok(refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "the gateway is shutting down; retry once it is back (or against another instance)".to_owned(),
        ));
    }
    if let Some(refused) = guard.hosts.as_ref().and_then(|hosts| hosts.refusal(&request)) {
        return Ok(refused);
    }
    if let Some((sessions, _)) = &guard.sessions
        && let Some(id) = request.headers().get(SESSION_ID)
        && !id.to_str().is_ok_and(|id| sessions.holds(id))
    {
        return Ok(session_not_found());
    }
    // The standalone stream (GET) lives as long as its session: not a request in flight.
    if request.method() != Method::POST {
        return inner.oneshot(request).await;
    }
    let in_flight = guard.drain.enter();
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, guard.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(e) if !is_length_limit(&e) => {
            return Ok(refusal(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("the request body could not be read: {e}"),
            ));
        }
        Err(_) => {
            return Ok(refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!(
                    "the request body is larger than {} bytes (aggregator.limits.maxRequestBodyBytes)",
                    guard.max_body_bytes
                ),
            ));
        }
    };
    if json_depth_exceeds(&bytes, guard.max_json_depth) {
        // With the request's id, the client can match the refusal to its request.
        return Ok(refusal_of(
            top_level_id(&bytes),
            StatusCode::BAD_REQUEST,
            -32600,
            format!(
                "invalid request: JSON nested deeper than {} levels (aggregator.limits.maxJsonDepth)",
                guard.max_json_depth
            ),
        ));
    }
    if let Some((sessions, max)) = &guard.sessions
        && !parts.headers.contains_key(SESSION_ID)
        && sessions.len() >= *max
        && is_initialize(&bytes)
    {
        return Ok(refusal_of(
            top_level_id(&bytes),
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            format!(
                "the gateway has {max} sessions open, its limit (aggregator.limits.maxSessions); close one, or retry \
                 once idle ones have ended"
            ),
        ));
    }
    let declares_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
    let response = inner
        .oneshot(Request::from_parts(parts, Body::from(bytes.clone())))
        .await?;
    if declares_json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return Ok(unreadable_body(&bytes));
    }
    // The count ends when the body has been sent (or dropped with its connection).
    Ok(response.map(|body| {
        Body::new(Counted {
            body,
            _in_flight: in_flight,
        })
    }))
}

pin_project_lite::pin_project! {
    /// A response body that counts its request in flight until it has been sent or dropped.
    struct Counted {
        #[pin]
        body: Body,
        _in_flight: InFlight,
    }
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Whether `json` is a JSON-RPC `initialize` request (its top-level `method`).
fn is_initialize(json: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Envelope<'_>>(json).is_ok_and(|e| e.method.as_deref() == Some("initialize"))
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// The answer to a JSON body the MCP service could not read as a JSON-RPC message.
fn unreadable_body(json: &[u8]) -> Response {
    match serde_json::from_slice::<serde::de::IgnoredAny>(json) {
        Err(e) => refusal(
            StatusCode::BAD_REQUEST,
            -32700,
            format!("parse error: the request body is not JSON: {e}"),
        ),
        Ok(_) => refusal_of(
            top_level_id(json),
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: the request body is not a JSON-RPC message".to_owned(),
        ),
    }
}

/// The answer to a request naming a session this gateway does not hold.
fn session_not_found() -> Response {
    refusal(
        StatusCode::NOT_FOUND,
        -32001,
        "Session not found: this gateway holds no session with this Mcp-Session-Id (it ended, or another replica \
         holds it); start a new session with initialize"
            .to_owned(),
    )
}

fn refusal(status: StatusCode, code: i64, message: String) -> Response {
    refusal_of(None, status, code, message)
}

/// A JSON-RPC error answering request `id` (`null` when unknown) with HTTP `status`.
pub(crate) fn refusal_of(id: Option<serde_json::Value>, status: StatusCode, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, http::HeaderValue::from_static("5"));
    }
    response
}

/// The `id` member of the top-level object of `json` when it is a number or a string, found
/// without parsing the rest (which may nest too deep to parse).
pub(crate) fn top_level_id(json: &[u8]) -> Option<serde_json::Value> {
    let mut depth = 0usize;
    let mut i = 0;
    let mut expect_key = false;
    while i < json.len() {
        match json[i] {
            b'"' => {
                let start = i + 1;
                i = string_end(json, start)?;
                if depth == 1 && expect_key {
                    let key = &json[start..i];
                    let rest = json[i + 1..].iter().position(|b| !b.is_ascii_whitespace())? + i + 1;
                    if key == b"id" && json.get(rest) == Some(&b':') {
                        let value = serde_json::Deserializer::from_slice(&json[rest + 1..])
                            .into_iter::<serde_json::Value>()
                            .next()?
                            .ok()?;
                        return (value.is_number() || value.is_string()).then_some(value);
                    }
                }
                expect_key = false;
            }
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => expect_key = depth == 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that ends the string whose text starts at `start`, when it ends: the
/// string is skipped to its next quote or backslash at a time (memchr), not byte by byte.
fn string_end(json: &[u8], mut start: usize) -> Option<usize> {
    loop {
        let rest = json.get(start..)?;
        let at = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[at] == b'"' {
            return Some(start + at);
        }
        // A backslash: the byte after it is escaped.
        start += at + 2;
    }
}

/// Whether the arrays and objects of `json` nest deeper than `max` (strings, escapes included,
/// are skipped; the text need not be valid JSON). One pass, no allocation.
pub(crate) fn json_depth_exceeds(json: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&byte) = json.get(i) {
        i += 1;
        match byte {
            b'"' => match string_end(json, i) {
                Some(end) => i = end + 1,
                // Unterminated: nothing after it nests.
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_initialize_request_is_one() {
        assert!(super::is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(super::is_initialize(br#"{"method" : "initialize", "id": "a"}"#));
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"method":"initialize"}}"#,
            br#"[{"method":"initialize"}]"#,
            b"not json",
        ] {
            assert!(!super::is_initialize(other), "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn depth_counts_arrays_and_objects_but_not_strings() {
        assert!(!json_depth_exceeds(b"{}", 1));
        assert!(json_depth_exceeds(b"{\"a\":{}}", 1));
        assert!(!json_depth_exceeds(br#"{"a":"{{{{\"[[["}"#, 1));
        assert!(!json_depth_exceeds(br#"[1,[2],[3],[4]]"#, 2), "siblings do not add up");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(json_depth_exceeds(deep.as_bytes(), 64));
        assert!(!json_depth_exceeds(b"not json at all", 1));
    }

    /// The deepest nesting of `json`, read byte by byte (a string ends at a quote no backslash
    /// escapes).
    fn deepest_bytewise(json: &[u8]) -> usize {
        let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
        for &byte in json {
            match (in_string, byte) {
                (true, _) if escaped => escaped = false,
                (true, b'\\') => escaped = true,
                (_, b'"') => in_string = !in_string,
                (false, b'[' | b'{') => depth += 1,
                (false, b']' | b'}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        deepest
    }

    #[test]
    fn skipping_strings_agrees_with_reading_every_byte() {
        // Every text of up to 6 of these bytes: quotes, escapes, brackets, a letter.
        let alphabet = b"[{]}\"\\a";
        let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last = texts.clone();
        for _ in 0..6 {
            last = last
                .iter()
                .flat_map(|t| alphabet.iter().map(move |&b| [t.as_slice(), &[b]].concat()))
                .collect();
            texts.extend(last.iter().cloned());
        }
        for text in &texts {
            for max in 0..3 {
                assert_eq!(
                    json_depth_exceeds(text, max),
                    deepest_bytewise(text) > max,
                    "{:?} at {max}",
                    String::from_utf8_lossy(text)
                );
            }
        }
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let after = format!(r#"{{"jsonrpc":"2.0","params":{{"id":"inner","x":{deep}}},"id": 42}}"#);
        assert_eq!(top_level_id(after.as_bytes()), Some(json!(42)));
        assert_eq!(top_level_id(br#"{"id":"a\"b","method":"m"}"#), Some(json!("a\"b")));
        assert_eq!(top_level_id(br#"{"method":"notifications/x","params":{"id":1}}"#), None);
        assert_eq!(
            top_level_id(br#"{"key":"id","id":{"x":1}}"#),
            None,
            "an object is no id"
        );
        assert_eq!(top_level_id(b"[[["), None);
    }

    #[tokio::test]
    async fn settled_waits_for_the_last_request() {
        let drain = Arc::new(Drain::default());
        let first = drain.enter();
        let second = drain.enter();
        drain.begin();
        assert!(drain.is_draining());
        let waiter = tokio::spawn({
            let drain = Arc::clone(&drain);
            async move { drain.settled().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(second);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("settles once none is in flight")
            .expect("the waiter ran");
        assert_eq!(drain.in_flight(), 0);
    }
}
