//! WorkflowExecution: parsing, status spellings and timestamps.

use chrono::{TimeZone, Utc};
use serde_json::json;

use super::{yaml, yaml_error};
use crate::crd::{ExecutionStatus, WORKFLOW_LABEL, WORKFLOW_STATUS_LABEL, WorkflowExecution, WorkflowExecutionSpec};

#[test]
fn statuses_use_the_documented_spellings() {
    for (status, spelling) in [
        (ExecutionStatus::InProgress, "inprogress"),
        (ExecutionStatus::Completed, "completed"),
        (ExecutionStatus::Failed, "failed"),
    ] {
        assert_eq!(serde_json::to_value(status).expect("serializes"), spelling);
        assert_eq!(status.to_string(), spelling);
    }
    let error = yaml_error::<ExecutionStatus>("running");
    assert!(error.contains("unknown variant `running`"), "{error}");
}

#[test]
fn new_record_is_named_by_the_execution_id_and_labelled() {
    let started = Utc
        .with_ymd_and_hms(2026, 9, 21, 12, 0, 0)
        .single()
        .expect("valid date");
    let record = WorkflowExecution::new(
        "0b7c2c1e-9f0e-4a51-a3c4-2f1d2b7a9e10",
        WorkflowExecutionSpec::started("deploy-application", started),
    );
    assert_eq!(record.metadata.name, "0b7c2c1e-9f0e-4a51-a3c4-2f1d2b7a9e10");
    assert_eq!(
        record.metadata.labels.get(WORKFLOW_LABEL).map(String::as_str),
        Some("deploy-application")
    );
    assert_eq!(
        record.metadata.labels.get(WORKFLOW_STATUS_LABEL).map(String::as_str),
        Some("inprogress")
    );
    let json = serde_json::to_value(&record).expect("serializes");
    assert_eq!(json["kind"], "WorkflowExecution");
    assert_eq!(json["spec"]["startedAt"], "2026-09-21T12:00:00Z");
    assert!(json["spec"].get("completedAt").is_none());
    assert!(json.get("status").is_none());
}

#[test]
fn record_without_started_at_does_not_parse() {
    let error = yaml_error::<WorkflowExecution>("metadata: {name: a}\nspec: {workflowName: w, status: completed}");
    assert!(error.contains("startedAt"), "{error}");
}

#[test]
fn record_with_a_malformed_timestamp_does_not_parse() {
    let error = yaml_error::<WorkflowExecution>(
        "metadata: {name: a}\nspec: {workflowName: w, status: failed, startedAt: '21/09/2026'}",
    );
    assert!(
        error.contains("invalid timestamp \"21/09/2026\": expected an RFC 3339 timestamp"),
        "{error}"
    );
}

#[test]
fn record_spec_accepts_fields_of_newer_versions() {
    let record: WorkflowExecution = yaml(
        "metadata: {name: a}\nspec: {workflowName: w, status: completed, \
         startedAt: '2026-09-21T12:00:00Z', stepCount: 3}",
    );
    assert_eq!(record.spec.status, ExecutionStatus::Completed);
}

#[test]
fn step_records_keep_arbitrary_json() {
    let record: WorkflowExecution = yaml(
        r#"
metadata: {name: a}
spec:
  workflowName: w
  status: failed
  startedAt: "2026-09-21T12:00:00Z"
  error: boom
  steps:
    - stepId: s
      tool: t
      status: failed
      startedAt: "2026-09-21T12:00:01.250Z"
      durationMs: 12
      input: {n: 1, list: [true, null, 2.5]}
      result: "[truncated: payload exceeded retention size limit]"
      error: boom
      storedAs: s
"#,
    );
    let step = &record.spec.steps[0];
    assert_eq!(step.input, Some(json!({"n": 1, "list": [true, null, 2.5]})));
    assert_eq!(
        step.result,
        Some(json!("[truncated: payload exceeded retention size limit]"))
    );
    assert_eq!(step.started_at.timestamp_subsec_millis(), 250);
}
