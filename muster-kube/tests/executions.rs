//! `KubeExecutionStore` against the API server double: records as WorkflowExecution resources,
//! read back with label selectors and pages, guarded, pruned, recovered per replica, and an API
//! server's refusal as an error. The store is called as the gateway calls it, inside
//! `spawn_blocking`, on both kinds of tokio runtime.
#![cfg(feature = "test-util")]

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use muster_core::crd::{
    ExecutionStatus, WORKFLOW_LABEL, WORKFLOW_STATUS_LABEL, WorkflowExecution, WorkflowExecutionSpec,
};
use muster_kube::{
    executions::{KubeExecutionStore, REPLICA_KEY, label_value},
    testing::{ADMIN_TOKEN, ApiServerDouble},
};
use muster_workflow::record::{
    ExecutionQuery, ExecutionStore, INTERRUPTED_ERROR, MAX_EXECUTION_PAYLOAD_BYTES, RETENTION_MAX_COUNT, RecordError,
    StatusFilter,
};
use serde_json::{Value, json};

const NS: &str = "muster";
const RESOURCE: &str = "workflowexecutions";

/// A double that checks records against the WorkflowExecution CRD's schema.
async fn double() -> ApiServerDouble {
    let crd = muster_kube::crd::workflow_execution();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("a schema")["openAPIV3Schema"].clone();
    ApiServerDouble::start().await.with_schema(RESOURCE, schema)
}

fn store(double: &ApiServerDouble, replica: &str) -> Arc<KubeExecutionStore> {
    Arc::new(KubeExecutionStore::new(double.client(), NS).with_replica(replica))
}

/// Runs `f` with the store as the gateway does: on a blocking thread.
async fn blocking<T: Send + 'static>(
    store: &Arc<KubeExecutionStore>,
    f: impl FnOnce(&KubeExecutionStore) -> T + Send + 'static,
) -> T {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .expect("the call ran")
}

fn at(minutes_ago: i64) -> DateTime<Utc> {
    Utc::now() - TimeDelta::minutes(minutes_ago)
}

/// A record of `workflow` named `id`, begun `started` and in `status`.
fn record(id: &str, workflow: &str, started: DateTime<Utc>, status: ExecutionStatus) -> WorkflowExecution {
    let mut spec = WorkflowExecutionSpec::started(workflow, started);
    spec.status = status;
    if status != ExecutionStatus::InProgress {
        spec.completed_at = Some(started + TimeDelta::seconds(1));
        spec.duration_ms = 1000;
    }
    spec.input = Some(json!({"who": "eve"}));
    WorkflowExecution::new(id, spec)
}

fn id(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn stored(double: &ApiServerDouble, id: &str) -> Value {
    double.get(RESOURCE, Some(NS), id).expect("the resource is stored")
}

/// Stores `execution` without HTTP (as another writer would), with `labels`.
fn put_raw(double: &ApiServerDouble, execution: &WorkflowExecution, labels: Value) {
    let mut object = serde_json::to_value(execution).expect("json");
    object["metadata"]["namespace"] = json!(NS);
    object["metadata"]["labels"] = labels;
    double.put(object).expect("stored");
}

// A current-thread runtime: `Handle::block_on` on the blocking thread while the runtime's one
// thread waits on the join (and drives the client's connections meanwhile).
#[tokio::test]
async fn a_run_is_a_resource_named_by_its_id_labelled_and_read_back() {
    let double = double().await;
    let store = store(&double, "muster-0");
    let mut run = record(&id(1), "deploy", at(1), ExecutionStatus::InProgress);
    let first = run.clone();
    blocking(&store, move |s| s.put(&first)).await.expect("written");
    let object = stored(&double, &id(1));
    assert_eq!(object["kind"], "WorkflowExecution");
    assert_eq!(object["spec"]["workflowName"], "deploy");
    assert_eq!(object["metadata"]["labels"][WORKFLOW_LABEL], "deploy");
    assert_eq!(object["metadata"]["labels"][WORKFLOW_STATUS_LABEL], "inprogress");
    assert_eq!(object["metadata"]["labels"][REPLICA_KEY], "muster-0");
    assert_eq!(object["metadata"]["annotations"][REPLICA_KEY], "muster-0");

    // The same run, finished: the record and its status label change.
    run.spec.status = ExecutionStatus::Completed;
    run.spec.result = Some(json!({"ok": true}));
    let finished = run.clone();
    blocking(&store, move |s| s.put(&finished)).await.expect("written");
    let object = stored(&double, &id(1));
    assert_eq!(object["metadata"]["labels"][WORKFLOW_STATUS_LABEL], "completed");
    assert_eq!(object["spec"]["result"], json!({"ok": true}));

    let got = blocking(&store, |s| s.get(&id(1))).await.expect("read").expect("found");
    assert_eq!(got.spec, run.spec);
    assert_eq!(got.metadata.name, id(1));
    assert_eq!(blocking(&store, |s| s.get(&id(2))).await.expect("read"), None);
    assert_eq!(blocking(&store, |s| s.get("../x")).await.expect("read"), None);
    let missing = WorkflowExecution::new("  ", WorkflowExecutionSpec::started("deploy", at(0)));
    assert!(matches!(
        blocking(&store, move |s| s.put(&missing)).await,
        Err(RecordError::MissingId)
    ));

    assert!(blocking(&store, |s| s.delete(&id(1))).await.expect("deleted"));
    assert!(!blocking(&store, |s| s.delete(&id(1))).await.expect("gone already"));
    assert!(double.get(RESOURCE, Some(NS), &id(1)).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_selects_by_label_and_pages_newest_first() {
    let double = double().await;
    let store = store(&double, "muster-0");
    // deploy: 5 runs (2 failed), backup: 2 runs; newer ids began later.
    let runs = [
        ("deploy", ExecutionStatus::Completed),
        ("backup", ExecutionStatus::Completed),
        ("deploy", ExecutionStatus::Failed),
        ("deploy", ExecutionStatus::Completed),
        ("backup", ExecutionStatus::InProgress),
        ("deploy", ExecutionStatus::Failed),
        ("deploy", ExecutionStatus::Completed),
    ];
    for (n, (workflow, status)) in runs.into_iter().enumerate() {
        let execution = record(&id(n), workflow, at(100 - n as i64), status);
        blocking(&store, move |s| s.put(&execution)).await.expect("written");
    }
    double.clear_logs();

    let deploy = ExecutionQuery::default().with_workflow_name("deploy");
    let page = blocking(&store, move |s| s.list(&deploy)).await.expect("listed");
    assert_eq!(page.total, 5);
    let ids: Vec<&str> = page.executions.iter().map(|e| e.execution_id.as_str()).collect();
    assert_eq!(ids, [id(6), id(5), id(3), id(2), id(0)]);

    let failed = ExecutionQuery::default()
        .with_workflow_name("deploy")
        .with_status(StatusFilter::Failed);
    let page = blocking(&store, move |s| s.list(&failed)).await.expect("listed");
    let ids: Vec<&str> = page.executions.iter().map(|e| e.execution_id.as_str()).collect();
    assert_eq!((page.total, ids), (2, vec![id(5).as_str(), id(2).as_str()]));

    let running = ExecutionQuery::default().with_status(StatusFilter::Running);
    let page = blocking(&store, move |s| s.list(&running)).await.expect("listed");
    assert_eq!(page.executions[0].execution_id, id(4));
    assert_eq!(page.total, 1);

    // The filters went to the API server as label selectors.
    let queries: Vec<String> = double.requests().into_iter().filter_map(|r| r.query).collect();
    let selectors: Vec<&String> = queries.iter().filter(|q| q.contains("labelSelector")).collect();
    assert_eq!(selectors.len(), 3, "{queries:?}");
    assert!(
        selectors[1].contains("muster.giantswarm.io%2Fworkflow%3Ddeploy"),
        "{queries:?}"
    );
    assert!(
        selectors[1].contains("muster.giantswarm.io%2Fstatus%3Dfailed"),
        "{queries:?}"
    );

    // Pages of the whole listing.
    let second = ExecutionQuery::default().with_page(3, 3);
    let page = blocking(&store, move |s| s.list(&second)).await.expect("listed");
    let ids: Vec<&str> = page.executions.iter().map(|e| e.execution_id.as_str()).collect();
    assert_eq!(ids, [id(3), id(2), id(1)]);
    assert_eq!((page.total, page.limit, page.offset, page.has_more), (7, 3, 3, true));
    let last = ExecutionQuery::default().with_page(3, 6);
    let page = blocking(&store, move |s| s.list(&last)).await.expect("listed");
    assert_eq!((page.executions.len(), page.has_more), (1, false));
    let cancelled = ExecutionQuery::default().with_status(StatusFilter::Cancelled);
    assert_eq!(
        blocking(&store, move |s| s.list(&cancelled))
            .await
            .expect("listed")
            .total,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reads_every_page_the_api_server_gives() {
    let double = double().await;
    let store = store(&double, "muster-0");
    for n in 0..620 {
        let execution = record(&id(n), "many", at(1000 - n as i64), ExecutionStatus::Completed);
        put_raw(
            &double,
            &execution,
            json!({WORKFLOW_LABEL: "many", WORKFLOW_STATUS_LABEL: "completed"}),
        );
    }
    let query = ExecutionQuery::default().with_workflow_name("many").with_page(10, 0);
    let page = blocking(&store, move |s| s.list(&query)).await.expect("listed");
    assert_eq!(page.total, 620);
    assert_eq!(page.executions[0].execution_id, id(619));
    let continued = double
        .requests()
        .iter()
        .filter(|r| r.query.as_deref().is_some_and(|q| q.contains("continue=")))
        .count();
    assert_eq!(continued, 2, "620 records in pages of 250");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_record_is_stored_truncated_within_256_kib() {
    let double = double().await;
    let store = store(&double, "muster-0");
    let mut big = record(&id(1), "big", at(1), ExecutionStatus::Completed);
    big.spec.input = Some(json!({"blob": "x".repeat(400 * 1024)}));
    big.spec.result = Some(json!({"blob": "y".repeat(300 * 1024)}));
    let original = big.clone();
    blocking(&store, move |s| s.put(&big)).await.expect("written");

    let object = stored(&double, &id(1));
    assert_eq!(object["spec"]["truncated"], true);
    let spec = serde_json::to_vec(&object["spec"]).expect("json");
    assert!(spec.len() <= MAX_EXECUTION_PAYLOAD_BYTES, "{} bytes", spec.len());
    assert!(
        object["spec"]["input"]["_truncated"].is_string(),
        "{}",
        object["spec"]["input"]
    );
    let got = blocking(&store, |s| s.get(&id(1))).await.expect("read").expect("found");
    assert!(got.spec.truncated);
    assert_ne!(got.spec.input, original.spec.input);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_records_older_than_21_days() {
    let double = double().await;
    let store = store(&double, "muster-0");
    let days = |d: i64| Utc::now() - TimeDelta::days(d);
    for (n, started) in [days(30), days(22), days(20), days(0)].into_iter().enumerate() {
        let execution = record(&id(n), "old", started, ExecutionStatus::Completed);
        blocking(&store, move |s| s.put(&execution)).await.expect("written");
    }
    let removed = blocking(&store, |s| s.prune(Utc::now())).await.expect("pruned");
    assert_eq!(removed, 2);
    let mut left: Vec<String> = double
        .list(RESOURCE, Some(NS))
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    left.sort();
    assert_eq!(left, [id(2), id(3)]);
    assert_eq!(blocking(&store, |s| s.prune(Utc::now())).await.expect("pruned"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_keeps_the_newest_10000() {
    let double = double().await;
    let store = store(&double, "muster-0");
    let extra = 3;
    for n in 0..RETENTION_MAX_COUNT + extra {
        let execution = record(
            &id(n),
            "busy",
            at(0) - TimeDelta::seconds(n as i64),
            ExecutionStatus::Completed,
        );
        put_raw(
            &double,
            &execution,
            json!({WORKFLOW_LABEL: "busy", WORKFLOW_STATUS_LABEL: "completed"}),
        );
    }
    let removed = blocking(&store, |s| s.prune(Utc::now())).await.expect("pruned");
    assert_eq!(removed, extra);
    assert_eq!(double.list(RESOURCE, Some(NS)).len(), RETENTION_MAX_COUNT);
    // The oldest went.
    for n in RETENTION_MAX_COUNT..RETENTION_MAX_COUNT + extra {
        assert!(double.get(RESOURCE, Some(NS), &id(n)).is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_fails_only_this_replicas_runs_in_progress() {
    let double = double().await;
    let mine = store(&double, "muster-0");
    let theirs = store(&double, "muster-1");
    let mut running = record(&id(1), "deploy", at(5), ExecutionStatus::InProgress);
    running.spec.steps.push(muster_core::crd::WorkflowExecutionStep {
        step_id: "apply".to_owned(),
        tool: "x_k8s_apply".to_owned(),
        status: ExecutionStatus::InProgress,
        started_at: at(4),
        completed_at: None,
        duration_ms: 0,
        input: None,
        result: None,
        error: None,
        stored_as: None,
    });
    let done = record(&id(2), "deploy", at(6), ExecutionStatus::Completed);
    let other = record(&id(3), "deploy", at(5), ExecutionStatus::InProgress);
    blocking(&mine, move |s| s.put(&running)).await.expect("written");
    blocking(&mine, move |s| s.put(&done)).await.expect("written");
    blocking(&theirs, move |s| s.put(&other)).await.expect("written");
    // A run with no replica (an older muster's): nobody's to recover.
    let unowned = record(&id(4), "deploy", at(5), ExecutionStatus::InProgress);
    put_raw(
        &double,
        &unowned,
        json!({WORKFLOW_LABEL: "deploy", WORKFLOW_STATUS_LABEL: "inprogress"}),
    );
    // A replica whose name maps to the same label, but is not this one.
    let lookalike = record(&id(5), "deploy", at(5), ExecutionStatus::InProgress);
    let mut object = serde_json::to_value(&lookalike).expect("json");
    object["metadata"]["namespace"] = json!(NS);
    object["metadata"]["labels"][REPLICA_KEY] = json!("muster-0");
    object["metadata"]["annotations"] = json!({REPLICA_KEY: "muster-0 (another)"});
    double.put(object).expect("stored");

    let now = Utc::now();
    double.clear_logs();
    let marked = blocking(&mine, move |s| s.recover_interrupted(now))
        .await
        .expect("recovered");
    assert_eq!(marked, [id(1)]);
    // Only this replica's runs in progress were read.
    let listed: Vec<String> = double
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .filter_map(|r| r.query)
        .collect();
    assert!(
        listed.len() == 1
            && listed[0].contains("muster.giantswarm.io%2Freplica%3Dmuster-0")
            && listed[0].contains("muster.giantswarm.io%2Fstatus%3Dinprogress"),
        "{listed:?}"
    );
    let failed = blocking(&mine, |s| s.get(&id(1))).await.expect("read").expect("found");
    assert_eq!(failed.spec.status, ExecutionStatus::Failed);
    assert_eq!(failed.spec.error.as_deref(), Some(INTERRUPTED_ERROR));
    assert_eq!(failed.spec.steps[0].status, ExecutionStatus::Failed);
    assert!(failed.spec.duration_ms >= 5 * 60 * 1000 - 1000);
    assert_eq!(
        stored(&double, &id(1))["metadata"]["labels"][WORKFLOW_STATUS_LABEL],
        "failed"
    );
    for alive in [id(3), id(4), id(5)] {
        assert_eq!(stored(&double, &alive)["spec"]["status"], "inprogress", "{alive}");
    }
    assert_eq!(stored(&double, &id(2))["spec"]["status"], "completed");

    // The other replica, restarted, recovers its own.
    let marked = blocking(&theirs, move |s| s.recover_interrupted(now))
        .await
        .expect("recovered");
    assert_eq!(marked, [id(3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_workflow_names_get_valid_labels_and_list_exactly() {
    let double = double().await;
    let store = store(&double, "muster-0");
    let long = "a".repeat(80);
    let names = [
        "team_deploy".to_owned(),
        long.clone(),
        "déploie l'app".to_owned(),
        "-x-".to_owned(),
    ];
    for (n, name) in names.iter().enumerate() {
        let execution = record(&id(n), name, at(n as i64), ExecutionStatus::Completed);
        blocking(&store, move |s| s.put(&execution)).await.expect("written");
    }
    let valid = regex::Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("a regex");
    for (n, name) in names.iter().enumerate() {
        let object = stored(&double, &id(n));
        let label = object["metadata"]["labels"][WORKFLOW_LABEL].as_str().expect("labelled");
        assert!(label.len() <= 63 && valid.is_match(label), "{name:?} -> {label:?}");
        assert_eq!(label, label_value(name));
        assert_eq!(object["spec"]["workflowName"], name.as_str());
    }
    assert_eq!(label_value("team_deploy"), "team_deploy");

    // Another name whose label is the same as the long one's: the spec decides.
    let impostor = record(&id(9), &"a".repeat(81), at(0), ExecutionStatus::Completed);
    put_raw(
        &double,
        &impostor,
        json!({WORKFLOW_LABEL: label_value(&long), WORKFLOW_STATUS_LABEL: "completed"}),
    );
    for (n, name) in names.iter().enumerate() {
        let query = ExecutionQuery::default().with_workflow_name(name.clone());
        let page = blocking(&store, move |s| s.list(&query)).await.expect("listed");
        let ids: Vec<&str> = page.executions.iter().map(|e| e.execution_id.as_str()).collect();
        assert_eq!(ids, [id(n)], "{name:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_the_api_server_is_an_error_naming_what_failed() {
    let double = double().await;
    // A ServiceAccount that may read the records but not write them.
    double.add_token("reader-token", "reader", &[]);
    double.allow("reader", &["get", "list"], "muster.giantswarm.io", RESOURCE, Some(NS));
    let reader = Arc::new(KubeExecutionStore::new(double.client_as("reader-token"), NS).with_replica("r"));
    let execution = record(&id(1), "deploy", at(0), ExecutionStatus::Completed);
    let error = blocking(&reader, move |s| s.put(&execution))
        .await
        .expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("cannot write WorkflowExecution")
            && message.contains(&format!("namespaces/muster/workflowexecutions/{}", id(1)))
            && message.contains("403"),
        "{message}"
    );
    match &error {
        RecordError::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied),
        other => panic!("{other:?}"),
    }
    assert!(blocking(&reader, |s| s.list(&ExecutionQuery::default())).await.is_ok());
    let error = blocking(&reader, |s| s.prune(Utc::now())).await;
    assert_eq!(error.expect("nothing to remove"), 0);

    // The API server away: an error at once without retries, or after the timeout with them.
    let mut config = double.config(ADMIN_TOKEN);
    config.default_retry = false;
    let impatient = Arc::new(KubeExecutionStore::new(
        kube::Client::try_from(config).expect("a client"),
        NS,
    ));
    let patient = Arc::new(KubeExecutionStore::new(double.client(), NS).with_timeout(Duration::from_millis(300)));
    double.set_unavailable(true);
    let error = blocking(&impatient, |s| s.get(&id(1))).await.expect_err("away");
    let message = error.to_string();
    assert!(
        message.contains("cannot read WorkflowExecution") && message.contains("503"),
        "{message}"
    );
    let started = std::time::Instant::now();
    let error = blocking(&patient, |s| s.list(&ExecutionQuery::default()))
        .await
        .expect_err("away");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(error.to_string().contains("cannot list WorkflowExecutions"), "{error}");
    match &error {
        RecordError::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::TimedOut),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn called_on_a_runtime_thread_it_answers_an_error_instead_of_blocking_it() {
    let double = double().await;
    let store = store(&double, "muster-0");
    // Outside spawn_blocking, on the runtime's own thread.
    let error = store.get(&id(1)).expect_err("refused");
    assert!(error.to_string().contains("spawn_blocking"), "{error}");
    // The same store works where it is meant to be called.
    assert_eq!(blocking(&store, |s| s.get(&id(1))).await.expect("read"), None);
}
