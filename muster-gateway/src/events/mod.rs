//! The event log: what happened to which MCPServer or Workflow, for `core_events`.
//!
//! An [`Event`] is Go muster's event (timestamp, namespace, involved object, reason, message,
//! `Normal`/`Warning` type, source) with optional structured [`EventDetails`]. The
//! [`reasons`] module names the reasons muster uses and the type each has.
//!
//! An [`EventLog`] keeps the newest events in memory for queries, broadcasts each to
//! followers ([`EventLog::subscribe`]), and, opened on a config directory, appends each to
//! `events/events-YYYY-MM-DD.json` (newline-delimited JSON, one file per UTC day, 30 days
//! kept) from a writer thread, so [`EventLog::emit`] never waits for the disk and the events
//! of earlier runs are there after a restart.
//!
//! [`EventQuery`] reads the `core_events` arguments and [`core_events_result`] produces the
//! answer, a JSON array of events, newest first, shaped as Go muster shows them.
//!
//! A log may also record every event elsewhere, with an [`EventBackend`] that `core_events`
//! then reads them back from ([`EventLog::with_backend`]): Kubernetes mode records them as
//! Kubernetes Events, which every replica sees. See [`EventBackend`] for what stays local.
//!
//! ```
//! use muster_gateway::events::{Event, EventLog, EventQuery, core_events_result, reasons};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let log = EventLog::open(dir.path())?;
//! let mut follower = log.subscribe();
//!
//! log.emit(Event::mcp_server("git", reasons::MCP_SERVER_CREATED, "MCPServer git created"));
//! assert_eq!(follower.try_recv()?.reason, "MCPServerCreated");
//!
//! let query = EventQuery::new().with_resource_type("MCPServer").with_resource_name("git");
//! assert_eq!(log.query(&query).len(), 1);
//!
//! let args = json!({"resourceType": "MCPServer", "resourceName": "git", "since": "1h"});
//! let answer = core_events_result(&log, args.as_object().ok_or("an object")?)?;
//! assert_eq!(answer[0]["reason"], "MCPServerCreated");
//! assert_eq!(answer[0]["resource_name"], "git");
//! # Ok(()) }
//! ```

mod backend;
mod event;
mod follow;
mod log;
mod query;
pub mod reasons;

pub use backend::EventBackend;
pub use event::{
    Author, DEFAULT_NAMESPACE, Event, EventDetails, EventType, InvolvedObject, KIND_MCP_SERVER, KIND_WORKFLOW, SOURCE,
};
pub use follow::{EVENT_NOTIFICATION, EventFollowers};
pub use log::{EVENTS_DIR, EventLog, EventLogOptions};
pub use query::{EventQuery, EventQueryResult, core_events_result};

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn answer(log: &EventLog, args: Value) -> Result<Value, String> {
        core_events_result(log, args.as_object().expect("an object"))
    }

    #[test]
    fn core_events_answers_the_scenario_queries() {
        let log = EventLog::in_memory();
        for reason in [
            reasons::MCP_SERVER_CREATED,
            reasons::MCP_SERVER_UPDATED,
            reasons::MCP_SERVER_DELETED,
        ] {
            log.emit(Event::mcp_server(
                "events-crud-server",
                reason,
                format!("{reason} happened"),
            ));
        }
        log.emit(Event::mcp_server("other", reasons::MCP_SERVER_CREATED, "other created"));
        log.emit(
            Event::workflow(
                "events-failing-wf",
                reasons::WORKFLOW_EXECUTION_FAILED,
                "Workflow events-failing-wf execution failed: boom-intentional-failure",
            )
            .with_details(EventDetails::default().with_error("boom-intentional-failure")),
        );

        let crud = answer(
            &log,
            json!({"resourceType": "MCPServer", "resourceName": "events-crud-server"}),
        )
        .expect("valid");
        let reasons: Vec<&str> = crud
            .as_array()
            .expect("an array")
            .iter()
            .filter_map(|e| e["reason"].as_str())
            .collect();
        assert_eq!(reasons, ["MCPServerDeleted", "MCPServerUpdated", "MCPServerCreated"]);

        let failed = answer(
            &log,
            json!({"resourceType": "Workflow", "resourceName": "events-failing-wf", "eventType": "Warning"}),
        )
        .expect("valid");
        let text = failed.to_string();
        assert!(text.contains("WorkflowExecutionFailed") && text.contains("boom-intentional-failure"));
        assert_eq!(failed[0]["data"]["error"], "boom-intentional-failure");
    }

    #[test]
    fn core_events_entries_have_go_muster_fields() {
        let log = EventLog::in_memory();
        let at = chrono::DateTime::parse_from_rfc3339("2026-09-21T12:43:07.25Z")
            .expect("valid")
            .with_timezone(&chrono::Utc);
        log.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, "MCPServer git started").with_timestamp(at));
        let entry = &answer(&log, json!({})).expect("valid")[0];
        assert_eq!(
            entry,
            &json!({
                "timestamp": "2026-09-21 12:43:07",
                "resource_type": "MCPServer",
                "resource_name": "git",
                "namespace": "default",
                "reason": "MCPServerStarted",
                "message": "MCPServer git started",
                "type": "Normal"
            })
        );
    }

    #[test]
    fn core_events_answers_an_empty_array_when_nothing_matches_and_an_error_for_bad_arguments() {
        let log = EventLog::in_memory();
        assert_eq!(answer(&log, json!({"resourceName": "none"})), Ok(json!([])));
        assert_eq!(
            answer(&log, json!({"limit": 0})),
            Err("'limit' must be a positive integer, got 0".to_owned())
        );
    }

    #[test]
    fn events_round_trip_through_their_json_line() {
        let event = Event::workflow("wf", reasons::WORKFLOW_STEP_FAILED, "step s failed")
            .with_namespace("team")
            .with_details(EventDetails::default().with_step_id("s").with_tool("x_git_status"));
        assert_eq!(event.event_type, EventType::Warning);
        assert_eq!(event.involved_object.namespace, "team");
        let line = serde_json::to_string(&event).expect("serializes");
        assert_eq!(serde_json::from_str::<Event>(&line).expect("parses"), event);
    }

    #[test]
    fn reasons_have_go_muster_types() {
        assert_eq!(reasons::event_type(reasons::MCP_SERVER_FAILED), EventType::Warning);
        assert_eq!(
            reasons::event_type(reasons::MCP_SERVER_HEALTH_CHECK_FAILED),
            EventType::Warning
        );
        assert_eq!(reasons::event_type(reasons::WORKFLOW_STEP_FAILED), EventType::Warning);
        assert_eq!(reasons::event_type(reasons::MCP_SERVER_CREATED), EventType::Normal);
        assert_eq!(
            reasons::event_type(reasons::MCP_SERVER_AUTH_REQUIRED),
            EventType::Normal
        );
        assert_eq!(reasons::event_type("SomethingElse"), EventType::Normal);
    }
}
