//! One SSE stream of a session, as the gateway sends it: the events, kept for a client that
//! loses the stream, and the readers that take them (each the body of an HTTP response).
//!
//! An [`Outbox`] is either a request's stream (the answer to a POST: its progress, the server's
//! requests that belong to it, and its answer, after which it ends) or the session's standalone
//! stream (the answer to a GET: everything else the server sends). Events go to one reader, the
//! primary; a new primary (a client resuming) takes over from the one before, which ends. The
//! standalone stream also has shadows: a second GET while the first still reads gets a stream
//! of keep-alives only, as rmcp's session manager gives, so that two `EventSource`s of one
//! client do not replace each other in a loop.
//!
//! Events are pushed without waiting: there is no channel between the session and the response.
//! What the primary has not read yet is kept (up to [`MAX_UNREAD`]), and of what it read, the
//! last [`MAX_KEPT`] (for resuming).
//!
//! ```ignore
//! let outbox = Outbox::request(7, Some(Duration::from_secs(3)));
//! let mut reader = outbox.reader(0, true); // primed: `req-7-0`, retry 3 s
//! outbox.push(answer);                     // `req-7-1`
//! outbox.end();
//! ```

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
    time::Duration,
};

use futures::Stream;
use rmcp::{model::ServerJsonRpcMessage, transport::streamable_http_server::session::ServerSseMessage};

use crate::http::kept_events::Kept;
pub(super) use crate::http::kept_events::MAX_KEPT;

/// At most this many events the primary reader has not read yet are kept (the oldest go first):
/// a client that stops reading its standalone stream does not grow the gateway without bound.
pub(super) const MAX_UNREAD: usize = 1024;

/// At most this many shadow streams per standalone stream (the oldest end first), as rmcp's.
const MAX_SHADOWS: usize = 32;

/// The prefix of a request stream's event ids (`req-N-I`); the standalone stream's are `I`.
const REQUEST_PREFIX: &str = "req-";

/// Where an event id points: the standalone stream, or request stream `N`; and the index of the
/// event in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventId {
    Standalone(usize),
    Request(u64, usize),
}

impl EventId {
    /// An event id of this session manager's forms (`I`, `req-N-I`).
    pub(super) fn parse(id: &str) -> Option<Self> {
        match id.strip_prefix(REQUEST_PREFIX) {
            Some(rest) => {
                let (n, i) = rest.split_once('-')?;
                Some(Self::Request(n.parse().ok()?, i.parse().ok()?))
            }
            None => Some(Self::Standalone(id.parse().ok()?)),
        }
    }

    fn render(self) -> String {
        match self {
            Self::Standalone(i) => i.to_string(),
            Self::Request(n, i) => format!("{REQUEST_PREFIX}{n}-{i}"),
        }
    }
}

/// One stream's events and readers.
#[derive(Debug)]
pub(super) struct Outbox {
    /// `None` for the standalone stream.
    request: Option<u64>,
    /// The priming event's `retry`, for a request stream's first reader.
    retry: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    events: Kept<ServerSseMessage>,
    /// The last event was pushed (a request stream's answer), or the session ended.
    ended: bool,
    /// The reader events go to.
    primary: Option<u64>,
    /// The index of the next event the primary reads.
    unread_from: usize,
    /// The live readers (primary and shadows) by number, with the waker of each waiting one.
    readers: HashMap<u64, Option<Waker>>,
    next_reader: u64,
}

impl Outbox {
    /// The stream of request stream `n` of its session, primed with `retry`.
    pub(super) fn request(n: u64, retry: Option<Duration>) -> Arc<Self> {
        Arc::new(Self {
            request: Some(n),
            retry,
            state: Mutex::default(),
        })
    }

    /// A session's standalone stream (rmcp primes its GET itself, with id `0`).
    pub(super) fn standalone() -> Arc<Self> {
        Arc::new(Self {
            request: None,
            retry: None,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn id(&self, index: usize) -> EventId {
        match self.request {
            Some(n) => EventId::Request(n, index),
            None => EventId::Standalone(index),
        }
    }

    /// Adds `message` as the next event and wakes the primary reader.
    pub(super) fn push(&self, message: ServerJsonRpcMessage) {
        let mut state = self.state();
        let index = state.events.next_index();
        let event = ServerSseMessage::new(self.id(index).render(), message);
        let unread = if state.primary.is_some() {
            index.saturating_sub(state.unread_from)
        } else {
            0
        };
        state.events.push(event, (unread + MAX_KEPT).min(MAX_UNREAD + MAX_KEPT));
        if let Some(waker) = state
            .primary
            .and_then(|p| state.readers.get_mut(&p))
            .and_then(Option::take)
        {
            drop(state);
            waker.wake();
        }
    }

    /// Ends the stream: its readers end once they have read what is there.
    pub(super) fn end(&self) {
        let mut state = self.state();
        state.ended = true;
        let wakers: Vec<Waker> = state.readers.values_mut().filter_map(Option::take).collect();
        drop(state);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether a reader (a response streaming this) is attached.
    pub(super) fn being_read(&self) -> bool {
        !self.state().readers.is_empty()
    }

    /// Whether the primary reader is attached.
    pub(super) fn has_primary(&self) -> bool {
        self.state().primary.is_some()
    }

    /// A reader of the events after index `after`, primed when `primed` (a request stream's
    /// first reader); it takes over from the primary before, which ends.
    pub(super) fn reader(self: &Arc<Self>, after: usize, primed: bool) -> Reader {
        let mut state = self.state();
        let id = state.next_reader;
        state.next_reader += 1;
        let replaced = state
            .primary
            .replace(id)
            .and_then(|p| state.readers.remove(&p))
            .flatten();
        state.readers.insert(id, None);
        state.unread_from = after.saturating_add(1);
        drop(state);
        if let Some(waker) = replaced {
            waker.wake();
        }
        let prime = match (primed, self.retry) {
            (true, Some(retry)) => Some(ServerSseMessage::priming(self.id(0).render(), retry)),
            _ => None,
        };
        Reader {
            outbox: Arc::clone(self),
            id,
            next: after.saturating_add(1),
            prime,
        }
    }

    /// A reader that gets no events, only rmcp's keep-alives, and ends with the stream.
    pub(super) fn shadow(self: &Arc<Self>) -> Reader {
        let mut state = self.state();
        let id = state.next_reader;
        state.next_reader += 1;
        let shadows = state.readers.len() - usize::from(state.primary.is_some());
        let mut evicted = None;
        if shadows >= MAX_SHADOWS {
            let primary = state.primary;
            let oldest = state.readers.keys().copied().filter(|r| Some(*r) != primary).min();
            evicted = oldest.and_then(|r| state.readers.remove(&r)).flatten();
        }
        state.readers.insert(id, None);
        drop(state);
        if let Some(waker) = evicted {
            waker.wake();
        }
        Reader {
            outbox: Arc::clone(self),
            id,
            next: usize::MAX,
            prime: None,
        }
    }
}

/// A response's view of an [`Outbox`]: the events from where it started, until the stream ends
/// or another reader takes over.
#[derive(Debug)]
pub(super) struct Reader {
    outbox: Arc<Outbox>,
    id: u64,
    next: usize,
    prime: Option<ServerSseMessage>,
}

impl Stream for Reader {
    type Item = ServerSseMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        let this = self.get_mut();
        if let Some(prime) = this.prime.take() {
            return Poll::Ready(Some(prime));
        }
        let mut state = this.outbox.state();
        if !state.readers.contains_key(&this.id) {
            // Another reader took over, or this shadow was one too many.
            return Poll::Ready(None);
        }
        if state.primary == Some(this.id)
            && let Some((at, event)) = state.events.at_or_after(this.next)
        {
            this.next = at + 1;
            state.unread_from = this.next;
            return Poll::Ready(Some(event));
        }
        if state.ended {
            return Poll::Ready(None);
        }
        state.readers.insert(this.id, Some(cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.outbox.state();
        state.readers.remove(&self.id);
        if state.primary == Some(self.id) {
            state.primary = None;
        }
    }
}
