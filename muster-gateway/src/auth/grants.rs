//! Which grant each session's connection carries, in this process.
//!
//! The grants themselves are in the sign-in state store, by owner and server
//! ([`owner_of`](muster_auth::state::owner_of)), each with a generation that a refresh advances.
//! A session connection records the owner and generation it was opened with (and the identity
//! sent along), so every session that uses a refreshed `subject` grant reconnects with the new
//! token on its next call. A connection is this process's, so this record is too.
//!
//! Connecting is one at a time per session and server ([`ConnectionGrants::connecting`]):
//! concurrent calls of a session that has to (re)connect (its first calls after a grant appeared
//! or was refreshed) make one connection, instead of each replacing the one before while the
//! others' calls run on it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use muster_core::SessionId;

/// Which grant a session's connection to a server was opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Used {
    pub(super) owner: String,
    pub(super) generation: u64,
    /// The fingerprint of the identity sent along (`forwardIdentity`), if any.
    pub(super) identity: Option<[u8; 32]>,
    /// When the access token it carries expires, if it says: a call that cannot read the grant
    /// goes on with the connection only until then.
    pub(super) expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Used {
    /// Whether the access token it carries has expired at `now`.
    pub(super) fn expired(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// A SHA-256 fingerprint of a secret, to tell whether a connection carries it without keeping it.
pub(super) fn fingerprint(secret: &muster_auth::Secret) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(secret.expose().as_bytes()).into()
}

/// What each session connection of this process carries, by session and server.
#[derive(Debug, Default)]
pub(super) struct ConnectionGrants {
    used: Mutex<HashMap<(String, String), Used>>,
    /// The connect lock of each session and server.
    connects: Mutex<ConnectLocks>,
}

/// The connect lock of each session and server.
type ConnectLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

impl ConnectionGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Used>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `session`'s connection to `server` carries `used`.
    pub(super) fn mark_used(&self, session: &SessionId, server: &str, used: Used) {
        self.lock()
            .insert((session.as_str().to_owned(), server.to_owned()), used);
    }

    /// What `session`'s connection to `server` carries.
    pub(super) fn used_by(&self, session: &SessionId, server: &str) -> Option<Used> {
        self.lock()
            .get(&(session.as_str().to_owned(), server.to_owned()))
            .cloned()
    }

    /// Waits until no other call connects `session` to `server`, and holds off the next one
    /// until the guard is dropped.
    pub(super) async fn connecting(&self, session: &SessionId, server: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = Arc::clone(
            self.connects
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((session.as_str().to_owned(), server.to_owned()))
                .or_default(),
        );
        lock.lock_owned().await
    }

    /// Forgets what `session`'s connections carry (they were closed).
    pub(super) fn forget(&self, session: &SessionId) {
        self.lock().retain(|(s, _), _| s != session.as_str());
        self.connects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(s, _), _| s != session.as_str());
    }

    /// Forgets the connections to `server` that carry `owner`'s grant (it is gone): their
    /// sessions.
    pub(super) fn take_users(&self, owner: &str, server: &str) -> Vec<SessionId> {
        let mut used = self.lock();
        let sessions: Vec<SessionId> = used
            .iter()
            .filter(|((_, s), u)| s == server && u.owner == owner)
            .map(|((session, _), _)| SessionId::new(session))
            .collect();
        for session in &sessions {
            used.remove(&(session.as_str().to_owned(), server.to_owned()));
        }
        sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(owner: &str, generation: u64) -> Used {
        Used {
            owner: owner.into(),
            generation,
            identity: None,
            expires_at: None,
        }
    }

    #[test]
    fn taking_a_grant_names_every_session_that_used_it() {
        let connections = ConnectionGrants::default();
        for s in ["a", "b"] {
            connections.mark_used(&SessionId::new(s), "github", used("subject-x", 1));
        }
        connections.mark_used(&SessionId::new("c"), "github", used("c", 9));
        let mut sessions = connections.take_users("subject-x", "github");
        sessions.sort();
        assert_eq!(sessions, vec![SessionId::new("a"), SessionId::new("b")]);
        assert!(connections.used_by(&SessionId::new("a"), "github").is_none());
        assert!(connections.used_by(&SessionId::new("c"), "github").is_some());
    }

    #[tokio::test]
    async fn one_call_at_a_time_connects_a_session_to_a_server() {
        let connections = ConnectionGrants::default();
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let held = connections.connecting(&a, "github").await;
        let same = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            connections.connecting(&a, "github"),
        );
        assert!(same.await.is_err(), "the same session and server wait");
        let other = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            connections.connecting(&b, "github"),
        );
        assert!(other.await.is_ok(), "another session does not");
        drop(held);
        let next = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            connections.connecting(&a, "github"),
        );
        assert!(next.await.is_ok(), "the next one goes once the first is done");
    }

    #[test]
    fn a_connections_token_has_expired_only_past_the_expiry_it_was_opened_with() {
        let now = chrono::Utc::now();
        let with = |expires_at| Used {
            expires_at,
            ..used("a", 1)
        };
        assert!(with(Some(now - chrono::TimeDelta::seconds(1))).expired(now));
        assert!(!with(Some(now + chrono::TimeDelta::seconds(1))).expired(now));
        assert!(!with(None).expired(now), "a token without an expiry does not expire");
    }

    #[test]
    fn a_closed_session_carries_nothing() {
        let connections = ConnectionGrants::default();
        connections.mark_used(&SessionId::new("a"), "github", used("a", 1));
        connections.mark_used(&SessionId::new("b"), "github", used("b", 2));
        connections.forget(&SessionId::new("a"));
        assert!(connections.used_by(&SessionId::new("a"), "github").is_none());
        assert_eq!(connections.used_by(&SessionId::new("b"), "github"), Some(used("b", 2)));
    }
}
