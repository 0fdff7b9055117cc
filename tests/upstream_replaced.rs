//! A downstream connection taken out of use while it carries calls: `close_when_idle` lets them
//! finish before it closes (a session's connection replaced by one with a fresh grant), where
//! `close` cuts them. Against the demo server over streamable HTTP, in its own process.

mod common;

use std::time::Duration;

use common::{DemoHttp, remote};
use muster::{
    core::CallContext,
    gateway::upstream::{UpstreamConnection, egress::Egress},
};
use serde_json::json;

async fn connection(demo: &DemoHttp) -> std::sync::Arc<UpstreamConnection> {
    let conn = UpstreamConnection::connect(&remote("demo", &demo.url), None, Egress::allowing_link_local(false))
        .await
        .expect("connected");
    std::sync::Arc::new(conn)
}

/// Starts a call of the demo's `sleep` for `seconds` on `conn`.
fn sleeping(
    conn: &std::sync::Arc<UpstreamConnection>,
    seconds: f64,
) -> tokio::task::JoinHandle<Result<muster::core::ToolOutput, muster::core::ToolError>> {
    let conn = std::sync::Arc::clone(conn);
    tokio::spawn(async move {
        let args = json!({"seconds": seconds}).as_object().cloned().unwrap_or_default();
        conn.call_tool("sleep", args, &CallContext::default()).await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_connection_closes_once_its_calls_have_ended_and_not_before() {
    let demo = DemoHttp::start();
    let conn = connection(&demo).await;
    let call = sleeping(&conn, 1.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.close_when_idle(Duration::from_secs(30));
    assert!(!conn.is_closed(), "closed while a call was in flight");
    let answer = call.await.expect("no panic");
    assert!(answer.is_ok(), "the call in flight finished: {answer:?}");
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    assert!(closed.is_ok(), "closed once idle");

    // `close` is what it replaces: it cuts the call.
    let cut = connection(&demo).await;
    let call = sleeping(&cut, 1.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cut.close();
    let answer = call.await.expect("no panic");
    assert!(answer.is_err(), "closing cuts the call: {answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_connection_whose_call_outlasts_the_grace_is_closed_after_it() {
    let demo = DemoHttp::start();
    let conn = connection(&demo).await;
    let call = sleeping(&conn, 30.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.close_when_idle(Duration::from_millis(500));
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    assert!(closed.is_ok(), "closed after the grace");
    let answer = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the cut call ends")
        .expect("no panic");
    assert!(answer.is_err(), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_closes_at_once() {
    let demo = DemoHttp::start();
    let conn = connection(&demo).await;
    conn.close_when_idle(Duration::from_secs(30));
    let closed = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
    assert!(
        closed.is_ok(),
        "nothing to wait for: closed at once, not after the grace"
    );
}
