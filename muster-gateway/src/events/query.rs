//! `core_events`: its arguments ([`EventQuery`]) and its answer ([`core_events_result`]).

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use serde_json::{Map, Value};

use super::{Event, EventLog, EventType};

/// Which events a query selects, and how many of them it returns.
///
/// Built from the `core_events` arguments by [`EventQuery::from_args`], or with the `with_*`
/// setters. Every filter is optional; an unset filter selects everything.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventQuery {
    /// Kind of the resource (`MCPServer`, `Workflow`), compared ignoring letter case.
    pub resource_type: Option<String>,
    /// Name of the resource, compared exactly.
    pub resource_name: Option<String>,
    /// Namespace, compared exactly.
    pub namespace: Option<String>,
    /// `Normal` or `Warning`.
    pub event_type: Option<EventType>,
    /// Only events at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only events at or before this time.
    pub until: Option<DateTime<Utc>>,
    /// The most events returned, the newest ones; at least 1.
    pub limit: usize,
    /// Whether the caller asked to follow new events as well (`follow: true`). The answer is
    /// the same; the gateway's `core_events` then pushes what comes next to the caller's session
    /// ([`super::EventFollowers`]), built on [`EventLog::subscribe`].
    pub follow: bool,
}

impl Default for EventQuery {
    fn default() -> Self {
        Self {
            resource_type: None,
            resource_name: None,
            namespace: None,
            event_type: None,
            since: None,
            until: None,
            limit: Self::DEFAULT_LIMIT,
            follow: false,
        }
    }
}

/// The time formats `since` and `until` accept, for error messages.
const TIME_FORMATS: &str = "duration (30m, 1h, 2h30m, 7d), RFC3339 (2024-01-15T10:00:00Z), \
                            date (2024-01-15), or datetime (2024-01-15 10:00:00)";

impl EventQuery {
    /// The number of events returned when the arguments name no `limit`.
    pub const DEFAULT_LIMIT: usize = 50;

    /// A query selecting everything, [`Self::DEFAULT_LIMIT`] at most.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the `core_events` arguments, with durations counted back from now.
    ///
    /// | Argument | Meaning |
    /// |---|---|
    /// | `resourceType` | kind of the resource, `MCPServer` or `Workflow` (any letter case) |
    /// | `resourceName` | name of the resource |
    /// | `namespace` | namespace of the resource |
    /// | `eventType` (alias `type`) | `Normal` or `Warning` (any letter case) |
    /// | `since` | events at or after: a duration back from now (`30m`, `1h`, `2h30m`, `7d`), an RFC 3339 timestamp, a date `2024-01-15` or a datetime `2024-01-15 10:00:00` (UTC) |
    /// | `until` | events at or before, in the same formats |
    /// | `limit` | most events returned, a positive integer, default 50 |
    /// | `follow` | boolean; see [`EventQuery::follow`] |
    ///
    /// An empty string is the same as an absent argument; unknown arguments are ignored.
    /// A value of the wrong type or format is an error whose text names the argument.
    pub fn from_args(args: &Map<String, Value>) -> Result<Self, String> {
        Self::from_args_at(args, Utc::now())
    }

    /// [`Self::from_args`] with durations counted back from `now`.
    pub fn from_args_at(args: &Map<String, Value>, now: DateTime<Utc>) -> Result<Self, String> {
        let mut query = Self {
            resource_type: string_arg(args, "resourceType")?,
            resource_name: string_arg(args, "resourceName")?,
            namespace: string_arg(args, "namespace")?,
            ..Self::default()
        };
        let event_type = match string_arg(args, "eventType")? {
            Some(value) => Some(value),
            None => string_arg(args, "type")?,
        };
        if let Some(value) = event_type {
            query.event_type = Some(
                EventType::parse(&value)
                    .ok_or_else(|| format!("Invalid 'eventType' value '{value}'. Valid types: Normal, Warning"))?,
            );
        }
        if let Some(value) = string_arg(args, "since")? {
            query.since = Some(parse_time(&value, now).map_err(|e| format!("Invalid 'since' time format: {e}"))?);
        }
        if let Some(value) = string_arg(args, "until")? {
            query.until = Some(parse_time(&value, now).map_err(|e| format!("Invalid 'until' time format: {e}"))?);
        }
        if let (Some(since), Some(until)) = (query.since, query.until)
            && since > until
        {
            return Err(format!(
                "'since' ({}) is after 'until' ({}): no event can match",
                since.to_rfc3339(),
                until.to_rfc3339()
            ));
        }
        if let Some(value) = args.get("limit").filter(|v| !v.is_null()) {
            query.limit = limit_arg(value)?;
        }
        match args.get("follow") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(follow)) => query.follow = *follow,
            Some(other) => return Err(format!("'follow' must be a boolean, got {other}")),
        }
        Ok(query)
    }

    /// Selects events about resources of `kind`.
    pub fn with_resource_type(mut self, kind: impl Into<String>) -> Self {
        self.resource_type = Some(kind.into());
        self
    }

    /// Selects events about resources named `name`.
    pub fn with_resource_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = Some(name.into());
        self
    }

    /// Selects events in `namespace`.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Selects events of `event_type`.
    pub fn with_event_type(mut self, event_type: EventType) -> Self {
        self.event_type = Some(event_type);
        self
    }

    /// Selects events at or after `since`.
    pub fn with_since(mut self, since: DateTime<Utc>) -> Self {
        self.since = Some(since);
        self
    }

    /// Selects events at or before `until`.
    pub fn with_until(mut self, until: DateTime<Utc>) -> Self {
        self.until = Some(until);
        self
    }

    /// Returns at most `limit` events (at least 1).
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.max(1);
        self
    }

    /// Whether `event` passes every filter (the limit aside). A follower applies this to
    /// each event from [`EventLog::subscribe`].
    pub fn matches(&self, event: &Event) -> bool {
        self.resource_type
            .as_deref()
            .is_none_or(|kind| event.involved_object.kind.eq_ignore_ascii_case(kind))
            && self
                .resource_name
                .as_deref()
                .is_none_or(|name| event.involved_object.name == name)
            && self.namespace.as_deref().is_none_or(|ns| event.namespace == ns)
            && self.event_type.is_none_or(|t| event.event_type == t)
            && self.since.is_none_or(|since| event.timestamp >= since)
            && self.until.is_none_or(|until| event.timestamp <= until)
    }
}

/// The events a query selected: the newest `limit` of them, newest first, and how many
/// matched in all.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct EventQueryResult {
    /// The newest matching events, newest first.
    pub events: Vec<Event>,
    /// How many events matched before the limit.
    pub total: usize,
}

impl EventQueryResult {
    /// The events of `candidates` that `query` selects: the newest `query.limit` of them,
    /// newest first, and how many matched. Among events of the same time, the one earlier in
    /// `candidates` comes first.
    pub fn from_matches(candidates: impl IntoIterator<Item = Event>, query: &EventQuery) -> Self {
        let mut events: Vec<Event> = candidates.into_iter().filter(|event| query.matches(event)).collect();
        // A stable sort: equal times keep the order of `candidates`.
        events.sort_by_key(|event| std::cmp::Reverse(event.timestamp));
        let total = events.len();
        events.truncate(query.limit.max(1));
        Self { events, total }
    }
}

/// Answers `core_events`: the arguments read by [`EventQuery::from_args`], the answer the
/// document Go muster returns, a JSON array of [`Event::to_display_json`] entries, newest first:
///
/// ```json
/// [{"timestamp":"2026-09-21 12:43:00","resource_type":"MCPServer","resource_name":"git",
///   "namespace":"default","reason":"MCPServerCreated","message":"...","type":"Normal"}]
/// ```
///
/// An error is the text of the tool's error result (a bad argument).
pub fn core_events_result(log: &EventLog, args: &Map<String, Value>) -> Result<Value, String> {
    Ok(EventQuery::from_args(args)?.answer(log))
}

impl EventQuery {
    /// The `core_events` answer to this query over `log`'s memory (see [`core_events_result`]).
    pub fn answer(&self, log: &EventLog) -> Value {
        display(&log.query(self))
    }

    /// The `core_events` answer to this query over where `log` records its events: its
    /// [backend](super::EventBackend) when it has one (the events of every replica), else its
    /// memory ([`EventLog::query_recorded`]).
    pub async fn answer_recorded(&self, log: &EventLog) -> Value {
        display(&log.query_recorded(self).await.events)
    }
}

/// The `core_events` answer listing `events`.
fn display(events: &[Event]) -> Value {
    Value::Array(events.iter().map(Event::to_display_json).collect())
}

/// A string argument; empty is absent.
fn string_arg(args: &Map<String, Value>, name: &str) -> Result<Option<String>, String> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
        Some(other) => Err(format!("'{name}' must be a string, got {other}")),
    }
}

fn limit_arg(value: &Value) -> Result<usize, String> {
    let bad = || format!("'limit' must be a positive integer, got {value}");
    let limit = match value {
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => u,
            (None, Some(f)) if f.fract() == 0.0 && f >= 1.0 && f <= u32::MAX as f64 => f as u64,
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    };
    if limit == 0 {
        return Err(bad());
    }
    Ok(usize::try_from(limit).unwrap_or(usize::MAX))
}

/// Parses a `since`/`until` value: a duration back from `now` (Go's syntax plus `d` for days),
/// an RFC 3339 timestamp, a date or a `YYYY-MM-DD HH:MM:SS` datetime (both UTC).
pub(crate) fn parse_time(value: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Some(ago) = parse_duration(value) {
        return now
            .checked_sub_signed(ago)
            .ok_or_else(|| format!("duration '{value}' reaches outside the calendar"));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(d.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(value, "%Y-%m-%d %H:%M:%S") {
        return Ok(t.and_utc());
    }
    Err(format!(
        "unsupported time format '{value}'. Supported formats: {TIME_FORMATS}"
    ))
}

/// Parses a duration in Go's syntax (`300ms`, `1.5h`, `2h45m`, `-1h`; units ns, us, µs, ms, s,
/// m, h) plus `d` for 24 hours. `None` when `value` is not one.
pub(crate) fn parse_duration(value: &str) -> Option<TimeDelta> {
    let (negative, mut rest) = match value.as_bytes().first()? {
        b'-' => (true, &value[1..]),
        b'+' => (false, &value[1..]),
        _ => (false, value),
    };
    if rest == "0" {
        return Some(TimeDelta::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut seconds = 0.0_f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let amount: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        seconds += amount * unit;
    }
    // About 292 years, the range of Go's time.Duration.
    if seconds > 9.2e9 {
        return None;
    }
    let delta = TimeDelta::nanoseconds((seconds * 1e9).round() as i64);
    Some(if negative { -delta } else { delta })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 9, 21, h, m, s).single().expect("valid time")
    }

    #[test]
    fn go_durations_parse_and_count_back_from_now() {
        let now = at(12, 0, 0);
        for (text, expected) in [
            ("1h", at(11, 0, 0)),
            ("30m", at(11, 30, 0)),
            ("2h30m", at(9, 30, 0)),
            ("1.5h", at(10, 30, 0)),
            ("90s", at(11, 58, 30)),
            ("0", at(12, 0, 0)),
            ("-1h", at(13, 0, 0)),
        ] {
            assert_eq!(parse_time(text, now), Ok(expected), "{text}");
        }
        assert_eq!(
            parse_time("7d", now),
            Ok(Utc.with_ymd_and_hms(2026, 9, 14, 12, 0, 0).single().expect("valid"))
        );
        assert_eq!(parse_duration("500ms"), Some(TimeDelta::milliseconds(500)));
        for bad in ["", "h", "1", "1x", "1.2.3h", "abc", "1h-"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_dates_and_datetimes_parse_as_utc() {
        let now = at(12, 0, 0);
        assert_eq!(parse_time("2026-09-21T10:00:00Z", now), Ok(at(10, 0, 0)));
        assert_eq!(parse_time("2026-09-21T12:00:00+02:00", now), Ok(at(10, 0, 0)));
        assert_eq!(parse_time("2026-09-21", now), Ok(at(0, 0, 0)));
        assert_eq!(parse_time("2026-09-21 08:15:00", now), Ok(at(8, 15, 0)));
        let err = parse_time("yesterday", now).expect_err("not a time");
        assert!(err.starts_with("unsupported time format 'yesterday'. Supported formats: duration"));
    }

    #[test]
    fn arguments_read_like_go_muster() {
        let now = at(12, 0, 0);
        let query = EventQuery::from_args_at(
            &args(json!({
                "resourceType": "mcpserver",
                "resourceName": "git",
                "namespace": "default",
                "eventType": "warning",
                "since": "1h",
                "until": "2026-09-21T11:59:00Z",
                "limit": 20,
                "follow": true,
                "unknown": 1
            })),
            now,
        )
        .expect("valid arguments");
        assert_eq!(query.resource_type.as_deref(), Some("mcpserver"));
        assert_eq!(query.resource_name.as_deref(), Some("git"));
        assert_eq!(query.namespace.as_deref(), Some("default"));
        assert_eq!(query.event_type, Some(EventType::Warning));
        assert_eq!(query.since, Some(at(11, 0, 0)));
        assert_eq!(query.until, Some(at(11, 59, 0)));
        assert_eq!(query.limit, 20);
        assert!(query.follow);
    }

    #[test]
    fn absent_and_empty_arguments_select_everything_fifty_at_most() {
        let query = EventQuery::from_args(&args(json!({"resourceName": "", "since": null}))).expect("valid");
        assert_eq!(query, EventQuery::new());
        assert_eq!(query.limit, 50);
        let aliased = EventQuery::from_args(&args(json!({"type": "Normal"}))).expect("valid");
        assert_eq!(aliased.event_type, Some(EventType::Normal));
        let float_limit = EventQuery::from_args(&args(json!({"limit": 5.0}))).expect("valid");
        assert_eq!(float_limit.limit, 5);
    }

    #[test]
    fn bad_values_are_refused_with_the_argument_named() {
        let cases = [
            (
                json!({"since": "yesterday"}),
                "Invalid 'since' time format: unsupported time format 'yesterday'",
            ),
            (
                json!({"until": "soon"}),
                "Invalid 'until' time format: unsupported time format 'soon'",
            ),
            (
                json!({"eventType": "Error"}),
                "Invalid 'eventType' value 'Error'. Valid types: Normal, Warning",
            ),
            (json!({"limit": 0}), "'limit' must be a positive integer, got 0"),
            (json!({"limit": -3}), "'limit' must be a positive integer, got -3"),
            (json!({"limit": 2.5}), "'limit' must be a positive integer, got 2.5"),
            (json!({"limit": "10"}), "'limit' must be a positive integer, got \"10\""),
            (json!({"resourceName": 7}), "'resourceName' must be a string, got 7"),
            (json!({"follow": "yes"}), "'follow' must be a boolean, got \"yes\""),
            (json!({"since": "1h", "until": "2h"}), "'since' ("),
        ];
        for (value, expected) in cases {
            let err = EventQuery::from_args(&args(value.clone())).expect_err("refused");
            assert!(err.starts_with(expected), "{value}: {err}");
        }
    }

    #[test]
    fn matching_compares_kind_without_case_and_the_rest_exactly() {
        let event = Event::mcp_server("git", "MCPServerStarted", "started").with_timestamp(at(11, 0, 0));
        assert!(EventQuery::new().with_resource_type("MCPSERVER").matches(&event));
        assert!(!EventQuery::new().with_resource_type("Workflow").matches(&event));
        assert!(!EventQuery::new().with_resource_name("Git").matches(&event));
        assert!(EventQuery::new().with_namespace("default").matches(&event));
        assert!(!EventQuery::new().with_event_type(EventType::Warning).matches(&event));
        assert!(
            EventQuery::new()
                .with_since(at(11, 0, 0))
                .with_until(at(11, 0, 0))
                .matches(&event)
        );
        assert!(!EventQuery::new().with_since(at(11, 0, 1)).matches(&event));
        assert!(!EventQuery::new().with_until(at(10, 59, 59)).matches(&event));
    }
}
