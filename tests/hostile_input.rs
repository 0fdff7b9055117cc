//! Hostile definitions and downstream servers: credentials where the reference refuses them, a
//! YAML bomb, a 100 MB file, and a downstream that floods stdout with 50 MB of garbage. Each is
//! refused or failed with its reason, memory stays bounded, and the gateway keeps serving the
//! rest.

mod common;

use std::path::Path;

use common::{Harness, demo_stdio, fast_supervision, text};
use muster::gateway::Gateway;
use serde_json::{Value, json};

/// The peak resident memory of this test process so far, in MiB (`VmHWM`).
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        / 1024
}

/// Whether a meta-tool's answer (the meta-tool's own error, or the wrapped tool's) is an error.
fn refused(result: &rmcp::model::CallToolResult) -> bool {
    let envelope: Value = serde_json::from_str(&text(result)).unwrap_or(Value::Null);
    result.is_error == Some(true) || envelope["isError"] == true
}

fn definition_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("mcpservers"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn credentials_on_remote_servers_are_refused_on_create_and_update_and_nothing_is_written() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().to_path_buf();
    std::fs::create_dir_all(dir.join("mcpservers")).expect("mkdir");
    let (gateway, problems) = Gateway::from_config_dir(&dir, fast_supervision()).expect("loads");
    assert!(problems.is_empty(), "{problems:?}");
    let h = Harness::serve(gateway).await;
    let url = "http://127.0.0.1:9/mcp";
    // A server to update.
    let created = h
        .meta(
            "call_tool",
            json!({"name": "core_mcpserver_create", "arguments": {"name": "remote", "type": "streamable-http", "url": url}}),
        )
        .await;
    assert!(!refused(&created), "{}", text(&created));
    let before = std::fs::read_to_string(dir.join("mcpservers/remote.yaml")).expect("written");

    let hostile = [
        (
            json!({"headers": {"Authorization": "Bearer s3cr3t-token"}}),
            "Authorization",
        ),
        (json!({"headers": {"cookie": "session=s3cr3t-token"}}), "cookie"),
        (json!({"headers": {"X-API-Key": "s3cr3t-token"}}), "X-API-Key"),
        (json!({"env": {"TOKEN": "s3cr3t-token"}}), "env"),
        (
            json!({"url": "http://user:s3cr3t-token@127.0.0.1:9/mcp"}),
            "user name or password",
        ),
    ];
    for (extra, named) in hostile {
        for (tool, name) in [("core_mcpserver_create", "other"), ("core_mcpserver_update", "remote")] {
            let mut args = json!({"name": name, "type": "streamable-http", "url": url});
            for (k, v) in extra.as_object().expect("object") {
                args[k] = v.clone();
            }
            let result = h.meta("call_tool", json!({"name": tool, "arguments": args})).await;
            assert!(refused(&result), "{tool} with {extra} was accepted: {}", text(&result));
            let message = text(&result);
            assert!(message.contains(named), "{tool} names {named}: {message}");
            assert!(
                !message.contains("s3cr3t-token"),
                "the refusal repeats the secret: {message}"
            );
        }
    }
    assert_eq!(definition_files(&dir), ["remote.yaml"], "no new definition was written");
    let after = std::fs::read_to_string(dir.join("mcpservers/remote.yaml")).expect("still there");
    assert_eq!(after, before, "the refused updates changed nothing");
    h.stop().await;
}

#[tokio::test]
async fn a_yaml_bomb_and_a_100_mb_file_are_refused_without_exhausting_memory() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().to_path_buf();
    std::fs::create_dir_all(dir.join("mcpservers")).expect("mkdir");
    std::fs::create_dir_all(dir.join("workflows")).expect("mkdir");
    // Billion laughs: nine levels of nine aliases, 9^9 (387 million) strings once expanded.
    let mut bomb = String::from(
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata: {name: laughs}\nx0: &a0 [\"lol\"]\n",
    );
    for level in 1..=9 {
        let previous = format!("*a{}", level - 1);
        let refs = [previous.as_str(); 9].join(", ");
        bomb.push_str(&format!("x{level}: &a{level} [{refs}]\n"));
    }
    bomb.push_str("spec:\n  steps: [{id: s, tool: core_service_list, args: {x: *a9}}]\n");
    std::fs::write(dir.join("workflows/laughs.yaml"), &bomb).expect("write the bomb");
    // 100 MB (sparse: the size is what a reader would face).
    let big = std::fs::File::create(dir.join("mcpservers/huge.yaml")).expect("create");
    big.set_len(100 * 1024 * 1024).expect("size");
    drop(big);
    // And one good server, which must still load.
    std::fs::write(
        dir.join("mcpservers/good.yaml"),
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata: {name: good}\nspec: {type: streamable-http, url: \"http://127.0.0.1:9/mcp\"}\n",
    )
    .expect("write");

    let peak_before = peak_rss_mib();
    let (gateway, problems) = Gateway::from_config_dir(&dir, fast_supervision()).expect("loads");
    let peak_after = peak_rss_mib();
    let described: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 2, "{described:?}");
    let huge = described
        .iter()
        .find(|p| p.contains("huge.yaml"))
        .expect("huge.yaml is named");
    assert!(huge.contains("104857600 bytes"), "{huge}");
    let laughs = described
        .iter()
        .find(|p| p.contains("laughs.yaml"))
        .expect("laughs.yaml is named");
    assert!(laughs.contains("invalid YAML"), "{laughs}");
    assert!(
        peak_after.saturating_sub(peak_before) < 100,
        "loading took {peak_before} -> {peak_after} MiB at peak"
    );
    assert!(gateway.registry().server("good").is_some(), "the good server loaded");
    assert!(gateway.registry().workflows().is_empty());
}

#[tokio::test]
async fn a_downstream_flooding_stdout_with_50_mb_of_garbage_is_failed_and_the_rest_served() {
    let mut flood = demo_stdio("flood");
    flood.spec.command = Some("sh".into());
    // 50 MB of random bytes (newlines among them), then silence.
    flood.spec.args = vec!["-c".into(), "head -c 52428800 /dev/urandom; exec sleep 60".into()];
    flood.spec.timeout = 5;
    let peak_before = peak_rss_mib();
    let h = Harness::start(vec![flood, demo_stdio("demo")]).await;
    let failed = common::eventually(30, || async {
        h.gateway
            .registry()
            .server("flood")
            .is_some_and(|s| !s.runtime.state.is_ready() && s.runtime.last_error.is_some())
    })
    .await;
    let status = h.gateway.registry().server("flood").expect("defined");
    assert!(
        failed,
        "the flooding server is failed with its error: {:?}",
        status.runtime
    );
    let echoed = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "still here"}}),
        )
        .await;
    assert!(text(&echoed).contains("still here"), "{}", text(&echoed));
    let peak_after = peak_rss_mib();
    assert!(
        peak_after.saturating_sub(peak_before) < 200,
        "the flood took memory: {peak_before} -> {peak_after} MiB at peak"
    );
    h.stop().await;
}
