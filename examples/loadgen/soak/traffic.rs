//! The sessions of the soak: what each request is for, how it ended, and the timeline of
//! outcomes they record (per target and outcome, in 100 ms buckets).

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{
    ServiceError,
    model::{CallToolRequestParams, CallToolResult},
};
use serde_json::json;

use crate::load::{self, CALL_TIMEOUT, Call, Session, object};

/// The resolution of the outcome timeline.
pub(crate) const BUCKET: Duration = Duration::from_millis(100);

/// Distinct error messages kept (by target, outcome and text with the digits folded).
pub(crate) const MAX_MESSAGES: usize = 200;

/// What a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Target {
    /// `call_tool x_echo0_echo`: the echo server over HTTP, killed twice.
    HttpEcho,
    /// `call_tool x_echo1_echo`: the echo server over stdio, killed the second time.
    StdioEcho,
    /// `call_tool x_demo_add`.
    DemoAdd,
    /// `list_tools {}`.
    ListTools,
    /// `filter_tools {query}`.
    FilterTools,
}

pub(crate) const TARGETS: [Target; 5] = [
    Target::HttpEcho,
    Target::StdioEcho,
    Target::DemoAdd,
    Target::ListTools,
    Target::FilterTools,
];

impl Target {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::HttpEcho => "`call_tool x_echo0_echo` (HTTP downstream)",
            Self::StdioEcho => "`call_tool x_echo1_echo` (stdio downstream)",
            Self::DemoAdd => "`call_tool x_demo_add` (stdio demo server)",
            Self::ListTools => "`list_tools {}`",
            Self::FilterTools => "`filter_tools {query}`",
        }
    }

    /// Request `i` of a session, in a rotation of twenty offset by the session's tag.
    pub(crate) fn pick(i: u64, tag: usize, demo: bool) -> Self {
        match (i + tag as u64) % 20 {
            16 | 17 if demo => Self::DemoAdd,
            0..=7 | 16 => Self::HttpEcho,
            8..=15 | 17 => Self::StdioEcho,
            18 => Self::ListTools,
            _ => Self::FilterTools,
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    /// The expected answer.
    Ok,
    /// A tool result with `isError: true`.
    ErrorResult,
    /// A JSON-RPC error.
    JsonRpcError,
    /// A result that is not the expected one.
    Wrong,
    /// Nothing within [`CALL_TIMEOUT`].
    NoAnswer,
    /// The session's transport failed (or another client-side failure).
    Transport,
}

pub(crate) const OUTCOMES: [Outcome; 6] = [
    Outcome::Ok,
    Outcome::ErrorResult,
    Outcome::JsonRpcError,
    Outcome::Wrong,
    Outcome::NoAnswer,
    Outcome::Transport,
];

impl Outcome {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ErrorResult => "error result",
            Self::JsonRpcError => "JSON-RPC error",
            Self::Wrong => "wrong answer",
            Self::NoAnswer => "no answer in 30 s",
            Self::Transport => "transport failure",
        }
    }

    /// The gateway answered (rightly or with an error).
    pub(crate) fn answered(self) -> bool {
        !matches!(self, Self::NoAnswer | Self::Transport)
    }
}

/// Distinct error messages by target, outcome and folded text: (count, first seen in ms).
pub(crate) type Messages = BTreeMap<(Target, Outcome, String), (u64, u64)>;

/// Counts per target and outcome, in one time bucket.
pub(crate) type Cell = [[AtomicU32; OUTCOMES.len()]; TARGETS.len()];

/// What the sessions record, shared.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) demo: bool,
    /// Outcomes by the time their answer came, per [`BUCKET`].
    pub(crate) timeline: Vec<Cell>,
    /// The slowest answer per bucket, in ms.
    pub(crate) slowest_ms: Vec<AtomicU32>,
    /// Distinct error messages: (count, first seen in ms from the start).
    pub(crate) messages: Mutex<Messages>,
    pub(crate) reconnects: AtomicU64,
    pub(crate) connect_failures: AtomicU64,
}

impl Shared {
    pub(crate) fn new(started: Instant, duration: Duration, demo: bool) -> Self {
        // Room for requests still in flight at the deadline.
        let buckets = ((duration + CALL_TIMEOUT * 2).as_millis() / BUCKET.as_millis()) as usize;
        Self {
            started,
            deadline: started + duration,
            demo,
            timeline: (0..buckets)
                .map(|_| std::array::from_fn(|_| std::array::from_fn(|_| AtomicU32::new(0))))
                .collect(),
            slowest_ms: (0..buckets).map(|_| AtomicU32::new(0)).collect(),
            messages: Mutex::default(),
            reconnects: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
        }
    }

    pub(crate) fn bucket(&self, at: Instant) -> usize {
        let i = (at.saturating_duration_since(self.started).as_millis() / BUCKET.as_millis()) as usize;
        i.min(self.timeline.len() - 1)
    }

    pub(crate) fn record(&self, target: Target, outcome: Outcome, issued: Instant, message: Option<String>) {
        let now = Instant::now();
        let b = self.bucket(now);
        self.timeline[b][target as usize][outcome as usize].fetch_add(1, Ordering::Relaxed);
        let ms = u32::try_from(now.duration_since(issued).as_millis()).unwrap_or(u32::MAX);
        self.slowest_ms[b].fetch_max(ms, Ordering::Relaxed);
        if let Some(message) = message {
            self.note(target, outcome, &message);
        }
    }

    pub(crate) fn note(&self, target: Target, outcome: Outcome, message: &str) {
        let at = self.started.elapsed().as_millis() as u64;
        let mut messages = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        let key = (target, outcome, fold(message));
        let key = if messages.len() >= MAX_MESSAGES && !messages.contains_key(&key) {
            (target, outcome, "(other messages)".to_owned())
        } else {
            key
        };
        messages.entry(key).or_insert((0, at)).0 += 1;
    }

    /// Sums of the buckets in `[from, to)` (times from the start).
    pub(crate) fn sum(&self, from: Duration, to: Duration) -> Tally {
        let first = (from.as_millis() / BUCKET.as_millis()) as usize;
        let last = ((to.as_millis() / BUCKET.as_millis()) as usize).min(self.timeline.len());
        let mut tally = Tally::default();
        for b in first..last {
            for t in TARGETS {
                for o in OUTCOMES {
                    tally.counts[t as usize][o as usize] +=
                        u64::from(self.timeline[b][t as usize][o as usize].load(Ordering::Relaxed));
                }
            }
            tally.slowest_ms = tally.slowest_ms.max(self.slowest_ms[b].load(Ordering::Relaxed));
        }
        tally
    }

    /// The buckets of `target`: (ok, not ok) per bucket.
    pub(crate) fn series(&self, target: Target) -> Vec<(u32, u32)> {
        self.timeline
            .iter()
            .map(|cell| {
                let row = &cell[target as usize];
                let ok = row[Outcome::Ok as usize].load(Ordering::Relaxed);
                let total: u32 = row.iter().map(|c| c.load(Ordering::Relaxed)).sum();
                (ok, total - ok)
            })
            .collect()
    }
}

/// `message` with digit runs folded to `N` and cut at 300 characters (so that messages naming
/// request ids or ports group together).
pub(crate) fn fold(message: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(if c == '|' || c == '\n' { ' ' } else { c });
        }
        if out.chars().count() >= 300 {
            out.push('…');
            break;
        }
    }
    out
}

/// Counts over an interval.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) counts: [[u64; OUTCOMES.len()]; TARGETS.len()],
    pub(crate) slowest_ms: u32,
}

impl Tally {
    pub(crate) fn of(&self, pred: impl Fn(Target, Outcome) -> bool) -> u64 {
        let mut n = 0;
        for t in TARGETS {
            for o in OUTCOMES {
                if pred(t, o) {
                    n += self.counts[t as usize][o as usize];
                }
            }
        }
        n
    }

    pub(crate) fn answered(&self) -> u64 {
        self.of(|_, o| o.answered())
    }

    pub(crate) fn error_answers(&self) -> u64 {
        self.of(|_, o| o.answered() && o != Outcome::Ok)
    }

    pub(crate) fn unanswered(&self) -> u64 {
        self.of(|_, o| !o.answered())
    }
}

/// Whether a result is the expected answer.
pub(crate) type Check = Box<dyn Fn(&CallToolResult) -> bool + Send>;

/// One request of session `tag`.
pub(crate) async fn issue(session: &Session, target: Target, tag: usize, i: u64) -> (Outcome, Option<String>) {
    let message = format!("s{tag}-c{i}");
    let (request, check): (CallToolRequestParams, Check) = match target {
        Target::HttpEcho | Target::StdioEcho => {
            let server = if target == Target::HttpEcho { "echo0" } else { "echo1" };
            let call = Call::ViaCallTool {
                server: server.to_owned(),
            };
            let request = call.request(&message, 0);
            let message = message.clone();
            (request, Box::new(move |r| call.answered(r, &message, 0)))
        }
        Target::DemoAdd => {
            let (a, b) = (i % 1000, tag as u64);
            let request = CallToolRequestParams::new("call_tool")
                .with_arguments(object(json!({"name": "x_demo_add", "arguments": {"a": a, "b": b}})));
            let sum = format!("{}", (a + b) as f64);
            let sum_int = format!("{}", a + b);
            (
                request,
                Box::new(move |r| {
                    let text = first_text(r);
                    text.contains("sum") && (text.contains(&sum) || text.contains(&sum_int))
                }),
            )
        }
        Target::ListTools => (
            CallToolRequestParams::new("list_tools").with_arguments(object(json!({}))),
            Box::new(|r| first_text(r).contains("x_")),
        ),
        Target::FilterTools => (
            CallToolRequestParams::new("filter_tools")
                .with_arguments(object(json!({"query": "echo a message back", "limit": 5}))),
            Box::new(|r| first_text(r).contains("echo")),
        ),
    };
    match tokio::time::timeout(CALL_TIMEOUT, session.call_tool(request)).await {
        Err(_) => (
            Outcome::NoAnswer,
            Some(format!("{target:?}: no answer in {CALL_TIMEOUT:?}")),
        ),
        Ok(Err(ServiceError::McpError(e))) => (Outcome::JsonRpcError, Some(format!("{} {}", e.code.0, e.message))),
        Ok(Err(e)) => (Outcome::Transport, Some(e.to_string())),
        Ok(Ok(result)) if result.is_error == Some(true) => (Outcome::ErrorResult, Some(first_text(&result))),
        Ok(Ok(result)) if check(&result) => (Outcome::Ok, None),
        Ok(Ok(result)) => (Outcome::Wrong, Some(first_text(&result))),
    }
}

pub(crate) fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// One session's loop: requests one after the other until the deadline; a new session after
/// a transport failure. Answers the session open at the end.
pub(crate) async fn drive(http: reqwest::Client, url: String, tag: usize, shared: Arc<Shared>) -> Option<Session> {
    let mut session: Option<Session> = None;
    let mut i: u64 = 0;
    while Instant::now() < shared.deadline {
        let Some(current) = &session else {
            match tokio::time::timeout(CALL_TIMEOUT, load::connect(&http, &url)).await {
                Ok(Ok(s)) => session = Some(s),
                Ok(Err(e)) => {
                    shared.connect_failures.fetch_add(1, Ordering::Relaxed);
                    shared.note(Target::HttpEcho, Outcome::Transport, &format!("connect: {e}"));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(_) => {
                    shared.connect_failures.fetch_add(1, Ordering::Relaxed);
                    shared.note(Target::HttpEcho, Outcome::NoAnswer, "connect: no answer in 30 s");
                }
            }
            continue;
        };
        let target = Target::pick(i, tag, shared.demo);
        let issued = Instant::now();
        let (outcome, message) = issue(current, target, tag, i).await;
        shared.record(target, outcome, issued, message);
        i += 1;
        if outcome == Outcome::Transport
            && let Some(old) = session.take()
        {
            shared.reconnects.fetch_add(1, Ordering::Relaxed);
            let _ = tokio::time::timeout(Duration::from_secs(5), old.cancel()).await;
        }
    }
    session
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_mixes_every_request() {
        let picks: Vec<Target> = (0..20).map(|i| Target::pick(i, 3, true)).collect();
        let count = |target| picks.iter().filter(|&&t| t == target).count();
        assert_eq!(
            TARGETS.map(count),
            [8, 8, 2, 1, 1],
            "http, stdio, demo, list_tools, filter_tools"
        );
        let without_demo: Vec<Target> = (0..20).map(|i| Target::pick(i, 0, false)).collect();
        assert_eq!(without_demo.iter().filter(|&&t| t == Target::HttpEcho).count(), 9);
    }

    #[test]
    fn messages_fold_their_digits() {
        assert_eq!(fold("s12-c3405 failed after 30s"), "sN-cN failed after Ns");
    }
}
