//! Native exposure (`aggregator.exposure: native | both`, `prefixMode: never`): the aggregated
//! tools, resources and prompts in the plain MCP lists and called directly, through the same
//! catalogue views as the meta-tools (toolsets, sign-in answers), driven by an rmcp client over
//! loopback with scripted downstream servers behind the gateway.

mod common;

use common::{Harness, remote, scripted::ScriptedServer};
use muster::core::config::{AggregatorConfig, Exposure, MusterConfig, PrefixMode};
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, PaginatedRequestParams},
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::json;

fn config(exposure: Exposure, prefix: PrefixMode) -> MusterConfig {
    MusterConfig::default().with_aggregator(
        AggregatorConfig::default()
            .with_exposure(exposure)
            .with_prefix_mode(prefix),
    )
}

/// A downstream with `count` tools `tool_<i>` (each answering its own name) and `whoami`.
async fn downstream(count: usize) -> ScriptedServer {
    let mut builder = ScriptedServer::builder().tool("whoami", true, |_| Ok(json!("you are in")));
    for i in 0..count {
        let name = format!("tool_{i:03}");
        let answer = name.clone();
        builder = builder.tool(&name, i % 2 == 0, move |_| Ok(json!(answer.clone())));
    }
    builder.serve().await
}

#[tokio::test]
async fn native_exposure_lists_pages_and_calls_the_aggregated_tools_directly() {
    let scripted = downstream(120).await;
    let h = Harness::start_with(
        config(Exposure::Native, PrefixMode::Always),
        vec![remote("lab", &scripted.url)],
    )
    .await;

    // The first page holds 100 tools and a cursor; every page together holds every tool.
    let first = h.client.list_tools(None).await.expect("tools/list");
    assert_eq!(first.tools.len(), 100);
    let cursor = first.next_cursor.clone().expect("a next cursor");
    let second = h
        .client
        .list_tools(Some(PaginatedRequestParams::default().with_cursor(Some(cursor))))
        .await
        .expect("the next page");
    let mut names: Vec<String> = first
        .tools
        .iter()
        .chain(&second.tools)
        .map(|t| t.name.to_string())
        .collect();
    let mut next = second.next_cursor.clone();
    while let Some(cursor) = next {
        let page = h
            .client
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(Some(cursor))))
            .await
            .expect("a page");
        names.extend(page.tools.iter().map(|t| t.name.to_string()));
        next = page.next_cursor;
    }
    for i in 0..120 {
        assert!(
            names.contains(&format!("x_lab_tool_{i:03}")),
            "x_lab_tool_{i:03} missing"
        );
    }
    assert!(names.contains(&"core_service_list".to_owned()));
    assert!(!names.contains(&"call_tool".to_owned()), "no meta-tools in native mode");
    let all = h.client.list_all_tools().await.expect("all pages");
    assert_eq!(all.len(), names.len());
    // Each listed tool carries its whole schema (the catalogue holds it as text).
    let schema_of = |name: &str| {
        let tool = all
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        serde_json::Value::Object((*tool.input_schema).clone())
    };
    assert_eq!(schema_of("x_lab_tool_007"), json!({"type": "object"}));
    let get = schema_of("core_workflow_get");
    assert_eq!(get["required"], json!(["name"]), "{get}");
    assert_eq!(get["properties"]["name"]["type"], "string", "{get}");

    // A direct call answers the tool's own result, not the call_tool envelope.
    let result = h
        .client
        .call_tool(CallToolRequestParams::new("x_lab_tool_007"))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(common::text(&result), "\"tool_007\"");
    assert_eq!(scripted.calls_of("tool_007").len(), 1);
    // An unknown tool is a protocol error naming it; a meta-tool is not callable in native mode.
    let unknown = h.client.call_tool(CallToolRequestParams::new("x_lab_nope")).await;
    assert!(format!("{unknown:?}").contains("x_lab_nope"), "{unknown:?}");
    assert!(
        h.client
            .call_tool(CallToolRequestParams::new("list_tools"))
            .await
            .is_err()
    );
    // A bad cursor is refused.
    let bad = h
        .client
        .list_tools(Some(PaginatedRequestParams::default().with_cursor(Some("nope".into()))))
        .await;
    assert!(bad.is_err());
    h.stop().await;
}

#[tokio::test]
async fn both_exposes_the_meta_tools_first_then_the_aggregated_ones_under_the_toolset() {
    let scripted = downstream(3).await;
    let h = Harness::start_with(
        config(Exposure::Both, PrefixMode::Always),
        vec![remote("lab", &scripted.url)],
    )
    .await;
    let names: Vec<String> = h
        .client
        .list_all_tools()
        .await
        .expect("tools")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names.first().map(String::as_str), Some("list_tools"), "{names:?}");
    assert!(names.contains(&"call_tool".to_owned()) && names.contains(&"x_lab_whoami".to_owned()));
    // Meta-tools still answer.
    let listed = h.meta("list_tools", json!({"limit": 5})).await;
    assert_ne!(listed.is_error, Some(true));

    // With a toolset, the native list and calls are narrowed to it.
    let scoped = h
        .client_with_headers(&[("x-muster-toolset", "tool:x_lab_whoami")])
        .await;
    let names: Vec<String> = scoped
        .list_all_tools()
        .await
        .expect("tools")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"x_lab_whoami".to_owned()), "{names:?}");
    assert!(!names.contains(&"x_lab_tool_000".to_owned()), "{names:?}");
    let refused = scoped
        .call_tool(CallToolRequestParams::new("x_lab_tool_000"))
        .await
        .expect("a tool error");
    assert_eq!(refused.is_error, Some(true));
    assert!(common::text(&refused).contains("outside the toolset"), "{refused:?}");
    let allowed = scoped
        .call_tool(CallToolRequestParams::new("x_lab_whoami"))
        .await
        .expect("allowed");
    assert_eq!(common::text(&allowed), "\"you are in\"");
    let _ = scoped.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn without_prefixes_names_are_the_servers_own_and_a_clash_is_refused() {
    let a = downstream(2).await;
    let h = Harness::start_with(config(Exposure::Native, PrefixMode::Never), vec![remote("a", &a.url)]).await;
    h.gateway.check_unique_names().expect("one server: no clash");
    let names: Vec<String> = h
        .client
        .list_all_tools()
        .await
        .expect("tools")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        names.contains(&"whoami".to_owned()) && names.contains(&"tool_001".to_owned()),
        "{names:?}"
    );
    let result = h
        .client
        .call_tool(CallToolRequestParams::new("whoami"))
        .await
        .expect("tools/call");
    assert_eq!(common::text(&result), "\"you are in\"");
    h.stop().await;

    // Two servers with the same tool names.
    let b = downstream(2).await;
    let h = Harness::start_with(
        config(Exposure::Native, PrefixMode::Never),
        vec![remote("a", &a.url), remote("b", &b.url)],
    )
    .await;
    let refused = h.gateway.check_unique_names().expect_err("names clash");
    let message = refused.to_string();
    assert!(
        message.contains(r#"The tool name "whoami" is exposed by both MCPServer "a" and MCPServer "b"."#),
        "{message}"
    );
    assert!(message.contains("set aggregator.prefixMode: always"), "{message}");
    h.stop().await;
}

#[tokio::test]
async fn meta_exposure_keeps_the_aggregated_tools_behind_call_tool() {
    let scripted = downstream(1).await;
    let h = Harness::start(vec![remote("lab", &scripted.url)]).await;
    let names: Vec<String> = h
        .client
        .list_all_tools()
        .await
        .expect("tools")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names.len(), 13, "{names:?}");
    let direct = h.client.call_tool(CallToolRequestParams::new("x_lab_whoami")).await;
    assert!(
        format!("{direct:?}").contains("only the meta-tools are callable directly"),
        "{direct:?}"
    );
    // The native resource list is auth://status alone.
    let resources = h.client.list_resources(None).await.expect("resources");
    assert_eq!(
        resources.resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
        ["auth://status"]
    );
    let config = StreamableHttpClientTransportConfig::with_uri(h.url.clone());
    let other = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("connects");
    assert_eq!(other.list_all_tools().await.expect("tools").len(), 13);
    let _ = other.cancel().await;
    h.stop().await;
}

#[tokio::test]
async fn a_native_call_that_needs_a_sign_in_gets_the_sign_in_answer_and_then_the_tool() {
    use common::{oidc::OidcProvider, signin::SignInGateway};
    use muster::core::config::McpClientConfig;
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default()
            .with_exposure(Exposure::Native)
            .with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let client = ().serve(StreamableHttpClientTransport::from_uri(format!("{}/mcp", gw.base))).await.expect("connects");
    let names = |tools: Vec<rmcp::model::Tool>| tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
    assert!(!names(client.list_all_tools().await.expect("tools")).contains(&"x_protected_whoami".to_owned()));
    let answer = client
        .call_tool(CallToolRequestParams::new("x_protected_whoami"))
        .await
        .expect("a tool result");
    assert_eq!(answer.is_error, Some(true));
    let hint = answer.structured_content.clone().unwrap_or_default();
    assert_eq!(hint["status"], "auth_required", "{answer:?}");
    let link = hint["authUrl"].as_str().expect("a link").to_owned();
    let callback = idp.sign_in(&link, "alice").await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
    assert!(names(client.list_all_tools().await.expect("tools")).contains(&"x_protected_whoami".to_owned()));
    let called = client
        .call_tool(CallToolRequestParams::new("x_protected_whoami"))
        .await
        .expect("called");
    assert_eq!(common::text(&called), "\"you are in\"");
    let _ = client.cancel().await;
    gw.stop().await;
}
