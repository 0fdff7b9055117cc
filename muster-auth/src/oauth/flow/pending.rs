//! [`PendingTable`]: pending sign-ins in this process, by state, each until it is taken or
//! expires; with the latest one of each session and server.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

use super::PendingSignIn;

/// Pending sign-ins by state. A record is handed out by [`PendingTable::take`] once; one past
/// its `expires_at` is never handed out, and is dropped on the next [`PendingTable::put`].
#[derive(Debug, Default)]
pub(crate) struct PendingTable {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_state: HashMap<String, Entry>,
    /// The state of the latest sign-in of each (session, server).
    latest: HashMap<(String, String), String>,
}

#[derive(Debug)]
struct Entry {
    pending: PendingSignIn,
    deadline: Instant,
}

impl Entry {
    fn live(&self) -> bool {
        Instant::now() < self.deadline
    }
}

impl PendingTable {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `pending` by `state` until its `expires_at`, as the latest of its session and
    /// server; drops what expired.
    pub(crate) fn put(&self, state: &str, pending: PendingSignIn) {
        let lifetime = (pending.expires_at - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        let key = (pending.request.session.clone(), pending.request.server.clone());
        let mut inner = self.lock();
        inner.by_state.retain(|_, entry| entry.live());
        let Inner { by_state, latest } = &mut *inner;
        latest.retain(|_, state| by_state.contains_key(state));
        latest.insert(key, state.to_owned());
        by_state.insert(
            state.to_owned(),
            Entry {
                pending,
                deadline: Instant::now() + lifetime,
            },
        );
    }

    /// The sign-in of `state`, while it waits.
    pub(crate) fn get(&self, state: &str) -> Option<PendingSignIn> {
        self.lock()
            .by_state
            .get(state)
            .filter(|entry| entry.live())
            .map(|entry| entry.pending.clone())
    }

    /// The latest sign-in `session` started for `server`, with its state, while it waits.
    pub(crate) fn latest(&self, session: &str, server: &str) -> Option<(String, PendingSignIn)> {
        let inner = self.lock();
        let state = inner.latest.get(&(session.to_owned(), server.to_owned()))?;
        let entry = inner.by_state.get(state).filter(|entry| entry.live())?;
        Some((state.clone(), entry.pending.clone()))
    }

    /// Sets where the browser goes after the callback of `state`; whether it waits.
    pub(crate) fn set_redirect(&self, state: &str, redirect: &str) -> bool {
        match self.lock().by_state.get_mut(state).filter(|entry| entry.live()) {
            Some(entry) => {
                entry.pending.browser_redirect = Some(redirect.to_owned());
                true
            }
            None => false,
        }
    }

    /// Takes the sign-in of `state` away: the one caller that gets it, while it waits.
    pub(crate) fn take(&self, state: &str) -> Option<PendingSignIn> {
        self.lock()
            .by_state
            .remove(state)
            .filter(Entry::live)
            .map(|entry| entry.pending)
    }

    /// How many sign-ins wait; drops what expired.
    pub(crate) fn len(&self) -> usize {
        let mut inner = self.lock();
        inner.by_state.retain(|_, entry| entry.live());
        inner.by_state.len()
    }
}
