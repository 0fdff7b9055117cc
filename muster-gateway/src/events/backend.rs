//! [`EventBackend`]: where an [`EventLog`] records its events besides its own memory, and where
//! `core_events` reads them back from.
//!
//! The trait's documentation says what a log with a backend does; here, two logs (two
//! replicas) sharing one backend:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use futures::future::BoxFuture;
//! use muster_core::BoxError;
//! use muster_gateway::events::{
//!     Event, EventBackend, EventLog, EventLogOptions, EventQuery, EventQueryResult, reasons,
//! };
//!
//! /// A backend that keeps what it is given in a list another log could share.
//! #[derive(Default)]
//! struct Shared(Mutex<Vec<Event>>);
//!
//! impl EventBackend for Shared {
//!     fn record(&self, event: &Event) {
//!         self.0.lock().expect("not poisoned").push(event.clone());
//!     }
//!
//!     fn query<'a>(&'a self, query: &'a EventQuery) -> BoxFuture<'a, Result<EventQueryResult, BoxError>> {
//!         let events = self.0.lock().expect("not poisoned").clone();
//!         Box::pin(async move { Ok(EventQueryResult::from_matches(events, query)) })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let shared = Arc::new(Shared::default());
//! let replica_a = EventLog::with_backend(shared.clone(), EventLogOptions::default());
//! let replica_b = EventLog::with_backend(shared, EventLogOptions::default());
//!
//! replica_a.emit(Event::mcp_server("git", reasons::MCP_SERVER_STARTED, "MCPServer git started"));
//! let found = replica_b.query_recorded(&EventQuery::new().with_resource_name("git")).await;
//! assert_eq!(found.events[0].reason, "MCPServerStarted");
//! assert!(replica_b.is_empty(), "replica b's own memory holds none of it");
//! # }
//! ```

use futures::future::BoxFuture;
use muster_core::BoxError;

use super::{Event, EventQuery, EventQueryResult};

/// A store an [`EventLog`](super::EventLog) records every event in, and answers `core_events`
/// from.
///
/// A log made with [`EventLog::with_backend`](super::EventLog::with_backend) still keeps the newest events in memory and
/// still broadcasts each to this process's followers; it also hands each event to the backend
/// ([`EventBackend::record`], which must not block), and [`EventLog::query_recorded`](super::EventLog::query_recorded) (what
/// `core_events` answers with) asks the backend rather than the memory, so that replicas
/// sharing a backend see each other's events. When the backend cannot answer (its store is
/// away), the answer comes from this process's memory and a warning is logged: `core_events`
/// then shows this replica's events only. Following (`core_events` with `follow: true`) stays
/// with the process: a follower sees the events of the replica it is connected to.
///
/// muster-kube's `KubeEvents` is the backend of Kubernetes mode (each event an `events.k8s.io`
/// Event on the object it concerns). The synchronous [`EventLog::query`](super::EventLog::query) and
/// [`core_events_result`](super::core_events_result) keep answering from memory.
pub trait EventBackend: Send + Sync + 'static {
    /// Adjusts `event` to what the backend will keep of it, before the log keeps, broadcasts
    /// and records it, so that this process's memory, its followers and the backend hold the
    /// same event (a namespace the backend knows, a timestamp at the precision it stores, a
    /// message cut to the length it allows). The default changes nothing.
    fn prepare(&self, event: &mut Event) {
        let _unchanged = event;
    }

    /// Records `event`. Called from [`EventLog::emit`](super::EventLog::emit), from any thread
    /// or task, inside or outside an async runtime: it must return at once and must not
    /// panic. A backend that writes over the network queues the event and writes it from a
    /// task of its own; what it cannot write it logs.
    fn record(&self, event: &Event);

    /// The events `query` selects, from every process that records into this backend: the
    /// newest `query.limit` of them, newest first, with the number that matched
    /// ([`EventQueryResult::from_matches`] computes that from candidates). An error makes the
    /// log answer from its memory instead.
    fn query<'a>(&'a self, query: &'a EventQuery) -> BoxFuture<'a, Result<EventQueryResult, BoxError>>;
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    };

    use serde_json::json;

    use super::*;
    use crate::events::{EventLog, EventLogOptions, reasons};

    /// Keeps what it records in a list; answers from it, or fails while `away`; prepares each
    /// event by moving it to namespace `muster`.
    #[derive(Default)]
    struct Recorder {
        recorded: Mutex<Vec<Event>>,
        away: AtomicBool,
    }

    impl EventBackend for Recorder {
        fn prepare(&self, event: &mut Event) {
            *event = event.clone().with_namespace("muster");
        }

        fn record(&self, event: &Event) {
            self.recorded.lock().expect("not poisoned").push(event.clone());
        }

        fn query<'a>(&'a self, query: &'a EventQuery) -> BoxFuture<'a, Result<EventQueryResult, BoxError>> {
            let away = self.away.load(Ordering::SeqCst);
            let events = self.recorded.lock().expect("not poisoned").clone();
            Box::pin(async move {
                if away {
                    return Err("the store is away".into());
                }
                Ok(EventQueryResult::from_matches(events, query))
            })
        }
    }

    fn started(name: &str) -> Event {
        Event::mcp_server(name, reasons::MCP_SERVER_STARTED, format!("MCPServer {name} started"))
    }

    #[tokio::test]
    async fn every_event_is_prepared_then_kept_broadcast_and_recorded_alike() {
        let backend = Arc::new(Recorder::default());
        let log = EventLog::with_backend(backend.clone(), EventLogOptions::default());
        let mut follower = log.subscribe();
        log.emit(started("git"));

        let recorded = backend.recorded.lock().expect("not poisoned").clone();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].namespace, "muster", "prepared before it was recorded");
        assert_eq!(follower.try_recv().expect("broadcast"), recorded[0]);
        assert_eq!(log.query(&EventQuery::new()), recorded, "kept as recorded");
    }

    #[tokio::test]
    async fn queries_are_answered_from_the_backend_with_the_events_of_other_logs() {
        let backend = Arc::new(Recorder::default());
        let one = EventLog::with_backend(backend.clone(), EventLogOptions::default());
        let two = EventLog::with_backend(backend, EventLogOptions::default());
        one.emit(started("a"));
        two.emit(started("b"));

        let found = two.query_recorded(&EventQuery::new().with_limit(1)).await;
        assert_eq!(found.total, 2);
        assert_eq!(found.events.len(), 1);
        let everything = one.query_recorded(&EventQuery::new()).await;
        let mut names: Vec<&str> = everything.events.iter().map(Event::name).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "b"]);
        let answer = EventQuery::new().with_resource_name("a").answer_recorded(&two).await;
        assert_eq!(answer[0]["resource_name"], "a");
        assert_eq!(answer[0]["namespace"], "muster");
        assert_eq!(answer.as_array().map(Vec::len), Some(1));
    }

    #[tokio::test]
    async fn a_failing_backend_is_answered_for_by_the_logs_own_memory() {
        let backend = Arc::new(Recorder::default());
        let one = EventLog::with_backend(backend.clone(), EventLogOptions::default());
        let two = EventLog::with_backend(backend.clone(), EventLogOptions::default());
        one.emit(started("a"));
        two.emit(started("b"));
        backend.away.store(true, Ordering::SeqCst);

        let found = two.query_recorded(&EventQuery::new()).await;
        let names: Vec<&str> = found.events.iter().map(Event::name).collect();
        assert_eq!(names, ["b"], "only this log's own");
        let answer = EventQuery::new().answer_recorded(&one).await;
        assert_eq!(answer, json!([one.query(&EventQuery::new())[0].to_display_json()]));
        assert_eq!(answer[0]["resource_name"], "a");
    }

    #[tokio::test]
    async fn a_log_without_a_backend_answers_from_memory() {
        let log = EventLog::in_memory();
        log.emit(started("a"));
        let found = log.query_recorded(&EventQuery::new()).await;
        assert_eq!(found, log.query_with_total(&EventQuery::new()));
        assert_eq!(found.events[0].namespace, "default");
    }

    #[test]
    fn matches_are_the_newest_first_and_earlier_candidates_win_ties() {
        let at = |s: i64| chrono::DateTime::from_timestamp(s, 0).expect("in range");
        let candidates = vec![
            started("old").with_timestamp(at(1)),
            started("tie-first").with_timestamp(at(5)),
            Event::workflow("wf", reasons::WORKFLOW_CREATED, "created").with_timestamp(at(9)),
            started("tie-second").with_timestamp(at(5)),
            started("new").with_timestamp(at(7)),
        ];
        let query = EventQuery::new().with_resource_type("mcpserver").with_limit(3);
        let found = EventQueryResult::from_matches(candidates, &query);
        assert_eq!(found.total, 4);
        let names: Vec<&str> = found.events.iter().map(Event::name).collect();
        assert_eq!(names, ["new", "tie-first", "tie-second"]);
    }
}
