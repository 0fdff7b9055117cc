//! Which servers each owner holds grants for, as this process last read it from the sign-in
//! state store: so that a request that needs no sign-in reads nothing from the store (with
//! Valkey, no round trip).
//!
//! Every request asks which servers its caller holds grants for (to connect a new session of a
//! person to them), and every downstream call whether its caller holds a grant for the server.
//! Both are answered from here while the owner's entry is fresh. An entry is forgotten when this
//! process changes the owner's grants (a sign-in completed, a sign-out, an ended session), when a
//! notice tells of a sign-in completed on another replica ([`SignInNotices`]: every completed
//! sign-in is told), when a grant read finds the grant gone (signed out on another replica, or
//! expired), and after [`MAX_AGE`]: a notice that was lost (Valkey's pub/sub does not keep
//! messages for a replica that is not connected) is made up for within that.
//!
//! [`SignInNotices`]: muster_auth::state::SignInNotices

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use muster_auth::state::{Result, SignInStore};

/// How long an entry answers without asking the store again.
pub(super) const MAX_AGE: Duration = Duration::from_secs(30);

/// The servers of each owner's grants, as last read (see the [module](self)).
#[derive(Debug, Default)]
pub(super) struct GrantIndex {
    entries: Mutex<HashMap<String, Entry>>,
    /// Advanced by every change: a read that began before a change keeps nothing.
    changes: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    read_at: Instant,
    servers: Arc<[String]>,
}

impl GrantIndex {
    /// The servers `owner` holds grants for: from a fresh entry, else from `store` (kept).
    pub(super) async fn servers_of(&self, store: &dyn SignInStore, owner: &str) -> Result<Arc<[String]>> {
        if let Some(entry) = self.lock().get(owner)
            && entry.read_at.elapsed() < MAX_AGE
        {
            return Ok(Arc::clone(&entry.servers));
        }
        let before = self.changes.load(Ordering::Acquire);
        let servers: Arc<[String]> = store.servers_of(owner).await?.into();
        let mut entries = self.lock();
        if self.changes.load(Ordering::Acquire) == before {
            entries.insert(
                owner.to_owned(),
                Entry {
                    read_at: Instant::now(),
                    servers: Arc::clone(&servers),
                },
            );
        }
        Ok(servers)
    }

    /// Whether `owner` holds a grant for `server`, as [`Self::servers_of`] says.
    pub(super) async fn holds(&self, store: &dyn SignInStore, owner: &str, server: &str) -> Result<bool> {
        Ok(self.servers_of(store, owner).await?.iter().any(|s| s == server))
    }

    /// `owner`'s grants changed: the next question asks the store.
    pub(super) fn forget(&self, owner: &str) {
        let mut entries = self.lock();
        self.changes.fetch_add(1, Ordering::AcqRel);
        entries.remove(owner);
    }

    /// Anything may have changed (notices were missed): every next question asks the store.
    pub(super) fn forget_all(&self) {
        let mut entries = self.lock();
        self.changes.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use muster_auth::state::{MemorySignInStore, contract::sample_grant};

    use super::*;

    #[tokio::test]
    async fn an_answer_is_kept_until_the_owners_grants_change() {
        let store = MemorySignInStore::new();
        let index = GrantIndex::default();
        assert!(!index.holds(&store, "s1", "github").await.expect("read"));
        store.put_grant("s1", "github", sample_grant("t")).await.expect("put");
        assert!(
            !index.holds(&store, "s1", "github").await.expect("read"),
            "kept: the store is not asked again"
        );
        index.forget("s1");
        assert!(index.holds(&store, "s1", "github").await.expect("read"));
        store.remove_grant("s1", "github").await.expect("remove");
        index.forget_all();
        assert!(index.servers_of(&store, "s1").await.expect("read").is_empty());
    }
}
