//! The gateway in front of real downstream MCP servers (the demo server of this repository over
//! stdio and over streamable HTTP), driven by a real MCP client over loopback HTTP.

mod common;

use common::{DemoHttp, Harness, demo_stdio, remote, text, tool_names};
use muster::core::crd::MCPServerState;
use rmcp::model::{CallToolRequestParams, ErrorCode};
use serde_json::{Value, json};

#[tokio::test]
async fn native_tools_list_is_exactly_the_thirteen_meta_tools() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let tools = h.client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "call_tool",
            "describe_prompt",
            "describe_resource",
            "describe_tool",
            "filter_prompts",
            "filter_resources",
            "filter_tools",
            "get_prompt",
            "get_resource",
            "list_core_tools",
            "list_prompts",
            "list_resources",
            "list_tools"
        ]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_stdio_downstreams_tools_are_listed_described_and_called() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;

    let page = h.meta_json("list_tools", json!({})).await;
    let names = tool_names(&page);
    for expected in ["x_demo_echo", "x_demo_add", "x_demo_fail", "core_service_list"] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} missing from {names:?}"
        );
    }
    let echo = page["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "x_demo_echo")
        .cloned()
        .unwrap_or_default();
    assert_eq!(echo["server"], "demo");
    assert_eq!(echo["kind"], "tool");
    assert_eq!(echo["summary"], "Echo a message back.");
    assert_eq!(echo["annotations"]["readOnlyHint"], true);

    let described = h.meta_json("describe_tool", json!({"name": "x_demo_add"})).await;
    assert_eq!(described["title"], "Add numbers");
    assert_eq!(described["inputSchema"]["properties"]["a"]["type"], "number");
    assert!(
        described["outputSchema"]["properties"]["sum"].is_object(),
        "{described}"
    );

    let result = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "hello gateway"}}),
        )
        .await;
    assert_eq!(result.is_error, Some(false));
    let envelope: Value = serde_json::from_str(&text(&result)).expect("envelope");
    assert_eq!(envelope["isError"], false);
    assert_eq!(envelope["content"][0]["text"], "hello gateway");
    assert_eq!(
        envelope["tool"],
        json!({"name": "x_demo_echo", "server": "demo", "serverTool": "echo"})
    );
    let meta = result.meta.as_ref().expect("_meta");
    assert_eq!(meta.0["muster.giantswarm.io/tool"], envelope["tool"]);

    let sum = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_add", "arguments": {"a": 2, "b": 40.5}}),
        )
        .await;
    assert_eq!(sum.structured_content, Some(json!({"sum": 42.5})));

    let failed = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_fail", "arguments": {"reason": "nope"}}),
        )
        .await;
    assert_eq!(failed.is_error, Some(true));
    let envelope: Value = serde_json::from_str(&text(&failed)).expect("envelope");
    assert_eq!(envelope["isError"], true);
    assert_eq!(envelope["content"][0]["text"], "nope");
    h.stop().await;
}

#[tokio::test]
async fn resources_and_prompts_are_reached_through_the_meta_tools() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let resources = h.meta_json("list_resources", json!({})).await;
    assert_eq!(resources[0]["uri"], "demo://greeting");
    assert_eq!(resources[0]["server"], "demo");
    let read = h.meta("get_resource", json!({"uri": "demo://greeting"})).await;
    assert_eq!(text(&read), "Hello from the muster demo server.");

    let prompts = h.meta_json("list_prompts", json!({})).await;
    assert_eq!(prompts[0]["name"], "x_demo_greet");
    let described = h.meta_json("describe_prompt", json!({"name": "x_demo_greet"})).await;
    assert_eq!(described["arguments"][0]["name"], "name");
    let messages = h
        .meta_json(
            "get_prompt",
            json!({"name": "x_demo_greet", "arguments": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"]["text"], "Please greet Ada warmly.");
    h.stop().await;
}

#[tokio::test]
async fn a_streamable_http_downstream_is_aggregated_beside_a_stdio_one() {
    let demo = DemoHttp::start();
    let h = Harness::start(vec![demo_stdio("local"), remote("remote", &demo.url)]).await;
    let page = h
        .meta_json("filter_tools", json!({"pattern": "x_remote_*", "limit": 10}))
        .await;
    assert_eq!(
        tool_names(&page),
        [
            "x_remote_add",
            "x_remote_echo",
            "x_remote_fail",
            "x_remote_list_items",
            "x_remote_pid",
            "x_remote_sleep"
        ]
    );
    let result = h
        .meta(
            "call_tool",
            json!({"name": "x_remote_echo", "arguments": {"message": "over http"}}),
        )
        .await;
    let envelope: Value = serde_json::from_str(&text(&result)).expect("envelope");
    assert_eq!(envelope["content"][0]["text"], "over http");
    assert_eq!(envelope["tool"]["server"], "remote");
    // Both servers expose demo://greeting: a read must say which.
    let ambiguous = h.meta("get_resource", json!({"uri": "demo://greeting"})).await;
    assert_eq!(ambiguous.is_error, Some(true));
    assert_eq!(
        text(&ambiguous),
        "Resource demo://greeting is exposed by servers local, remote; the \"server\" argument is required"
    );
    let read = h
        .meta("get_resource", json!({"uri": "demo://greeting", "server": "remote"}))
        .await;
    assert_eq!(text(&read), "Hello from the muster demo server.");
    h.stop().await;
}

#[tokio::test]
async fn a_downstream_that_cannot_start_is_failed_and_the_others_still_serve() {
    let mut missing = demo_stdio("broken");
    missing.spec.command = Some("/nonexistent/muster-test-server".into());
    let refused = remote("refused", "http://127.0.0.1:9/mcp");
    let h = Harness::start(vec![demo_stdio("demo"), missing, refused]).await;

    let status = h
        .meta(
            "call_tool",
            json!({"name": "core_service_status", "arguments": {"name": "broken"}}),
        )
        .await;
    let envelope: Value = serde_json::from_str(&text(&status)).expect("envelope");
    let service: Value =
        serde_json::from_str(envelope["content"][0]["text"].as_str().unwrap_or_default()).expect("status");
    assert_eq!(service["state"], "failed");
    assert!(
        service["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("/nonexistent/muster-test-server"),
        "{service}"
    );

    // A remote server that refuses is retried, and Failed from its third consecutive failure.
    let registry = std::sync::Arc::clone(h.gateway.registry());
    let refused = move || {
        registry
            .server("refused")
            .map(|s| (s.runtime.state, s.runtime.consecutive_failures, s.runtime.last_error))
    };
    assert!(
        refused().is_some_and(|s| s.2.is_some()),
        "the refusal is recorded: {:?}",
        refused()
    );
    assert_eq!(
        refused().and_then(|s| s.2).as_deref(),
        Some("cannot reach http://127.0.0.1:9/mcp: connection refused"),
        "the lastError names the URL and the cause"
    );
    let failed = common::eventually(10, || {
        let now = refused();
        async move { now.is_some_and(|s| s.0 == MCPServerState::Failed && s.1 >= 3) }
    })
    .await;
    assert!(failed, "not Failed after three attempts: {:?}", refused());
    let list = h.meta("call_tool", json!({"name": "core_service_list"})).await;
    let services = list.structured_content.clone().expect("structured");
    let refused_state = services["services"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "refused")
        .cloned();
    assert_eq!(refused_state.map(|s| s["state"].clone()), Some(json!("failed")));

    let page = h
        .meta_json("filter_tools", json!({"pattern": "x_*", "limit": 50}))
        .await;
    assert_eq!(
        tool_names(&page),
        [
            "x_demo_add",
            "x_demo_echo",
            "x_demo_fail",
            "x_demo_list_items",
            "x_demo_pid",
            "x_demo_sleep"
        ]
    );
    h.stop().await;
}

#[tokio::test]
async fn bad_calls_get_the_documented_errors() {
    let h = Harness::start(vec![demo_stdio("demo")]).await;
    let no_name = h.meta("call_tool", json!({"arguments": {}})).await;
    assert_eq!(
        (no_name.is_error, text(&no_name).as_str()),
        (Some(true), "name argument is required")
    );
    let not_object = h
        .meta("call_tool", json!({"name": "x_demo_echo", "arguments": [1, 2]}))
        .await;
    assert_eq!(
        (not_object.is_error, text(&not_object).as_str()),
        (Some(true), "arguments must be a JSON object")
    );
    let unknown = h.meta("call_tool", json!({"name": "x_demo_nope"})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(text(&unknown), "Tool execution failed: tool not found: x_demo_nope");
    let bad_limit = h.meta("list_tools", json!({"limit": 0})).await;
    assert_eq!(
        (bad_limit.is_error, text(&bad_limit).as_str()),
        (Some(true), "limit must be at least 1")
    );

    // Aggregated tools are not callable natively: only the meta-tools are.
    let err = h
        .client
        .call_tool(CallToolRequestParams::new("x_demo_echo"))
        .await
        .expect_err("a native call of an aggregated tool is refused");
    match err {
        rmcp::service::ServiceError::McpError(data) => {
            assert_eq!(data.code, ErrorCode::INVALID_PARAMS);
            assert!(data.message.contains("call_tool"), "{}", data.message);
        }
        other => panic!("unexpected error {other}"),
    }
    h.stop().await;
}

#[tokio::test]
async fn list_tools_pages_to_the_end_without_gaps() {
    let h = Harness::start(vec![demo_stdio("a"), demo_stdio("b")]).await;
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = h.meta_json("list_tools", json!({"limit": 4, "offset": offset})).await;
        let names = tool_names(&page);
        assert!(names.len() <= 4);
        seen.extend(names);
        assert_eq!(page["total"], page["total_tools"]);
        if page["truncated"] == false {
            assert_eq!(seen.len() as u64, page["total"].as_u64().unwrap_or_default());
            break;
        }
        offset += 4;
    }
    let mut unique = seen.clone();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "pages overlap: {seen:?}");
    // Server tools come first, by server name, each in its server's order; core tools follow.
    assert_eq!(
        &seen[..12],
        [
            "x_a_add",
            "x_a_echo",
            "x_a_fail",
            "x_a_list_items",
            "x_a_pid",
            "x_a_sleep",
            "x_b_add",
            "x_b_echo",
            "x_b_fail",
            "x_b_list_items",
            "x_b_pid",
            "x_b_sleep"
        ]
    );
    assert!(seen[12..].iter().all(|n| n.starts_with("core_")), "{seen:?}");
    h.stop().await;
}

/// Forwards each connection accepted on a loopback port to `target` (host:port), counting them.
async fn counting_proxy(target: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr.to_string(), accepted)
}

#[tokio::test]
async fn calls_to_a_streamable_http_downstream_reuse_its_connections() {
    let demo = DemoHttp::start();
    let demo_addr = address_of(&demo.url);
    let (proxy, accepted) = counting_proxy(demo_addr).await;
    let h = Harness::start(vec![remote("remote", &format!("http://{proxy}/mcp"))]).await;
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    let calls = 30;
    for i in 0..calls {
        let result = h
            .meta(
                "call_tool",
                json!({"name": "x_remote_echo", "arguments": {"message": format!("call {i}")}}),
            )
            .await;
        let envelope: Value = serde_json::from_str(&text(&result)).expect("envelope");
        assert_eq!(envelope["content"][0]["text"], format!("call {i}"));
    }
    let opened = accepted.load(std::sync::atomic::Ordering::SeqCst) - before;
    // One call after another: each goes out on the connection the previous one left in the
    // pool. Without the pool each call opened a connection of its own.
    assert!(
        opened <= 2,
        "{calls} calls opened {opened} connections to the downstream"
    );
    h.stop().await;
}

/// Over streamable HTTP a call's progress reports come before its answer on the POST's event
/// stream, which the gateway's HTTP call lane reads (`upstream::http_lane`): the reports must
/// still restart the server's timeout and reach the client, the last before the result.
#[tokio::test]
async fn progress_over_a_streamable_http_downstream_restarts_its_timeout_and_reaches_the_client() {
    use common::progress::{ProgressRecorder, each_calls_last_report_arrives};

    let demo = DemoHttp::start();
    let mut patient = remote("remote", &demo.url);
    patient.spec.timeout = 1;
    let h = Harness::start(vec![patient]).await;
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let client = h.client_with(ProgressRecorder(tx)).await;
    let args = json!({"name": "x_remote_sleep", "arguments": {"seconds": 2.5}});
    let result = client
        .call_tool(
            CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("answered");
    assert_eq!(
        result.is_error,
        Some(false),
        "a 2.5 s call with progress outlives a 1 s timeout: {}",
        text(&result)
    );
    let mut reports = 0;
    while seen.try_recv().is_ok() {
        reports += 1;
    }
    assert!(reports >= 10, "progress reports relayed: {reports}");
    each_calls_last_report_arrives(client.peer(), &mut seen, "x_remote_sleep", 10).await;
    let _ = client.cancel().await;
    h.stop().await;
}

/// A streamable-HTTP downstream that restarts forgets the gateway's session. The call lane's post
/// in the old session is turned away (404); the call goes through rmcp, which opens a new session
/// and sends it there, and later calls take the lane in the new session.
#[tokio::test]
async fn calls_after_a_streamable_http_downstream_restarts_are_answered_in_a_new_session() {
    let demo = DemoHttp::start();
    let addr = address_of(&demo.url);
    let h = Harness::start(vec![remote("remote", &demo.url)]).await;
    let echo = |message: &str| json!({"name": "x_remote_echo", "arguments": {"message": message}});
    let answer =
        |result: &rmcp::model::CallToolResult| -> Value { serde_json::from_str(&text(result)).expect("envelope") };
    assert_eq!(
        answer(&h.meta("call_tool", echo("before")).await)["content"][0]["text"],
        "before"
    );
    drop(demo);
    let _demo = DemoHttp::start_on(&addr);
    for message in ["after", "again", "and again"] {
        let envelope = answer(&h.meta("call_tool", echo(message)).await);
        assert_eq!(envelope["content"][0]["text"], message, "{envelope}");
    }
    h.stop().await;
}

/// The `host:port` of an `http://` URL.
fn address_of(url: &str) -> String {
    url.strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .expect("an http:// url")
        .to_owned()
}
