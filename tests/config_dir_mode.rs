//! Filesystem mode: definition writes through the core tools land in the config directory,
//! events are recorded, and edits of the directory are applied live.

mod common;

use std::path::Path;

use common::{Harness, call_meta, connect, envelope, eventually, fast_supervision, gateway_binary, text};
use muster::gateway::Gateway;
use serde_json::{Value, json};

fn demo_yaml(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: {name}\nspec:\n  type: stdio\n  autoStart: true\n  command: {}\n  args: [demo-server]\n{extra}",
        gateway_binary().display()
    )
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn core(result: &rmcp::model::CallToolResult) -> Value {
    let envelope: Value = serde_json::from_str(&text(result)).unwrap_or(Value::Null);
    let inner = envelope["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(inner).unwrap_or_else(|_| json!({"error": text(result), "inner": inner}))
}

fn tool_names(h: &Harness) -> Vec<String> {
    h.gateway
        .registry()
        .catalog()
        .tools()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|n| n.starts_with("x_"))
        .collect()
}

#[tokio::test]
async fn core_tools_write_definitions_atomically_and_record_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "mcpservers/demo.yaml", &demo_yaml("demo", ""));
    let (gateway, problems) = Gateway::from_config_dir(dir.path(), fast_supervision()).expect("loads");
    assert!(problems.is_empty(), "{problems:?}");
    let h = Harness::serve(gateway).await;
    let call = |name: &'static str, args: Value| {
        let h = &h;
        async move { h.meta("call_tool", json!({"name": name, "arguments": args})).await }
    };

    let created = call(
        "core_mcpserver_create",
        json!({"name": "extra", "type": "stdio", "command": [gateway_binary().display().to_string(), "demo-server"], "autoStart": true, "displayName": " Extra tools "}),
    )
    .await;
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    assert_eq!(core(&created)["displayName"], "Extra tools");
    let file = dir.path().join("mcpservers/extra.yaml");
    let written = std::fs::read_to_string(&file).expect("written");
    assert!(
        written.contains("demo-server") && written.contains("Extra tools"),
        "{written}"
    );
    assert!(eventually(10, || async { tool_names(&h).contains(&"x_extra_echo".to_owned()) }).await);

    let refused = call("core_mcpserver_delete", json!({"name": "extra"})).await;
    assert!(
        text(&refused).contains("stop it with core_service_stop before deleting it"),
        "{}",
        text(&refused)
    );
    let stopped = call("core_service_stop", json!({"name": "extra"})).await;
    assert_eq!(core(&stopped)["state"], "stopped", "{}", text(&stopped));
    let deleted = call("core_mcpserver_delete", json!({"name": "extra"})).await;
    assert_eq!(deleted.is_error, Some(false), "{}", text(&deleted));
    assert!(!file.exists(), "the definition file is removed");
    let missing = call("core_mcpserver_delete", json!({"name": "extra"})).await;
    assert!(text(&missing).contains("not found"));

    let updated = call(
        "core_mcpserver_update",
        json!({"name": "demo", "toolPrefix": "renamed"}),
    )
    .await;
    assert_eq!(updated.is_error, Some(false), "{}", text(&updated));
    assert!(
        std::fs::read_to_string(dir.path().join("mcpservers/demo.yaml"))
            .expect("kept")
            .contains("toolPrefix: renamed")
    );
    assert!(eventually(10, || async { tool_names(&h).contains(&"x_renamed_echo".to_owned()) }).await);

    let invalid = call(
        "core_mcpserver_validate",
        json!({"name": "bad", "type": "stdio", "timeout": 900}),
    )
    .await;
    let invalid = core(&invalid);
    assert_eq!(invalid["valid"], false);
    assert!(
        invalid["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("spec.timeout") && e.contains("spec.command")),
        "{invalid}"
    );

    let port = call("core_config_update_aggregator", json!({"aggregator": {"Port": 9999}})).await;
    assert_eq!(core(&port)["aggregator"]["port"], 9999, "{}", text(&port));
    let saved = call("core_config_save", json!({})).await;
    assert_eq!(saved.is_error, Some(false), "{}", text(&saved));
    let config = std::fs::read_to_string(dir.path().join("config.yaml")).expect("saved");
    assert!(config.contains("port: 9999"), "{config}");

    let events = call(
        "core_events",
        json!({"resourceType": "MCPServer", "resourceName": "extra"}),
    )
    .await;
    let events_text = text(&events);
    for reason in [
        "MCPServerCreated",
        "MCPServerStarted",
        "MCPServerStopped",
        "MCPServerDeleted",
    ] {
        assert!(events_text.contains(reason), "{reason} missing: {events_text}");
    }
    // Without the front door, a write's author is the MCP session it came in; the answer and
    // the events name files relative to the config directory.
    let listed = core(&events);
    let created_event = listed
        .as_array()
        .and_then(|e| e.iter().find(|e| e["reason"] == "MCPServerCreated"))
        .unwrap_or_else(|| panic!("no MCPServerCreated: {listed}"));
    let author = &created_event["data"]["author"];
    assert!(
        author["session"].as_str().is_some_and(|s| !s.is_empty()),
        "{created_event}"
    );
    assert!(author.get("subject").is_none(), "{created_event}");
    assert_eq!(core(&created)["file"], "mcpservers/extra.yaml");
    assert!(
        !events_text.contains(&dir.path().display().to_string()),
        "{events_text}"
    );
    h.gateway.registry().events().flush(std::time::Duration::from_secs(2));
    let day = chrono::Utc::now().format("%Y-%m-%d");
    let log = std::fs::read_to_string(dir.path().join(format!("events/events-{day}.json"))).expect("event log");
    assert!(log.lines().count() >= 4 && log.contains("MCPServerDeleted"), "{log}");
    h.stop().await;
}

#[tokio::test]
async fn edits_of_the_config_directory_are_applied_live_and_a_bad_file_keeps_the_last_good_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "mcpservers/a.yaml", &demo_yaml("a", ""));
    let (gateway, _) = Gateway::from_config_dir(dir.path(), fast_supervision()).expect("loads");
    let _watch = gateway.watch_config_dir().expect("watching");
    let h = Harness::serve(gateway).await;
    assert!(tool_names(&h).contains(&"x_a_echo".to_owned()));
    let a_pid = h.gateway.registry().server("a").and_then(|s| s.runtime.last_connected);

    write(dir.path(), "mcpservers/b.yaml", &demo_yaml("b", ""));
    assert!(
        eventually(10, || async { tool_names(&h).contains(&"x_b_echo".to_owned()) }).await,
        "b added"
    );

    write(dir.path(), "mcpservers/b.yaml", &demo_yaml("b", "  toolPrefix: bee\n"));
    assert!(
        eventually(10, || async {
            let names = tool_names(&h);
            names.contains(&"x_bee_echo".to_owned()) && !names.contains(&"x_b_echo".to_owned())
        })
        .await,
        "b changed"
    );

    write(dir.path(), "mcpservers/a.yaml", "kind: MCPServer\nmetadata: [broken\n");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(
        tool_names(&h).contains(&"x_a_echo".to_owned()),
        "a keeps its last good definition"
    );
    assert_eq!(
        h.gateway.registry().server("a").and_then(|s| s.runtime.last_connected),
        a_pid,
        "a was not touched"
    );

    std::fs::remove_file(dir.path().join("mcpservers/b.yaml")).expect("rm");
    assert!(
        eventually(10, || async {
            h.gateway.registry().server("b").is_none() && !tool_names(&h).iter().any(|n| n.starts_with("x_bee_"))
        })
        .await,
        "b removed"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_bad_file_keeps_its_last_good_definition_when_the_directory_is_named_by_a_roundabout_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(tmp.path().join("elsewhere")).expect("mkdir");
    // The path the gateway is given, and the one the watcher sees events under, differ.
    let dir = tmp.path().join("elsewhere").join("..");
    let remote = |name: &str| {
        format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: {name}\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:9/mcp\n"
        )
    };
    write(&dir, "mcpservers/a.yaml", &remote("a"));
    let (gateway, problems) = Gateway::from_config_dir(&dir, fast_supervision()).expect("loads");
    assert!(problems.is_empty(), "{problems:?}");
    let _watch = gateway.watch_config_dir().expect("watching");

    write(&dir, "mcpservers/a.yaml", "kind: MCPServer\nmetadata: [broken\n");
    write(&dir, "mcpservers/b.yaml", &remote("b"));
    let registry = gateway.registry();
    assert!(
        eventually(10, || async { registry.server("b").is_some() }).await,
        "the change was read"
    );
    assert!(registry.server("a").is_some(), "a keeps its last good definition");
}

/// The Rust block of README.md's "Using the SDK" (compiled as a doc test of the facade crate).
fn readme_sdk_snippet() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let section = readme
        .split("## Using the SDK")
        .nth(1)
        .expect("a Using the SDK section");
    let block = section.split("```rust").nth(1).expect("a Rust block");
    block.split("```").next().expect("the block's end").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_sdk_snippet_behaves_like_the_reference_gateway() {
    // The snippet people copy is filesystem mode, as the reference gateway runs...
    let snippet = readme_sdk_snippet();
    for call in [
        "Gateway::from_config_dir(",
        ".watch_config_dir()",
        ".start().await",
        ".serve(listener",
    ] {
        assert!(snippet.contains(call), "the README's snippet lost {call}:\n{snippet}");
    }
    assert!(
        !snippet.contains("Gateway::new("),
        "in-memory mode is not what the README describes"
    );

    // ...and these are its steps, on a copy of examples/config whose demo server is this build's.
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "mcpservers/demo.yaml", &demo_yaml("demo", ""));
    write(
        dir.path(),
        "workflows/demo-tour.yaml",
        &std::fs::read_to_string("examples/config/workflows/demo-tour.yaml").expect("the example workflow"),
    );
    let (gateway, problems) = Gateway::from_config_dir(dir.path(), fast_supervision()).expect("loads");
    assert!(problems.is_empty(), "{problems:?}");
    let _watch = gateway.watch_config_dir().expect("watched");
    gateway.start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = gateway.clone();
    let serving = tokio::spawn(async move {
        served
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let client = connect(&url, &[], None).await;
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move { call_meta(client, "call_tool", json!({"name": name, "arguments": args})).await }
    };

    // A workflow run is recorded on disk, beside the definitions.
    let run = call("workflow_demo-tour", json!({"who": "sdk"})).await;
    assert_eq!(run.is_error, Some(false), "{}", text(&run));
    let records = std::fs::read_dir(dir.path().join("workflow_executions"))
        .expect("run records")
        .count();
    assert_eq!(records, 1);
    // A definition made through the core tools is written back.
    let created = call(
        "core_mcpserver_create",
        json!({"name": "made", "type": "stdio", "command": [gateway_binary().display().to_string(), "demo-server"]}),
    )
    .await;
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    assert!(dir.path().join("mcpservers/made.yaml").is_file());
    // A file dropped into the directory is applied live.
    write(dir.path(), "mcpservers/live.yaml", &demo_yaml("live", ""));
    assert!(
        eventually(20, || async {
            let listed = call_meta(&client, "filter_tools", json!({"pattern": "x_live_*"})).await;
            envelope(&listed)["total"].as_u64().unwrap_or(0) > 0
        })
        .await,
        "x_live_* never appeared"
    );
    // Events go to the event log on disk.
    gateway.registry().events().flush(std::time::Duration::from_secs(2));
    let day = chrono::Utc::now().format("%Y-%m-%d");
    let log = std::fs::read_to_string(dir.path().join(format!("events/events-{day}.json"))).expect("event log");
    assert!(log.contains("MCPServerCreated"), "{log}");
    let _ = client.cancel().await;
    stop.send(()).expect("signal");
    serving.await.expect("the task").expect("served");
}
