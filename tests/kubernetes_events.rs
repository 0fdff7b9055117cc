//! Events in Kubernetes mode with the real gateway binary: two replicas (two `gateway serve`
//! processes) against one API server double (`muster_kube::testing`, which validates Events as
//! the API server does). What a replica observes is an `events.k8s.io/v1` Event on the
//! MCPServer or Workflow it concerns, and `core_events` on either replica reads the Events of
//! both. The downstream server (the demo server over streamable HTTP) and the client (rmcp) are
//! real.

mod common;

use common::{
    DemoHttp, eventually,
    kubernetes::{GATEWAY_USER, cluster, core as call, greet_workflow, mcpserver, remote, tool_shown, two_replicas},
};
use muster_kube::testing::ApiServerDouble;
use serde_json::{Value, json};

const EVENTS: &str = "events.events.k8s.io";

/// muster's Events in `namespace` about the `kind` named `name`.
fn events_about(double: &ApiServerDouble, namespace: &str, kind: &str, name: &str) -> Vec<Value> {
    double
        .list(EVENTS, Some(namespace))
        .into_iter()
        .filter(|e| {
            e["regarding"]["kind"] == kind
                && e["regarding"]["name"] == name
                && e["reportingController"] == "muster.giantswarm.io/muster"
        })
        .collect()
}

/// The `(reason, message)` of each entry of a `core_events` answer.
fn entries(answer: &Value) -> Vec<(String, String)> {
    answer
        .as_array()
        .map(|all| {
            all.iter()
                .map(|e| {
                    (
                        e["reason"].as_str().unwrap_or_default().to_owned(),
                        e["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_kubernetes_events_on_their_resource_that_every_replica_reads() {
    let (double, dir) = cluster("").await;
    let demo = DemoHttp::start();
    let server = double
        .put(mcpserver("muster", "demo", remote(&demo.url)))
        .expect("stored");
    double
        .put(mcpserver("team", "helper", remote(&demo.url)))
        .expect("stored");
    double.put(greet_workflow()).expect("stored");

    let ((one, one_client), (two, two_client)) = two_replicas(dir.path()).await;
    assert!(
        tool_shown(&one_client, "workflow_greet", true, 30).await,
        "{}",
        one.log()
    );
    assert!(
        tool_shown(&two_client, "workflow_greet", true, 30).await,
        "{}",
        two.log()
    );

    // The server's Events: on the MCPServer, from each replica that connected to it.
    let connected = || {
        let events = events_about(&double, "muster", "MCPServer", "demo");
        let instances: Vec<Value> = events.iter().map(|e| e["reportingInstance"].clone()).collect();
        instances.contains(&json!("muster-one")) && instances.contains(&json!("muster-two"))
    };
    assert!(
        eventually(20, || async { connected() }).await,
        "{:?}\n{}",
        double.list(EVENTS, None),
        one.log()
    );
    let about_demo = events_about(&double, "muster", "MCPServer", "demo");
    let event = &about_demo[0];
    assert_eq!(
        event["regarding"]["apiVersion"], "muster.giantswarm.io/v1alpha1",
        "{event}"
    );
    assert_eq!(event["regarding"]["uid"], server["metadata"]["uid"], "{event}");
    assert_eq!(event["metadata"]["namespace"], "muster", "{event}");
    // Written with muster's own identity, created and never changed.
    let audit = double.audit_log();
    let writes: Vec<_> = audit.iter().filter(|e| e.resource == "events").collect();
    assert!(!writes.is_empty(), "{audit:?}");
    assert!(
        writes
            .iter()
            .all(|e| e.user == GATEWAY_USER && e.impersonated_by.is_none() && e.verb == "create"),
        "{writes:?}"
    );

    // core_events about it answers with those Events.
    let (ok, answer) = call(
        &one_client,
        "core_events",
        json!({"resourceType": "MCPServer", "resourceName": "demo"}),
    )
    .await;
    assert!(ok, "{answer}\n{}", one.log());
    let answered = entries(&answer);
    assert!(!answered.is_empty(), "{answer}");
    let stored: Vec<(String, String)> = events_about(&double, "muster", "MCPServer", "demo")
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["note"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(
        answered.iter().all(|a| stored.contains(a)),
        "{answered:?} not in {stored:?}"
    );
    assert!(
        answer
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| e["resource_type"] == "MCPServer" && e["resource_name"] == "demo" && e["namespace"] == "muster"),
        "{answer}"
    );

    // Another namespace's server: its Events are in its namespace, and core_events names it as
    // the gateway does.
    assert!(
        eventually(20, || async {
            !events_about(&double, "team", "MCPServer", "helper").is_empty()
        })
        .await,
        "{:?}",
        double.list(EVENTS, None)
    );
    let (ok, team) = call(&two_client, "core_events", json!({"resourceName": "team_helper"})).await;
    assert!(ok && !entries(&team).is_empty(), "{team}\n{}", two.log());
    assert_eq!(team[0]["namespace"], "team", "{team}");
    assert_eq!(team[0]["resource_name"], "team_helper", "{team}");

    // A run through replica one: its Events are replica one's, and replica two reads them.
    let (ok, run) = call(&one_client, "workflow_greet", json!({"who": "eve"})).await;
    assert!(ok && run["status"] == "completed", "{run}\n{}", one.log());
    let completed = || {
        events_about(&double, "muster", "Workflow", "greet")
            .into_iter()
            .filter(|e| e["reason"] == "WorkflowExecutionCompleted")
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(20, || async { !completed().is_empty() }).await,
        "{:?}",
        double.list(EVENTS, None)
    );
    assert!(
        completed().iter().all(|e| e["reportingInstance"] == "muster-one"),
        "only replica one ran it: {:?}",
        completed()
    );
    let (ok, seen) = call(
        &two_client,
        "core_events",
        json!({"resourceType": "workflow", "resourceName": "greet", "since": "10m"}),
    )
    .await;
    assert!(ok, "{seen}\n{}", two.log());
    let reasons: Vec<String> = entries(&seen).into_iter().map(|(reason, _)| reason).collect();
    assert!(
        reasons.contains(&"WorkflowExecutionCompleted".to_owned())
            && reasons.contains(&"WorkflowExecutionStarted".to_owned()),
        "replica two reads replica one's run: {seen}\n{}",
        two.log()
    );
    let position = |reason: &str| reasons.iter().position(|r| r == reason);
    assert!(
        position("WorkflowExecutionCompleted") < position("WorkflowExecutionStarted"),
        "newest first: {reasons:?}"
    );
}
