use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use muster_core::crd::{ExecutionStatus, WorkflowExecution, WorkflowExecutionSpec, WorkflowExecutionStep};
use serde_json::{Map, Value, json};

use super::*;

fn at(minute: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0)
        .single()
        .expect("a valid time")
        + TimeDelta::minutes(minute)
}

fn step(id: &str, status: ExecutionStatus) -> WorkflowExecutionStep {
    WorkflowExecutionStep {
        step_id: id.to_owned(),
        tool: format!("x_{id}"),
        status,
        started_at: at(0),
        completed_at: (status != ExecutionStatus::InProgress).then(|| at(1)),
        duration_ms: 60_000,
        input: Some(json!({"step": id})),
        result: Some(json!({"ok": true})),
        error: None,
        stored_as: Some(format!("{id}_out")),
    }
}

fn record(id: &str, workflow: &str, status: ExecutionStatus, started: DateTime<Utc>) -> WorkflowExecution {
    let mut spec = WorkflowExecutionSpec::started(workflow, started);
    spec.status = status;
    if status != ExecutionStatus::InProgress {
        spec.completed_at = Some(started + TimeDelta::seconds(2));
        spec.duration_ms = 2000;
    }
    if status == ExecutionStatus::Failed {
        spec.error = Some("boom".to_owned());
    } else {
        spec.result = Some(json!({"done": true}));
    }
    spec.input = Some(json!({"env": "prod"}));
    spec.steps = vec![step("a", ExecutionStatus::Completed), step("b", status)];
    WorkflowExecution::new(id, spec)
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("test arguments must be an object"),
    }
}

fn dir_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("readable folder")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn big_value(bytes: usize) -> Value {
    Value::String("x".repeat(bytes))
}

#[test]
fn a_record_written_to_the_filesystem_reads_back_unchanged_and_survives_reopening() {
    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    let original = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    store.put(&original).expect("put");

    assert_eq!(store.get("run-1").expect("get"), Some(original.clone()));
    let reopened = FsExecutionStore::open(config.path()).expect("reopen");
    assert_eq!(reopened.get("run-1").expect("get"), Some(original));
    assert_eq!(reopened.list(&ExecutionQuery::default()).expect("list").total, 1);
    assert_eq!(reopened.get("run-2").expect("get"), None);
}

#[test]
fn the_file_is_indented_go_shaped_json_at_the_go_path() {
    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    store
        .put(&record("run-1", "deploy", ExecutionStatus::Completed, at(0)))
        .expect("put");

    let path = config.path().join("workflow_executions").join("run-1.yaml");
    let text = std::fs::read_to_string(&path).expect("the record file");
    assert!(text.starts_with("{\n  \""), "indented JSON: {text}");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["execution_id"], "run-1");
    assert_eq!(doc["workflow_name"], "deploy");
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["duration_ms"], 2000);
    assert_eq!(doc["steps"][0]["step_id"], "a");
    assert_eq!(doc["steps"][0]["stored_as"], "a_out");
    assert!(doc.get("truncated").is_none());
}

#[test]
fn a_record_written_by_go_muster_loads() {
    let config = tempfile::tempdir().expect("temp dir");
    let dir = config.path().join(EXECUTIONS_DIR);
    std::fs::create_dir_all(&dir).expect("folder");
    let go = r#"{
  "execution_id": "2f0c1d9e-aaaa-4bbb-8ccc-123456789abc",
  "workflow_name": "inspect",
  "status": "failed",
  "started_at": "2026-11-01T12:00:00.123456789Z",
  "completed_at": "2026-11-01T12:00:01.5+00:00",
  "duration_ms": 1377,
  "input": {"ns": "default"},
  "error": "step pods failed",
  "steps": [{"step_id": "pods", "tool": "x_k8s_list_pods", "status": "failed",
             "started_at": "2026-11-01T12:00:00Z", "duration_ms": 10, "input": null, "error": "nope"}]
}"#;
    std::fs::write(dir.join("2f0c1d9e-aaaa-4bbb-8ccc-123456789abc.yaml"), go).expect("write");

    let store = FsExecutionStore::open(config.path()).expect("open");
    let got = store
        .get("2f0c1d9e-aaaa-4bbb-8ccc-123456789abc")
        .expect("get")
        .expect("the record");
    assert_eq!(got.spec.workflow_name, "inspect");
    assert_eq!(got.spec.status, ExecutionStatus::Failed);
    assert_eq!(got.spec.steps[0].tool, "x_k8s_list_pods");
    assert_eq!(
        got.metadata
            .labels
            .get(muster_core::crd::WORKFLOW_STATUS_LABEL)
            .map(String::as_str),
        Some("failed")
    );
}

#[test]
fn a_file_that_does_not_parse_is_skipped_not_fatal() {
    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    store
        .put(&record("good", "deploy", ExecutionStatus::Completed, at(0)))
        .expect("put");
    std::fs::write(store.dir().join("bad.yaml"), "{ not json").expect("write");

    let reopened = FsExecutionStore::open(config.path()).expect("open despite a bad file");
    let page = reopened.list(&ExecutionQuery::default()).expect("list");
    assert_eq!(page.total, 1);
    assert_eq!(page.executions[0].execution_id, "good");
}

#[test]
fn writes_leave_no_temporary_file_and_a_crash_left_temporary_file_is_ignored_and_cleaned() {
    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    store
        .put(&record("run-1", "deploy", ExecutionStatus::InProgress, at(0)))
        .expect("put");
    store
        .put(&record("run-1", "deploy", ExecutionStatus::Completed, at(0)))
        .expect("replace");
    assert_eq!(dir_names(store.dir()), ["run-1.yaml"]);

    // A crash between creating the temporary file and renaming it leaves half a document.
    let half = store.dir().join(".run-2.yaml.tmp-0123456789abcdef");
    std::fs::write(&half, "{\n  \"execution_id\": \"run-2\",\n  \"workfl").expect("write");

    let reopened = FsExecutionStore::open(config.path()).expect("open");
    assert_eq!(reopened.get("run-2").expect("get"), None);
    assert_eq!(reopened.list(&ExecutionQuery::default()).expect("list").total, 1);
    assert_eq!(dir_names(reopened.dir()), ["run-1.yaml"]);
    assert_eq!(
        reopened.get("run-1").expect("get").map(|e| e.spec.status),
        Some(ExecutionStatus::Completed)
    );
}

#[test]
fn an_id_with_path_separators_stays_inside_the_folder() {
    assert_eq!(sanitize_id("../../etc/passwd"), "______etc_passwd");
    assert_eq!(sanitize_id(r#"a\b:c*d?e"f<g>h|i.j"#), "a_b_c_d_e_f_g_h_i_j");

    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    let sneaky = record("../escape", "deploy", ExecutionStatus::Completed, at(0));
    store.put(&sneaky).expect("put");

    assert_eq!(dir_names(store.dir()), ["___escape.yaml"]);
    assert_eq!(dir_names(config.path()), [EXECUTIONS_DIR]);
    assert_eq!(store.get("../escape").expect("get"), Some(sneaky));
    assert_eq!(
        store.get("___escape").expect("get"),
        None,
        "only the named record counts"
    );
    assert!(store.delete("../escape").expect("delete"));
    assert!(dir_names(store.dir()).is_empty());
}

#[test]
fn a_record_without_an_id_is_refused() {
    let nameless = record("", "deploy", ExecutionStatus::Completed, at(0));
    let config = tempfile::tempdir().expect("temp dir");
    let fs = FsExecutionStore::open(config.path()).expect("open");
    assert!(matches!(fs.put(&nameless), Err(RecordError::MissingId)));
    assert!(matches!(
        MemoryExecutionStore::new().put(&nameless),
        Err(RecordError::MissingId)
    ));
}

#[test]
fn the_guard_leaves_a_small_record_unchanged() {
    let small = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    let guarded = guard_payload(&small);
    assert!(matches!(guarded, std::borrow::Cow::Borrowed(_)));
    assert_eq!(*guarded, small);
}

#[test]
fn the_guard_replaces_only_the_big_fields_and_flags_the_stored_copy() {
    let mut big = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    big.spec.result = Some(big_value(100 * 1024));
    big.spec.steps[0].input = Some(json!({"blob": big_value(100 * 1024)}));
    big.spec.steps[1].result = Some(big_value(100 * 1024));
    big.spec.steps[1].input = Some(json!({"small": 1}));

    let config = tempfile::tempdir().expect("temp dir");
    for store in [
        Box::new(MemoryExecutionStore::new()) as Box<dyn ExecutionStore>,
        Box::new(FsExecutionStore::open(config.path()).expect("open")),
    ] {
        let caller_copy = big.clone();
        store.put(&big).expect("put");
        assert_eq!(big, caller_copy, "the caller's record is not modified");

        let stored = store.get("run-1").expect("get").expect("the record");
        assert!(stored.spec.truncated);
        assert_eq!(stored.spec.result, Some(json!(TRUNCATION_MARKER)));
        assert_eq!(
            stored.spec.steps[0].input,
            Some(json!({"_truncated": TRUNCATION_MARKER}))
        );
        assert_eq!(stored.spec.steps[1].result, Some(json!(TRUNCATION_MARKER)));
        // Small fields survive.
        assert_eq!(stored.spec.input, Some(json!({"env": "prod"})));
        assert_eq!(stored.spec.steps[1].input, Some(json!({"small": 1})));
        assert_eq!(stored.spec.steps[0].result, Some(json!({"ok": true})));
        let size = serde_json::to_vec(&stored).expect("json").len();
        assert!(size < MAX_EXECUTION_PAYLOAD_BYTES, "{size}");
    }
}

#[test]
fn a_record_just_under_the_limit_is_not_truncated_even_with_a_big_field() {
    let mut record = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    record.spec.result = Some(big_value(100 * 1024));
    let guarded = guard_payload(&record);
    assert!(!guarded.spec.truncated);
    assert_eq!(*guarded, record);
}

#[test]
fn prune_removes_records_older_than_21_days_and_keeps_the_rest() {
    let now = at(0) + TimeDelta::days(30);
    let config = tempfile::tempdir().expect("temp dir");
    let fs = FsExecutionStore::open(config.path()).expect("open");
    let memory = MemoryExecutionStore::new();
    for store in [&fs as &dyn ExecutionStore, &memory] {
        store
            .put(&record(
                "old",
                "w",
                ExecutionStatus::Completed,
                now - TimeDelta::days(22),
            ))
            .expect("put");
        store
            .put(&record(
                "edge",
                "w",
                ExecutionStatus::Completed,
                now - TimeDelta::days(21),
            ))
            .expect("put");
        store
            .put(&record(
                "new",
                "w",
                ExecutionStatus::Completed,
                now - TimeDelta::days(1),
            ))
            .expect("put");
        assert_eq!(store.prune(now).expect("prune"), 1);
        assert_eq!(store.get("old").expect("get"), None);
        let left: Vec<String> = store
            .list(&ExecutionQuery::default())
            .expect("list")
            .executions
            .into_iter()
            .map(|s| s.execution_id)
            .collect();
        assert_eq!(left, ["new", "edge"]);
    }
    assert_eq!(dir_names(fs.dir()), ["edge.yaml", "new.yaml"]);
}

#[test]
fn prune_keeps_only_the_newest_10000_records() {
    let now = at(0) + TimeDelta::days(1);
    let store = MemoryExecutionStore::new();
    for i in 0..(RETENTION_MAX_COUNT as i64 + 3) {
        store
            .put(&record(
                &format!("r{i:05}"),
                "w",
                ExecutionStatus::Completed,
                at(0) + TimeDelta::seconds(i),
            ))
            .expect("put");
    }
    assert_eq!(store.prune(now).expect("prune"), 3);
    for oldest in ["r00000", "r00001", "r00002"] {
        assert_eq!(store.get(oldest).expect("get"), None);
    }
    assert!(store.get("r00003").expect("get").is_some());
    assert_eq!(
        store.list(&ExecutionQuery::default()).expect("list").total,
        RETENTION_MAX_COUNT
    );
    assert_eq!(store.prune(now).expect("prune again"), 0);
}

#[test]
fn recover_interrupted_marks_in_progress_records_failed_and_persists_it() {
    let now = at(5);
    let config = tempfile::tempdir().expect("temp dir");
    {
        let store = FsExecutionStore::open(config.path()).expect("open");
        store
            .put(&record("cut", "deploy", ExecutionStatus::InProgress, at(0)))
            .expect("put");
        store
            .put(&record("done", "deploy", ExecutionStatus::Completed, at(0)))
            .expect("put");
    }
    let store = FsExecutionStore::open(config.path()).expect("reopen after the crash");
    assert_eq!(store.recover_interrupted(now).expect("recover"), ["cut"]);

    let cut = store.get("cut").expect("get").expect("the record");
    assert_eq!(cut.spec.status, ExecutionStatus::Failed);
    assert_eq!(cut.spec.error.as_deref(), Some(INTERRUPTED_ERROR));
    assert_eq!(cut.spec.completed_at, Some(now));
    assert_eq!(cut.spec.duration_ms, 5 * 60 * 1000);
    assert_eq!(cut.spec.result, None);
    assert_eq!(
        cut.spec.steps[0].status,
        ExecutionStatus::Completed,
        "finished steps stay"
    );
    assert_eq!(
        cut.spec.steps[1].status,
        ExecutionStatus::Failed,
        "the running step failed"
    );
    assert_eq!(
        cut.metadata
            .labels
            .get(muster_core::crd::WORKFLOW_STATUS_LABEL)
            .map(String::as_str),
        Some("failed")
    );
    assert_eq!(
        store.get("done").expect("get").map(|e| e.spec.status),
        Some(ExecutionStatus::Completed)
    );
    let running = ExecutionQuery::default().with_status(StatusFilter::Running);
    assert_eq!(store.list(&running).expect("list").total, 0);
    assert!(store.recover_interrupted(now).expect("again").is_empty());

    let reopened = FsExecutionStore::open(config.path()).expect("reopen");
    assert_eq!(
        reopened.get("cut").expect("get").map(|e| e.spec.status),
        Some(ExecutionStatus::Failed)
    );

    let memory = MemoryExecutionStore::new();
    memory
        .put(&record("cut", "deploy", ExecutionStatus::InProgress, at(0)))
        .expect("put");
    assert_eq!(memory.recover_interrupted(now).expect("recover"), ["cut"]);
    assert_eq!(
        memory.get("cut").expect("get").map(|e| e.spec.status),
        Some(ExecutionStatus::Failed)
    );
}

fn seeded(store: &dyn ExecutionStore) {
    let runs = [
        ("r1", "deploy", ExecutionStatus::Completed),
        ("r2", "deploy", ExecutionStatus::Failed),
        ("r3", "inspect", ExecutionStatus::Completed),
        ("r4", "deploy", ExecutionStatus::InProgress),
        ("r5", "deploy", ExecutionStatus::Completed),
    ];
    for (minute, (id, workflow, status)) in (0_i64..).zip(runs) {
        store.put(&record(id, workflow, status, at(minute))).expect("put");
    }
}

#[test]
fn listing_filters_by_workflow_and_status_newest_first_with_paging() {
    let store = MemoryExecutionStore::new();
    seeded(&store);

    let all = execution_list_result(&store, &args(json!({}))).expect("list");
    assert_eq!(all["total"], 5);
    assert_eq!(all["limit"], DEFAULT_LIST_LIMIT);
    assert_eq!(all["offset"], 0);
    assert_eq!(all["has_more"], false);
    let ids: Vec<&str> = all["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .map(|e| e["execution_id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["r5", "r4", "r3", "r2", "r1"]);

    let first = &all["executions"][3];
    assert_eq!(first["workflow_name"], "deploy");
    assert_eq!(first["status"], "failed");
    assert_eq!(first["step_count"], 2);
    assert_eq!(first["duration_ms"], 2000);
    assert_eq!(first["error"], "boom");
    assert!(first["started_at"].is_string() && first["completed_at"].is_string());

    let page = execution_list_result(&store, &args(json!({"workflow_name": "deploy", "limit": 2}))).expect("list");
    assert_eq!(page["total"], 4);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["executions"][0]["execution_id"], "r5");
    assert_eq!(page["executions"][1]["execution_id"], "r4");

    let last = execution_list_result(
        &store,
        &args(json!({"workflow_name": "deploy", "limit": 2.0, "offset": 2})),
    )
    .expect("list");
    assert_eq!(last["total"], 4);
    assert_eq!(last["has_more"], false);
    assert_eq!(last["executions"].as_array().map(Vec::len), Some(2));

    let running = execution_list_result(&store, &args(json!({"status": "running"}))).expect("list");
    assert_eq!(running["total"], 1);
    assert_eq!(running["executions"][0]["execution_id"], "r4");
    assert_eq!(running["executions"][0]["status"], "inprogress");
    assert!(running["executions"][0].get("completed_at").is_none());

    let completed =
        execution_list_result(&store, &args(json!({"status": "completed", "workflow_name": "deploy"}))).expect("list");
    assert_eq!(completed["total"], 2);

    let cancelled = execution_list_result(&store, &args(json!({"status": "cancelled"}))).expect("list");
    assert_eq!(cancelled["total"], 0);
}

#[test]
fn the_filesystem_store_lists_like_the_memory_store() {
    let config = tempfile::tempdir().expect("temp dir");
    let fs = FsExecutionStore::open(config.path()).expect("open");
    let memory = MemoryExecutionStore::new();
    seeded(&fs);
    seeded(&memory);
    let query = ExecutionQuery::default().with_workflow_name("deploy").with_page(3, 1);
    assert_eq!(fs.list(&query).expect("fs"), memory.list(&query).expect("memory"));
    let reopened = FsExecutionStore::open(config.path()).expect("reopen");
    assert_eq!(reopened.list(&query).expect("fs"), memory.list(&query).expect("memory"));
}

#[test]
fn bad_list_arguments_are_errors_worded_as_go_muster_words_them() {
    const ENUM: &str = "status must be one of the enum values: inprogress, completed, failed";
    for (bad, expected) in [
        (json!({"status": "sleeping"}), ENUM),
        (json!({"status": ""}), ENUM),
        (json!({"status": 3}), ENUM),
        (json!({"limit": 0}), "limit must be at least 1 (minimum value)"),
        (json!({"limit": -1}), "limit must be at least 1 (minimum value)"),
        (json!({"limit": -1.0}), "limit must be at least 1 (minimum value)"),
        (json!({"limit": 1001}), "limit must be at most 1000 (maximum value)"),
        (json!({"limit": 1e30}), "limit must be at most 1000 (maximum value)"),
        (json!({"limit": u64::MAX}), "limit must be at most 1000 (maximum value)"),
        (json!({"limit": "ten"}), "limit must be an integer"),
        (json!({"limit": 2.5}), "limit must be an integer"),
        (json!({"limit": true}), "limit must be an integer"),
        (json!({"offset": -1}), "offset must be at least 0 (minimum value)"),
        (json!({"offset": 1.5}), "offset must be an integer"),
        (json!({"workflow_name": 7}), "workflow_name must be a string"),
    ] {
        let error = ExecutionQuery::from_args(&args(bad.clone())).expect_err("a bad argument");
        assert_eq!(error, expected, "{bad}");
    }
}

#[test]
fn list_arguments_at_the_bounds_and_the_aliases_are_accepted() {
    for (good, limit, offset) in [
        (json!({"limit": 1}), 1, 0),
        (json!({"limit": 1000, "offset": 0}), 1000, 0),
        (json!({"limit": 10.0, "offset": 2.0}), 10, 2),
        (json!({"limit": null, "offset": 999_999}), DEFAULT_LIST_LIMIT, 999_999),
        (json!({"offset": 1e30}), DEFAULT_LIST_LIMIT, usize::MAX),
    ] {
        let query = ExecutionQuery::from_args(&args(good.clone())).expect("valid arguments");
        assert_eq!((query.limit, query.offset), (limit, offset), "{good}");
    }
    for (status, filter) in [
        ("inprogress", StatusFilter::Running),
        ("running", StatusFilter::Running),
        ("completed", StatusFilter::Completed),
        ("failed", StatusFilter::Failed),
        ("cancelled", StatusFilter::Cancelled),
    ] {
        let query = ExecutionQuery::from_args(&args(json!({"status": status}))).expect("a known status");
        assert_eq!(query.status, Some(filter), "{status}");
    }
    let query = ExecutionQuery::from_args(&args(json!({"workflow_name": "", "status": null}))).expect("no filter");
    assert_eq!(query, ExecutionQuery::default());
}

#[test]
fn an_empty_workflow_name_lists_everything_and_a_huge_offset_an_empty_page() {
    let store = MemoryExecutionStore::new();
    seeded(&store);
    let all = execution_list_result(&store, &args(json!({"workflow_name": ""}))).expect("list");
    assert_eq!(all["total"], 5);
    let past = execution_list_result(&store, &args(json!({"limit": 1, "offset": 999_999}))).expect("list");
    assert_eq!(past["total"], 5);
    assert_eq!(past["executions"], json!([]));
    assert_eq!(past["has_more"], false);
}

#[test]
fn get_answers_the_whole_record_without_steps_or_one_step() {
    let store = MemoryExecutionStore::new();
    seeded(&store);

    let whole = execution_get_result(&store, &args(json!({"execution_id": "r2"}))).expect("get");
    assert_eq!(whole["execution_id"], "r2");
    assert_eq!(whole["workflow_name"], "deploy");
    assert_eq!(whole["status"], "failed");
    assert_eq!(whole["error"], "boom");
    assert_eq!(whole["input"], json!({"env": "prod"}));
    assert_eq!(whole["steps"].as_array().map(Vec::len), Some(2));

    let bare = execution_get_result(&store, &args(json!({"execution_id": "r2", "include_steps": false}))).expect("get");
    assert!(bare.get("steps").is_none());
    assert_eq!(bare["execution_id"], "r2");

    let one = execution_get_result(&store, &args(json!({"execution_id": "r2", "step_id": "b"}))).expect("get");
    assert_eq!(one["step_id"], "b");
    assert_eq!(one["tool"], "x_b");
    assert_eq!(one["stored_as"], "b_out");

    let error =
        execution_get_result(&store, &args(json!({"execution_id": "r2", "step_id": "zz"}))).expect_err("no step");
    assert!(error.contains("'zz'") && error.contains("'r2'"), "{error}");
}

#[test]
fn get_errors_name_the_missing_id_or_argument() {
    let store = MemoryExecutionStore::new();
    seeded(&store);
    for (bad, expected) in [
        (json!({"execution_id": "nope"}), "workflow execution 'nope' not found"),
        (json!({}), "execution_id is required"),
        (json!({"execution_id": null}), "execution_id is required"),
        (json!({"execution_id": ""}), "execution_id must not be empty"),
        (json!({"execution_id": 12}), "execution_id must be a string"),
        (
            json!({"execution_id": "r2", "include_steps": "not-boolean"}),
            "include_steps must be a boolean",
        ),
        (
            json!({"execution_id": "r2", "include_steps": 1}),
            "include_steps must be a boolean",
        ),
        (
            json!({"execution_id": "r2", "step_id": ""}),
            "step_id is invalid: cannot be empty",
        ),
        (json!({"execution_id": "r2", "step_id": null}), "step_id cannot be null"),
        (json!({"execution_id": "r2", "step_id": 3}), "step_id must be a string"),
        (
            json!({"execution_id": "r2", "step_id": "zz"}),
            "step 'zz' not found in execution 'r2'",
        ),
    ] {
        let error = execution_get_result(&store, &args(bad.clone())).expect_err("a bad argument");
        assert_eq!(error, expected, "{bad}");
    }
}

#[test]
fn get_without_steps_strips_steps_and_template_vars_from_the_result() {
    let store = MemoryExecutionStore::new();
    let mut run = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    run.spec.result = Some(json!({
        "execution_id": "run-1",
        "status": "completed",
        "steps": [{"id": "a", "status": "completed"}],
        "template_vars": ["input.env"],
        "summary": "ok",
    }));
    store.put(&run).expect("put");

    let bare =
        execution_get_result(&store, &args(json!({"execution_id": "run-1", "include_steps": false}))).expect("get");
    assert_eq!(
        bare["result"],
        json!({"execution_id": "run-1", "status": "completed", "summary": "ok"})
    );
    let text = bare.to_string();
    assert!(!text.contains("steps") && !text.contains("x_a"), "{text}");
    assert_eq!(bare["input"], json!({"env": "prod"}));

    let whole = execution_get_result(&store, &args(json!({"execution_id": "run-1"}))).expect("get");
    assert_eq!(
        whole["result"]["template_vars"],
        json!(["input.env"]),
        "kept by default"
    );
    assert_eq!(whole["result"]["steps"][0]["id"], "a");

    // A result that is not an object is left alone.
    run.spec.result = Some(json!("steps done"));
    store.put(&run).expect("put");
    let bare =
        execution_get_result(&store, &args(json!({"execution_id": "run-1", "include_steps": false}))).expect("get");
    assert_eq!(bare["result"], "steps done");
}

#[test]
fn every_step_in_a_get_answer_has_an_input() {
    let store = MemoryExecutionStore::new();
    let mut run = record("run-1", "deploy", ExecutionStatus::Completed, at(0));
    run.spec.steps[1].input = None;
    store.put(&run).expect("put");

    let whole = execution_get_result(&store, &args(json!({"execution_id": "run-1"}))).expect("get");
    assert_eq!(whole["steps"][0]["input"], json!({"step": "a"}));
    assert_eq!(whole["steps"][1]["input"], json!({}));
    let one = execution_get_result(&store, &args(json!({"execution_id": "run-1", "step_id": "b"}))).expect("get");
    assert_eq!(one["input"], json!({}));
    assert_eq!(
        store.get("run-1").expect("get").expect("the record").spec.steps[1].input,
        None,
        "the stored record is unchanged"
    );
}

#[test]
fn delete_removes_the_record_and_its_file() {
    let config = tempfile::tempdir().expect("temp dir");
    let store = FsExecutionStore::open(config.path()).expect("open");
    store
        .put(&record("run-1", "deploy", ExecutionStatus::Completed, at(0)))
        .expect("put");
    assert!(store.delete("run-1").expect("delete"));
    assert!(!store.delete("run-1").expect("delete again"));
    assert_eq!(store.get("run-1").expect("get"), None);
    assert_eq!(store.list(&ExecutionQuery::default()).expect("list").total, 0);
    assert!(dir_names(store.dir()).is_empty());
}

#[test]
fn ids_that_sanitize_alike_share_one_file_and_the_last_write_wins() {
    let config = tempfile::tempdir().expect("temp dir");
    let fs = FsExecutionStore::open(config.path()).expect("open");
    for store in [&fs as &dyn ExecutionStore, &MemoryExecutionStore::new()] {
        ids_that_sanitize_alike(store);
    }
}

fn ids_that_sanitize_alike(store: &dyn ExecutionStore) {
    store
        .put(&record("a.b", "deploy", ExecutionStatus::Completed, at(0)))
        .expect("put");
    store
        .put(&record("a_b", "inspect", ExecutionStatus::Completed, at(1)))
        .expect("put");

    let page = store.list(&ExecutionQuery::default()).expect("list");
    assert_eq!(page.total, 1);
    assert_eq!(page.executions[0].execution_id, "a_b");
    assert_eq!(store.get("a.b").expect("get"), None);
    assert!(!store.delete("a.b").expect("delete"), "the file belongs to a_b");
    assert!(store.get("a_b").expect("get").is_some());
}

#[test]
fn many_small_steps_still_fit_the_limit_with_the_middle_ones_omitted() {
    let mut many = record("run-1", "loop", ExecutionStatus::Completed, at(0));
    let template = many.spec.steps[0].clone();
    many.spec.steps = (0..10_000)
        .map(|i| {
            let mut step = template.clone();
            step.step_id = "visit".into();
            step.stored_as = Some(format!("visit_{i}"));
            step.input = Some(json!({"item": format!("item-{i}"), "n": i}));
            step.result = Some(json!({"ok": true, "i": i}));
            step
        })
        .collect();
    let guarded = guard_payload(&many);
    assert!(guarded.spec.truncated);
    let size = serde_json::to_vec(&*guarded).expect("json").len();
    assert!(size <= MAX_EXECUTION_PAYLOAD_BYTES, "{size}");
    let steps = &guarded.spec.steps;
    assert_eq!(steps.first().and_then(|s| s.stored_as.as_deref()), Some("visit_0"));
    assert_eq!(steps.last().and_then(|s| s.stored_as.as_deref()), Some("visit_9999"));
    let omitted: Vec<_> = steps.iter().filter(|s| s.step_id == OMITTED_STEP_ID).collect();
    assert_eq!(omitted.len(), 1);
    let kept = steps.len() - 1;
    let note = omitted[0]
        .result
        .as_ref()
        .and_then(|r| r.as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        note.starts_with(&format!("{} step records omitted", 10_000 - kept)),
        "{note}"
    );
}

#[test]
fn large_payloads_under_an_eighth_of_the_limit_are_replaced_biggest_first_when_they_add_up() {
    let mut record = record("run-1", "fan", ExecutionStatus::Completed, at(0));
    let template = record.spec.steps[0].clone();
    record.spec.steps = (0..12)
        .map(|i| {
            let mut step = template.clone();
            step.step_id = format!("s{i}");
            step.result = Some(big_value(if i == 5 { 30 * 1024 } else { 24 * 1024 }));
            step
        })
        .collect();
    let guarded = guard_payload(&record);
    assert!(guarded.spec.truncated);
    assert_eq!(
        guarded.spec.steps[5].result,
        Some(json!(TRUNCATION_MARKER)),
        "the biggest goes first"
    );
    assert_eq!(
        guarded.spec.steps.len(),
        12,
        "no step record is dropped when payloads suffice"
    );
    let size = serde_json::to_vec(&*guarded).expect("json").len();
    assert!(size <= MAX_EXECUTION_PAYLOAD_BYTES, "{size}");
    let kept = guarded
        .spec
        .steps
        .iter()
        .filter(|s| s.result != Some(json!(TRUNCATION_MARKER)))
        .count();
    assert!(kept >= 1, "only as many are replaced as needed");
}
