//! Tests of the HTTP call lane, against a scripted streamable-HTTP server on loopback (the lane
//! alone; the gateway's own tests call real downstreams through it).

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    response::Response,
    routing::any,
};
use futures::StreamExt;
use rmcp::{
    RoleClient,
    model::{JsonRpcMessage, NumberOrString},
    service::RequestHandle,
};
use serde_json::{Value, json};

use super::*;

const BUDGET: CallBudget = CallBudget {
    idle: Duration::from_secs(10),
    max_total: Duration::from_secs(30),
};

/// A request the scripted server took.
#[derive(Debug, Clone)]
struct Seen {
    method: http::Method,
    headers: HeaderMap,
    body: Value,
}

type Script = dyn Fn(&Seen) -> Response + Send + Sync;

#[derive(Clone)]
struct Server {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Script>,
}

async fn take(State(server): State<Server>, method: http::Method, headers: HeaderMap, body: Bytes) -> Response {
    let seen = Seen {
        method,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let response = (server.script)(&seen);
    server.seen.lock().expect("lock").push(seen);
    response
}

/// A lane to a server answering each request with `script`, the requests it took, and what the
/// lane hands rmcp.
async fn lane(
    script: impl Fn(&Seen) -> Response + Send + Sync + 'static,
) -> (
    HttpLane,
    Arc<Mutex<Vec<Seen>>>,
    mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
) {
    lane_via(Via::Plain, script).await
}

/// Which of the lane's senders a test goes through ([`sender`]).
#[derive(Debug, Clone, Copy)]
enum Via {
    Plain,
    Reqwest,
}

/// [`lane`], sending `via` one sender.
async fn lane_via(
    via: Via,
    script: impl Fn(&Seen) -> Response + Send + Sync + 'static,
) -> (
    HttpLane,
    Arc<Mutex<Vec<Seen>>>,
    mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
) {
    let server = Server {
        seen: Arc::default(),
        script: Arc::new(script),
    };
    let seen = Arc::clone(&server.seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let app = Router::new().route("/mcp", any(take)).with_state(server);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (lane, from_lane) = lane_at(&url, via);
    (lane, seen, from_lane)
}

/// A lane whose session, recorded as rmcp would, is at `url`, sending `via` one sender, and
/// what it hands rmcp.
fn lane_at(url: &str, via: Via) -> (HttpLane, mpsc::UnboundedReceiver<ServerJsonRpcMessage>) {
    let record = Arc::new(SessionRecord::default());
    let headers = HashMap::from([
        (
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static("2025-06-18"),
        ),
        (HeaderName::from_static("x-team"), HeaderValue::from_static("blue")),
    ]);
    record.note(url, Some("session-1"), Some("secret"), &headers);
    let (to_rmcp, from_lane) = mpsc::unbounded_channel();
    let lane = HttpLane::new(Egress::Open, record, to_rmcp, CallRelay::default());
    let lane = match via {
        Via::Plain => lane,
        Via::Reqwest => lane.with_senders(Senders::reqwest_only(reqwest::Client::new())),
    };
    (lane, from_lane)
}

/// One call of `echo` through `lane`, within [`BUDGET`], never cancelled.
async fn call_once(lane: &HttpLane) -> Result<ToolOutput, Failure> {
    call_within(lane, &mut params(), BUDGET).await
}

/// A call of `params` through `lane` within `budget`, with no progress sink, never cancelled,
/// its result passed on.
async fn call_within(
    lane: &HttpLane,
    params: &mut CallToolRequestParams,
    budget: CallBudget,
) -> Result<ToolOutput, Failure> {
    lane.call(params, budget, None, None, &CancellationToken::new(), Reading::Passed)
        .await
}

fn params() -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(json!({"text": "hi"}).as_object().cloned().unwrap_or_default())
}

/// The answer to `seen`'s call: its id, a text result.
fn answer(seen: &Seen, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": {"content": [{"type": "text", "text": text}]}})
}

fn progress(seen: &Seen, progress: u32) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
           "params": {"progressToken": seen.body["id"], "progress": progress}})
}

fn json_response(status: u16, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, JSON)
        .body(Body::from(body.to_string()))
        .expect("response")
}

/// An SSE response: each event `(id, data)` after `gap`.
fn sse(events: Vec<(Option<&'static str>, String)>, gap: Duration) -> Response {
    let body = futures::stream::iter(events).then(move |(id, data)| async move {
        tokio::time::sleep(gap).await;
        let id = id.map(|id| format!("id: {id}\n")).unwrap_or_default();
        Ok::<_, Infallible>(format!("{id}data: {data}\n\n"))
    });
    Response::builder()
        .header(CONTENT_TYPE, EVENT_STREAM)
        .body(Body::from_stream(body))
        .expect("response")
}

/// An SSE response that sends `events`, then nothing for a minute.
/// A script answering `tools/call` with `call`, and any other post (a cancellation) with 202.
fn calls_with(
    call: impl Fn(&Seen) -> Response + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Response + Send + Sync + 'static {
    move |s: &Seen| match s.body["method"].as_str() {
        Some("tools/call") => call(s),
        _ => json_response(202, &Value::Null),
    }
}

fn sse_then_silence(events: Vec<String>) -> Response {
    let body = futures::stream::iter(events)
        .map(|data| Ok::<_, Infallible>(format!("data: {data}\n\n")))
        .chain(futures::stream::once(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(String::new())
        }));
    Response::builder()
        .header(CONTENT_TYPE, EVENT_STREAM)
        .body(Body::from_stream(body))
        .expect("response")
}

/// The text of a result, which the lane passes on as the server wrote it.
fn text(output: &ToolOutput) -> String {
    assert!(output.json().is_some(), "the server's JSON is kept: {output:?}");
    let result = output.clone().into_result().expect("a result");
    result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default()
}

/// The `notifications/cancelled` the server was sent, once there is one.
async fn cancelled(seen: &Arc<Mutex<Vec<Seen>>>) -> Value {
    for _ in 0..100 {
        let found = seen
            .lock()
            .expect("lock")
            .iter()
            .find(|s| s.body["method"] == "notifications/cancelled")
            .map(|s| s.body["params"].clone());
        if let Some(params) = found {
            return params;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no notifications/cancelled reached the server");
}

#[tokio::test]
async fn a_json_answer_is_read_and_the_request_carries_the_session() {
    for via in [Via::Plain, Via::Reqwest] {
        a_json_answer_via(via).await;
    }
}

async fn a_json_answer_via(via: Via) {
    let (lane, seen, _) = lane_via(via, |s| json_response(200, &answer(s, "hi back"))).await;
    let mut params = params();
    let result = call_within(&lane, &mut params, BUDGET).await.expect("answered");
    assert_eq!(text(&result), "hi back");
    let seen = seen.lock().expect("lock")[0].clone();
    assert_eq!(seen.method, http::Method::POST);
    for (name, value) in [
        ("mcp-session-id", "session-1"),
        ("mcp-protocol-version", "2025-06-18"),
        ("x-team", "blue"),
        ("authorization", "Bearer secret"),
        ("content-type", JSON),
    ] {
        assert_eq!(
            seen.headers.get(name).and_then(|v| v.to_str().ok()),
            Some(value),
            "{name}"
        );
    }
    let accept = seen
        .headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(accept.contains(JSON) && accept.contains(EVENT_STREAM), "{accept}");
    assert_eq!(seen.body["method"], "tools/call");
    assert_eq!(seen.body["params"]["name"], "echo");
    assert_eq!(seen.body["params"]["arguments"], json!({"text": "hi"}));
    let id = seen.body["id"].as_str().expect("a string id");
    assert!(id.starts_with("muster-"), "{id}");
    assert_eq!(
        seen.body["params"]["_meta"]["progressToken"], id,
        "the id is the progress token"
    );
    // The caller's params are as they were: the token went out with the request only.
    assert!(params.meta.as_ref().is_none_or(|m| m.get_progress_token().is_none()));
}

#[tokio::test]
async fn a_streamed_answer_follows_its_progress_and_the_rest_goes_to_rmcp() {
    let (lane, _, mut to_rmcp) = lane(|s| {
        let sampling = json!({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 5}});
        sse(
            vec![
                (Some("e0"), String::new()),
                (Some("e1"), progress(s, 1).to_string()),
                (Some("e2"), sampling.to_string()),
                (Some("e3"), progress(s, 2).to_string()),
                (Some("e4"), answer(s, "done").to_string()),
            ],
            Duration::from_millis(5),
        )
    })
    .await;
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let reports = Arc::clone(&reports);
        ProgressSink::new(move |u: muster_core::call::ProgressUpdate| reports.lock().expect("lock").push(u.progress))
    };
    let result = lane
        .call(
            &mut params(),
            BUDGET,
            Some(sink),
            None,
            &CancellationToken::new(),
            Reading::Passed,
        )
        .await
        .expect("answered");
    assert_eq!(text(&result), "done");
    assert_eq!(
        *reports.lock().expect("lock"),
        [1.0, 2.0],
        "in order, before the answer"
    );
    let handed = to_rmcp.try_recv().expect("the sampling request went to rmcp");
    assert!(
        matches!(&handed, JsonRpcMessage::Request(r) if r.id == NumberOrString::Number(9)),
        "{handed:?}"
    );
    assert!(
        to_rmcp.try_recv().is_err(),
        "the call's own messages stay with the lane"
    );
}

#[tokio::test]
async fn progress_restarts_the_wait_and_each_timeout_cancels_the_call_with_rmcps_reason() {
    let budget = CallBudget {
        idle: Duration::from_millis(400),
        max_total: Duration::from_secs(30),
    };
    // Reports every 200 ms for 1.2 s, three idle waits: answered.
    let (slow, _, _) = lane(|s| {
        let mut events: Vec<_> = (1..=6).map(|n| (None, progress(s, n).to_string())).collect();
        events.push((None, answer(s, "late").to_string()));
        sse(events, Duration::from_millis(200))
    })
    .await;
    let result = call_within(&slow, &mut params(), budget).await;
    assert_eq!(text(&result.expect("progress kept the call alive")), "late");

    // Silence: the idle wait runs out.
    let (silent, seen, _) = lane(calls_with(|_| sse_then_silence(Vec::new()))).await;
    let failure = call_within(&silent, &mut params(), budget)
        .await
        .expect_err("timed out");
    assert!(
        matches!(failure, Failure::TimedOut(t) if t == budget.idle),
        "{failure:?}"
    );
    let params_sent = cancelled(&seen).await;
    assert_eq!(
        params_sent["reason"],
        RequestHandle::<RoleClient>::REQUEST_TIMEOUT_REASON
    );
    assert_eq!(params_sent["requestId"], seen.lock().expect("lock")[0].body["id"]);

    // Reports forever: the whole budget runs out.
    let total = CallBudget {
        idle: Duration::from_millis(400),
        max_total: Duration::from_millis(700),
    };
    let (chatty, seen, _) = lane(calls_with(|s| {
        sse(
            (1..=50).map(|n| (None, progress(s, n).to_string())).collect(),
            Duration::from_millis(100),
        )
    }))
    .await;
    let failure = call_within(&chatty, &mut params(), total).await.expect_err("timed out");
    assert!(
        matches!(failure, Failure::TimedOut(t) if t == total.max_total),
        "{failure:?}"
    );
    assert_eq!(
        cancelled(&seen).await["reason"],
        RequestHandle::<RoleClient>::REQUEST_MAX_TOTAL_TIMEOUT_REASON
    );
}

#[tokio::test]
async fn a_call_cancelled_or_dropped_is_cancelled_downstream() {
    let script = || calls_with(|s| sse_then_silence(vec![progress(s, 1).to_string()]));
    let (lane_a, seen, _) = lane(script()).await;
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let failure = lane_a
        .call(&mut params(), BUDGET, None, None, &cancel, Reading::Passed)
        .await
        .expect_err("cancelled");
    assert!(matches!(failure, Failure::Cancelled), "{failure:?}");
    assert_eq!(cancelled(&seen).await["reason"], "cancelled by the client");
    // The session's headers go with the notification.
    let notification = seen.lock().expect("lock")[1].clone();
    assert_eq!(
        notification.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()),
        Some("session-1")
    );

    let (lane_b, seen, _) = lane(script()).await;
    let dropped = tokio::time::timeout(Duration::from_millis(200), call_within(&lane_b, &mut params(), BUDGET)).await;
    assert!(dropped.is_err(), "still waiting when dropped");
    assert_eq!(
        cancelled(&seen).await["reason"],
        "the gateway stopped waiting for the call"
    );
}

#[tokio::test]
async fn a_request_turned_away_goes_to_rmcp_with_its_params_as_they_were() {
    for status in [404, 401, 403, 400] {
        let (lane, seen, _) = lane(move |_| json_response(status, &json!({"error": "no"}))).await;
        let mut params = params();
        params
            .meta
            .get_or_insert_default()
            .set_progress_token(ProgressToken(NumberOrString::Number(77)));
        let failure = call_within(&lane, &mut params, BUDGET).await.expect_err("turned away");
        assert!(matches!(failure, Failure::Fallback), "{status}: {failure:?}");
        assert_eq!(
            params.meta.as_ref().and_then(|m| m.get_progress_token()),
            Some(ProgressToken(NumberOrString::Number(77))),
            "{status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            seen.lock().expect("lock").len(),
            1,
            "{status}: nothing more sent (no cancellation)"
        );
    }
    // No session recorded yet: nothing is sent.
    let (to_rmcp, _) = mpsc::unbounded_channel();
    let unrecorded = HttpLane::new(Egress::Open, Arc::default(), to_rmcp, CallRelay::default());
    let failure = call_once(&unrecorded).await.expect_err("no session");
    assert!(matches!(failure, Failure::Fallback), "{failure:?}");
}

#[tokio::test]
async fn a_server_error_fails_the_call_with_its_json_rpc_error_or_its_status() {
    let (lane_a, _, _) = lane(|s| {
        json_response(
            500,
            &json!({"jsonrpc": "2.0", "id": s.body["id"], "error": {"code": -32603, "message": "it broke"}}),
        )
    })
    .await;
    let failure = call_once(&lane_a).await.expect_err("refused");
    assert!(
        matches!(&failure, Failure::Refused(e) if e.message == "it broke"),
        "{failure:?}"
    );

    let (lane_b, seen, _) = lane(|_| {
        Response::builder()
            .status(502)
            .body(Body::from("upstream gone"))
            .expect("response")
    })
    .await;
    let failure = call_once(&lane_b).await.expect_err("failed");
    assert!(
        matches!(&failure, Failure::Lost(why) if why.contains("502") && why.contains("upstream gone")),
        "{failure:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        seen.lock().expect("lock").len(),
        1,
        "answered: not sent again, nothing to cancel"
    );

    // Too many requests: not sent again, the server's Retry-After named.
    let (lane_d, seen, _) = lane(|_| {
        Response::builder()
            .status(429)
            .header("retry-after", "7")
            .body(Body::empty())
            .expect("response")
    })
    .await;
    let failure = call_once(&lane_d).await.expect_err("refused");
    assert!(
        matches!(&failure, Failure::Lost(why) if why.contains("429") && why.contains("retry after 7")),
        "{failure:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(seen.lock().expect("lock").len(), 1, "not sent again, nothing to cancel");

    // A 202 is no answer to a request.
    let (lane_c, _, _) = lane(|_| json_response(202, &Value::Null)).await;
    let failure = call_once(&lane_c).await.expect_err("no answer");
    assert!(
        matches!(&failure, Failure::Lost(why) if why.contains("202")),
        "{failure:?}"
    );
}

#[tokio::test]
async fn a_broken_stream_is_resumed_from_its_last_event() {
    for via in [Via::Plain, Via::Reqwest] {
        a_broken_stream_via(via).await;
    }
}

async fn a_broken_stream_via(via: Via) {
    let (lane, seen, _) = lane_via(via, |s| match s.method {
        http::Method::POST => sse(
            vec![
                (Some("e0"), String::new()),
                (
                    Some("e1"),
                    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).to_string(),
                ),
            ],
            Duration::ZERO,
        ),
        _ => sse(
            vec![(
                Some("e2"),
                json!({"jsonrpc": "2.0", "id": "muster-1", "result": {"content": []}}).to_string(),
            )],
            Duration::ZERO,
        ),
    })
    .await;
    let output = call_once(&lane).await.expect("answered on the resumed stream");
    assert_eq!(output.json().map(|json| json.get()), Some(r#"{"content":[]}"#));
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].method, http::Method::GET);
    let header = |name: &str| {
        seen[1]
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(header("last-event-id").as_deref(), Some("e1"));
    assert_eq!(header("mcp-session-id").as_deref(), Some("session-1"));
    assert_eq!(header("accept").as_deref(), Some(EVENT_STREAM));
}

#[tokio::test]
async fn a_stream_that_ends_without_an_answer_or_an_event_id_fails_the_call() {
    let (lane, _, _) = lane(|_| {
        sse(
            vec![(
                None,
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).to_string(),
            )],
            Duration::ZERO,
        )
    })
    .await;
    let failure = call_once(&lane).await.expect_err("no answer");
    assert!(
        matches!(&failure, Failure::Lost(why) if why.contains("ended before the answer")),
        "{failure:?}"
    );
}

#[test]
fn plain_http_goes_on_the_lanes_own_pool_and_https_through_reqwest() {
    let uri = |s: &str| http::Uri::try_from(s).expect("uri");
    assert!(!sender::plain_http(&uri("https://127.0.0.1:1/mcp")), "TLS is reqwest's");
    let proxy_configured = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    assert_eq!(
        sender::plain_http(&uri("http://127.0.0.1:1/mcp")),
        !proxy_configured,
        "plain HTTP takes the lane's pool unless a proxy is configured"
    );
}

#[tokio::test]
async fn a_server_that_cannot_be_reached_fails_the_call_naming_its_url_and_why() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", closed.local_addr().expect("addr"));
    drop(closed);
    for via in [Via::Plain, Via::Reqwest] {
        let (lane, _) = lane_at(&url, via);
        let failure = call_once(&lane).await.expect_err("nobody listens");
        let Failure::Send(error) = failure else {
            panic!("{via:?}: {failure:?}");
        };
        let message = error.to_string();
        assert!(message.contains(&url), "{via:?}: {message}");
        if matches!(via, Via::Plain) {
            assert!(message.to_lowercase().contains("connect"), "{message}");
        }
    }
}
