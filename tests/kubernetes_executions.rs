//! Workflow run records in Kubernetes mode with the real gateway binary: two replicas (two
//! `gateway serve` processes) against one API server double (`muster_kube::testing`), each
//! reaching it through its own kubeconfig. A run through one replica is a WorkflowExecution
//! resource that the other replica's `core_workflow_execution_*` tools read. The downstream
//! server (the demo server over streamable HTTP) and the client (rmcp) are real.

mod common;

use std::{path::Path, process::Command, time::Duration};

use common::{DemoHttp, call_meta, connect, envelope, eventually, gateway_binary, gateway_process::GatewayChild};
use muster_kube::testing::ApiServerDouble;
use rmcp::{RoleClient, service::RunningService};
use serde_json::{Value, json};

/// The gateway's ServiceAccount, as the double knows it.
const GATEWAY_TOKEN: &str = "muster-serviceaccount-token";
const GATEWAY_USER: &str = "system:serviceaccount:muster:muster";

/// A config directory asking for Kubernetes mode in namespace `muster`, with a kubeconfig for
/// the gateway's ServiceAccount on `double` beside it.
fn replica_dir(double: &ApiServerDouble) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a config directory");
    std::fs::write(dir.path().join("config.yaml"), "kubernetes: true\nnamespace: muster\n").expect("config.yaml");
    double
        .write_kubeconfig(dir.path().join("kubeconfig"), GATEWAY_TOKEN, "muster")
        .expect("a kubeconfig");
    dir
}

/// `gateway serve` of `dir` on a free loopback port as pod `pod`, reaching the double through
/// `KUBECONFIG`.
fn spawn_replica(dir: &Path, pod: &str) -> GatewayChild {
    let mut command = Command::new(gateway_binary());
    command
        .args(["serve", "--config-path"])
        .arg(dir)
        .args(["--port", &free_port().to_string()])
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("POD_NAME", pod)
        .env("MUSTER_MCPSERVER_INITIAL_BACKOFF", "1s")
        .env("MUSTER_MCPSERVER_MAX_BACKOFF", "2s")
        .env("RUST_LOG", "info");
    GatewayChild::spawn(command)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Calls `tool` through the meta-tool `call_tool`: whether it succeeded, and its answer (the
/// structured content, else the first text item as JSON, else that text).
async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> (bool, Value) {
    let result = call_meta(client, "call_tool", json!({"name": tool, "arguments": args})).await;
    let envelope = envelope(&result);
    let answer = if let Some(content) = envelope.get("structuredContent") {
        content.clone()
    } else if let Some(text) = envelope["content"][0]["text"].as_str() {
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
    } else {
        Value::String(common::text(&result))
    };
    let failed = result.is_error == Some(true) || envelope["isError"] == true;
    (!failed, answer)
}

/// Waits until `list_tools` of `client` shows `tool`.
async fn tool_shown(client: &RunningService<RoleClient, ()>, tool: &str, secs: u64) -> bool {
    eventually(secs, || async {
        let page = envelope(&call_meta(client, "list_tools", json!({"limit": 500})).await);
        common::tool_names(&page).iter().any(|t| t == tool)
    })
    .await
}

const STALE_OWN: &str = "00000000-0000-4000-8000-000000000001";
const STALE_OTHER: &str = "00000000-0000-4000-8000-000000000002";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_through_one_replica_is_a_workflowexecution_the_other_replica_reads() {
    let double = ApiServerDouble::start().await;
    double.add_token(GATEWAY_TOKEN, GATEWAY_USER, &["system:serviceaccounts"]);
    double.allow_all(GATEWAY_USER);
    let demo = DemoHttp::start();
    double
        .put(json!({
            "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": "demo", "namespace": "muster"},
            "spec": {"type": "streamable-http", "url": demo.url, "timeout": 5},
        }))
        .expect("stored");
    double
        .put(json!({
            "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "greet", "namespace": "muster"},
            "spec": {
                "args": {"who": {"type": "string", "required": true}},
                "steps": [{"id": "say", "tool": "x_demo_echo", "args": {"message": "hello {{ .input.who }}"}}],
            },
        }))
        .expect("stored");

    // Runs a previous process of replica one left in progress, and one of a replica that is
    // not here: replica one fails its own at start; nobody touches the other.
    for (id, pod) in [(STALE_OWN, "muster-one"), (STALE_OTHER, "muster-gone")] {
        double
            .put(json!({
                "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "WorkflowExecution",
                "metadata": {"name": id, "namespace": "muster",
                    "labels": {"muster.giantswarm.io/workflow": "greet", "muster.giantswarm.io/status": "inprogress",
                        "muster.giantswarm.io/replica": pod},
                    "annotations": {"muster.giantswarm.io/replica": pod}},
                "spec": {"workflowName": "greet", "status": "inprogress", "startedAt": "2026-12-01T10:00:00Z"},
            }))
            .expect("stored");
    }

    let (one_dir, two_dir) = (replica_dir(&double), replica_dir(&double));
    let one = spawn_replica(one_dir.path(), "muster-one");
    let two = spawn_replica(two_dir.path(), "muster-two");
    let one_client = connect(&one.endpoint(Duration::from_secs(60)), &[], None).await;
    let two_client = connect(&two.endpoint(Duration::from_secs(60)), &[], None).await;
    assert!(tool_shown(&one_client, "workflow_greet", 30).await, "{}", one.log());

    let status = |id: &str| {
        double
            .get("workflowexecutions", Some("muster"), id)
            .map(|o| o["spec"]["status"].clone())
    };
    assert_eq!(status(STALE_OWN), Some(json!("failed")), "{}", one.log());
    assert_eq!(status(STALE_OTHER), Some(json!("inprogress")));

    let (ok, run) = call(&one_client, "workflow_greet", json!({"who": "eve"})).await;
    assert!(ok, "{run}\n{}", one.log());
    assert_eq!(run["status"], "completed", "{run}");
    let id = run["execution_id"].as_str().expect("an execution id").to_owned();

    // The resource, with muster's labels, written by replica one with muster's own identity.
    let object = double
        .get("workflowexecutions", Some("muster"), &id)
        .expect("the run is a WorkflowExecution in muster's namespace");
    let labels = &object["metadata"]["labels"];
    assert_eq!(labels["muster.giantswarm.io/workflow"], "greet", "{object}");
    assert_eq!(labels["muster.giantswarm.io/status"], "completed", "{object}");
    assert_eq!(labels["muster.giantswarm.io/replica"], "muster-one", "{object}");
    assert_eq!(object["spec"]["steps"][0]["tool"], "x_demo_echo", "{object}");
    let audit = double.audit_log();
    let writes: Vec<_> = audit.iter().filter(|e| e.resource == "workflowexecutions").collect();
    assert!(writes.iter().any(|e| e.name == id), "{audit:?}");
    assert!(
        writes
            .iter()
            .all(|e| e.user == GATEWAY_USER && e.impersonated_by.is_none()),
        "{audit:?}"
    );

    // Replica two lists and reads it.
    let (ok, listed) = call(
        &two_client,
        "core_workflow_execution_list",
        json!({"workflow_name": "greet", "status": "completed"}),
    )
    .await;
    assert!(ok, "{listed}\n{}", two.log());
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["executions"][0]["execution_id"], id.as_str(), "{listed}");
    assert_eq!(listed["executions"][0]["status"], "completed", "{listed}");
    let (ok, all) = call(
        &two_client,
        "core_workflow_execution_list",
        json!({"workflow_name": "greet"}),
    )
    .await;
    assert!(ok && all["total"] == 3, "the run and the two older ones: {all}");
    let (ok, got) = call(&two_client, "core_workflow_execution_get", json!({"execution_id": id})).await;
    assert!(ok, "{got}\n{}", two.log());
    assert_eq!(got["execution_id"], id.as_str(), "{got}");
    assert_eq!(got["workflow_name"], "greet", "{got}");
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["input"], json!({"who": "eve"}), "{got}");
    assert_eq!(got["steps"][0]["tool"], "x_demo_echo", "{got}");
    assert_eq!(got["steps"][0]["input"], json!({"message": "hello eve"}), "{got}");
    let (ok, failed) = call(
        &two_client,
        "core_workflow_execution_list",
        json!({"workflow_name": "greet", "status": "failed"}),
    )
    .await;
    assert!(ok, "{failed}");
    assert_eq!(failed["total"], 1, "{failed}");
    assert_eq!(failed["executions"][0]["execution_id"], STALE_OWN, "{failed}");
}
