//! Workflow run records in Kubernetes mode with the real gateway binary: two replicas (two
//! `gateway serve` processes) against one API server double (`muster_kube::testing`), each
//! reaching it through its own kubeconfig. A run through one replica is a WorkflowExecution
//! resource that the other replica's `core_workflow_execution_*` tools read. The downstream
//! server (the demo server over streamable HTTP) and the client (rmcp) are real.

mod common;

use common::{
    DemoHttp,
    kubernetes::{GATEWAY_USER, cluster, core as call, greet_workflow, mcpserver, remote, tool_shown, two_replicas},
};
use serde_json::json;

const STALE_OWN: &str = "00000000-0000-4000-8000-000000000001";
const STALE_OTHER: &str = "00000000-0000-4000-8000-000000000002";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_through_one_replica_is_a_workflowexecution_the_other_replica_reads() {
    let (double, dir) = cluster("").await;
    let demo = DemoHttp::start();
    double
        .put(mcpserver("muster", "demo", remote(&demo.url)))
        .expect("stored");
    double.put(greet_workflow()).expect("stored");

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

    let ((one, one_client), (two, two_client)) = two_replicas(dir.path()).await;
    assert!(
        tool_shown(&one_client, "workflow_greet", true, 30).await,
        "{}",
        one.log()
    );

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
