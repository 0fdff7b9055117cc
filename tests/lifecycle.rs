//! Downstream servers that crash, hang, print garbage or restart, under a live gateway.

mod common;

use std::{sync::Arc, time::Duration};

use common::{
    DemoHttp, Harness, demo_stdio, envelope, eventually,
    progress::{
        LogRecorder, ProgressRecorder, conformance_fixture, each_calls_last_log_line_arrives,
        each_calls_last_report_arrives,
    },
    remote, text,
};
use muster::core::crd::MCPServerState;
use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ProgressNotificationParam},
    service::NotificationContext,
    transport::StreamableHttpClientTransport,
};
use serde_json::json;
use tokio::sync::mpsc;

async fn demo_pid(h: &Harness, server: &str) -> u32 {
    let result = h.meta("call_tool", json!({"name": format!("x_{server}_pid")})).await;
    envelope(&result)["content"][0]["text"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .expect("a pid")
}

fn state(h: &Harness, server: &str) -> Option<MCPServerState> {
    h.gateway.registry().server(server).map(|s| s.runtime.state)
}

/// A client that records the notifications it receives.
#[derive(Clone)]
struct Recorder(mpsc::UnboundedSender<String>);

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send("tools/list_changed".into());
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send(format!("progress {}", params.progress));
    }
}

#[tokio::test]
async fn a_killed_stdio_downstream_fails_the_call_comes_back_and_clients_are_notified() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let watcher = h.client_with(Recorder(tx)).await;
    let pid = demo_pid(&h, "demo").await;

    let client = h.client.peer().clone();
    let call = tokio::spawn(async move {
        let args = json!({"name": "x_demo_sleep", "arguments": {"seconds": 10}});
        client
            .call_tool(
                CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default()),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());

    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("answered")
        .expect("joined")
        .expect("a result");
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).starts_with("Tool execution failed:"), "{}", text(&result));

    assert!(
        eventually(10, || async {
            state(&h, "demo") == Some(MCPServerState::Running) && demo_pid_alive(&h).await
        })
        .await
    );
    let new_pid = demo_pid(&h, "demo").await;
    assert_ne!(new_pid, pid, "a new process serves the tools");
    let restarts = h.gateway.registry().server("demo").map(|s| s.runtime.restart_count);
    assert_eq!(restarts, Some(1));
    let mut notifications = Vec::new();
    while let Ok(n) = seen.try_recv() {
        notifications.push(n);
    }
    assert!(
        notifications.iter().any(|n| n == "tools/list_changed"),
        "{notifications:?}"
    );
    let _ = watcher.cancel().await;
    h.stop().await;
}

async fn demo_pid_alive(h: &Harness) -> bool {
    let result = h.meta("call_tool", json!({"name": "x_demo_pid"})).await;
    result.is_error == Some(false)
}

#[tokio::test]
async fn a_hanging_call_ends_at_the_servers_timeout_with_a_clear_error() {
    let mut slow = demo_stdio("slow");
    slow.spec.timeout = 1;
    slow.spec.progress = Some(muster::core::crd::MCPServerProgress { max_duration: 1 });
    let h = Harness::start(vec![slow]).await;
    let started = std::time::Instant::now();
    let result = h
        .meta(
            "call_tool",
            json!({"name": "x_slow_sleep", "arguments": {"seconds": 30}}),
        )
        .await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), "Tool execution failed: tool call timed out after 1s");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // The server itself stays up.
    assert_eq!(state(&h, "slow"), Some(MCPServerState::Running));
    h.stop().await;
}

#[tokio::test]
async fn progress_restarts_the_timeout_and_reaches_the_calling_client() {
    let mut patient = demo_stdio("patient");
    patient.spec.timeout = 1;
    let h = Harness::start(vec![patient]).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let client = h.client_with(Recorder(tx)).await;
    let args = json!({"name": "x_patient_sleep", "arguments": {"seconds": 2.5}});
    let request = CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default());
    let handle = client
        .send_request_with_option(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(request)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let response = handle.await_response().await.expect("answered");
    let rmcp::model::ServerResult::CallToolResult(result) = response else {
        panic!("not a call result")
    };
    assert_eq!(
        result.is_error,
        Some(false),
        "a 2.5 s call with progress outlives a 1 s timeout: {}",
        text(&result)
    );
    let mut progress = 0;
    while let Ok(n) = seen.try_recv() {
        if n.starts_with("progress") {
            progress += 1;
        }
    }
    assert!(progress >= 10, "progress notifications relayed: {progress}");
    let _ = client.cancel().await;
    h.stop().await;
}

/// The demo's `sleep` sends its last report (progress = total) right before its result. rmcp
/// handles a notification in a task of its own, so unless the gateway takes the report as it
/// reads it, the result can overtake it and the call is unregistered before its last report
/// is relayed: the e2e tests with server-everything saw exactly that on a loaded machine.
#[tokio::test]
async fn a_calls_last_progress_report_reaches_the_client_before_the_call_ends() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let client = h.client_with(ProgressRecorder(tx)).await;
    each_calls_last_report_arrives(client.peer(), &mut seen, "x_demo_sleep", 25).await;
    let _ = client.cancel().await;
    h.stop().await;
}

/// The same race for log lines: the conformance fixture's `test_tool_with_logging` logs three
/// lines and answers right after the third. rmcp handles a notification in a task of its own,
/// so unless the gateway relays a line as it reads it, the call can end before its last line is
/// relayed, and the line is lost (the conformance suite saw 2 of 3 once, under CI load). On an
/// idle machine the race is too rare to show here (15 rounds passed without the fix, 3 runs);
/// this test holds the end-to-end relay of log lines to the calling client, and
/// `upstream::progress`'s unit test holds the order deterministically.
#[tokio::test]
async fn a_calls_last_log_line_reaches_the_client_before_the_call_ends() {
    let h = Harness::start(vec![conformance_fixture("fixture")]).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let client = h.client_with(LogRecorder(tx)).await;
    each_calls_last_log_line_arrives(client.peer(), &mut seen, "x_fixture_test_tool_with_logging", 15).await;
    let _ = client.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn a_downstream_printing_garbage_is_failed_with_its_error() {
    let mut garbage = demo_stdio("garbage");
    garbage.spec.command = Some("sh".into());
    garbage.spec.args = vec!["-c".into(), "echo 'this is not JSON-RPC'; exec sleep 30".into()];
    garbage.spec.timeout = 1;
    let h = Harness::start(vec![garbage, demo_stdio("demo")]).await;
    let registry = std::sync::Arc::clone(h.gateway.registry());
    let failed = eventually(10, || {
        let registry = std::sync::Arc::clone(&registry);
        async move {
            registry
                .server("garbage")
                .is_some_and(|s| s.runtime.state == MCPServerState::Failed)
        }
    })
    .await;
    let status = h.gateway.registry().server("garbage").expect("defined");
    assert!(failed, "{:?}", status.runtime);
    assert!(status.runtime.last_error.is_some_and(|e| !e.is_empty()));
    let ok = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "still here"}}),
        )
        .await;
    assert_eq!(ok.is_error, Some(false));
    h.stop().await;
}

#[tokio::test]
async fn a_streamable_http_downstream_restarted_under_the_gateway_is_recovered() {
    let demo = DemoHttp::start();
    let url = demo.url.clone();
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let h = Harness::start(vec![remote("remote", &url)]).await;
    let before = demo_pid(&h, "remote").await;
    drop(demo); // kill it
    let restarted = DemoHttp::start_on(&addr);
    let recovered = eventually(15, || async {
        let result = h.meta("call_tool", json!({"name": "x_remote_pid"})).await;
        envelope(&result)["content"][0]["text"]
            .as_str()
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|p| p != before)
    })
    .await;
    assert!(
        recovered,
        "the gateway reaches the restarted server without a manual restart"
    );
    drop(restarted);
    h.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_clients_are_all_answered_while_a_downstream_restarts() {
    let h = Arc::new(Harness::start(vec![demo_stdio("demo")]).await);
    let mut clients = Vec::new();
    for i in 0..50 {
        let url = h.url.clone();
        clients.push(tokio::spawn(async move {
            let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.expect("connects");
            let mut answered = 0;
            for j in 0..4 {
                let args = json!({"name": "x_demo_echo", "arguments": {"message": format!("{i}-{j}")}});
                let result = client
                    .call_tool(
                        CallToolRequestParams::new("call_tool")
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await;
                if result.is_ok() {
                    answered += 1;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = client.cancel().await;
            answered
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let restart = h
        .meta(
            "call_tool",
            json!({"name": "core_service_restart", "arguments": {"name": "demo"}}),
        )
        .await;
    assert_eq!(restart.is_error, Some(false), "{}", text(&restart));
    let mut total = 0;
    for c in clients {
        total += c.await.expect("no panic");
    }
    assert_eq!(total, 200, "every request got an answer (a result or an error result)");
    assert!(eventually(10, || async { state(&h, "demo") == Some(MCPServerState::Running) }).await);
}

#[tokio::test]
async fn a_failed_attempt_records_the_http_status_the_endpoint_answered() {
    let demo = DemoHttp::start();
    let wrong_path = demo.url.replace("/mcp", "/not-served");
    let h = Harness::start(vec![remote("misrouted", &wrong_path)]).await;
    let status = h.gateway.registry().server("misrouted").expect("defined");
    assert_eq!(
        status.runtime.last_failure_http_status,
        Some(404),
        "{:?}",
        status.runtime.last_error
    );
    let last_error = status.runtime.last_error.clone().unwrap_or_default();
    assert!(
        last_error.starts_with(&format!("POST {wrong_path} answered HTTP 404 Not Found")),
        "{last_error}"
    );
    let crd = status.runtime.to_status(false);
    assert_eq!(crd.last_failure_http_status, Some(404));
    h.stop().await;
}

#[tokio::test]
async fn a_call_the_client_cancels_is_cancelled_downstream() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("cancelled");
    let args =
        json!({"name": "x_demo_sleep", "arguments": {"seconds": 30, "cancel_marker": marker.display().to_string()}});
    let request = CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default());
    let handle = h
        .client
        .send_request_with_option(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(request)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle
        .cancel(Some("the person changed their mind".into()))
        .await
        .expect("cancel sent");
    assert!(
        eventually(5, || {
            let m = marker.clone();
            async move { m.exists() }
        })
        .await,
        "the downstream call saw the cancellation"
    );
    // The connection stays usable.
    let ok = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "after"}}),
        )
        .await;
    assert_eq!(ok.is_error, Some(false));
    h.stop().await;
}
