//! The last events of an SSE stream, numbered from 1, for a client that lost the stream to
//! resume it from the last event it got; and which ended streams are kept. Both the session
//! manager's streams ([`sessions`](super::sessions)) and the calls answered in front of it
//! ([`session_calls`](super::session_calls)) keep their events in a [`Kept`], and forget their
//! ended streams through an [`Ended`], under one policy: [`MAX_KEPT`] events a stream, ended
//! streams for [`RETAIN`], at most [`MAX_ENDED`] of a session's, and at most [`MAX_ENDED_BYTES`]
//! of their events where those are counted (the calls answered in front count their SSE bytes;
//! the session manager's events are typed messages, and it counts none).
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
pub(crate) const RETAIN: Duration = Duration::from_secs(60);

/// At most this many ended streams are kept per session (the oldest go first).
pub(crate) const MAX_ENDED: usize = 64;

/// At most this many bytes of events of a session's ended streams are kept: about a hundred
/// small answers (an `echo`'s is 300 bytes), a few large ones (a `list_tools` page is 10 KB and
/// more). A client resuming asks for the calls it had in flight when its connection broke: the
/// last ones. Kept whole for 60 s, 64 answers of a busy session took 110 KB each of 50 sessions
/// in the soak.
pub(crate) const MAX_ENDED_BYTES: usize = 32 * 1024;

/// A session's ended streams, in the order they ended, so that the oldest are forgotten first
/// without a scan: those ended more than [`RETAIN`] ago, those over [`MAX_ENDED`], and the oldest
/// while their events take more than [`MAX_ENDED_BYTES`] (the last one stays whatever its size).
#[derive(Debug, Default)]
pub(crate) struct Ended {
    /// When each ended, its number, and the bytes of its events.
    order: VecDeque<(Instant, u64, usize)>,
    bytes: usize,
}

impl Ended {
    /// Notes that stream `n`, whose events take `bytes` (0 where they are not counted), ended
    /// `at`; then forgets from `streams` what is over.
    pub(crate) fn push<T>(&mut self, at: Instant, n: u64, bytes: usize, streams: &mut HashMap<u64, T>) {
        self.order.push_back((at, n, bytes));
        self.bytes += bytes;
        self.forget(at, streams);
    }

    /// The bytes of the events of the ended streams kept.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets from `streams` the ended ones past their time or over the bounds, as of `now`.
    pub(crate) fn forget<T>(&mut self, now: Instant, streams: &mut HashMap<u64, T>) {
        while let Some(&(at, n, bytes)) = self.order.front() {
            let over = self.order.len() > MAX_ENDED || (self.bytes > MAX_ENDED_BYTES && self.order.len() > 1);
            if !over && now.saturating_duration_since(at) <= RETAIN {
                break;
            }
            self.order.pop_front();
            self.bytes -= bytes;
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
    use super::*;

    #[test]
    fn ended_streams_are_forgotten_the_oldest_first_over_the_count() {
        let mut streams: HashMap<u64, ()> = (0..100).map(|n| (n, ())).collect();
        let mut ended = Ended::default();
        let now = Instant::now();
        for n in 0..80 {
            ended.push(now, n, 10, &mut streams);
        }
        let mut kept: Vec<u64> = streams.keys().copied().collect();
        kept.sort_unstable();
        let expected: Vec<u64> = (80 - MAX_ENDED as u64..100).collect();
        assert_eq!(kept, expected, "the last {MAX_ENDED} ended, and those not ended, stay");
    }

    #[test]
    fn ended_streams_are_forgotten_over_the_bytes_but_the_last() {
        let mut streams: HashMap<u64, ()> = (0..5).map(|n| (n, ())).collect();
        let mut ended = Ended::default();
        let now = Instant::now();
        let quarter = MAX_ENDED_BYTES / 4 + 1;
        for n in 0..4 {
            ended.push(now, n, quarter, &mut streams);
        }
        assert_eq!(streams.len(), 4, "the first went: four quarters and a bit are over");
        assert!(!streams.contains_key(&0));
        ended.push(now, 4, MAX_ENDED_BYTES * 2, &mut streams);
        assert_eq!(streams.keys().copied().collect::<Vec<_>>(), [4], "one over alone stays");
    }

    #[test]
    fn ended_streams_are_forgotten_after_their_time() {
        let mut streams: HashMap<u64, ()> = (0..2).map(|n| (n, ())).collect();
        let mut ended = Ended::default();
        let at = Instant::now();
        ended.push(at, 0, 0, &mut streams);
        ended.forget(at + RETAIN, &mut streams);
        assert_eq!(streams.len(), 2, "kept for all of RETAIN");
        ended.forget(at + RETAIN + Duration::from_millis(1), &mut streams);
        assert_eq!(streams.keys().copied().collect::<Vec<_>>(), [1], "forgotten after");
    }

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
