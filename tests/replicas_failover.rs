//! One of three gateway processes killed (SIGKILL) behind haproxy while fifty clients call a
//! tool through it: every call is answered, after the client's retry where its replica died
//! under it. Sessionful (2025-11-25, rmcp's client): a client whose session was on the killed
//! replica gets 404 from the replica haproxy sends it to instead, and rmcp's client opens a new
//! session there by itself. Stateless (2026-07-28, the official Python SDK,
//! `tests/clients/stateless_load.py`): each request may go to any replica. Either way a call cut
//! off mid-flight is sent again by the client (at most five tries).
//!
//! Needs `haproxy` (Debian package) and the gateway example (`cargo build --examples`); skipped
//! without haproxy, failed under `CI=true`.

mod common;

use std::time::Duration;

use common::{
    connect,
    haproxy::Haproxy,
    replicas::{ReplicaSettings, Replicas},
    scripted::ScriptedServer,
    text,
};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

/// Clients, and calls each makes.
const CLIENTS: usize = 50;
const CALLS: usize = 6;

/// Three replicas serving an echo server as `plain` (and `slow`, the demo server at `slow`,
/// when given), behind haproxy (`None`: no haproxy here).
async fn cluster(slow: Option<&str>) -> Option<(ScriptedServer, Replicas, Haproxy)> {
    let echo = ScriptedServer::builder()
        .tool("echo", true, |args| Ok(args.get("text").cloned().unwrap_or_default()))
        .serve()
        .await;
    let mut settings = ReplicaSettings::default().with_http_server("plain", &echo.url, None);
    if let Some(url) = slow {
        settings = settings.with_http_server("slow", url, None);
    }
    let replicas = Replicas::start(3, &settings);
    let haproxy = Haproxy::start(&replicas.backends())?;
    for (name, _) in replicas.backends() {
        haproxy.await_server(&name, true, Duration::from_secs(10));
    }
    Some((echo, replicas, haproxy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_fifty_clients_is_answered_when_a_replica_is_killed() {
    let Some((_echo, mut replicas, haproxy)) = cluster(None).await else {
        return;
    };

    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(&haproxy.mcp(), &[], None).await);
    }
    let on_killed = haproxy.sessions().iter().filter(|(_, r)| r == "r1").count();
    assert!(on_killed > 0, "some sessions are on r1: {:?}", haproxy.sessions());

    let runs = clients.iter().enumerate().map(|(c, client)| async move {
        let mut retries = 0;
        for i in 0..CALLS {
            let expected = format!("client {c} call {i}");
            let mut args = serde_json::Map::new();
            args.insert("name".into(), json!("x_plain_echo"));
            args.insert("arguments".into(), json!({"text": expected}));
            let mut answered = None;
            for _ in 0..5 {
                let call = CallToolRequestParams::new("call_tool").with_arguments(args.clone());
                match tokio::time::timeout(Duration::from_secs(20), client.call_tool(call)).await {
                    Ok(Ok(result)) if result.is_error != Some(true) && text(&result).contains(&expected) => {
                        answered = Some(result);
                        break;
                    }
                    _ => {
                        retries += 1;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                }
            }
            assert!(answered.is_some(), "client {c}: call {i} was never answered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        retries
    });
    let killing = async {
        tokio::time::sleep(Duration::from_millis(250)).await;
        replicas[0].kill();
    };
    let (retries, ()) = futures::future::join(futures::future::join_all(runs), killing).await;
    let retried = retries.iter().filter(|r| **r > 0).count();
    eprintln!(
        "{} of {CLIENTS} clients had a session on r1; {retried} clients retried a call ({} retries)",
        on_killed,
        retries.iter().sum::<usize>()
    );
    haproxy.await_server("r1", false, Duration::from_secs(10));
    for client in clients {
        let _ = client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_fifty_stateless_clients_is_answered_when_a_replica_is_killed() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: scripts/test creates it from requirements.txt",
        python.display()
    );
    // Calls that take a while (the demo server's sleep), so that the kill is likely to cut some
    // (how many varies: 0 to 15 of 300 seen).
    let demo = common::DemoHttp::start();
    let Some((_echo, mut replicas, haproxy)) = cluster(Some(&demo.url)).await else {
        return;
    };
    let mut client = tokio::process::Command::new(python)
        .arg(root.join("tests/clients/stateless_load.py"))
        .arg(haproxy.mcp())
        .args(["--clients", &CLIENTS.to_string(), "--calls", &CALLS.to_string()])
        .args(["--tool", "x_slow_sleep", "--seconds", "0.3"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the Python clients");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(client.stdout.take().expect("stdout")));
    let mut next = async || -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("the Python clients report within 120 s")
            .expect("reads their output")
            .expect("they report before they end (their stderr is above)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an event: {line:?}: {e}"))
    };
    let ready = next().await;
    assert_eq!(ready["event"], "ready", "{ready}");
    assert_eq!(ready["protocol"], "2026-07-28", "{ready}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    replicas[0].kill();
    let done = next().await;
    assert_eq!(done["event"], "done", "{done}");
    assert_eq!(done["unanswered"], json!([]), "every call answered: {done}");
    assert_eq!(done["answered"], json!(CLIENTS * CALLS), "{done}");
    eprintln!(
        "stateless: {} calls answered, {} retries; first errors: {}",
        done["answered"], done["retries"], done["errors"]
    );
    haproxy.await_server("r1", false, Duration::from_secs(10));
    let _ = client.wait().await;
}
