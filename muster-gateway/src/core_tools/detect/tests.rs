//! [`detect`] against real servers on loopback.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    body::Body,
    extract::Request,
    middleware::{Next, from_fn},
    response::{
        IntoResponse, Response as AxumResponse,
        sse::{Event as SseFrame, Sse},
    },
    routing::get,
};
use futures::{StreamExt, stream};
use rmcp::{
    ServerHandler,
    model::{Implementation, ServerCapabilities, ServerConfig},
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};

use super::*;

const QUICK: Duration = Duration::from_secs(5);

/// A trivial MCP server: its name and version are all a probe reads.
#[derive(Debug, Clone)]
struct Trivial;

impl ServerHandler for Trivial {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("detect-test", "1.2.3"))
    }
}

/// Serves `router` on a loopback port; returns its base URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// Every request's method and `Mcp-Session-Id`, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

fn mcp_router(config: StreamableHttpServerConfig, seen: Seen) -> Router {
    let service = StreamableHttpService::new(|| Ok(Trivial), LocalSessionManager::default().into(), config);
    Router::new()
        .nest_service("/mcp", service)
        .layer(from_fn(move |request: Request, next: Next| {
            let seen = Arc::clone(&seen);
            async move {
                let session = request
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                seen.lock().expect("lock").push((request.method().to_string(), session));
                next.run(request).await
            }
        }))
}

#[tokio::test]
async fn a_streamable_http_server_is_detected_with_its_name_and_the_session_is_ended() {
    let seen = Seen::default();
    let base = serve(mcp_router(StreamableHttpServerConfig::default(), Arc::clone(&seen))).await;
    let url = format!("{base}/mcp");
    let result = detect(&url, &BTreeMap::new(), QUICK).await;
    assert_eq!(
        result,
        DetectResult {
            url: url.clone(),
            transport: DetectedTransport::StreamableHttp,
            reachable: true,
            requires_auth: false,
            server_name: Some("detect-test".into()),
            server_version: Some("1.2.3".into()),
            detail: "initialize handshake succeeded over streamable-http".into(),
        }
    );
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], ("POST".to_owned(), None));
    assert_eq!(seen[1].0, "DELETE");
    assert!(seen[1].1.is_some(), "the DELETE names the session");
}

#[tokio::test]
async fn a_stateless_json_answering_server_is_detected_without_a_session_to_end() {
    let seen = Seen::default();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let base = serve(mcp_router(config, Arc::clone(&seen))).await;
    let result = detect(&format!("{base}/mcp"), &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::StreamableHttp);
    assert_eq!(result.server_name.as_deref(), Some("detect-test"));
    assert_eq!(seen.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn the_callers_headers_are_sent_with_the_probes() {
    let app = Router::new().fallback(|request: Request| async move {
        if request.headers().get("x-api-key").and_then(|v| v.to_str().ok()) == Some("k-123") {
            let body = json!({"jsonrpc": "2.0", "id": 1, "result": {
                "protocolVersion": "2025-03-26", "capabilities": {},
                "serverInfo": {"name": "keyed", "version": "0.1.0"}}});
            ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
        } else {
            StatusCode::FORBIDDEN.into_response()
        }
    });
    let base = serve(app).await;
    let headers = BTreeMap::from([("X-API-Key".to_owned(), "k-123".to_owned())]);
    let result = detect(&base, &headers, QUICK).await;
    assert_eq!(result.transport, DetectedTransport::StreamableHttp);
    assert_eq!(result.server_name.as_deref(), Some("keyed"));
    let without = detect(&base, &BTreeMap::new(), QUICK).await;
    assert_eq!(without.transport, DetectedTransport::Unknown);
    assert!(without.reachable);
    assert!(without.detail.contains("403 Forbidden"), "{}", without.detail);
}

#[tokio::test]
async fn a_server_asking_for_authorization_requires_auth_and_quotes_the_challenge() {
    let challenge = r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource""#;
    let app = Router::new().fallback(move || async move {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
            "sign in",
        )
            .into_response()
    });
    let base = serve(app).await;
    let result = detect(&format!("{base}/mcp"), &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::Unknown);
    assert!(result.reachable);
    assert!(result.requires_auth);
    assert!(result.detail.contains(challenge), "{}", result.detail);
    assert!(
        result.detail.contains("POST initialize answered 401 Unauthorized"),
        "{}",
        result.detail
    );
    let json = serde_json::to_value(&result).expect("serializes");
    assert_eq!(json["requiresAuth"], true);
    assert!(json.get("serverName").is_none());
}

#[tokio::test]
async fn an_sse_only_server_is_detected_by_its_endpoint_event() {
    async fn events() -> Sse<impl futures::Stream<Item = Result<SseFrame, Infallible>>> {
        let endpoint =
            stream::once(async { Ok(SseFrame::default().event("endpoint").data("/messages?sessionId=abc")) });
        // Like a real SSE server, the stream stays open.
        Sse::new(endpoint.chain(stream::pending()))
    }
    let base = serve(Router::new().route("/sse", get(events))).await;
    let url = format!("{base}/sse");
    let result = detect(&url, &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::Sse, "{}", result.detail);
    assert!(result.reachable);
    assert!(!result.requires_auth);
    assert!(result.detail.contains("/messages?sessionId=abc"), "{}", result.detail);
    assert_eq!(
        serde_json::to_value(&result).expect("serializes"),
        json!({"url": url, "transport": "sse", "reachable": true, "requiresAuth": false, "detail": result.detail})
    );
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    let result = detect(&format!("http://{addr}/mcp"), &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::Unknown);
    assert!(!result.reachable);
    assert!(!result.requires_auth);
    assert!(
        result.detail.starts_with("the server could not be reached"),
        "{}",
        result.detail
    );
}

#[tokio::test]
async fn a_web_page_is_reachable_but_no_mcp_transport() {
    let app = Router::new().fallback(|| async { ([(header::CONTENT_TYPE, "text/html")], "<html></html>") });
    let base = serve(app).await;
    let result = detect(&base, &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::Unknown);
    assert!(result.reachable);
    assert_eq!(
        result.detail,
        "no MCP transport detected: POST initialize answered 200 OK with text/html, not an MCP response; \
         GET event stream answered 200 OK with text/html, not an event stream"
    );
}

#[tokio::test]
async fn a_redirect_is_reported_not_followed() {
    let app = Router::new().fallback(|| async {
        AxumResponse::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header(header::LOCATION, "https://elsewhere.example/mcp")
            .body(Body::empty())
            .expect("a response")
    });
    let base = serve(app).await;
    let result = detect(&base, &BTreeMap::new(), QUICK).await;
    assert_eq!(result.transport, DetectedTransport::Unknown);
    assert!(
        result.detail.contains("redirect to https://elsewhere.example/mcp"),
        "{}",
        result.detail
    );
}

#[tokio::test]
async fn a_server_that_never_answers_runs_into_the_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let started = std::time::Instant::now();
    let result = detect(
        &format!("http://{addr}/mcp"),
        &BTreeMap::new(),
        Duration::from_millis(300),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(result.transport, DetectedTransport::Unknown);
    assert!(!result.reachable);
    assert!(result.detail.contains("no answer within 300ms"), "{}", result.detail);
}

#[tokio::test]
async fn bad_urls_and_headers_are_answered_not_probed() {
    for url in ["not a url", "ftp://example.com/mcp", "file:///etc/passwd"] {
        let result = detect(url, &BTreeMap::new(), QUICK).await;
        assert_eq!(result.transport, DetectedTransport::Unknown, "{url}");
        assert!(!result.reachable);
    }
    let headers = BTreeMap::from([("Bad Header".to_owned(), "secret-value".to_owned())]);
    let result = detect("http://127.0.0.1:1/mcp", &headers, QUICK).await;
    assert_eq!(result.detail, "the header name \"Bad Header\" is not valid");
    assert!(!result.detail.contains("secret-value"));
}

#[test]
fn the_sse_parser_handles_split_chunks_line_endings_and_multiline_data() {
    let mut parser = SseParser::default();
    assert!(parser.push(b": comment\r\nevent: endp").is_empty());
    assert!(parser.push(b"oint\r\ndata: /messages\r").is_empty());
    assert_eq!(
        parser.push(b"\n\r\ndata: {\"a\":\ndata: 1}\n\n"),
        vec![
            SseEvent {
                event: "endpoint".into(),
                data: "/messages".into()
            },
            SseEvent {
                event: "message".into(),
                data: "{\"a\":\n1}".into()
            },
        ]
    );
    // An event without data (a priming event) is not dispatched.
    assert!(parser.push(b"id: 0\nretry: 3000\n\n").is_empty());
}

#[test]
fn handshakes_are_read_from_results_errors_and_batches() {
    let completed = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
        "serverInfo": {"name": "n", "version": "v"}}});
    assert!(matches!(
        handshake(&completed),
        Some(Handshake::Completed { name: Some(n), version: Some(v), protocol_version: Some(p) })
            if n == "n" && v == "v" && p == "2025-06-18"
    ));
    let refused = json!([{"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "unsupported version"}}]);
    assert!(matches!(handshake(&refused), Some(Handshake::Refused(m)) if m == "unsupported version"));
    assert!(handshake(&json!({"jsonrpc": "2.0", "id": 2, "result": {}})).is_none());
    assert!(handshake(&json!({"hello": "world"})).is_none());
}
