//! `core_events` with `follow: true` pushes the matching events that happen from then on to the
//! caller's session as `notifications/muster/event`, once each, and stops when the session ends.

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::{Harness, demo_stdio, eventually};
use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, CustomNotification},
    service::NotificationContext,
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A client that records the custom notifications it receives.
#[derive(Clone)]
struct Pushed(mpsc::UnboundedSender<(String, Option<Value>)>);

impl ClientHandler for Pushed {
    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send((notification.method, notification.params));
    }
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("call_tool").with_arguments(
        json!({"name": name, "arguments": arguments})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followed_events_are_pushed_once_each_and_only_those_the_filters_select() {
    let h = Harness::start(vec![demo_stdio("demo"), demo_stdio("other")]).await;
    let (tx, mut pushed) = mpsc::unbounded_channel();
    let client = Pushed(tx)
        .serve(StreamableHttpClientTransport::from_uri(h.url.clone()))
        .await
        .expect("connects");
    let follow = json!({"follow": true, "resourceType": "MCPServer", "resourceName": "demo"});
    // Asked twice with the same filters, as a polling client does: still one follower.
    for _ in 0..2 {
        let answer = client
            .call_tool(call("core_events", follow.clone()))
            .await
            .expect("answered");
        assert_eq!(answer.is_error, Some(false), "{answer:?}");
    }
    assert_eq!(h.gateway.core_tools().event_followers().len(), 1);

    for name in ["other", "demo"] {
        let restarted = client
            .call_tool(call("core_service_restart", json!({"name": name})))
            .await
            .expect("answered");
        assert_eq!(restarted.is_error, Some(false), "{restarted:?}");
    }
    // Collect what is pushed for a while.
    let mut events = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some((method, params))) = tokio::time::timeout_at(until, pushed.recv()).await {
        assert_eq!(method, "notifications/muster/event");
        events.push(params.expect("an event"));
    }
    assert!(!events.is_empty(), "the restart of demo was pushed");
    for event in &events {
        assert_eq!(event["resource_name"], "demo", "{event}");
        assert_eq!(event["resource_type"], "MCPServer", "{event}");
    }
    let distinct: BTreeSet<String> = events.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), events.len(), "each event once: {events:?}");
    // What was pushed is what core_events lists.
    let listed = client
        .call_tool(call(
            "core_events",
            json!({"resourceType": "MCPServer", "resourceName": "demo", "limit": 1000}),
        ))
        .await
        .expect("answered");
    let text = listed.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default();
    let envelope: Value = serde_json::from_str(&text).expect("an envelope");
    let listed: BTreeSet<String> =
        serde_json::from_str::<Value>(envelope["content"][0]["text"].as_str().unwrap_or("[]"))
            .expect("a list")
            .as_array()
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
    assert!(distinct.is_subset(&listed), "pushed {distinct:?}\nlisted {listed:?}");

    // The follower ends with its session.
    let _ = client.cancel().await;
    let core_tools = h.gateway.core_tools().clone();
    assert!(
        eventually(15, || {
            let core_tools = core_tools.clone();
            async move { core_tools.event_followers().is_empty() }
        })
        .await,
        "the follower ended with the session"
    );
    h.stop().await;
}
