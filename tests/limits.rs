//! `aggregator.limits` with real clients and a real downstream: JSON nesting depth, concurrent
//! calls per session and per server (a bounded queue, then a busy error naming the limit), and
//! a graceful shutdown that lets calls in flight finish, refuses new ones, and leaves no process
//! of a downstream server behind; request heads up to `maxRequestHeadBytes`; sessions up to
//! `maxSessions`. Every refusal leaves the gateway serving.

mod common;

use std::time::{Duration, Instant};

use common::{Harness, call_meta, connect, demo_stdio, envelope, eventually, fast_supervision, text};
use muster::{
    core::config::{AggregatorConfig, Limits, MusterConfig},
    gateway::Gateway,
};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn with_limits(limits: Limits) -> MusterConfig {
    MusterConfig::default().with_aggregator(AggregatorConfig::default().with_limits(limits))
}

/// A JSON-RPC `tools/call` of `call_tool` whose arguments nest `depth` levels.
fn deep_call(depth: usize) -> String {
    let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"call_tool","arguments":{{"name":"x_demo_echo","arguments":{{"message":"hi","deep":{nested}}}}}}}}}"#
    )
}

/// A `call_tool` request running downstream tool `tool` with `arguments`.
fn call_tool(tool: &str, arguments: Value) -> CallToolRequestParams {
    let args = json!({"name": tool, "arguments": arguments});
    CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default())
}

/// A JSON value nesting `depth` arrays.
fn nested(depth: usize) -> Value {
    serde_json::from_str(&format!("{}1{}", "[".repeat(depth), "]".repeat(depth))).expect("valid JSON")
}

/// POSTs `body` to the gateway at `url` outside any session; the status and the body.
async fn post(url: &str, body: String) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .expect("the gateway answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn json_nested_deeper_than_the_limit_is_refused_naming_the_limit() {
    let h = Harness::start_with(
        with_limits(Limits::default().with_max_json_depth(16)),
        vec![demo_stdio("demo")],
    )
    .await;
    // 100,000 levels: refused before any parse, with a JSON-RPC error naming the key.
    let (status, body) = post(&h.url, deep_call(100_000)).await;
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error body");
    assert_eq!(error["error"]["code"], -32600, "{body}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("deeper than 16 levels"), "{message}");
    assert!(message.contains("aggregator.limits.maxJsonDepth"), "{message}");

    // Just over the limit (the envelope itself is 4 levels deep) is refused too; a client's
    // call in its session gets an error, and the session goes on working.
    let deep = nested(13);
    let refused = h
        .client
        .call_tool(call_tool("x_demo_echo", json!({"message": "hi", "deep": deep})))
        .await;
    assert!(
        refused.is_err(),
        "a call nesting past the limit is refused: {refused:?}"
    );
    let echoed = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "still here"}}),
        )
        .await;
    assert!(text(&echoed).contains("still here"), "{}", text(&echoed));
    // Up to the limit passes.
    let passed = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "shallow", "deep": nested(8)}}),
        )
        .await;
    assert!(text(&passed).contains("shallow"), "{}", text(&passed));
    h.stop().await;
}

/// Calls `x_demo_sleep` for `seconds` through `call_tool` on `client`: the result's text, or
/// the protocol error's or error result's text.
async fn try_sleep(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    seconds: f64,
) -> Result<String, String> {
    let result = client
        .call_tool(call_tool("x_demo_sleep", json!({"seconds": seconds})))
        .await;
    match result {
        Ok(r) if r.is_error == Some(true) => Err(text(&r)),
        Ok(r) => Ok(text(&r)),
        Err(e) => Err(e.to_string()),
    }
}

/// [`try_sleep`] on a new session of `url`.
async fn sleep_call(url: &str, seconds: f64) -> Result<String, String> {
    let client = connect(url, &[], None).await;
    let result = try_sleep(&client, seconds).await;
    let _ = client.cancel().await;
    result
}

#[tokio::test]
async fn a_session_over_its_calls_waits_in_the_queue_then_is_refused_as_busy() {
    let h = Harness::start_with(
        with_limits(
            Limits::default()
                .with_max_concurrent_calls_per_session(2)
                .with_max_queued_calls(1)
                .with_queue_timeout_seconds(1),
        ),
        vec![demo_stdio("demo")],
    )
    .await;
    // Four calls of one session at once: two run, one waits (and its wait of 1 s runs out
    // before a slot frees), one finds the queue full.
    let calls = (0..4).map(|_| try_sleep(&h.client, 2.5));
    // Meanwhile another session is not held up by this one's limit.
    let other = async {
        let started = Instant::now();
        let echoed = sleep_call(&h.url, 0.0).await;
        (echoed, started.elapsed())
    };
    let (results, (other_result, other_took)) = tokio::join!(futures::future::join_all(calls), other);
    let slept = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|t| t.contains("slept 2.5s")))
        .count();
    let busy: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(slept, 2, "two calls ran: {results:?}");
    assert_eq!(busy.len(), 2, "two were refused: {busy:?}");
    for message in &busy {
        assert!(message.contains("is busy"), "{message}");
        assert!(
            message.contains("aggregator.limits.maxConcurrentCallsPerSession"),
            "{message}"
        );
    }
    assert!(other_result.is_ok(), "{other_result:?}");
    assert!(
        other_took < Duration::from_secs(2),
        "the other session waited {other_took:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_queued_call_runs_once_a_slot_frees() {
    let h = Harness::start_with(
        with_limits(
            Limits::default()
                .with_max_concurrent_calls_per_session(1)
                .with_max_queued_calls(4)
                .with_queue_timeout_seconds(20),
        ),
        vec![demo_stdio("demo")],
    )
    .await;
    let started = Instant::now();
    let calls = (0..3).map(|_| try_sleep(&h.client, 0.4));
    let results = futures::future::join_all(calls).await;
    for r in &results {
        assert!(r.as_ref().is_ok_and(|t| t.contains("slept 0.4s")), "{r:?}");
    }
    // One at a time: three sleeps of 0.4 s take at least 1.2 s.
    assert!(
        started.elapsed() >= Duration::from_millis(1150),
        "{:?}",
        started.elapsed()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_server_over_its_calls_refuses_the_next_caller_as_busy() {
    let h = Harness::start_with(
        with_limits(
            Limits::default()
                .with_max_concurrent_calls_per_server(1)
                .with_max_queued_calls(0),
        ),
        vec![demo_stdio("demo")],
    )
    .await;
    // Two sessions: the server's one slot is taken by the first, the second is refused at once.
    let first = sleep_call(&h.url, 1.5);
    let second = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        sleep_call(&h.url, 0.0).await
    };
    let (first, second) = tokio::join!(first, second);
    assert!(first.as_ref().is_ok_and(|t| t.contains("slept 1.5s")), "{first:?}");
    let refused = second.expect_err("the second caller is refused");
    assert!(refused.contains("server demo is busy"), "{refused}");
    assert!(
        refused.contains("aggregator.limits.maxConcurrentCallsPerServer"),
        "{refused}"
    );
    // Once the slot is free, calls run again.
    let again = sleep_call(&h.url, 0.0).await;
    assert!(again.as_ref().is_ok_and(|t| t.contains("slept 0s")), "{again:?}");
    h.stop().await;
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) && pid != std::process::id() {
            found.push(pid);
        }
    }
    found
}

/// A demo server started by a shell that also leaves a `sleep <marker>` behind: the grandchild
/// an orphan would be.
/// Whether every process carrying `marker` is gone within a few seconds. The server's process
/// group is sent SIGKILL before `serve` returns, but a process dies only when it is next
/// scheduled, which on a loaded machine can be a moment later.
async fn all_gone(marker: &str) -> bool {
    eventually(5, || async { processes_with(marker).is_empty() }).await
}

fn demo_with_a_grandchild(marker: &str) -> muster::core::crd::MCPServer {
    let mut server = demo_stdio("demo");
    let demo = server.spec.command.clone().expect("the demo command");
    server.spec.command = Some("sh".into());
    server.spec.args = vec!["-c".into(), format!("sleep {marker} & exec {demo} demo-server")];
    server
}

/// Serves `config` with `server` through [`Gateway::serve`]; the URL, the trigger of the
/// shutdown signal and the serving task.
async fn serve(
    config: MusterConfig,
    server: muster::core::crd::MCPServer,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<muster::gateway::ShutdownReport>>,
) {
    let gateway = Gateway::with_supervision(config, vec![server], Vec::new(), fast_supervision()).expect("valid");
    gateway.start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let (stop, signal) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        gateway
            .serve(listener, async move {
                let _ = signal.await;
            })
            .await
    });
    (url, stop, serving)
}

#[tokio::test]
async fn shutdown_lets_calls_in_flight_finish_and_leaves_no_process_behind() {
    let marker = format!("{}.{}", 7000 + std::process::id() % 1000, std::process::id());
    let (url, stop, serving) = serve(MusterConfig::default(), demo_with_a_grandchild(&marker)).await;
    assert_eq!(processes_with(&marker).len(), 1, "the grandchild runs");
    let client = connect(&url, &[], None).await;
    let pid: u32 =
        envelope(&call_meta(&client, "call_tool", json!({"name": "x_demo_pid"})).await)["content"][0]["text"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .expect("the demo server's pid");
    let in_flight = tokio::spawn(async move {
        let result = call_meta(
            &client,
            "call_tool",
            json!({"name": "x_demo_sleep", "arguments": {"seconds": 1.5}}),
        )
        .await;
        (text(&result), client)
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.send(()).expect("signal");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A request after the signal is refused (a 503 on an open connection, or no connection).
    let late = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await;
    if let Ok(response) = late {
        assert_eq!(response.status().as_u16(), 503, "a new request during the drain");
    }
    let (answer, client) = in_flight.await.expect("the call task");
    assert!(answer.contains("slept 1.5s"), "the call in flight finished: {answer}");
    let report = tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("serve returns")
        .expect("the task")
        .expect("served");
    assert!(report.in_flight_at_signal >= 1, "{report:?}");
    assert_eq!(report.ended_in_flight, 0, "{report:?}");
    drop(client);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
        "the downstream process {pid} was stopped"
    );
    assert!(
        all_gone(&marker).await,
        "what the downstream started is gone too: {:?}",
        processes_with(&marker)
    );
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[tokio::test]
async fn shutdown_ends_calls_still_running_at_the_deadline() {
    let marker = format!("{}.{}", 8000 + std::process::id() % 1000, std::process::id());
    let (url, stop, serving) = serve(
        with_limits(Limits::default().with_shutdown_timeout_seconds(1)),
        demo_with_a_grandchild(&marker),
    )
    .await;
    let client = connect(&url, &[], None).await;
    let in_flight = tokio::spawn(async move {
        client
            .call_tool(call_tool("x_demo_sleep", json!({"seconds": 60})))
            .await
            .map(|r| text(&r))
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let started = Instant::now();
    stop.send(()).expect("signal");
    let report = tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("serve returns long before the call would have")
        .expect("the task")
        .expect("served");
    assert_eq!(report.ended_in_flight, 1, "{report:?}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let answer = tokio::time::timeout(Duration::from_secs(20), in_flight)
        .await
        .expect("the caller is answered or disconnected");
    let ended = match &answer {
        Ok(Err(e)) => e.to_string(),
        other => panic!("the call was ended with an error, not finished: {other:?}"),
    };
    assert!(
        ended.contains("the gateway shut down before the call finished"),
        "{ended}"
    );
    assert!(all_gone(&marker).await, "{:?}", processes_with(&marker));
}

const INITIALIZE_PARAMS: &str = r#""protocolVersion":"2025-06-18","clientInfo":{"name":"t","version":"1"}"#;

/// POSTs an `initialize` to `url` with a header `x-padding` of `padding` bytes and a body
/// padded with `body_padding` bytes; the status, or the error when the connection failed.
async fn initialize_padded(
    http: &reqwest::Client,
    url: &str,
    padding: usize,
    body_padding: usize,
) -> Result<u16, reqwest::Error> {
    initialize_padded_answer(http, url, padding, body_padding)
        .await
        .map(|(status, _)| status)
}

/// [`initialize_padded`]'s status and body.
async fn initialize_padded_answer(
    http: &reqwest::Client,
    url: &str,
    padding: usize,
    body_padding: usize,
) -> Result<(u16, String), reqwest::Error> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{{INITIALIZE_PARAMS},"capabilities":{{"experimental":{{"pad":{{"x":"{}"}}}}}}}}}}"#,
        "p".repeat(body_padding)
    );
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("x-padding", "h".repeat(padding))
        .body(body)
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.unwrap_or_default()))
}

/// Asserts `answer` is a 431 whose JSON-RPC error names `maxRequestHeadBytes` and `max`.
#[track_caller]
fn assert_head_refused(answer: Result<(u16, String), reqwest::Error>, max: usize) {
    let (status, body) = answer.expect("answered");
    assert_eq!(status, 431, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    let message = body["error"]["message"].as_str().expect("an error message");
    assert!(
        message.contains("aggregator.limits.maxRequestHeadBytes") && message.contains(&format!("the {max} allowed")),
        "{message}"
    );
}

/// Signals the gateway served by [`serve`] to stop; its report once it did.
async fn stopped(
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<std::io::Result<muster::gateway::ShutdownReport>>,
) -> muster::gateway::ShutdownReport {
    stop.send(()).expect("signal");
    tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("serve returns")
        .expect("the task")
        .expect("served")
}

#[tokio::test]
async fn a_request_head_over_max_request_head_bytes_gets_431_and_the_gateway_keeps_serving() {
    let (url, stop, serving) = serve(MusterConfig::default(), demo_stdio("demo")).await;
    let http = reqwest::Client::new();
    assert_eq!(
        initialize_padded(&http, &url, 7000, 0).await.ok(),
        Some(200),
        "a 7 KB header"
    );
    // Over the default 8 KiB: refused with a body that names the key.
    assert_head_refused(initialize_padded_answer(&http, &url, 9000, 0).await, 8192);
    // The same for any route, not only /mcp.
    let health = url.replace("/mcp", "/health");
    let refused = http
        .get(&health)
        .header("x-padding", "h".repeat(9000))
        .send()
        .await
        .expect("answered");
    assert_eq!(refused.status().as_u16(), 431);
    // Past twice the limit, hyper cuts the connection's read off itself (a bare 431).
    assert_eq!(
        initialize_padded(&http, &url, 20_000, 0).await.ok(),
        Some(431),
        "a head over twice the limit"
    );
    // Bodies are not bound by it; and the gateway goes on serving.
    assert_eq!(
        initialize_padded(&http, &url, 0, 1_000_000).await.ok(),
        Some(200),
        "a 1 MB body"
    );
    assert_eq!(
        initialize_padded(&reqwest::Client::new(), &url, 100, 0).await.ok(),
        Some(200)
    );
    stopped(stop, serving).await;

    // Raised, the limit lets the larger head through.
    let raised = with_limits(Limits::default().with_max_request_head_bytes(16 * 1024));
    let (url, stop, serving) = serve(raised, demo_stdio("demo")).await;
    assert_eq!(
        initialize_padded(&http, &url, 9000, 0).await.ok(),
        Some(200),
        "under 16 KiB"
    );
    assert_head_refused(initialize_padded_answer(&http, &url, 17000, 0).await, 16 * 1024);
    stopped(stop, serving).await;
}

#[tokio::test]
async fn under_the_router_a_request_head_over_max_request_head_bytes_gets_431_naming_the_key() {
    // An embedder's own server (axum::serve of Gateway::router), whose buffers hyper's defaults
    // bound: the router refuses the head itself.
    let h = Harness::start_with(MusterConfig::default(), Vec::new()).await;
    let http = reqwest::Client::new();
    assert_eq!(initialize_padded(&http, &h.url, 7000, 0).await.ok(), Some(200));
    assert_head_refused(initialize_padded_answer(&http, &h.url, 9000, 0).await, 8192);
    assert_head_refused(initialize_padded_answer(&http, &h.url, 40_000, 0).await, 8192);
    h.stop().await;
}

#[tokio::test]
async fn the_gateway_s_own_server_takes_mcp_past_the_router_and_routes_every_other_path() {
    let (url, stop, serving) = serve(MusterConfig::default(), demo_stdio("demo")).await;
    let base = url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    for mcp in [url.clone(), format!("{url}/"), format!("{url}/under")] {
        let (status, id, body) = initialize(&http, &mcp).await;
        assert_eq!(status, 200, "{mcp}: {body}");
        assert!(id.is_some(), "{mcp}: a session");
    }
    // The guard stands in front of it.
    let (status, body) = post(&url, deep_call(200)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("maxJsonDepth"), "{body}");
    let health = http.get(format!("{base}/health")).send().await.expect("answers");
    assert_eq!(health.status().as_u16(), 200);
    let health: Value = health.json().await.expect("JSON");
    assert_eq!(health["status"], "ok", "{health}");
    let metrics = http.get(format!("{base}/metrics")).send().await.expect("answers");
    assert_eq!(metrics.status().as_u16(), 200);
    assert!(
        metrics.text().await.expect("text").contains("muster_catalog_tools"),
        "the metrics"
    );
    for elsewhere in ["/mcpx", "/nope", "/"] {
        let response = http.get(format!("{base}{elsewhere}")).send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 404, "{elsewhere}");
    }
    stopped(stop, serving).await;
}

/// POSTs an `initialize` to `url`; the status, the session id given, and the body.
async fn initialize(http: &reqwest::Client, url: &str) -> (u16, Option<String>, String) {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"initialize","params":{{{INITIALIZE_PARAMS},"capabilities":{{}}}}}}"#
        ))
        .send()
        .await
        .expect("answers");
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, id, response.text().await.expect("a body"))
}

#[tokio::test]
async fn an_initialize_over_max_sessions_gets_503_naming_the_limit_until_a_session_ends() {
    // Three: the harness's own client has one.
    let h = Harness::start_with(with_limits(Limits::default().with_max_sessions(3)), Vec::new()).await;
    let http = reqwest::Client::new();
    let (first, second) = (initialize(&http, &h.url).await, initialize(&http, &h.url).await);
    assert_eq!((first.0, second.0), (200, 200));
    let (status, id, body) = initialize(&http, &h.url).await;
    assert_eq!((status, id), (503, None), "{body}");
    let refusal: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(refusal["id"], 3, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("aggregator.limits.maxSessions"), "{message}");
    // A request of an open session is not refused.
    let session = first.1.expect("a session id");
    let ping = http
        .post(&h.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await
        .expect("answers");
    assert_eq!(ping.status().as_u16(), 202);
    // Once a session ends, there is room for the next.
    let closed = http
        .delete(&h.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("answers");
    assert!(closed.status().is_success(), "{}", closed.status());
    assert_eq!(initialize(&http, &h.url).await.0, 200);
    h.stop().await;
}
