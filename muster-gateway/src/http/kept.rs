//! The last events of an SSE stream, numbered from 1, for a client that lost the stream to
//! resume it from the last event it got. Both the session manager's streams
//! ([`sessions`](super::sessions)) and the calls answered in front of it
//! ([`session_calls`](super::session_calls)) keep their events in one.
//!
//! ```ignore
//! let mut kept = Kept::default();
//! kept.push("a", 2);
//! kept.push("b", 2);
//! kept.push("c", 2); // "a" goes: at most two are kept
//! assert_eq!(kept.at_or_after(1), Some((2, "b")));
//! ```

use std::collections::VecDeque;

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
