//! [`MemorySignInStore`]: the sign-in state of one process, in memory, with people's grants
//! optionally kept in an encrypted grant file store.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    fmt,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;

use super::{
    Attempt, ExchangeEntry, HeldGrant, RefreshGuard, Result, SignInStore, is_durable_owner,
    locks::{GrantKey, KeyedLocks},
};
use crate::oauth::{
    flow::{PendingSignIn, PendingTable},
    grant::Grant,
    registration::ClientRegistration,
    store::{EncryptedGrantStore, GrantStoreError},
};

/// The sign-in state of one process: everything in memory, nothing shared with another process.
/// Never fails.
///
/// With a grant file store ([`MemorySignInStore::with_grant_file`]) the grants of durable owners
/// ([`is_durable_owner`]: people and principals) are also written to it, and read back when the
/// store is made, so they survive a restart; a grant the file store cannot write is kept in
/// memory (with a warning). The file store's calls block on file I/O, as they did before this
/// store existed; they are rare (a sign-in, a refresh, a sign-out).
#[derive(Default)]
pub struct MemorySignInStore {
    pending: PendingTable,
    registrations: Mutex<HashMap<String, ClientRegistration>>,
    grants: Mutex<BTreeMap<GrantKey, HeldGrant>>,
    next_generation: AtomicU64,
    grant_file: Option<EncryptedGrantStore>,
    attempts: Mutex<HashMap<String, VecDeque<Instant>>>,
    refreshing: KeyedLocks,
    exchanges: Mutex<HashMap<String, (ExchangeEntry, tokio::time::Instant)>>,
}

impl fmt::Debug for MemorySignInStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySignInStore")
            .field("pending", &self.pending.len())
            .field("grants", &lock(&self.grants).len())
            .field("grant_file", &self.grant_file)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn key(owner: &str, server: &str) -> GrantKey {
    (owner.to_owned(), server.to_owned())
}

impl MemorySignInStore {
    /// An empty store; grants last as long as the process.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that also keeps durable owners' grants in `grant_file`, starting with the grants
    /// it holds. Refused when its directory cannot be listed.
    pub fn with_grant_file(grant_file: EncryptedGrantStore) -> Result<Self, GrantStoreError> {
        let stored = grant_file.load_all()?;
        let store = Self {
            grant_file: Some(grant_file),
            ..Self::default()
        };
        for kept in stored {
            store.remember(&kept.owner, &kept.server, kept.grant);
        }
        Ok(store)
    }

    fn remember(&self, owner: &str, server: &str, grant: Grant) -> u64 {
        let generation = self.next_generation();
        lock(&self.grants).insert(key(owner, server), HeldGrant { grant, generation });
        generation
    }

    fn next_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Writes a durable owner's `grant` to the grant file store, when there is one.
    fn save_to_file(&self, owner: &str, server: &str, grant: &Grant) {
        if let Some(file) = &self.grant_file
            && is_durable_owner(owner)
            && let Err(e) = file.save(owner, server, grant)
        {
            tracing::warn!(server, error = %e, "the grant is kept in memory only");
        }
    }
}

#[async_trait]
impl SignInStore for MemorySignInStore {
    async fn put_pending(&self, state: &str, pending: PendingSignIn) -> Result<()> {
        self.pending.put(state, pending);
        Ok(())
    }

    async fn pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        Ok(self.pending.get(state))
    }

    async fn latest_pending(&self, session: &str, server: &str) -> Result<Option<(String, PendingSignIn)>> {
        Ok(self.pending.latest(session, server))
    }

    async fn set_browser_redirect(&self, state: &str, redirect: &str) -> Result<bool> {
        Ok(self.pending.set_redirect(state, redirect))
    }

    async fn take_pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        Ok(self.pending.take(state))
    }

    async fn registration(&self, issuer: &str) -> Result<Option<ClientRegistration>> {
        Ok(lock(&self.registrations).get(issuer).cloned())
    }

    async fn put_registration(&self, issuer: &str, registration: ClientRegistration) -> Result<()> {
        lock(&self.registrations).insert(issuer.to_owned(), registration);
        Ok(())
    }

    async fn remove_registration(&self, issuer: &str) -> Result<()> {
        lock(&self.registrations).remove(issuer);
        Ok(())
    }

    async fn grant(&self, owner: &str, server: &str) -> Result<Option<HeldGrant>> {
        Ok(lock(&self.grants).get(&key(owner, server)).cloned())
    }

    async fn put_grant(&self, owner: &str, server: &str, grant: Grant) -> Result<u64> {
        self.save_to_file(owner, server, &grant);
        Ok(self.remember(owner, server, grant))
    }

    async fn replace_grant(&self, owner: &str, server: &str, generation: u64, grant: Grant) -> Result<Option<u64>> {
        let replaced = {
            let mut grants = lock(&self.grants);
            match grants.get_mut(&key(owner, server)) {
                Some(held) if held.generation == generation => {
                    let generation = self.next_generation();
                    *held = HeldGrant {
                        grant: grant.clone(),
                        generation,
                    };
                    generation
                }
                _ => return Ok(None),
            }
        };
        self.save_to_file(owner, server, &grant);
        Ok(Some(replaced))
    }

    async fn remove_grant(&self, owner: &str, server: &str) -> Result<Option<Grant>> {
        let grant = lock(&self.grants).remove(&key(owner, server)).map(|held| held.grant);
        if let Some(file) = &self.grant_file
            && is_durable_owner(owner)
            && let Err(e) = file.remove(owner, server)
        {
            tracing::warn!(server, error = %e, "the grant could not be removed from the store");
        }
        Ok(grant)
    }

    async fn servers_of(&self, owner: &str) -> Result<Vec<String>> {
        Ok(lock(&self.grants)
            .range(key(owner, "")..)
            .take_while(|((o, _), _)| o == owner)
            .map(|((_, server), _)| server.clone())
            .collect())
    }

    async fn count_attempt(&self, who: &str, limit: usize, window: Duration) -> Result<Attempt> {
        let mut attempts = lock(&self.attempts);
        attempts.retain(|_, times| times.back().is_some_and(|at| at.elapsed() < window));
        let mine = attempts.entry(who.to_owned()).or_default();
        while mine.front().is_some_and(|at| at.elapsed() >= window) {
            mine.pop_front();
        }
        if mine.len() >= limit {
            let retry_in = mine.front().map_or(window, |at| window.saturating_sub(at.elapsed()));
            return Ok(Attempt::Refused { retry_in });
        }
        mine.push_back(Instant::now());
        Ok(Attempt::Counted(mine.len()))
    }

    async fn refresh_guard(&self, owner: &str, server: &str) -> Result<RefreshGuard> {
        Ok(self.refreshing.lock(key(owner, server)).await)
    }

    async fn exchange_entry(&self, key: &str) -> Result<Option<ExchangeEntry>> {
        let now = tokio::time::Instant::now();
        Ok(lock(&self.exchanges)
            .get(key)
            .filter(|(_, fresh_until)| now < *fresh_until)
            .map(|(entry, _)| entry.clone()))
    }

    async fn put_exchange_entry(&self, key: &str, entry: ExchangeEntry, fresh_for: Duration) -> Result<()> {
        let now = tokio::time::Instant::now();
        let mut exchanges = lock(&self.exchanges);
        exchanges.retain(|_, (_, fresh_until)| now < *fresh_until);
        exchanges.insert(key.to_owned(), (entry, now + fresh_for));
        Ok(())
    }

    fn forget_exchange_entry(&self, key: &str) {
        lock(&self.exchanges).remove(key);
    }

    fn forget_exchange_entries(&self, prefix: &str) {
        lock(&self.exchanges).retain(|key, _| !key.starts_with(prefix));
    }
}

#[cfg(test)]
impl MemorySignInStore {
    /// How many refresh locks exist (held or waited for).
    pub(super) fn refresh_locks(&self) -> usize {
        self.refreshing.len()
    }
}
