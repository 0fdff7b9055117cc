//! Resumable streams of the calls answered in front of rmcp: event ids, and what a client that
//! lost a call's stream gets back when it asks for it again.
//!
//! A call's SSE stream starts with a priming event, as rmcp's streams do (SEP-1699): an empty
//! `data` with the id `call-N-0` and a `retry` of [`RETRY`]. Each event after it has the id
//! `call-N-I`, `N` numbering the session's calls and `I` the stream's events. The stream keeps
//! the last [`MAX_KEPT`] events it sent ([`Sent`]: no lock, no registration; 1.5k instructions a
//! call, 1%, for all this). When it reaches its end (the answer went out), that is dropped with
//! it. When it is dropped before (the client's connection broke), the call runs on and its
//! events go on into a [`Replay`] registered in the session, kept for [`RETAIN`] after the call
//! ends. A `GET` of the session with `Last-Event-ID: call-N-I` then gets the events after `I`,
//! and the rest as they come ([`resume`]). A replay that is not there (the stream had reached
//! its end, more than [`RETAIN`] passed, or the gateway has not yet seen the connection go)
//! gives an empty stream, as rmcp's resume of an unknown event does: the client asks again after
//! `retry`, and stops after its last attempt.
//!
//! [`RETAIN`]: crate::http::kept::RETAIN
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
use rmcp::model::ServerJsonRpcMessage;
use tokio::sync::Notify;

use crate::http::{
    kept::{Kept, MAX_KEPT, forget_ended},
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
    open: Mutex<HashMap<u64, Arc<Replay>>>,
}

impl Replays {
    fn find(&self, n: u64) -> Option<Arc<Replay>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).get(&n).cloned()
    }

    fn close(&self, n: u64) {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&n);
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

    /// `message` as the stream's next event, after the priming event when `primed` is false.
    pub(super) fn event(&mut self, message: &ServerJsonRpcMessage, primed: bool) -> Bytes {
        let event = frame(self.n, self.events.next_index(), message, primed);
        self.events.push(event.clone(), MAX_KEPT);
        event
    }

    /// The priming event, and `then` after it.
    pub(super) fn primed(&self, then: &[u8]) -> Bytes {
        let mut frame = Vec::with_capacity(64 + then.len());
        write_priming(&mut frame, self.n);
        frame.extend_from_slice(then);
        Bytes::from(frame)
    }

    /// The replay of a stream that broke before its end, registered for the client to resume
    /// (ended replays past [`RETAIN`](crate::http::kept::RETAIN) are forgotten).
    pub(super) fn abandon(self, replays: &Replays) -> Arc<Replay> {
        let replay = Arc::new(Replay {
            n: self.n,
            state: Mutex::new(State {
                events: self.events,
                ended: None,
            }),
            grown: Notify::new(),
        });
        let mut open = replays.open.lock().unwrap_or_else(|e| e.into_inner());
        forget_ended(&mut open, |replay| replay.ended());
        open.insert(self.n, Arc::clone(&replay));
        replay
    }
}

/// Event `index` of call `n`: `message`, after the priming event when `primed` is false.
fn frame(n: u64, index: usize, message: &ServerJsonRpcMessage, primed: bool) -> Bytes {
    let mut frame = Vec::with_capacity(256);
    if !primed {
        write_priming(&mut frame, n);
    }
    frame.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut frame, message).expect("a JSON-RPC message serializes");
    write_id(&mut frame, n, index);
    frame.push(b'\n');
    Bytes::from(frame)
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
    pub(super) fn push(&self, message: &ServerJsonRpcMessage) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let event = frame(self.n, state.events.next_index(), message, true);
        state.events.push(event, MAX_KEPT);
        drop(state);
        self.grown.notify_waiters();
    }

    /// Notes that the call sent its last event.
    pub(super) fn end(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).ended = Some(Instant::now());
        self.grown.notify_waiters();
    }

    fn ended(&self) -> Option<Instant> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).ended
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
pub(super) fn resume(replays: &Arc<Replays>, n: u64, after: usize, keep_alive: Duration) -> Response {
    let replay = replays.find(n);
    let replays = Arc::clone(replays);
    let events = futures::stream::unfold((replay, after.saturating_add(1)), move |(replay, next)| {
        let replays = Arc::clone(&replays);
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
                        Err(true) => {
                            // Everything reached this client.
                            replays.close(replay.n);
                            return None;
                        }
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
    use rmcp::model::NumberOrString;

    use super::*;
    use crate::http::kept::MAX_ENDED;

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
    fn ended_replays_are_forgotten_after_their_time_or_over_the_cap() {
        let replays = Replays::default();
        let running = Sent::new(&replays).abandon(&replays);
        let mut ended = Vec::new();
        for _ in 0..MAX_ENDED + 20 {
            let replay = Sent::new(&replays).abandon(&replays);
            replay.end();
            ended.push(replay.n);
        }
        let _ = Sent::new(&replays).abandon(&replays); // forgets
        let open = replays.open.lock().expect("unpoisoned");
        assert!(open.contains_key(&running.n), "a running call's replay stays");
        let kept = ended.iter().filter(|n| open.contains_key(n)).count();
        assert!(kept <= MAX_ENDED, "{kept} ended replays kept");
        assert!(
            open.contains_key(ended.last().expect("some")),
            "the newest ended replay is kept"
        );
        assert!(!open.contains_key(&ended[0]), "the oldest ended replay is forgotten");
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
        let later = Arc::clone(&replay);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            later.push(&message(3));
            later.end();
        });
        let third = body.next().await.expect("an event").expect("data");
        assert!(String::from_utf8_lossy(&third).ends_with("id: call-0-3\n\n"));
        assert!(body.next().await.is_none(), "the stream ends with the call");
        assert!(replays.find(replay.n).is_none(), "delivered: forgotten");
        // A replay that is gone gives an empty stream.
        let gone = resume(&replays, replay.n, 0, Duration::from_secs(30));
        assert!(gone.into_body().into_data_stream().next().await.is_none());
        // So does an event past any there is (the largest index a client can send).
        let mut sent = Sent::new(&replays);
        sent.event(&message(1), false);
        let replay = sent.abandon(&replays);
        replay.end();
        let past = resume(&replays, replay.n, usize::MAX, Duration::from_secs(30));
        assert!(past.into_body().into_data_stream().next().await.is_none());
    }
}
