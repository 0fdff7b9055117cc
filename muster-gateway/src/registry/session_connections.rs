//! [`SessionConnections`]: the connections each MCP session holds of its own (to the servers it
//! signed in to, or reaches with its caller's token), the catalogue each such session sees, when
//! each last made a request, and who is told when a session is forgotten.
//!
//! It knows nothing of the servers' definitions or of the catalogue's making: the registry
//! (`sessions`) combines it with the server table. Every lock here is held only for the map
//! operation itself; connections are closed after it is released.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

use muster_catalog::Catalog;
use muster_core::SessionId;

use crate::upstream::SharedConnection;

/// Told when the registry forgets a session's connections, for what sits above the registry
/// and keeps something per session (the sign-in services: grants, exchanged tokens).
pub trait SessionObserver: Send + Sync + std::fmt::Debug {
    /// `session`'s connections were closed. `ended`: its clients are gone for good, so what it
    /// alone held may go; else it was idle, and its next request connects it again.
    fn session_forgotten(&self, session: &SessionId, ended: bool);
}

/// The session side of the registry's state.
#[derive(Debug, Default)]
pub(crate) struct SessionConnections {
    /// By session, then server.
    connections: RwLock<BTreeMap<String, BTreeMap<String, SharedConnection>>>,
    /// The catalogue each session with connections sees, built on first use after a change.
    catalogs: RwLock<BTreeMap<String, Arc<Catalog>>>,
    /// When each session last made a request, for idle reaping.
    last_seen: Mutex<BTreeMap<String, Instant>>,
    /// Told when a session is forgotten.
    observers: RwLock<Vec<Arc<dyn SessionObserver>>>,
}

impl SessionConnections {
    /// The connections `session` holds, when it holds any.
    pub(crate) fn held_by(&self, session: &SessionId) -> Option<BTreeMap<String, SharedConnection>> {
        read(&self.connections)
            .get(session.as_str())
            .filter(|c| !c.is_empty())
            .cloned()
    }

    /// The connection `session` holds to `server`.
    pub(crate) fn get(&self, session: &SessionId, server: &str) -> Option<SharedConnection> {
        read(&self.connections)
            .get(session.as_str())
            .and_then(|c| c.get(server))
            .cloned()
    }

    /// Whether any session holds a connection to `server`.
    pub(crate) fn any_holds(&self, server: &str) -> bool {
        read(&self.connections).values().any(|c| c.contains_key(server))
    }

    /// Makes `conn` the connection `session` holds to `server`; the one it replaces is closed
    /// once the calls it carries have ended.
    pub(crate) fn put(&self, session: &SessionId, server: &str, conn: SharedConnection) {
        let previous = write(&self.connections)
            .entry(session.as_str().to_owned())
            .or_default()
            .insert(server.to_owned(), conn);
        if let Some(previous) = previous {
            // The calls it carries finish (each is bounded by the server's maxDuration).
            previous.close_when_idle(previous.max_duration());
        }
    }

    /// Drops and closes the connection `session` holds to `server`; whether it held one.
    pub(crate) fn remove(&self, session: &SessionId, server: &str) -> bool {
        let removed = write(&self.connections)
            .get_mut(session.as_str())
            .and_then(|c| c.remove(server));
        let held = removed.is_some();
        if let Some(conn) = removed {
            conn.close();
        }
        held
    }

    /// The catalogue built for `session` since its last change.
    pub(crate) fn cached_catalog(&self, session: &SessionId) -> Option<Arc<Catalog>> {
        read(&self.catalogs).get(session.as_str()).cloned()
    }

    /// Keeps `catalog` as what `session` sees until its next change.
    pub(crate) fn cache_catalog(&self, session: &SessionId, catalog: Arc<Catalog>) {
        write(&self.catalogs).insert(session.as_str().to_owned(), catalog);
    }

    /// Forgets the catalogue built for `session` (its connections changed).
    pub(crate) fn forget_catalog(&self, session: &SessionId) {
        write(&self.catalogs).remove(session.as_str());
    }

    /// Forgets every session's catalogue (the shared catalogue changed).
    pub(crate) fn forget_catalogs(&self) {
        write(&self.catalogs).clear();
    }

    /// Notes that `session` made a request now.
    pub(crate) fn touch(&self, session: &SessionId) {
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.as_str().to_owned(), Instant::now());
    }

    /// The sessions holding connections that made no request for `idle`.
    pub(crate) fn idle(&self, idle: Duration) -> Vec<SessionId> {
        let seen = self.last_seen.lock().unwrap_or_else(|e| e.into_inner());
        read(&self.connections)
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .filter(|(s, _)| seen.get(*s).is_none_or(|at| at.elapsed() >= idle))
            .map(|(s, _)| SessionId::new(s))
            .collect()
    }

    /// Every session with an entry of connections, by id.
    pub(crate) fn sessions(&self) -> Vec<SessionId> {
        read(&self.connections).keys().map(SessionId::new).collect()
    }

    /// Closes `session`'s connections and forgets it, telling each observer (`ended`: its
    /// clients are gone for good, else it was idle).
    pub(crate) fn forget(&self, session: &SessionId, ended: bool) {
        let dropped = write(&self.connections).remove(session.as_str());
        for conn in dropped.into_iter().flat_map(BTreeMap::into_values) {
            conn.close();
        }
        self.forget_catalog(session);
        let observers = read(&self.observers).clone();
        for observer in observers {
            observer.session_forgotten(session, ended);
        }
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session.as_str());
    }

    /// Tells `observer` of every session forgotten from now on.
    pub(crate) fn observe(&self, observer: Arc<dyn SessionObserver>) {
        write(&self.observers).push(observer);
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Told(Mutex<Vec<(String, bool)>>);

    impl SessionObserver for Told {
        fn session_forgotten(&self, session: &SessionId, ended: bool) {
            self.0
                .lock()
                .expect("not poisoned")
                .push((session.as_str().to_owned(), ended));
        }
    }

    #[test]
    fn forgetting_a_session_drops_its_catalogue_and_tells_every_observer() {
        let sessions = SessionConnections::default();
        let told = Arc::new(Told::default());
        sessions.observe(Arc::clone(&told) as _);
        let a = SessionId::new("a");
        sessions.cache_catalog(&a, Arc::new(Catalog::empty()));
        sessions.touch(&a);
        sessions.forget(&a, true);
        sessions.forget(&SessionId::new("b"), false);
        assert!(sessions.cached_catalog(&a).is_none());
        assert_eq!(
            *told.0.lock().expect("not poisoned"),
            vec![("a".to_owned(), true), ("b".to_owned(), false)]
        );
    }

    #[test]
    fn a_session_without_connections_is_never_idle_and_holds_nothing() {
        let sessions = SessionConnections::default();
        let a = SessionId::new("a");
        assert!(sessions.idle(Duration::ZERO).is_empty());
        assert!(sessions.held_by(&a).is_none());
        assert!(!sessions.remove(&a, "github"));
        assert!(!sessions.any_holds("github"));
    }
}
