//! What `/mcp` accepts at the HTTP level: the `Host` values of `aggregator.allowedHosts`
//! (loopback by default, DNS-rebinding protection), the `Origin` values of `allowedOrigins`,
//! and bodies up to `maxRequestBodyBytes`. Refusals are 403 and 413, each a JSON-RPC error naming
//! the key that sets the limit, and the gateway keeps serving.

mod common;

use common::Harness;
use muster::core::config::{AggregatorConfig, Limits, MusterConfig};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// POSTs `body` to `url` with `host` (and `origin`, when given); the status.
async fn post(url: &str, host: &str, origin: Option<&str>, body: String) -> u16 {
    post_answer(url, host, origin, body).await.0
}

/// [`post`]'s status and body.
async fn post_answer(url: &str, host: &str, origin: Option<&str>, body: String) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.expect("answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Asserts a 403 whose JSON-RPC error names the Host refused and `aggregator.allowedHosts`
/// with the hosts it lists.
#[track_caller]
fn assert_host_refused((status, body): (u16, String), host: &str, listed: &str) {
    assert_eq!(status, 403, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    let message = body["error"]["message"].as_str().expect("an error message");
    assert!(message.contains(&format!("{host:?}")), "{message}");
    assert!(
        message.contains(&format!("(aggregator.allowedHosts: {listed})")),
        "{message}"
    );
}

fn config(aggregator: AggregatorConfig) -> MusterConfig {
    MusterConfig::default().with_aggregator(aggregator)
}

#[tokio::test]
async fn by_default_only_loopback_hosts_reach_mcp() {
    let h = Harness::start(Vec::new()).await;
    let port = h
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .expect("a port");
    assert_eq!(
        post(&h.url, &format!("127.0.0.1:{port}"), None, INITIALIZE.into()).await,
        200
    );
    assert_eq!(
        post(&h.url, &format!("localhost:{port}"), None, INITIALIZE.into()).await,
        200
    );
    assert_host_refused(
        post_answer(&h.url, "evil.example.com", None, INITIALIZE.into()).await,
        "evil.example.com",
        "localhost, 127.0.0.1, ::1",
    );
    h.stop().await;
}

#[tokio::test]
async fn configured_hosts_and_origins_are_the_ones_accepted() {
    let h = Harness::start_with(
        config(
            AggregatorConfig::default()
                .with_allowed_hosts(vec!["muster.example.com".into(), "127.0.0.1".into()])
                .with_allowed_origins(vec!["https://chat.example.com".into()]),
        ),
        Vec::new(),
    )
    .await;
    assert_eq!(post(&h.url, "muster.example.com", None, INITIALIZE.into()).await, 200);
    assert_eq!(
        post(
            &h.url,
            "muster.example.com",
            Some("https://chat.example.com"),
            INITIALIZE.into()
        )
        .await,
        200
    );
    assert_eq!(
        post(
            &h.url,
            "muster.example.com",
            Some("https://evil.example.com"),
            INITIALIZE.into()
        )
        .await,
        403
    );
    assert_host_refused(
        post_answer(&h.url, "evil.example.com:8090", None, INITIALIZE.into()).await,
        "evil.example.com:8090",
        "muster.example.com, 127.0.0.1",
    );
    h.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_and_the_gateway_keeps_serving() {
    let h = Harness::start_with(
        config(AggregatorConfig::default().with_limits(Limits::default().with_max_request_body_bytes(2048))),
        Vec::new(),
    )
    .await;
    let port = h
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .expect("a port");
    let host = format!("127.0.0.1:{port}");
    let padding = "x".repeat(4096);
    let big = INITIALIZE.replace(r#""name":"t""#, &format!(r#""name":"{padding}""#));
    assert_eq!(post(&h.url, &host, None, big).await, 413);
    assert_eq!(post(&h.url, &host, None, INITIALIZE.into()).await, 200);
    let listed = h.meta("list_tools", serde_json::json!({"limit": 1})).await;
    assert_ne!(listed.is_error, Some(true));
    h.stop().await;
}

#[tokio::test]
async fn ending_a_session_answers_no_content() {
    let h = Harness::start(Vec::new()).await;
    let http = reqwest::Client::new();
    let initialized = http
        .post(&h.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE)
        .send()
        .await
        .expect("answers");
    assert_eq!(initialized.status().as_u16(), 200);
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let ended = http
        .delete(&h.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("answers");
    // 204, which the MCP Python SDK takes as a clean end (it warns on 202).
    assert_eq!(ended.status().as_u16(), 204);
    // The session is gone.
    let after = http
        .post(&h.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .send()
        .await
        .expect("answers");
    assert_eq!(after.status().as_u16(), 404);
    h.stop().await;
}
