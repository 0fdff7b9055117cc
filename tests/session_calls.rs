//! `tools/call` on an established session is answered in front of rmcp
//! (`muster_gateway::http::session_calls`), on the wire: the answer and the call's progress come
//! on the request's SSE stream, a cancellation (or the end of the session) reaches the
//! downstream, and every request rmcp
//! would refuse is still refused (a foreign `Host` or `Origin`, an unsupported protocol
//! version, a session that ended).
//!
//! rmcp opens each request's stream with a priming event (`retry:`, an event id); an answer
//! given in front of it has neither. That is how these tests tell who answered.

mod common;

use std::time::Duration;

use common::{
    Harness, demo_stdio,
    raw_session::{Answer, RawSession, result_text},
};
use muster::core::config::{AggregatorConfig, MusterConfig};
use serde_json::json;

#[tokio::test]
async fn a_call_on_an_established_session_is_answered_in_front_of_rmcp_with_its_progress_first() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let session = RawSession::open(&h.url).await;

    let answer = session
        .post(
            RawSession::call(
                7,
                "x_demo_sleep",
                json!({"seconds": 0.35}),
                Some(json!({"progressToken": "p7"})),
            ),
            &[],
        )
        .await;
    assert_eq!(answer.status, 200);
    assert!(!answer.answered_by_rmcp(), "answered by rmcp: {answer:?}");
    let messages = answer.messages();
    let (last, progress) = messages.split_last().expect("an answer");
    assert_eq!(last["id"], 7, "{last}");
    assert_eq!(result_text(last), "slept 0.35s");
    let reported: Vec<f64> = progress
        .iter()
        .map(|m| {
            assert_eq!(m["method"], "notifications/progress", "{m}");
            assert_eq!(m["params"]["progressToken"], "p7", "{m}");
            m["params"]["progress"].as_f64().expect("a number")
        })
        .collect();
    assert!(reported.len() >= 3, "the demo reports every 100 ms: {reported:?}");
    assert!(reported.windows(2).all(|w| w[0] <= w[1]), "in order: {reported:?}");
    assert_eq!(
        reported.last().copied(),
        Some(0.35),
        "the final report precedes the answer"
    );

    // Any other method is rmcp's.
    let listed = session
        .post(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}), &[])
        .await;
    assert!(listed.answered_by_rmcp(), "{listed:?}");
    assert_eq!(listed.messages().last().expect("an answer")["id"], 8);
    h.stop().await;
}

#[tokio::test]
async fn a_call_rmcp_would_refuse_is_refused_on_an_established_session() {
    let h = Harness::start_with(
        MusterConfig::default()
            .with_aggregator(AggregatorConfig::default().with_allowed_origins(vec!["https://chat.example.com".into()])),
        vec![demo_stdio("demo")],
    )
    .await;
    let session = RawSession::open(&h.url).await;
    let echo = |id| RawSession::call(id, "x_demo_sleep", json!({"seconds": 0}), None);

    // DNS rebinding: a foreign Host naming a live session.
    let rebound = session.post(echo(1), &[("host", "evil.example.com")]).await;
    assert_eq!(rebound.status, 403, "{rebound:?}");
    // A cross-origin page.
    let foreign = session.post(echo(2), &[("origin", "https://evil.example.com")]).await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    // An allowed origin is rmcp's to judge too (the handshake named none), and it passes.
    let allowed = session.post(echo(3), &[("origin", "https://chat.example.com")]).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert!(allowed.answered_by_rmcp(), "{allowed:?}");
    assert_eq!(result_text(allowed.messages().last().expect("an answer")), "slept 0s");
    // A protocol version rmcp does not know.
    let unknown = session.post(echo(4), &[("mcp-protocol-version", "1999-01-01")]).await;
    assert_eq!(unknown.status, 400, "{unknown:?}");
    // A client that does not take SSE.
    let json_only = session.post(echo(5), &[("accept", "application/json")]).await;
    assert_eq!(json_only.status, 406, "{json_only:?}");
    // With the handshake's headers, the call is answered in front.
    let plain = session.post(echo(6), &[]).await;
    assert_eq!(plain.status, 200);
    assert!(!plain.answered_by_rmcp(), "{plain:?}");
    assert_eq!(result_text(plain.messages().last().expect("an answer")), "slept 0s");

    // An end rmcp refuses ends nothing: the session still answers in front.
    let refused = session
        .http
        .delete(&session.url)
        .header("host", "evil.example.com")
        .header("mcp-session-id", &session.id)
        .send()
        .await
        .expect("answers");
    assert_eq!(refused.status(), 403);
    let still = session.post(echo(9), &[]).await;
    assert!(!still.answered_by_rmcp(), "{still:?}");
    assert_eq!(result_text(still.messages().last().expect("an answer")), "slept 0s");

    // A session its client ended answers nothing, and one never opened neither.
    session.end().await;
    let after = session.post(echo(7), &[]).await;
    assert_eq!(after.status, 404, "{after:?}");
    let stranger = RawSession {
        id: "not-a-session".into(),
        ..session
    };
    assert_eq!(stranger.post(echo(8), &[]).await.status, 404);
    h.stop().await;
}

/// Starts a 30 s call as request `id` on a new session, runs `end` on the session once it is
/// under way, and checks that the downstream saw the call cancelled and that the call's stream
/// (answered in front of rmcp) ended long before 30 s.
async fn a_long_call_is_cancelled_by<F, Fut>(id: u64, end: F)
where
    F: FnOnce(RawSession) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let session = RawSession::open(&h.url).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let marker = dir.path().join("cancelled");
    let arguments = json!({"seconds": 30, "cancel_marker": marker.display().to_string()});
    let response = session
        .send(RawSession::call(id, "x_demo_sleep", arguments, None), &[])
        .await;
    assert_eq!(response.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    end(session).await;
    assert!(
        common::eventually(5, || async { marker.exists() }).await,
        "the downstream saw the cancellation"
    );
    let answer = tokio::time::timeout(Duration::from_secs(10), Answer::read(response))
        .await
        .expect("the call ends long before its 30 s");
    assert!(!answer.answered_by_rmcp(), "{answer:?}");
    h.stop().await;
}

#[tokio::test]
async fn cancelling_a_call_answered_in_front_of_rmcp_cancels_it_downstream() {
    a_long_call_is_cancelled_by(11, |session| async move {
        let cancelled = session
            .post(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11, "reason": "test"}}),
                &[],
            )
            .await;
        assert_eq!(cancelled.status, 202, "{cancelled:?}");
    })
    .await;
}

#[tokio::test]
async fn ending_the_session_cancels_its_calls_answered_in_front_of_rmcp() {
    a_long_call_is_cancelled_by(12, |session| async move {
        session.end().await;
    })
    .await;
}

#[tokio::test]
async fn a_call_whose_client_goes_still_runs_to_its_end() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let session = RawSession::open(&h.url).await;
    let response = session
        .send(RawSession::call(13, "x_demo_sleep", json!({"seconds": 0.5}), None), &[])
        .await;
    assert_eq!(response.status(), 200);
    // The client goes with the call under way: its connection closes, the stream is dropped.
    drop(response);
    drop(session);
    let finished = r#"muster_tool_calls_total{tool="x_demo_sleep",server="demo",kind="tool",outcome="ok"} 1"#;
    let metrics = h.url.replace("/mcp", "/metrics");
    let seen = common::eventually(10, || {
        let metrics = metrics.clone();
        async move {
            let text = reqwest::get(&metrics)
                .await
                .expect("GET /metrics")
                .text()
                .await
                .unwrap_or_default();
            text.contains(finished)
        }
    })
    .await;
    assert!(seen, "the call finished downstream and was counted: {finished}");
    h.stop().await;
}

/// A stdio MCP server, in Python, whose results are written as rmcp would never write them:
/// spaces, keys out of order, `\u` escapes. `plain` answers such a result; `complete` one with
/// `resultType: "complete"` and array structured content (what a 2026-07-28 server may send);
/// `broken` one whose text block has no text.
const ODD_SERVER: &str = r#"
import json, sys
RESULTS = {
    "plain": '{ "isError" : false, "content" : [ {"text":"caf\\u00e9 \\"odd\\"","type":"text"} ] }',
    "complete": '{"resultType":"complete","structuredContent":[1,2],"content":[]}',
    "broken": '{"content":[{"type":"text"}]}',
}
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if id is None:
        continue
    if method == "initialize":
        result = json.dumps({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                             "serverInfo": {"name": "odd", "version": "1"}})
    elif method == "tools/list":
        result = json.dumps({"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in RESULTS]})
    elif method == "tools/call":
        result = RESULTS[message["params"]["name"]]
    else:
        result = "{}"
    sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (json.dumps(id), result))
    sys.stdout.flush()
"#;

#[tokio::test]
async fn a_downstream_result_goes_out_byte_for_byte_when_the_client_reads_it_the_same() {
    use muster::core::{
        config::Exposure,
        crd::{MCPServer, MCPServerSpec, ServerType},
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("odd.py");
    std::fs::write(&script, ODD_SERVER).expect("written");
    let odd = MCPServer::new(
        "odd",
        MCPServerSpec {
            server_type: Some(ServerType::Stdio),
            auto_start: true,
            command: Some("python3".into()),
            args: vec![script.display().to_string()],
            timeout: 20,
            ..MCPServerSpec::default()
        },
    );
    let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_exposure(Exposure::Both));
    let h = Harness::start_with(config, vec![odd]).await;
    let session = RawSession::open(&h.url).await;
    let native =
        |id: u64, tool: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool}});

    // Called natively, in front of rmcp: the server's bytes, spliced into the response.
    let plain = session.post(native(1, "x_odd_plain"), &[]).await;
    assert!(!plain.answered_by_rmcp(), "{plain:?}");
    let data: Vec<&String> = plain
        .events
        .iter()
        .flatten()
        .filter(|l| l.starts_with("data: {"))
        .collect();
    assert_eq!(
        data,
        [
            r#"data: {"jsonrpc":"2.0","id":1,"result":{ "isError" : false, "content" : [ {"text":"caf\u00e9 \"odd\"","type":"text"} ] }}"#
        ],
        "{plain:?}"
    );
    // A result this client (2025-06-18) reads otherwise goes out as rmcp writes it for it.
    let complete = session.post(native(2, "x_odd_complete"), &[]).await;
    let answer = complete.messages().pop().expect("an answer");
    assert_eq!(
        answer["result"],
        json!({"content": [{"type": "text", "text": "[1,2]"}]}),
        "{answer}"
    );
    // A result that is not one is the call's error, naming what is wrong.
    let broken = session.post(native(3, "x_odd_broken"), &[]).await;
    let answer = broken.messages().pop().expect("an answer");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let why = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        why.contains("server odd") && why.contains("missing field `text`"),
        "{why}"
    );
    // Through call_tool, the envelope reads the result.
    let enveloped = session
        .post(RawSession::call(4, "x_odd_plain", json!({}), None), &[])
        .await;
    assert_eq!(
        result_text(enveloped.messages().last().expect("an answer")),
        "café \"odd\""
    );
    session.end().await;
    h.stop().await;
}
