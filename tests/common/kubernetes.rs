//! Kubernetes mode with the reference gateway binary: an API server double
//! (`muster_kube::testing`) with the gateway's ServiceAccount, a config directory asking for
//! Kubernetes mode with a kubeconfig beside it, replicas of `gateway serve` reaching the double
//! through `KUBECONFIG`, and the calls the tests make through the meta-tools.

use std::{path::Path, process::Command, time::Duration};

use muster_kube::testing::ApiServerDouble;
use rmcp::{RoleClient, service::RunningService};
use serde_json::{Value, json};

use super::{call_meta, envelope, eventually, gateway_binary, gateway_process::GatewayChild, text, tool_names};

/// The gateway's ServiceAccount, as the double knows it.
pub const GATEWAY_TOKEN: &str = "muster-serviceaccount-token";
pub const GATEWAY_USER: &str = "system:serviceaccount:muster:muster";

/// A double, and a config directory asking for Kubernetes mode in namespace `muster` (plus
/// `team`) with `extra_config` lines, and a kubeconfig (`kubeconfig`) for the gateway's
/// ServiceAccount beside it.
pub async fn cluster(extra_config: &str) -> (ApiServerDouble, tempfile::TempDir) {
    let double = ApiServerDouble::start().await;
    double.add_token(GATEWAY_TOKEN, GATEWAY_USER, &["system:serviceaccounts"]);
    double.allow_all(GATEWAY_USER);
    let dir = tempfile::tempdir().expect("a config directory");
    let config = format!("kubernetes: true\nnamespace: muster\nadditionalNamespaces: [team]\n{extra_config}");
    std::fs::write(dir.path().join("config.yaml"), config).expect("config.yaml");
    double
        .write_kubeconfig(dir.path().join("kubeconfig"), GATEWAY_TOKEN, "muster")
        .expect("a kubeconfig");
    (double, dir)
}

/// `gateway serve` of `dir` on `port` as replica `pod` (its `POD_NAME`), with `kubeconfig`; a
/// status Lease of 4 s and a reconnect backoff of 1 to 2 s.
pub fn spawn_replica(dir: &Path, port: u16, kubeconfig: &Path, pod: &str) -> GatewayChild {
    let mut command = Command::new(gateway_binary());
    command
        .args(["serve", "--config-path"])
        .arg(dir)
        .args(["--port", &port.to_string()])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAME", pod)
        .env("MUSTER_STATUS_LEASE_DURATION", "4s")
        .env("MUSTER_MCPSERVER_INITIAL_BACKOFF", "1s")
        .env("MUSTER_MCPSERVER_MAX_BACKOFF", "2s")
        .env("RUST_LOG", "info");
    GatewayChild::spawn(command)
}

/// A replica of [`two_replicas`], with a client connected to it.
pub type Replica = (GatewayChild, RunningService<RoleClient, ()>);

/// Replicas `muster-one` and `muster-two` of `dir` (Kubernetes mode, on free ports, through the
/// kubeconfig beside it), each with a client connected.
pub async fn two_replicas(dir: &Path) -> (Replica, Replica) {
    let kubeconfig = dir.join("kubeconfig");
    let one = spawn_replica(dir, super::replicas::free_port(), &kubeconfig, "muster-one");
    let two = spawn_replica(dir, super::replicas::free_port(), &kubeconfig, "muster-two");
    let one_client = super::connect(&one.endpoint(Duration::from_secs(60)), &[], None).await;
    let two_client = super::connect(&two.endpoint(Duration::from_secs(60)), &[], None).await;
    ((one, one_client), (two, two_client))
}

/// The Workflow `greet` of muster's namespace: it takes `who` and calls the demo server's
/// `x_demo_echo` with `hello <who>`.
pub fn greet_workflow() -> Value {
    json!({
        "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "greet", "namespace": "muster"},
        "spec": {
            "args": {"who": {"type": "string", "required": true}},
            "steps": [{"id": "say", "tool": "x_demo_echo", "args": {"message": "hello {{ .input.who }}"}}],
        },
    })
}

/// An MCPServer resource.
pub fn mcpserver(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec,
    })
}

/// The spec of a remote server at `url`.
pub fn remote(url: &str) -> Value {
    json!({"type": "streamable-http", "url": url, "timeout": 5})
}

/// The names `list_tools` shows.
pub async fn listed(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    tool_names(&envelope(&call_meta(client, "list_tools", json!({"limit": 500})).await))
}

/// Waits up to `secs` until `list_tools` shows (or stops showing) `tool`.
pub async fn tool_shown(client: &RunningService<RoleClient, ()>, tool: &str, shown: bool, secs: u64) -> bool {
    eventually(secs, || async {
        listed(client).await.iter().any(|t| t == tool) == shown
    })
    .await
}

/// Calls the demo server's echo tool `tool`.
pub async fn echo(client: &RunningService<RoleClient, ()>, tool: &str) -> Result<(), String> {
    let result = call_meta(
        client,
        "call_tool",
        json!({"name": tool, "arguments": {"message": "hi"}}),
    )
    .await;
    if result.is_error == Some(true) {
        Err(text(&result))
    } else {
        Ok(())
    }
}

/// Calls `tool` through the meta-tool `call_tool`: whether it succeeded, and its answer (the
/// structured content, else the first text item as JSON, else the error's text).
pub async fn core(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> (bool, Value) {
    let result = call_meta(client, "call_tool", json!({"name": tool, "arguments": args})).await;
    let envelope = envelope(&result);
    let answer = if let Some(content) = envelope.get("structuredContent") {
        content.clone()
    } else if let Some(item) = envelope["content"][0]["text"].as_str() {
        serde_json::from_str(item).unwrap_or_else(|_| Value::String(item.to_owned()))
    } else {
        Value::String(text(&result))
    };
    let failed = result.is_error == Some(true) || envelope["isError"] == true;
    (!failed, answer)
}
