//! `KubeEvents` against the API server double: each event an `events.k8s.io/v1` Event on the
//! resource it concerns (the double validates Events as the API server does), read back by
//! any replica with the filters `core_events` takes, long messages cut, and an API server that
//! does not answer never reaching the emitter.
#![cfg(feature = "test-util")]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{TimeDelta, Utc};
use muster_gateway::events::{
    Event, EventBackend, EventDetails, EventLog, EventLogOptions, EventQuery, EventType, reasons,
};
use muster_kube::{
    events::{DETAILS_ANNOTATION, KubeEvents, NOTE_MAX_BYTES, QUEUE_CAPACITY, REPORTING_CONTROLLER},
    testing::ApiServerDouble,
};
use serde_json::{Value, json};

const NS: &str = "muster";
const EVENTS: &str = "events.events.k8s.io";

fn backend(double: &ApiServerDouble, replica: &str) -> Arc<KubeEvents> {
    Arc::new(
        KubeEvents::new(double.client(), NS)
            .with_namespaces(["team"])
            .with_replica(replica),
    )
}

fn log(backend: &Arc<KubeEvents>) -> EventLog {
    EventLog::with_backend(backend.clone(), EventLogOptions::default())
}

/// Waits up to 10 s until the double holds `count` Events in `namespace` (all when `None`).
async fn events_stored(double: &ApiServerDouble, namespace: Option<&str>, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stored = double.list(EVENTS, namespace);
        if stored.len() >= count || Instant::now() > deadline {
            return stored;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn put_server(double: &ApiServerDouble, namespace: &str, name: &str) -> String {
    let stored = double
        .put(json!({
            "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
        }))
        .expect("stored");
    stored["metadata"]["uid"].as_str().expect("a uid").to_owned()
}

#[tokio::test]
async fn an_event_becomes_an_event_object_on_the_resource_it_concerns() {
    let double = ApiServerDouble::start().await;
    let git_uid = put_server(&double, NS, "git");
    let api_uid = put_server(&double, "team", "api");
    let log = log(&backend(&double, "muster-0"));

    log.emit(
        Event::mcp_server("git", reasons::MCP_SERVER_FAILED, "MCPServer git failed: 503")
            .with_details(EventDetails::default().with_http_status(503).with_error("unavailable")),
    );
    log.emit(Event::mcp_server(
        "team_api",
        reasons::MCP_SERVER_STARTED,
        "MCPServer team_api started",
    ));

    let git = events_stored(&double, Some(NS), 1).await;
    assert_eq!(git.len(), 1, "{git:?}");
    let event = &git[0];
    let name = event["metadata"]["name"].as_str().expect("a name");
    let (prefix, hex) = name.split_once('.').expect("<name>.<hex>");
    assert_eq!(prefix, "git");
    assert!(hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    assert_eq!(event["apiVersion"], "events.k8s.io/v1");
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer", "name": "git",
               "namespace": NS, "uid": git_uid})
    );
    assert_eq!(event["reason"], "MCPServerFailed");
    assert_eq!(event["action"], "MCPServerFailed");
    assert_eq!(event["note"], "MCPServer git failed: 503");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reportingController"], REPORTING_CONTROLLER);
    assert_eq!(event["reportingInstance"], "muster-0");
    let at = chrono::DateTime::parse_from_rfc3339(event["eventTime"].as_str().expect("a time")).expect("RFC 3339");
    assert!(Utc::now() - at.with_timezone(&Utc) < TimeDelta::seconds(10));
    let details: Value = serde_json::from_str(
        event["metadata"]["annotations"][DETAILS_ANNOTATION]
            .as_str()
            .expect("details"),
    )
    .expect("JSON");
    assert_eq!(details, json!({"httpStatus": 503, "error": "unavailable"}));

    let team = events_stored(&double, Some("team"), 1).await;
    assert_eq!(team.len(), 1, "another namespace's server gets its Event there");
    assert_eq!(team[0]["regarding"]["name"], "api");
    assert_eq!(team[0]["regarding"]["namespace"], "team");
    assert_eq!(team[0]["regarding"]["uid"], api_uid.as_str());
    assert_eq!(team[0]["type"], "Normal");
    assert!(
        team[0]["metadata"].get("annotations").is_none(),
        "no details, no annotation"
    );
}

#[tokio::test]
async fn what_is_read_back_is_what_was_recorded_details_included() {
    let double = ApiServerDouble::start().await;
    let log = log(&backend(&double, "muster-0"));
    let at = |seconds: i64| Utc::now() - TimeDelta::seconds(seconds);
    log.emit(
        Event::workflow("deploy", reasons::WORKFLOW_STEP_FAILED, "step apply failed")
            .with_timestamp(at(3))
            .with_details(
                EventDetails::default()
                    .with_execution_id("0b6f6f2e")
                    .with_step_id("apply")
                    .with_tool("x_kubernetes_apply")
                    .with_error("boom")
                    .with_next_retry_after(Utc::now()),
            ),
    );
    log.emit(
        Event::mcp_server("team_api", reasons::MCP_SERVER_CREATED, "MCPServer team_api created").with_timestamp(at(2)),
    );
    log.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, "MCPServer git started").with_timestamp(at(1)));
    events_stored(&double, None, 3).await;

    let query = EventQuery::new();
    let kept = log.query_with_total(&query);
    let read = log.query_recorded(&query).await;
    assert_eq!(read, kept, "read back from the cluster as kept in memory");
    assert_eq!(read.total, 3);
    assert_eq!(read.events[2].data.tool.as_deref(), Some("x_kubernetes_apply"));
    let team = read.events.iter().find(|e| e.name() == "team_api").expect("read back");
    assert_eq!(
        (team.namespace.as_str(), team.involved_object.namespace.as_str()),
        ("team", "team")
    );
    assert_eq!(read.events[0].namespace, NS);
    // core_events answers as filesystem mode does.
    assert_eq!(query.answer_recorded(&log).await, query.answer(&log));
}

#[tokio::test]
async fn one_replicas_events_are_read_back_by_another() {
    let double = ApiServerDouble::start().await;
    let one = log(&backend(&double, "muster-one"));
    let two = log(&backend(&double, "muster-two"));
    let before = Utc::now() - TimeDelta::seconds(1);
    one.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, "MCPServer git started").with_timestamp(before));
    two.emit(Event::mcp_server(
        "git",
        reasons::MCP_SERVER_STOPPED,
        "MCPServer git stopped",
    ));
    events_stored(&double, Some(NS), 2).await;

    let query = EventQuery::new()
        .with_resource_type("MCPServer")
        .with_resource_name("git");
    let seen = two.query_recorded(&query).await;
    let reasons: Vec<&str> = seen.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["MCPServerStopped", "MCPServerStarted"]);
    assert_eq!(seen.events[1], one.query(&query)[0]);
    let instances: Vec<Value> = double
        .list(EVENTS, Some(NS))
        .iter()
        .map(|e| e["reportingInstance"].clone())
        .collect();
    assert!(instances.contains(&json!("muster-one")) && instances.contains(&json!("muster-two")));
}

#[tokio::test]
async fn queries_select_on_the_server_by_kind_name_and_type_and_here_by_time() {
    let double = ApiServerDouble::start().await;
    let backend = backend(&double, "muster-0");
    let log = log(&backend);
    let old = Utc::now() - TimeDelta::hours(2);
    log.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, "started").with_timestamp(old));
    log.emit(Event::mcp_server("git", reasons::MCP_SERVER_FAILED, "failed"));
    log.emit(Event::workflow(
        "git",
        reasons::WORKFLOW_CREATED,
        "a workflow of the same name",
    ));
    log.emit(Event::mcp_server("team_git", reasons::MCP_SERVER_FAILED, "failed too"));
    // Another controller's Event about the same server is not muster's.
    double
        .put(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "git.other", "namespace": NS},
            "eventTime": "2026-12-01T10:00:00.000000Z", "regarding": {"kind": "MCPServer", "name": "git", "namespace": NS},
            "reason": "Scaled", "action": "Scale", "note": "not muster's", "type": "Normal",
            "reportingController": "example.com/other", "reportingInstance": "other-0",
        }))
        .expect("stored");
    events_stored(&double, None, 5).await;
    double.clear_logs();

    let names = |found: &[Event]| {
        found
            .iter()
            .map(|e| format!("{}/{}", e.kind(), e.name()))
            .collect::<Vec<_>>()
    };
    let git = log
        .query_recorded(
            &EventQuery::new()
                .with_resource_type("mcpserver")
                .with_resource_name("git"),
        )
        .await;
    assert_eq!(names(&git.events), ["MCPServer/git", "MCPServer/git"]);
    let lists: Vec<String> = double
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| format!("{} {}", r.path, r.query.clone().unwrap_or_default()))
        .collect();
    assert_eq!(lists.len(), 1, "only muster's namespace is listed: {lists:?}");
    assert!(
        lists[0].starts_with("/apis/events.k8s.io/v1/namespaces/muster/events "),
        "{lists:?}"
    );
    for term in [
        "reportingController%3Dmuster.giantswarm.io%2Fmuster",
        "regarding.kind%3DMCPServer",
        "regarding.name%3Dgit",
    ] {
        assert!(lists[0].contains(term), "{term} in {lists:?}");
    }

    let warnings = log
        .query_recorded(&EventQuery::new().with_event_type(EventType::Warning))
        .await;
    assert_eq!(names(&warnings.events).len(), 2);
    let recent = log
        .query_recorded(&EventQuery::new().with_since(Utc::now() - TimeDelta::hours(1)))
        .await;
    assert_eq!(recent.total, 3, "the event of two hours ago is left out");
    let team = log.query_recorded(&EventQuery::new().with_namespace("team")).await;
    assert_eq!(names(&team.events), ["MCPServer/team_git"]);
    let elsewhere = log.query_recorded(&EventQuery::new().with_namespace("nowhere")).await;
    assert_eq!(elsewhere.total, 0);
}

#[tokio::test]
async fn many_events_are_read_back_in_pages() {
    let double = ApiServerDouble::start().await;
    let log = log(&backend(&double, "muster-0"));
    let count = muster_kube::executions::LIST_PAGE as usize + 10;
    let start = Utc::now() - TimeDelta::hours(1);
    for n in 0..count {
        let at = start + TimeDelta::milliseconds(i64::try_from(n).expect("small"));
        log.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, format!("started {n}")).with_timestamp(at));
    }
    assert_eq!(events_stored(&double, Some(NS), count).await.len(), count);
    double.clear_logs();
    let found = log.query_recorded(&EventQuery::new().with_limit(5)).await;
    assert_eq!(found.total, count);
    assert_eq!(
        found.events[0].message,
        format!("started {}", count - 1),
        "the newest first"
    );
    let pages = double
        .requests()
        .iter()
        .filter(|r| r.query.as_deref().is_some_and(|q| q.contains("continue=")))
        .count();
    assert_eq!(pages, 1, "a second page was asked for");
}

#[tokio::test]
async fn a_long_message_is_cut_to_the_note_limit_on_a_character_boundary() {
    let double = ApiServerDouble::start().await;
    let log = log(&backend(&double, "muster-0"));
    let long = format!("x{}", "é".repeat(1000));
    log.emit(
        Event::mcp_server("git", reasons::MCP_SERVER_FAILED, long.clone())
            .with_details(EventDetails::default().with_error(long.clone())),
    );
    let stored = events_stored(&double, Some(NS), 1).await;
    assert_eq!(stored.len(), 1, "the API server took it");
    let note = stored[0]["note"].as_str().expect("a note");
    assert!(
        note.len() <= NOTE_MAX_BYTES && note.len() > NOTE_MAX_BYTES - 4,
        "{}",
        note.len()
    );
    assert!(note.ends_with('…') && long.starts_with(note.trim_end_matches('…')));
    let kept = &log.query(&EventQuery::new())[0];
    assert_eq!(kept.message, note, "the replica keeps what the Event holds");
    assert_eq!(kept.data.error.as_deref(), Some(note));
    assert_eq!(&log.query_recorded(&EventQuery::new()).await.events[0], kept);
}

#[tokio::test]
async fn an_api_server_away_fails_queries_and_never_holds_up_emit() {
    let double = ApiServerDouble::start().await;
    let backend = Arc::new(
        KubeEvents::new(double.client(), NS)
            .with_replica("muster-0")
            .with_timeout(Duration::from_millis(500)),
    );
    let log = log(&backend);
    double.set_unavailable(true);

    let started = Instant::now();
    let emitted = QUEUE_CAPACITY + 50;
    for n in 0..emitted {
        log.emit(Event::mcp_server(
            "git",
            reasons::MCP_SERVER_STARTED,
            format!("started {n}"),
        ));
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "emit waited: {:?}",
        started.elapsed()
    );
    let error = backend
        .query(&EventQuery::new())
        .await
        .expect_err("no answer from the API server");
    assert!(error.to_string().contains("API server"), "{error}");
    let fallback = log.query_recorded(&EventQuery::new().with_limit(10_000)).await;
    assert_eq!(fallback.total, emitted, "answered from the replica's memory");

    double.set_unavailable(false);
    // The queue drains (a few events were lost to the timeout while the server was away)...
    events_stored(&double, Some(NS), QUEUE_CAPACITY - 20).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ... and takes events again.
    log.emit(Event::mcp_server("git", reasons::MCP_SERVER_STOPPED, "stopped"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !double
        .list(EVENTS, Some(NS))
        .iter()
        .any(|e| e["reason"] == "MCPServerStopped")
    {
        assert!(Instant::now() < deadline, "writing resumed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let written = double.list(EVENTS, Some(NS)).len();
    assert!(
        written <= QUEUE_CAPACITY + 2,
        "what did not fit the queue was dropped: {written}"
    );
}

#[tokio::test]
async fn the_uid_of_a_resource_is_read_once_for_a_burst_of_its_events() {
    let double = ApiServerDouble::start().await;
    let uid = put_server(&double, NS, "git");
    let log = log(&backend(&double, "muster-0"));
    double.clear_logs();
    for step in 0..5 {
        log.emit(Event::mcp_server(
            "git",
            reasons::MCP_SERVER_TOOLS_CHANGED,
            format!("MCPServer git changed its tools ({step})"),
        ));
    }
    let stored = events_stored(&double, Some(NS), 5).await;
    assert_eq!(stored.len(), 5);
    assert!(
        stored.iter().all(|e| e["regarding"]["uid"] == uid.as_str()),
        "{stored:?}"
    );
    let reads = double
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/mcpservers/git"))
        .count();
    assert_eq!(reads, 1, "one read of the resource for five Events");
}
