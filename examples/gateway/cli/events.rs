//! `events [-f]`: what happened to the MCP servers and workflows (`core_events`).
//!
//! Without `-f` it prints the matching events once: `-o table|wide` oldest first (the newest at
//! the bottom, where `-f` goes on), `-o json|yaml` as the gateway answers them, newest first.
//!
//! With `-f` it asks with `follow: true`, prints the matching events oldest first, then every
//! new one as it happens until interrupted: each `notifications/muster/event` the gateway
//! pushes, and, in case one was missed (a follower that fell behind, a gateway that does not
//! push), what `core_events` reports since the newest event seen, asked every [`POLL`]. An event
//! is printed once. `-o json` prints one event per line (JSON Lines), `-o yaml` one document each.

use std::{collections::HashSet, time::Duration};

use serde_json::{Map, Value, json};

use super::{
    client::Client,
    error::{CliError, OK},
    note,
    output::{Column, Format, Out, at},
};

/// How often `-f` asks for new events.
const POLL: Duration = Duration::from_secs(1);

/// The most events one poll of `-f` asks for.
const POLL_LIMIT: u32 = 1000;

/// The `events` filters, as `core_events` takes them.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventFilters {
    pub(crate) resource_type: Option<String>,
    pub(crate) resource_name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) event_type: Option<String>,
    pub(crate) since: Option<String>,
    pub(crate) until: Option<String>,
    pub(crate) limit: Option<u32>,
}

impl EventFilters {
    /// The `core_events` arguments.
    fn args(&self, follow: bool) -> Value {
        let mut args = Map::new();
        let mut put = |key: &str, value: &Option<String>| {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                args.insert(key.to_owned(), json!(v));
            }
        };
        put("resourceType", &self.resource_type);
        put("resourceName", &self.resource_name);
        put("namespace", &self.namespace);
        put("eventType", &self.event_type);
        put("since", &self.since);
        put("until", &self.until);
        if let Some(limit) = self.limit {
            args.insert("limit".into(), json!(limit));
        }
        if follow {
            args.insert("follow".into(), json!(true));
        }
        Value::Object(args)
    }
}

const COLUMNS: &[Column] = &[
    Column::new("TIME", |r| at(r, "timestamp")),
    Column::new("TYPE", |r| at(r, "type")).state(),
    Column::new("NAMESPACE", |r| at(r, "namespace")).wide(),
    Column::new("RESOURCE", |r| {
        format!("{}/{}", at(r, "resource_type"), at(r, "resource_name"))
    }),
    Column::new("REASON", |r| at(r, "reason")),
    Column::new("COUNT", |r| r.get("count").map_or("1".to_owned(), super::output::cell)).wide(),
    Column::new("MESSAGE", |r| at(r, "message")),
];

/// Typical widths of the columns when following (the header's when wider).
const TYPICAL: &[usize] = &[19, 7, 9, 30, 24, 5, 200];

/// The events of a `core_events` answer.
fn events_of(answer: &Value) -> Vec<Value> {
    answer.as_array().cloned().unwrap_or_default()
}

/// `events`.
pub(crate) async fn events(client: &Client, out: &Out, filters: &EventFilters, follow: bool) -> Result<u8, CliError> {
    let answer = client
        .core("core_events", filters.args(follow), "reading events")
        .await?;
    if !follow {
        let mut events = events_of(&answer);
        if out.format.is_table() {
            if events.is_empty() {
                note("No events found.");
                return Ok(OK);
            }
            events.reverse();
            out.write_table(COLUMNS, &events);
        } else {
            out.data(&answer);
        }
        return Ok(OK);
    }
    let mut follower = Follower::new(out);
    let mut first = events_of(&answer);
    first.reverse();
    for event in first {
        follower.emit(event);
    }
    // Until an event is seen, new ones are those from now on (give or take the clocks).
    let started = (chrono::Utc::now() - chrono::TimeDelta::seconds(2))
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            _ = &mut interrupted => return Ok(OK),
            Some(event) = client.next_event() => follower.emit(event),
            () = tokio::time::sleep(POLL) => {
                let mut poll = filters.clone();
                poll.since = Some(follower.newest.clone().unwrap_or_else(|| started.clone()));
                poll.until = None;
                poll.limit = Some(POLL_LIMIT);
                let answer = client.core("core_events", poll.args(true), "reading events").await?;
                let mut fresh = events_of(&answer);
                fresh.reverse();
                for event in fresh {
                    follower.emit(event);
                }
            }
        }
    }
}

/// Prints events as they come, each once.
#[derive(Debug)]
struct Follower<'a> {
    out: &'a Out,
    widths: Option<Vec<usize>>,
    /// The events printed at the newest timestamp (older ones never come again: polls ask
    /// from the newest on).
    seen: HashSet<String>,
    newest: Option<String>,
}

impl<'a> Follower<'a> {
    fn new(out: &'a Out) -> Self {
        Self {
            out,
            widths: None,
            seen: HashSet::new(),
            newest: None,
        }
    }

    /// Prints `event` unless it was printed already.
    fn emit(&mut self, event: Value) {
        let key = event.to_string();
        let timestamp = event
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if self.seen.contains(&key) || self.newest.as_deref().is_some_and(|n| timestamp.as_str() < n) {
            return;
        }
        if self.newest.as_deref() != Some(timestamp.as_str()) {
            self.seen.clear();
            self.newest = Some(timestamp);
        }
        self.seen.insert(key);
        match self.out.format {
            Format::Table | Format::Wide => {
                let widths = self.widths.get_or_insert_with(|| {
                    let widths = self.out.stream_widths(COLUMNS, TYPICAL);
                    self.out.stream_row(COLUMNS, &widths, None);
                    widths
                });
                self.out.stream_row(COLUMNS, widths, Some(&event));
            }
            Format::Json => self.out.line(&event.to_string()),
            Format::Yaml => {
                self.out.line("---");
                self.out.data(&event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_core_events_arguments() {
        let filters = EventFilters {
            resource_type: Some("MCPServer".into()),
            resource_name: Some("demo".into()),
            event_type: Some("Warning".into()),
            since: Some("1h".into()),
            limit: Some(5),
            ..EventFilters::default()
        };
        assert_eq!(
            filters.args(true),
            json!({"resourceType": "MCPServer", "resourceName": "demo", "eventType": "Warning", "since": "1h",
                   "limit": 5, "follow": true})
        );
        assert_eq!(EventFilters::default().args(false), json!({}));
    }
}
