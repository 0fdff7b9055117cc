//! [`GrantFallback`]: a [`SignInStore`] over another one across the network (Valkey, for
//! replicas) that keeps this process's last-known copy of the grants it may refresh alone, so
//! that while that store cannot be reached such a grant is still used, and refreshed, here, and
//! written back once the store answers again.
//!
//! What it keeps a copy of, and why rotation decides it:
//!
//! - a transport session's grant (an owner that is not [durable](super::is_durable_owner)),
//!   always: a sessionful client stays on the replica that holds its session, so no other
//!   process uses that grant, and refreshing it here replays no refresh token;
//! - a person's (`grantScope: subject`) or a principal's grant only while its authorization
//!   server is known *not* to rotate its refresh token
//!   ([`Grant::rotates_refresh_tokens`] is `Some(false)`: its refreshes answered no refresh
//!   token, or the same one). Such a grant is used by every replica, and during an outage each
//!   may refresh it with the same refresh token. A provider that rotates refresh tokens spends
//!   one at its first use and revokes the whole grant when it is used again, so two replicas
//!   refreshing a rotating grant apart would sign the person out; a provider that does not
//!   rotate answers both, and every token either refresh got stays valid. A durable grant never
//!   refreshed yet (`None`: not known) or known to rotate (`Some(true)`, kept once seen) gets no
//!   copy: its operations go to the store, and fail while it is away
//!   ([`Unavailable`](super::SignInStoreError::Unavailable), naming the store), as before.
//!
//! For a grant it keeps a copy of:
//!
//! - every operation goes to the store first; a grant this process reads or writes is copied;
//! - when the store fails, the copy answers: the grant (and the servers its owner holds
//!   copies for), and the refresh guard is one refresh of the grant at a time in this process
//!   (always held, before the store's: two refreshes here never overlap either way);
//! - a grant put while the store fails (a refresh: a sign-in needs the store to take its
//!   state) is kept *unsynced*, with a generation of this process (its high bit set, which a
//!   store that counts from one never gives), logged at warn. From then on this process reads
//!   its copy, not the store's older grant;
//! - the write-back is [`SignInStore::replace_grant`] from the store's generation the refresh
//!   started from: it lands (the copy takes the store's new generation) unless a new sign-in
//!   replaced or removed that grant meanwhile, and then the copy is dropped; both logged at info.
//!   It is tried on the next read of the grant, and by a task in the background (from 250 ms,
//!   doubling up to every 5 s) that any operation the store answers wakes. Several replicas
//!   may each have refreshed a person's grant while the store was away: the first write-back
//!   lands, the others find the store's generation moved on and are dropped (their tokens stay
//!   valid at a provider that does not rotate), and those replicas read the store's grant from
//!   then on;
//! - a copy goes when its grant is removed (a sign-out, a refused refresh, the end of its
//!   session: the gateway removes an ended session's grants), when the store says the grant is
//!   gone, when the store answers a grant that is not to be copied (a person's grant whose
//!   refresh turned out to rotate), and past [`GrantFallback::with_capacity`] copies
//!   (10,000 by default) the least recently used goes, a written one first.
//!
//! A connection opened with an unsynced copy reconnects once after the write-back, since the
//! generation changes. A person's grant refreshed here that answers a *different* refresh
//! token (its provider began rotating) is still kept and written back, logged at warn: the
//! refresh token it replaced may be spent already.
//!
//! ```
//! use muster_auth::state::{MemorySignInStore, GrantFallback, SignInStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A gateway wraps its Valkey store (`GrantFallback::new(valkey_store)`); any store
//! // can be wrapped.
//! let store = GrantFallback::new(MemorySignInStore::new()).with_capacity(1_000);
//! assert!(store.grant("session-1", "github").await?.is_none());
//! assert!(store.servers_of("session-1").await?.is_empty());
//! assert_eq!(store.copies(), 0);
//! # Ok(()) }
//! ```

use std::{
    fmt,
    pin::pin,
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use tokio::sync::Notify;

use self::copies::{Copies, Written};
use super::{
    Attempt, ExchangeEntry, HeldGrant, RefreshGuard, Result, SignInStore, is_durable_owner,
    locks::{GrantKey, KeyedLocks},
};
use crate::oauth::{flow::PendingSignIn, grant::Grant, registration::ClientRegistration};

mod copies;

/// The generations this process gives to grants it changed: the high bit set.
const LOCAL_GENERATIONS: u64 = 1 << 63;

/// The first wait of the background write-back, and the longest.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// A [`SignInStore`] over `S` that keeps transport sessions' grants, and persons' and
/// principals' grants whose refresh token does not rotate, usable and refreshable in this
/// process while `S` cannot be reached. See the [module docs](self).
pub struct GrantFallback<S> {
    shared: Arc<Shared<S>>,
}

/// What the store and its background write-back share.
struct Shared<S> {
    store: S,
    copies: Mutex<Copies>,
    refreshing: KeyedLocks,
    next_local: AtomicU64,
    /// Wakes the background write-back (an operation the store answered).
    wake: Arc<Notify>,
}

impl<S: fmt::Debug> fmt::Debug for GrantFallback<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrantFallback")
            .field("store", &self.shared.store)
            .field("copies", &self.shared.copies().len())
            .finish_non_exhaustive()
    }
}

fn key(owner: &str, server: &str) -> GrantKey {
    (owner.to_owned(), server.to_owned())
}

/// Whether this process keeps a copy of `owner`'s `grant`: a transport session's always; a
/// person's or a principal's only while its authorization server is known not to rotate its
/// refresh token (see the [module docs](self)).
fn copied(owner: &str, grant: &Grant) -> bool {
    !is_durable_owner(owner) || grant.rotates_refresh_tokens == Some(false)
}

impl<S: SignInStore + 'static> GrantFallback<S> {
    /// `store`, with the grants this process may refresh alone copied here for when it cannot be
    /// reached.
    pub fn new(store: S) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                copies: Mutex::new(Copies::new()),
                refreshing: KeyedLocks::default(),
                next_local: AtomicU64::new(0),
                wake: Arc::new(Notify::new()),
            }),
        }
    }

    /// Keeps at most `capacity` copies (at least one; 10,000 by default).
    pub fn with_capacity(self, capacity: usize) -> Self {
        self.shared.copies().set_capacity(capacity);
        self
    }

    /// The store it wraps.
    pub fn get_ref(&self) -> &S {
        &self.shared.store
    }

    /// How many grants it holds a copy of.
    pub fn copies(&self) -> usize {
        self.shared.copies().len()
    }
}

impl<S> Shared<S> {
    fn copies(&self) -> MutexGuard<'_, Copies> {
        self.copies.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<S: SignInStore + 'static> Shared<S> {
    /// `result`, after waking the background write-back when the store answered and a copy
    /// waits for it.
    fn answered<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_ok() && self.copies().retrying {
            self.wake.notify_one();
        }
        result
    }

    /// Writes `owner`'s unsynced copy for `server` back to the store (see [`Written`]); fails
    /// when the store does.
    async fn write_back(&self, owner: &str, server: &str) -> Result<Written> {
        let key = key(owner, server);
        let Some(write_back) = self.copies().begin_write_back(&key) else {
            return Ok(Written::Elsewhere);
        };
        let outcome = self
            .store
            .replace_grant(owner, server, write_back.from, write_back.grant.clone())
            .await;
        let written = self
            .copies()
            .end_write_back(&key, &write_back, outcome.as_ref().ok().copied());
        match &written {
            Written::Landed(_) => tracing::info!(
                server,
                "a grant refreshed while the sign-in state store was unavailable is written back to it"
            ),
            Written::Dropped => tracing::info!(
                server,
                "a grant refreshed while the sign-in state store was unavailable is dropped, and the store's \
                 is read from now on: the grant it was refreshed from was replaced meanwhile (a new sign-in, \
                 or another replica's refresh written back first) or removed"
            ),
            Written::Elsewhere => {}
        }
        outcome.map(|_| written)
    }

    /// Writes every unsynced copy back: whether none waits any more (the background retry then
    /// ends).
    async fn write_back_all(&self) -> bool {
        let unsynced = self.copies().unsynced_keys();
        for (owner, server) in unsynced {
            if self.write_back(&owner, &server).await.is_err() {
                return false; // still away: the next round tries again
            }
        }
        let mut copies = self.copies();
        copies.retrying = copies.any_unsynced();
        !copies.retrying
    }
}

impl<S: SignInStore + 'static> GrantFallback<S> {
    /// Starts the background write-back, unless it runs.
    fn retry_in_background(&self) {
        {
            let mut copies = self.shared.copies();
            if copies.retrying {
                return;
            }
            copies.retrying = true;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(retry(Arc::downgrade(&self.shared), Arc::clone(&self.shared.wake)))),
            Err(_) => {
                // Outside a runtime: the next read of the grant writes it back.
                self.shared.copies().retrying = false;
            }
        }
    }
}

/// Writes the unsynced copies back until none waits, waiting between rounds from
/// [`FIRST_RETRY`] up to [`LONGEST_RETRY`], or until woken; ends when the store goes.
async fn retry<S: SignInStore + 'static>(shared: Weak<Shared<S>>, wake: Arc<Notify>) {
    let mut wait = FIRST_RETRY;
    loop {
        let woken = wake.notified();
        let sleep = tokio::time::sleep(wait);
        futures::future::select(pin!(woken), pin!(sleep)).await;
        let Some(shared) = shared.upgrade() else { return };
        if shared.write_back_all().await {
            return;
        }
        wait = (wait * 2).min(LONGEST_RETRY);
    }
}

#[async_trait]
impl<S: SignInStore + 'static> SignInStore for GrantFallback<S> {
    async fn put_pending(&self, state: &str, pending: PendingSignIn) -> Result<()> {
        self.shared
            .answered(self.shared.store.put_pending(state, pending).await)
    }

    async fn pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        self.shared.answered(self.shared.store.pending(state).await)
    }

    async fn latest_pending(&self, session: &str, server: &str) -> Result<Option<(String, PendingSignIn)>> {
        self.shared
            .answered(self.shared.store.latest_pending(session, server).await)
    }

    async fn set_browser_redirect(&self, state: &str, redirect: &str) -> Result<bool> {
        self.shared
            .answered(self.shared.store.set_browser_redirect(state, redirect).await)
    }

    async fn take_pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        self.shared.answered(self.shared.store.take_pending(state).await)
    }

    async fn registration(&self, issuer: &str) -> Result<Option<ClientRegistration>> {
        self.shared.answered(self.shared.store.registration(issuer).await)
    }

    async fn put_registration(&self, issuer: &str, registration: ClientRegistration) -> Result<()> {
        self.shared
            .answered(self.shared.store.put_registration(issuer, registration).await)
    }

    async fn remove_registration(&self, issuer: &str) -> Result<()> {
        self.shared
            .answered(self.shared.store.remove_registration(issuer).await)
    }

    async fn grant(&self, owner: &str, server: &str) -> Result<Option<HeldGrant>> {
        let shared = &self.shared;
        let key = key(owner, server);
        if shared.copies().is_unsynced(&key) {
            match shared.write_back(owner, server).await {
                Ok(Written::Landed(held)) => return Ok(Some(*held)),
                Ok(Written::Dropped) => {}
                // Another write-back runs, or the store is still away: this process's copy is
                // newer than the store's grant.
                Ok(Written::Elsewhere) | Err(_) => {
                    if let Some(held) = shared.copies().unsynced(&key) {
                        return Ok(Some(held));
                    }
                }
            }
        }
        match shared.store.grant(owner, server).await {
            Ok(Some(held)) => {
                let copied = copied(owner, &held.grant);
                let held = shared.copies().read(key, held, copied);
                shared.answered(Ok(Some(held)))
            }
            Ok(None) => {
                shared.copies().gone(&key);
                shared.answered(Ok(None))
            }
            Err(e) => {
                let copy = shared.copies().get(&key);
                if copy.is_some() {
                    tracing::debug!(server, error = %e, "a grant is read from this process's copy");
                    return Ok(copy);
                }
                Err(e)
            }
        }
    }

    async fn put_grant(&self, owner: &str, server: &str, grant: Grant) -> Result<u64> {
        let shared = &self.shared;
        let key = key(owner, server);
        match shared.store.put_grant(owner, server, grant.clone()).await {
            Ok(generation) => {
                let copied = copied(owner, &grant);
                shared.copies().written(key, HeldGrant { grant, generation }, copied);
                shared.answered(Ok(generation))
            }
            Err(e) => {
                let generation = LOCAL_GENERATIONS | (shared.next_local.fetch_add(1, Ordering::Relaxed) + 1);
                let rotates = grant.rotates_refresh_tokens != Some(false);
                if !shared.copies().changed_here(&key, grant, generation) {
                    return Err(e);
                }
                tracing::warn!(
                    server,
                    error = %e,
                    durable = is_durable_owner(owner),
                    "a grant is refreshed in this process while the sign-in state store is unavailable; \
                     it is kept here and written back once the store answers"
                );
                if rotates && is_durable_owner(owner) {
                    // Known not to rotate when this refresh began: the provider changed its mind.
                    // The answer is kept (the refresh token it replaced may be spent already).
                    tracing::warn!(
                        server,
                        "a grant other replicas use answered a rotated refresh token while the sign-in state \
                         store is unavailable; a refresh elsewhere may replay the one it replaced"
                    );
                }
                self.retry_in_background();
                Ok(generation)
            }
        }
    }

    async fn replace_grant(&self, owner: &str, server: &str, generation: u64, grant: Grant) -> Result<Option<u64>> {
        let shared = &self.shared;
        let key = key(owner, server);
        let replaced = shared
            .store
            .replace_grant(owner, server, generation, grant.clone())
            .await?;
        match replaced {
            Some(generation) => {
                let copied = copied(owner, &grant);
                shared.copies().written(key, HeldGrant { grant, generation }, copied);
            }
            None => shared.copies().gone(&key),
        }
        shared.answered(Ok(replaced))
    }

    async fn remove_grant(&self, owner: &str, server: &str) -> Result<Option<Grant>> {
        let shared = &self.shared;
        let key = key(owner, server);
        shared.copies().remove(&key);
        let removed = shared.store.remove_grant(owner, server).await;
        // Again: a read that raced the removal may have copied the grant back.
        shared.copies().remove(&key);
        shared.answered(removed)
    }

    async fn servers_of(&self, owner: &str) -> Result<Vec<String>> {
        let shared = &self.shared;
        match shared.store.servers_of(owner).await {
            Err(e) => {
                let servers = shared.copies().servers_of(owner);
                if servers.is_empty() { Err(e) } else { Ok(servers) }
            }
            answer => shared.answered(answer),
        }
    }

    async fn count_attempt(&self, who: &str, limit: usize, window: Duration) -> Result<Attempt> {
        self.shared
            .answered(self.shared.store.count_attempt(who, limit, window).await)
    }

    async fn refresh_guard(&self, owner: &str, server: &str) -> Result<RefreshGuard> {
        let shared = &self.shared;
        let key = key(owner, server);
        let here = shared.refreshing.lock(key.clone()).await;
        let e = match shared.store.refresh_guard(owner, server).await {
            Ok(there) => return shared.answered(Ok(RefreshGuard::new((here, there)))),
            Err(e) => e,
        };
        let known = shared.copies().get(&key).is_some();
        if !known {
            return Err(e);
        }
        tracing::debug!(server, error = %e, "a grant is refreshed one at a time in this process");
        Ok(here)
    }

    async fn exchange_guard(&self, key: &str) -> Result<RefreshGuard> {
        self.shared.answered(self.shared.store.exchange_guard(key).await)
    }

    async fn exchange_entry(&self, key: &str) -> Result<Option<ExchangeEntry>> {
        self.shared.answered(self.shared.store.exchange_entry(key).await)
    }

    async fn put_exchange_entry(&self, key: &str, entry: ExchangeEntry, fresh_for: Duration) -> Result<()> {
        self.shared
            .answered(self.shared.store.put_exchange_entry(key, entry, fresh_for).await)
    }

    fn forget_exchange_entry(&self, key: &str) {
        self.shared.store.forget_exchange_entry(key);
    }

    fn forget_exchange_entries(&self, prefix: &str) {
        self.shared.store.forget_exchange_entries(prefix);
    }
}

#[cfg(test)]
mod tests;
