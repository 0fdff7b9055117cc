//! Families and name collisions, with real demo servers behind the gateway.

mod common;

use common::{Harness, demo_stdio, envelope, text, tool_names};
use muster::core::crd::MCPServerFamily;
use serde_json::{Value, json};

fn family_member(name: &str, family: &str) -> muster::core::crd::MCPServer {
    let mut server = demo_stdio(name);
    server.spec.family = Some(MCPServerFamily {
        name: family.into(),
        instance_arg: "cluster".into(),
    });
    server
}

#[tokio::test]
async fn a_family_of_two_servers_is_one_tool_surface_routed_by_the_instance_argument() {
    let h = Harness::start(vec![family_member("east", "k8s"), family_member("west", "k8s")]).await;
    let page = h
        .meta_json("filter_tools", json!({"pattern": "x_*", "limit": 50}))
        .await;
    let names = tool_names(&page);
    assert_eq!(
        names,
        [
            "x_k8s_add",
            "x_k8s_echo",
            "x_k8s_fail",
            "x_k8s_list_items",
            "x_k8s_pid",
            "x_k8s_sleep"
        ]
    );

    let described = h.meta_json("describe_tool", json!({"name": "x_k8s_pid"})).await;
    assert_eq!(
        described["inputSchema"]["properties"]["cluster"]["enum"],
        json!(["east", "west"])
    );
    assert!(
        described["inputSchema"]["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("cluster")))
    );
    assert!(
        described["description"]
            .as_str()
            .is_some_and(|d| d.ends_with("(available on servers: east, west)"))
    );

    let east = h
        .meta(
            "call_tool",
            json!({"name": "x_k8s_pid", "arguments": {"cluster": "east"}}),
        )
        .await;
    let west = h
        .meta(
            "call_tool",
            json!({"name": "x_k8s_pid", "arguments": {"cluster": "west"}}),
        )
        .await;
    let (east, west) = (envelope(&east), envelope(&west));
    assert_eq!(
        east["tool"],
        json!({"name": "x_k8s_pid", "server": "east", "serverTool": "pid"})
    );
    assert_eq!(west["tool"]["server"], "west");
    assert_ne!(
        east["content"][0]["text"], west["content"][0]["text"],
        "two different processes answered"
    );

    // The instance argument is stripped before forwarding: echo sees only its own argument.
    let echo = h
        .meta(
            "call_tool",
            json!({"name": "x_k8s_echo", "arguments": {"cluster": "west", "message": "hi"}}),
        )
        .await;
    assert_eq!(envelope(&echo)["content"][0]["text"], "hi");

    let missing = h.meta("call_tool", json!({"name": "x_k8s_pid", "arguments": {}})).await;
    assert_eq!(
        text(&missing),
        "Tool execution failed: tool x_k8s_pid is provided by a family on servers east, west; the \"cluster\" parameter is required"
    );
    let unknown = h
        .meta(
            "call_tool",
            json!({"name": "x_k8s_pid", "arguments": {"cluster": "north"}}),
        )
        .await;
    assert!(
        text(&unknown).contains("is not available on server \"north\"; available: east, west"),
        "{}",
        text(&unknown)
    );

    // server:<member> selects the family surface.
    let scoped = h.client_with_headers(&[("x-muster-toolset", "server:east")]).await;
    let page = common::call_meta(&scoped, "list_tools", json!({})).await;
    let page: Value = serde_json::from_str(&text(&page)).expect("json");
    assert_eq!(page["total"], 6, "{page}");
    let _ = scoped.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn two_servers_producing_the_same_name_are_reported_not_overwritten() {
    let mut a = demo_stdio("alpha");
    a.spec.tool_prefix = Some("shared".into());
    let mut b = demo_stdio("beta");
    b.spec.tool_prefix = Some("shared".into());
    let h = Harness::start(vec![a, b]).await;
    let result = h
        .meta(
            "call_tool",
            json!({"name": "x_shared_echo", "arguments": {"message": "who"}}),
        )
        .await;
    assert_eq!(
        envelope(&result)["tool"]["server"],
        "alpha",
        "the first server by name keeps the name"
    );
    let beta = h.gateway.registry().server("beta").expect("defined");
    let error = beta.runtime.last_error.unwrap_or_default();
    assert!(error.contains("x_shared_echo") && error.contains("alpha"), "{error}");
    let events = h
        .meta(
            "call_tool",
            json!({"name": "core_events", "arguments": {"resourceName": "beta"}}),
        )
        .await;
    assert!(
        text(&events).contains("MCPServerToolNameCollision"),
        "{}",
        text(&events)
    );
    h.stop().await;
}

#[tokio::test]
async fn a_server_outside_musters_namespace_gets_its_namespace_in_front_of_its_prefix() {
    let mut config = muster::core::config::MusterConfig::default();
    config.namespace = Some("muster".into());
    let mut foreign = demo_stdio("demo");
    foreign.metadata.namespace = Some("team-a".into());
    let mut home = demo_stdio("home");
    home.metadata.namespace = Some("muster".into());
    let h = Harness::start_with(config, vec![foreign, home]).await;
    let page = h
        .meta_json("filter_tools", json!({"pattern": "x_*_echo", "limit": 50}))
        .await;
    let names = tool_names(&page);
    assert_eq!(names, ["x_team-a_demo_echo", "x_home_echo"]);
    h.stop().await;
}
