//! Resumable streams of the calls answered in front of rmcp: event ids, and what a client that
//! lost a call's stream gets back when it asks for it again.
//!
//! A call's SSE stream starts with a priming event, as rmcp's streams do (SEP-1699): an empty
//! `data` with the id `call-N-0` and a `retry` of [`RETRY`]. Each event after it has the id
//! `call-N-I`, `N` numbering the session's calls and `I` the stream's events. The stream keeps
//! the last [`MAX_KEPT`] events it sent ([`Sent`]: no lock, no registration while it runs).
//! When it reaches its end (the answer went out), its events are kept in a [`Replay`] registered
//! in the session ([`Sent::finish`]); when it is dropped before (the client's connection broke),
//! the call runs on and its events go on into a [`Replay`] registered at once
//! ([`Sent::abandon`]). Either way the replay is kept after the call's end as the session
//! manager keeps its streams ([`Ended`]: for a minute, within a count and a size). A `GET` of the
//! session with `Last-Event-ID: call-N-I` then gets the events after `I`, and the rest as they
//! come ([`resume`]), as often as the client asks, as rmcp's session manager answers for the
//! calls it answers. A replay that is not there (forgotten, or the gateway has not yet seen the
//! connection go) gives an empty stream, as rmcp's resume of an unknown event does: the client
//! asks again after `retry`, and stops after its last attempt.
//!
//! ```text
//! data:
//! id: call-12-0
//! retry: 3000
//!
//! data: {"jsonrpc":"2.0","method":"notifications/progress","params":{...}}
//! id: call-12-1
//!
//! data: {"jsonrpc":"2.0","id":7,"result":{...}}
//! id: call-12-2
//! ```
//!
//! A client that got `call-12-1` and lost the stream sends `GET` with `Last-Event-ID: call-12-1`
//! and gets `call-12-2`, the answer.

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    body::{Body, Bytes},
    response::Response,
};
use http::{HeaderValue, header};
use serde::Serialize;
use tokio::sync::Notify;

use crate::http::{
    kept_events::{Ended, Kept, MAX_KEPT},
    sessions::DEFAULT_RETRY as RETRY,
};

const PREFIX: &str = "call-";

/// The call number and event index of an event id of ours (`call-N-I`).
pub(super) fn replay_event_id(id: &str) -> Option<(u64, usize)> {
    let (n, i) = id.strip_prefix(PREFIX)?.split_once('-')?;
    Some((n.parse().ok()?, i.parse().ok()?))
}

/// The replays of one session's calls.
#[derive(Debug, Default)]
pub(super) struct Replays {
    next: AtomicU64,
    open: Mutex<Open>,
}

/// The replays kept, and the order their calls ended in.
#[derive(Debug, Default)]
struct Open {
    replays: HashMap<u64, Arc<Replay>>,
    ended: Ended,
}

impl Replays {
    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, n: u64) -> Option<Arc<Replay>> {
        self.open().replays.get(&n).cloned()
    }

    /// Notes that `replay`'s call sent its last event.
    pub(super) fn end(&self, replay: &Replay) {
        let (at, bytes) = replay.end();
        let open = &mut *self.open();
        open.ended.push(at, replay.n, bytes, &mut open.replays);
    }
}

/// A call's stream as it goes out: its number in the session and the events sent so far. Kept
/// by the stream alone (no lock, no registration) until the stream breaks ([`Sent::abandon`]).
#[derive(Debug, Default)]
pub(super) struct Sent {
    n: u64,
    events: Kept<Bytes>,
}

impl Sent {
    /// The stream of the session's next call.
    pub(super) fn new(replays: &Replays) -> Self {
        Self {
            n: replays.next.fetch_add(1, Ordering::Relaxed),
            events: Kept::default(),
        }
    }

    /// `message` as the stream's next event, after the priming event when `primed` is false
    /// (kept without it: a client resuming has had it).
    pub(super) fn event(&mut self, message: &impl Serialize, primed: bool) -> Bytes {
        let (frame, priming) = frame(self.n, self.events.next_index(), message, primed);
        self.events.push(frame.slice(priming..), MAX_KEPT);
        frame
    }

    /// The priming event, and `then` after it.
    pub(super) fn primed(&self, then: &[u8]) -> Bytes {
        let mut frame = Vec::with_capacity(64 + then.len());
        write_priming(&mut frame, self.n);
        frame.extend_from_slice(then);
        Bytes::from(frame)
    }

    /// The replay of a stream that broke before its end, registered for the client to resume;
    /// the call's events go on into it, and [`Replays::end`] notes its end.
    pub(super) fn abandon(self, replays: &Replays) -> Arc<Replay> {
        self.register(replays, None)
    }

    /// Keeps the events of a stream that reached its end (its answer went out), for a client
    /// that lost it after all.
    pub(super) fn finish(self, replays: &Replays) {
        self.register(replays, Some(Instant::now()));
    }

    fn register(self, replays: &Replays, ended: Option<Instant>) -> Arc<Replay> {
        let bytes = size(&self.events);
        let replay = Arc::new(Replay {
            n: self.n,
            state: Mutex::new(State {
                events: self.events,
                ended,
            }),
            grown: Notify::new(),
        });
        let open = &mut *replays.open();
        open.replays.insert(replay.n, Arc::clone(&replay));
        match ended {
            Some(at) => open.ended.push(at, replay.n, bytes, &mut open.replays),
            None => open.ended.forget(Instant::now(), &mut open.replays),
        }
        replay
    }
}

/// The bytes of `events`.
fn size(events: &Kept<Bytes>) -> usize {
    events.iter().map(Bytes::len).sum()
}

/// Event `index` of call `n`: `message`, after the priming event when `primed` is false; and
/// the length of the priming event in it.
fn frame(n: u64, index: usize, message: &impl Serialize, primed: bool) -> (Bytes, usize) {
    let mut frame = Vec::with_capacity(256);
    if !primed {
        write_priming(&mut frame, n);
    }
    let priming = frame.len();
    frame.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut frame, message).expect("a JSON-RPC message serializes");
    write_id(&mut frame, n, index);
    frame.push(b'\n');
    (Bytes::from(frame), priming)
}

fn write_priming(frame: &mut Vec<u8>, n: u64) {
    frame.extend_from_slice(b"data: ");
    write_id(frame, n, 0);
    frame.extend_from_slice(b"retry: ");
    write_number(frame, u64::try_from(RETRY.as_millis()).unwrap_or(u64::MAX));
    frame.extend_from_slice(b"\n\n");
}

/// `\nid: call-N-I\n` (written without `fmt`, which cost ten times as much).
fn write_id(frame: &mut Vec<u8>, n: u64, index: usize) {
    frame.extend_from_slice(b"\nid: ");
    frame.extend_from_slice(PREFIX.as_bytes());
    write_number(frame, n);
    frame.push(b'-');
    write_number(frame, index as u64);
    frame.push(b'\n');
}

/// Writes `n` in decimal.
fn write_number(frame: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    frame.extend_from_slice(&digits[at..]);
}

/// The events of one call's stream, as sent (with their ids).
#[derive(Debug)]
pub(super) struct Replay {
    n: u64,
    state: Mutex<State>,
    grown: Notify,
}

#[derive(Debug, Default)]
struct State {
    events: Kept<Bytes>,
    /// When the call's last event was added.
    ended: Option<Instant>,
}

impl Replay {
    /// Adds `message` as the stream's next event (the stream was primed).
    pub(super) fn push(&self, message: &impl Serialize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (event, _) = frame(self.n, state.events.next_index(), message, true);
        state.events.push(event, MAX_KEPT);
        drop(state);
        self.grown.notify_waiters();
    }

    /// Notes that the call sent its last event ([`Replays::end`]); when, and the bytes of its
    /// events.
    fn end(&self) -> (Instant, usize) {
        let at = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.ended = Some(at);
        let bytes = size(&state.events);
        drop(state);
        self.grown.notify_waiters();
        (at, bytes)
    }

    /// Event `index` (1-based), or the oldest one kept after it was dropped, with its index;
    /// else (not sent yet) whether the stream has ended.
    fn event(&self, index: usize) -> Result<(usize, Bytes), bool> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.events.at_or_after(index).ok_or(state.ended.is_some())
    }
}

/// The answer to a `GET` with `Last-Event-ID: call-N-I`: the events of call `N` after `I`,
/// then the rest as they come, with a comment every `keep_alive` while none does; an empty
/// stream when the call's replay is gone.
pub(super) fn resume(replays: &Replays, n: u64, after: usize, keep_alive: Duration) -> Response {
    let replay = replays.find(n);
    let events = futures::stream::unfold((replay, after.saturating_add(1)), move |(replay, next)| {
        async move {
            let replay = replay?;
            loop {
                // Waiting starts before the look, so that an event added in between wakes it.
                let step = {
                    let grown = replay.grown.notified();
                    tokio::pin!(grown);
                    grown.as_mut().enable();
                    match replay.event(next) {
                        Ok((at, event)) => Some((at, event)),
                        // Everything reached this client (kept for another ask all the same).
                        Err(true) => return None,
                        Err(false) => match tokio::time::timeout(keep_alive, grown).await {
                            Ok(()) => continue,
                            Err(_) => None,
                        },
                    }
                };
                return match step {
                    Some((at, event)) => Some((Ok::<_, Infallible>(event), (Some(replay), at + 1))),
                    None => Some((Ok(Bytes::from_static(b":\n\n")), (Some(replay), next))),
                };
            }
        }
    });
    sse_response(Body::from_stream(events))
}

/// An SSE response of `body`, with rmcp's headers: `X-Accel-Buffering: no` keeps a proxy such
/// as nginx from holding a call's progress back until its answer.
pub(super) fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    response
}

const X_ACCEL_BUFFERING: header::HeaderName = header::HeaderName::from_static("x-accel-buffering");

#[cfg(test)]
mod tests {
    use rmcp::model::{NumberOrString, ServerJsonRpcMessage};

    use super::*;
    use crate::http::kept_events::{MAX_ENDED, MAX_ENDED_BYTES, RETAIN};

    fn message(n: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::CustomResult(rmcp::model::CustomResult(serde_json::json!({"n": n}))),
            NumberOrString::Number(n),
        )
    }

    #[test]
    fn events_are_numbered_after_the_priming_event() {
        let replays = Replays::default();
        let (first, mut second) = (Sent::new(&replays), Sent::new(&replays));
        assert_eq!((first.n, second.n), (0, 1));
        let event = String::from_utf8(second.event(&message(1), false).to_vec()).expect("text");
        assert_eq!(
            event,
            "data: \nid: call-1-0\nretry: 3000\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":1}}\nid: call-1-1\n\n"
        );
        let (_, kept) = second.events.at_or_after(1).expect("kept");
        assert!(kept.starts_with(b"data: {"), "kept without the priming event");
        let event = String::from_utf8(second.event(&message(2), true).to_vec()).expect("text");
        assert!(
            event.starts_with("data: {") && event.ends_with("\nid: call-1-2\n\n"),
            "{event}"
        );
        assert_eq!(
            &second.primed(b":\n\n")[..],
            b"data: \nid: call-1-0\nretry: 3000\n\n:\n\n"
        );
        // Once abandoned, the events go on with the next index.
        let replay = second.abandon(&replays);
        replay.push(&message(3));
        let (_, third) = replay.event(3).expect("the third event");
        assert!(String::from_utf8_lossy(&third).ends_with("\nid: call-1-3\n\n"));
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 3000, 1_234_567_890, u64::MAX] {
            let mut frame = Vec::new();
            write_number(&mut frame, n);
            assert_eq!(String::from_utf8(frame).expect("digits"), n.to_string());
        }
    }

    #[test]
    fn ids_of_others_are_not_ours() {
        for id in ["0", "3/12", "call-", "call-1", "call-x-1", "call-1-", "other-1-2"] {
            assert_eq!(replay_event_id(id), None, "{id}");
        }
        assert_eq!(replay_event_id("call-0-0"), Some((0, 0)));
        assert_eq!(replay_event_id("call-12-3"), Some((12, 3)));
    }

    #[test]
    fn ended_replays_are_forgotten_over_the_cap_the_oldest_first() {
        let replays = Replays::default();
        let running = Sent::new(&replays).abandon(&replays);
        let mut ended = Vec::new();
        for k in 0..MAX_ENDED + 20 {
            let mut sent = Sent::new(&replays);
            ended.push(sent.n);
            sent.event(&message(1), false);
            if k % 2 == 0 {
                sent.finish(&replays);
            } else {
                replays.end(&sent.abandon(&replays));
            }
        }
        let open = replays.open();
        assert!(open.replays.contains_key(&running.n), "a running call's replay stays");
        let kept: Vec<u64> = ended.iter().copied().filter(|n| open.replays.contains_key(n)).collect();
        assert_eq!(kept, ended[20..], "the last {MAX_ENDED} ended are kept");
    }

    #[test]
    fn ended_replays_are_forgotten_over_the_byte_budget_but_the_last() {
        let big = |k: i64| {
            ServerJsonRpcMessage::response(
                rmcp::model::ServerResult::CustomResult(rmcp::model::CustomResult(
                    serde_json::json!({"pad": "x".repeat(MAX_ENDED_BYTES / 4)}),
                )),
                NumberOrString::Number(k),
            )
        };
        let replays = Replays::default();
        let mut ended = Vec::new();
        for k in 0..10 {
            let mut sent = Sent::new(&replays);
            ended.push(sent.n);
            sent.event(&big(k), false);
            sent.finish(&replays);
        }
        let open = replays.open();
        let kept: Vec<u64> = ended.iter().copied().filter(|n| open.replays.contains_key(n)).collect();
        assert_eq!(kept, ended[7..], "three of a quarter of the budget and a bit each");
        assert!(open.ended.bytes() <= MAX_ENDED_BYTES, "{}", open.ended.bytes());
        drop(open);
        // One over the budget alone is kept all the same, until the next.
        let mut sent = Sent::new(&replays);
        let n = sent.n;
        sent.event(&big(0), false);
        sent.event(&big(1), true);
        sent.event(&big(2), true);
        sent.event(&big(3), true);
        sent.event(&big(4), true);
        sent.finish(&replays);
        let open = replays.open();
        assert_eq!(open.replays.keys().copied().collect::<Vec<_>>(), [n]);
    }

    #[test]
    fn ended_replays_are_forgotten_after_their_time() {
        let replays = Replays::default();
        let mut sent = Sent::new(&replays);
        sent.event(&message(1), false);
        let before = Instant::now();
        sent.finish(&replays);
        let after = Instant::now();
        let open = &mut *replays.open();
        open.ended.forget(before + RETAIN, &mut open.replays);
        assert_eq!(open.replays.len(), 1, "kept for all of RETAIN");
        open.ended
            .forget(after + RETAIN + Duration::from_millis(1), &mut open.replays);
        assert!(open.replays.is_empty(), "forgotten after");
    }

    #[tokio::test]
    async fn a_stream_that_reached_its_end_can_be_had_again() {
        use futures::StreamExt as _;
        let replays = Arc::new(Replays::default());
        let mut sent = Sent::new(&replays);
        sent.event(&message(1), false);
        sent.event(&message(2), true);
        let n = sent.n;
        sent.finish(&replays);
        for _ in 0..2 {
            let events: Vec<Bytes> = resume(&replays, n, 1, Duration::from_secs(30))
                .into_body()
                .into_data_stream()
                .map(|event| event.expect("bytes"))
                .collect()
                .await;
            assert_eq!(events.len(), 1, "{events:?}");
            assert!(String::from_utf8_lossy(&events[0]).ends_with("id: call-0-2\n\n"));
        }
    }

    #[tokio::test]
    async fn a_resumed_stream_sends_what_follows_its_last_event_and_waits_for_the_rest() {
        use futures::StreamExt as _;
        let replays = Arc::new(Replays::default());
        let mut sent = Sent::new(&replays);
        sent.event(&message(1), false);
        sent.event(&message(2), true);
        let replay = sent.abandon(&replays);
        let response = resume(&replays, replay.n, 1, Duration::from_secs(30));
        let mut body = response.into_body().into_data_stream();
        let second = body.next().await.expect("an event").expect("data");
        assert!(String::from_utf8_lossy(&second).ends_with("id: call-0-2\n\n"));
        // The third comes once the call sends it; then the stream ends with the call.
        let (later, later_replays) = (Arc::clone(&replay), Arc::clone(&replays));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            later.push(&message(3));
            later_replays.end(&later);
        });
        let third = body.next().await.expect("an event").expect("data");
        assert!(String::from_utf8_lossy(&third).ends_with("id: call-0-3\n\n"));
        assert!(body.next().await.is_none(), "the stream ends with the call");
        assert!(replays.find(replay.n).is_some(), "delivered, and kept for another ask");
        // A replay that is not there gives an empty stream.
        let gone = resume(&replays, 999, 0, Duration::from_secs(30));
        assert!(gone.into_body().into_data_stream().next().await.is_none());
        // So does an event past any there is (the largest index a client can send).
        let mut sent = Sent::new(&replays);
        sent.event(&message(1), false);
        let replay = sent.abandon(&replays);
        replays.end(&replay);
        let past = resume(&replays, replay.n, usize::MAX, Duration::from_secs(30));
        assert!(past.into_body().into_data_stream().next().await.is_none());
    }
}
