//! The last events of an SSE stream, numbered from 1, for a client that lost the stream to
//! resume it from the last event it got; and how long ended streams are kept. Both the session
//! manager's streams ([`sessions`](super::sessions)) and the calls answered in front of it
//! ([`session_calls`](super::session_calls)) keep their events in one, under the same policy
//! ([`MAX_KEPT`], [`RETAIN`], [`MAX_ENDED`]). The session manager forgets ended streams with
//! [`forget_ended`] when it opens one (its streams end inside their outbox, which does not know
//! the map); the calls answered in front, once a call, in the order they ended.
//!
//! ```ignore
//! let mut kept = Kept::default();
//! kept.push("a", 2);
//! kept.push("b", 2);
//! kept.push("c", 2); // "a" goes: at most two are kept
//! assert_eq!(kept.at_or_after(1), Some((2, "b")));
//! ```

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

/// At most this many events a stream has sent are kept (the last ones): a call reporting
/// progress for hours must not hold every report. A client resuming from an event no longer kept
/// gets the stream from the oldest one kept (what it misses is progress; the answer is last).
pub(crate) const MAX_KEPT: usize = 64;

/// How long a stream is kept after it ended, for a client that lost it (rmcp's).
pub const RETAIN: Duration = Duration::from_secs(60);

/// At most this many ended streams are kept per session (the oldest go first).
pub const MAX_ENDED: usize = 64;

/// Forgets the streams of `streams` (by number) that ended more than [`RETAIN`] ago, and the
/// oldest ended ones over [`MAX_ENDED`]; `ended` says when a stream ended, if it has.
pub(crate) fn forget_ended<T>(streams: &mut HashMap<u64, T>, ended: impl Fn(&T) -> Option<Instant>) {
    let mut done: Vec<(Instant, u64)> = streams
        .iter()
        .filter_map(|(n, stream)| ended(stream).map(|at| (at, *n)))
        .collect();
    if done.is_empty() {
        return;
    }
    done.sort_unstable();
    let now = Instant::now();
    let over = done.len().saturating_sub(MAX_ENDED);
    for (i, (at, n)) in done.into_iter().enumerate() {
        if i < over || now.duration_since(at) > RETAIN {
            streams.remove(&n);
        }
    }
}

/// The last events of a stream (each push says how many to keep).
#[derive(Debug)]
pub(crate) struct Kept<T> {
    events: VecDeque<T>,
    /// The index of `events[0]`.
    first: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self {
            events: VecDeque::new(),
            first: 1,
        }
    }
}

impl<T: Clone> Kept<T> {
    /// The index the next event pushed gets.
    pub(crate) fn next_index(&self) -> usize {
        self.first + self.events.len()
    }

    /// Adds `event` as the next one, keeping at most `keep` (at least one): the oldest go.
    pub(crate) fn push(&mut self, event: T, keep: usize) {
        while self.events.len() >= keep.max(1) {
            self.events.pop_front();
            self.first += 1;
        }
        self.events.push_back(event);
    }

    /// Event `index`, or the oldest one kept when it is no longer kept, with its index; `None`
    /// when it has not been pushed yet.
    pub(crate) fn at_or_after(&self, index: usize) -> Option<(usize, T)> {
        let at = index.max(self.first);
        let event = self.events.get(at - self.first)?;
        Some((at, event.clone()))
    }

    /// The events kept, the oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.events.iter()
    }

    /// How many events are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn a_stream_keeps_its_last_events_and_a_resume_from_before_them_starts_at_the_oldest() {
        const KEEP: usize = 8;
        let mut kept = Kept::default();
        assert_eq!((kept.next_index(), kept.at_or_after(1)), (1, None));
        for i in 1..=KEEP + 10 {
            assert_eq!(kept.next_index(), i);
            kept.push(i, KEEP);
        }
        assert_eq!(kept.len(), KEEP, "the oldest went");
        let oldest = 10 + 1;
        assert_eq!(kept.at_or_after(1), Some((oldest, oldest)));
        let last = KEEP + 10;
        assert_eq!(kept.at_or_after(last), Some((last, last)));
        assert_eq!(kept.at_or_after(last + 1), None, "not pushed yet");
        // Keeping fewer drops down to that many at the next push.
        kept.push(last + 1, 2);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.at_or_after(0), Some((last, last)));
    }
}
