//! The grants people hold, by owner and server, and which grant each session's connection
//! carries.
//!
//! A grant's owner follows the server's `grantScope` ([`owner_of`]): the session that signed
//! in (`session`, the default; behind the front door the session is the caller's principal), or
//! the person (`subject`: the issuer and subject the front door authenticated, so every session
//! of that person reuses it until `core_auth_logout`). A caller without a principal has no
//! subject, so a `subject` grant falls back to its session.
//!
//! Each stored grant has a generation that a refresh advances; a session connection records the
//! generation it was opened with, so every session that uses a refreshed `subject` grant
//! reconnects with the new token on its next call.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use muster_auth::oauth::{
    grant::Grant,
    store::{EncryptedGrantStore, GrantStoreError},
};
use muster_core::{Principal, SessionId, crd::GrantScope};

/// The owner of a grant for a server of `scope`, obtained by `session` with `principal`.
pub(super) fn owner_of(session: &SessionId, principal: Option<&Principal>, scope: GrantScope) -> String {
    match (scope, principal) {
        (GrantScope::Subject, Some(p)) => {
            use sha2::{Digest, Sha256};
            let mut digest = Sha256::new();
            for part in [p.issuer.as_deref().unwrap_or_default(), p.subject.as_str()] {
                digest.update(part.as_bytes());
                digest.update([0]);
            }
            let hex: String = digest.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!("{SUBJECT_PREFIX}{hex}")
        }
        _ => session.as_str().to_owned(),
    }
}

const SUBJECT_PREFIX: &str = "subject-";

/// Whether grants of `owner` outlive a transport: a person (`subject`) or a principal's session,
/// which come back after a restart, unlike a transport session.
pub(super) fn is_durable(owner: &str) -> bool {
    owner.starts_with(SUBJECT_PREFIX) || owner.starts_with("principal-")
}

/// A grant with its generation.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) grant: Grant,
    pub(super) generation: u64,
}

/// Which grant a session's connection to a server was opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Used {
    pub(super) owner: String,
    pub(super) generation: u64,
    /// The fingerprint of the identity sent along (`forwardIdentity`), if any.
    pub(super) identity: Option<[u8; 32]>,
}

/// A SHA-256 fingerprint of a secret, to tell whether a connection carries it without keeping it.
pub(super) fn fingerprint(secret: &muster_auth::Secret) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(secret.expose().as_bytes()).into()
}

/// The grants, and what each session connection uses.
#[derive(Debug, Default)]
pub(super) struct GrantBook {
    grants: Mutex<BTreeMap<(String, String), Held>>,
    used: Mutex<HashMap<(String, String), Used>>,
    next_generation: std::sync::atomic::AtomicU64,
    /// Where durable owners' grants are kept across restarts, when configured.
    store: Option<EncryptedGrantStore>,
}

impl GrantBook {
    /// A book kept in `store`, with the grants it holds.
    pub(super) fn persisted(store: EncryptedGrantStore) -> Result<Self, GrantStoreError> {
        let stored = store.load_all()?;
        let book = Self {
            store: Some(store),
            ..Self::default()
        };
        for kept in stored {
            book.remember(&kept.owner, &kept.server, kept.grant);
        }
        Ok(book)
    }

    /// The grant `owner` holds for `server`.
    pub(super) fn get(&self, owner: &str, server: &str) -> Option<Held> {
        self.lock_grants().get(&(owner.to_owned(), server.to_owned())).cloned()
    }

    /// Keeps `grant` as `owner`'s for `server` (in the store too, for a durable owner); its new
    /// generation.
    pub(super) fn put(&self, owner: &str, server: &str, grant: Grant) -> u64 {
        if let Some(store) = &self.store
            && is_durable(owner)
            && let Err(e) = store.save(owner, server, &grant)
        {
            tracing::warn!(server, error = %e, "the grant is kept in memory only");
        }
        self.remember(owner, server, grant)
    }

    fn remember(&self, owner: &str, server: &str, grant: Grant) -> u64 {
        let generation = self.next_generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.lock_grants()
            .insert((owner.to_owned(), server.to_owned()), Held { grant, generation });
        generation
    }

    /// Removes `owner`'s grant for `server`, with the sessions whose connections used it.
    pub(super) fn take(&self, owner: &str, server: &str) -> (Option<Grant>, Vec<SessionId>) {
        let grant = self
            .lock_grants()
            .remove(&(owner.to_owned(), server.to_owned()))
            .map(|h| h.grant);
        if let Some(store) = &self.store
            && is_durable(owner)
            && let Err(e) = store.remove(owner, server)
        {
            tracing::warn!(server, error = %e, "the grant could not be removed from the store");
        }
        let mut used = self.lock_used();
        let sessions: Vec<SessionId> = used
            .iter()
            .filter(|((_, s), u)| s == server && u.owner == owner)
            .map(|((session, _), _)| SessionId::new(session))
            .collect();
        for session in &sessions {
            used.remove(&(session.as_str().to_owned(), server.to_owned()));
        }
        (grant, sessions)
    }

    /// The servers `owner` holds grants for.
    pub(super) fn servers_of(&self, owner: &str) -> Vec<String> {
        self.lock_grants()
            .range((owner.to_owned(), String::new())..)
            .take_while(|((o, _), _)| o == owner)
            .map(|((_, server), _)| server.clone())
            .collect()
    }

    /// Records that `session`'s connection to `server` carries `used`.
    pub(super) fn mark_used(&self, session: &SessionId, server: &str, used: Used) {
        self.lock_used()
            .insert((session.as_str().to_owned(), server.to_owned()), used);
    }

    /// What `session`'s connection to `server` carries.
    pub(super) fn used_by(&self, session: &SessionId, server: &str) -> Option<Used> {
        self.lock_used()
            .get(&(session.as_str().to_owned(), server.to_owned()))
            .cloned()
    }

    /// Forgets what `session`'s connections carry (they were closed).
    pub(super) fn forget_used(&self, session: &SessionId) {
        self.lock_used().retain(|(s, _), _| s != session.as_str());
    }

    /// Forgets what `session`'s connections carry (its connections are gone) and hands back the
    /// grants only it owned (its own `session` grants, for a transport session that ended).
    pub(super) fn end_session(&self, session: &SessionId) -> Vec<(String, Grant)> {
        self.lock_used().retain(|(s, _), _| s != session.as_str());
        if is_durable(session.as_str()) {
            return Vec::new();
        }
        let mut grants = self.lock_grants();
        let servers: Vec<String> = grants
            .keys()
            .filter(|(owner, _)| owner == session.as_str())
            .map(|(_, server)| server.clone())
            .collect();
        servers
            .into_iter()
            .filter_map(|server| {
                grants
                    .remove(&(session.as_str().to_owned(), server.clone()))
                    .map(|h| (server, h.grant))
            })
            .collect()
    }

    fn lock_grants(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Held>> {
        self.grants.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_used(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Used>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use muster_auth::{Secret, oauth::registration::ClientRegistration};

    use super::*;

    fn grant(token: &str) -> Grant {
        Grant {
            access_token: Secret::new(token),
            refresh_token: None,
            expires_at: None,
            scope: None,
            issuer: "https://idp".into(),
            token_endpoint: "https://idp/token".into(),
            revocation_endpoint: None,
            client: ClientRegistration::pre_registered("muster".to_owned(), None),
            resource: "https://mcp".into(),
        }
    }

    fn person(sub: &str) -> Principal {
        Principal::new(sub).with_issuer("https://idp")
    }

    #[test]
    fn a_subject_grant_belongs_to_the_person_a_session_grant_to_the_session() {
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let alice = person("alice");
        let subject = owner_of(&a, Some(&alice), GrantScope::Subject);
        assert_eq!(subject, owner_of(&b, Some(&alice), GrantScope::Subject));
        assert_ne!(subject, owner_of(&a, Some(&person("bob")), GrantScope::Subject));
        assert_eq!(owner_of(&a, Some(&alice), GrantScope::Session), "a");
        // Without a principal there is no person: the session owns it.
        assert_eq!(owner_of(&a, None, GrantScope::Subject), "a");
        assert!(is_durable(&subject) && !is_durable("a") && is_durable("principal-00"));
    }

    #[test]
    fn taking_a_grant_names_every_session_that_used_it() {
        let book = GrantBook::default();
        let generation = book.put("subject-x", "github", grant("t1"));
        for s in ["a", "b"] {
            book.mark_used(
                &SessionId::new(s),
                "github",
                Used {
                    owner: "subject-x".into(),
                    generation,
                    identity: None,
                },
            );
        }
        book.mark_used(
            &SessionId::new("c"),
            "github",
            Used {
                owner: "c".into(),
                generation: 9,
                identity: None,
            },
        );
        let (taken, mut sessions) = book.take("subject-x", "github");
        assert!(taken.is_some());
        sessions.sort();
        assert_eq!(sessions, vec![SessionId::new("a"), SessionId::new("b")]);
        assert!(book.used_by(&SessionId::new("c"), "github").is_some());
    }

    #[test]
    fn a_refresh_advances_the_generation() {
        let book = GrantBook::default();
        let first = book.put("a", "github", grant("t1"));
        let second = book.put("a", "github", grant("t2"));
        assert!(second > first);
        assert_eq!(book.get("a", "github").map(|h| h.generation), Some(second));
        assert_eq!(book.servers_of("a"), vec!["github".to_owned()]);
        assert!(book.servers_of("ab").is_empty());
    }

    #[test]
    fn an_ended_transport_session_hands_back_its_own_grants_only() {
        let book = GrantBook::default();
        book.put("a", "github", grant("t1"));
        book.put("subject-x", "slack", grant("t2"));
        book.put("principal-1", "jira", grant("t3"));
        let gone = book.end_session(&SessionId::new("a"));
        assert_eq!(gone.len(), 1);
        assert!(book.get("a", "github").is_none());
        assert!(book.end_session(&SessionId::new("principal-1")).is_empty());
        assert!(book.get("principal-1", "jira").is_some());
    }
}
