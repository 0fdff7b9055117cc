//! Toolsets end to end: a real MCP client sending `X-muster-Toolset` to the gateway, with the
//! demo server behind it.

mod common;

use common::{Harness, call_meta, demo_stdio, text, tool_names as names};
use muster::core::config::MusterConfig;
use serde_json::{Value, json};

fn json_text(result: &rmcp::model::CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "error result: {}", text(result));
    serde_json::from_str(&text(result)).expect("JSON")
}

#[tokio::test]
async fn a_toolset_header_narrows_discovery_and_call_tool_refuses_the_rest() {
    let h = Harness::start(vec![demo_stdio("demo"), demo_stdio("other")]).await;
    let scoped = h
        .client_with_headers(&[("x-muster-toolset", "tool:x_demo_echo, server:other")])
        .await;

    let page = json_text(&call_meta(&scoped, "list_tools", json!({})).await);
    assert_eq!(
        names(&page),
        [
            "x_demo_echo",
            "x_other_add",
            "x_other_echo",
            "x_other_fail",
            "x_other_list_items",
            "x_other_pid",
            "x_other_sleep"
        ]
    );
    assert_eq!(page["toolset"], json!(["tool:x_demo_echo", "server:other"]));

    let ok = call_meta(
        &scoped,
        "call_tool",
        json!({"name": "x_demo_echo", "arguments": {"message": "in"}}),
    )
    .await;
    assert_eq!(ok.is_error, Some(false), "{}", text(&ok));
    let refused = call_meta(
        &scoped,
        "call_tool",
        json!({"name": "x_demo_add", "arguments": {"a": 1, "b": 2}}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        text(&refused),
        "tool \"x_demo_add\" is outside the toolset [tool:x_demo_echo, server:other]"
    );
    let described = call_meta(&scoped, "describe_tool", json!({"name": "x_demo_add"})).await;
    assert_eq!(
        text(&described),
        "tool \"x_demo_add\" is outside the toolset [tool:x_demo_echo, server:other]"
    );

    // The unscoped client on the same gateway still sees everything.
    let all = h.meta_json("list_tools", json!({"limit": 100})).await;
    assert!(names(&all).contains(&"x_demo_add".to_owned()));
    let _ = scoped.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn an_invalid_toolset_is_the_answer_of_every_meta_tool() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let bad = h.client_with_headers(&[("x-muster-toolset", "preset:nope")]).await;
    for (tool, args) in [
        ("list_tools", json!({})),
        ("filter_tools", json!({"pattern": "*"})),
        (
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "x"}}),
        ),
        ("list_resources", json!({})),
    ] {
        let result = call_meta(&bad, tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert_eq!(
            text(&result),
            "toolset [preset:nope] names unknown preset \"nope\"; known presets: read-only, none, full",
            "{tool}"
        );
    }
    let _ = bad.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn a_configured_preset_scopes_resources_and_prompts_by_server() {
    let mut config = MusterConfig::default();
    config.toolset_presets.insert(
        "demo-only".into(),
        json!({"description": "The demo server", "include": [{"server": "demo"}], "exclude": [{"tool": "x_demo_fail"}]}),
    );
    let h = Harness::start_with(config, vec![demo_stdio("demo"), demo_stdio("other")]).await;
    let scoped = h.client_with_headers(&[("x-muster-toolset", "preset:demo-only")]).await;
    let page = json_text(&call_meta(&scoped, "filter_tools", json!({"limit": 10, "include_presets": true})).await);
    assert_eq!(
        names(&page),
        [
            "x_demo_add",
            "x_demo_echo",
            "x_demo_list_items",
            "x_demo_pid",
            "x_demo_sleep"
        ]
    );
    assert_eq!(page["toolset"], json!(["preset:demo-only"]));
    assert_eq!(page["toolset_unmatched"], json!([]));
    assert!(
        page["presets"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "demo-only")),
        "{page}"
    );

    let resources = json_text(&call_meta(&scoped, "list_resources", json!({})).await);
    let servers: Vec<&str> = resources
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["server"].as_str())
        .collect();
    assert_eq!(servers, ["demo"]);
    let other_prompt = call_meta(
        &scoped,
        "get_prompt",
        json!({"name": "x_other_greet", "arguments": {"name": "x"}}),
    )
    .await;
    assert_eq!(
        text(&other_prompt),
        "prompt \"x_other_greet\" is outside the toolset [preset:demo-only]"
    );
    let _ = scoped.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn a_bad_preset_refuses_to_build_the_gateway() {
    let mut config = MusterConfig::default();
    config
        .toolset_presets
        .insert("read-only".into(), json!({"include": [{"tool": "x"}]}));
    let err = muster::gateway::Gateway::new(config, Vec::new(), Vec::new()).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "toolset preset \"read-only\": built-in presets cannot be redefined"
    );
}
