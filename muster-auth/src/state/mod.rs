//! [`SignInStore`]: where the sign-in state of a gateway is kept, so that another backend (Valkey,
//! for replicas) can keep it instead of this process.
//!
//! One store holds everything a sign-in needs beyond the request at hand:
//!
//! | what | keyed by | operations | expiry |
//! |---|---|---|---|
//! | pending sign-ins ([`PendingSignIn`]: who asked, for which server, the PKCE verifier, the redirect URI, the authorization URL, the browser's redirect, the issuer's description at start) | state | put, get, take (once), the latest of a session and server, set the browser's redirect | the record's `expires_at` |
//! | client registrations ([`ClientRegistration`]) | issuer | get, put, remove | none |
//! | grants ([`HeldGrant`]: a [`Grant`] and its generation) | owner and server | get, put, replace while unchanged, remove, the servers of an owner | none |
//! | sign-in attempts ([`Attempt`]) | person (session) | count within a window, up to a limit | the window |
//! | refreshes in flight ([`RefreshGuard`]) | owner and server | one at a time | dropped |
//! | exchanged tokens ([`ExchangeEntry`]) | session and server | get, put, forget (a key, or by prefix) | given at put |
//! | exchanges in flight ([`RefreshGuard`]) | session and server | one at a time (across replicas; none in one process) | dropped |
//!
//! What only one process can hold stays out of it, in memory: which connection each session
//! holds and which grant or credential it was opened with, the waiters for a link's outcome, the
//! one-connect-at-a-time locks of a session, and the one-exchange-at-a-time of the exchange
//! cache in this process (its failures' backoff too). A session is served by one replica; the
//! state a sign-in leaves is for all of them.
//!
//! [`MemorySignInStore`] is the store of one process, and the default: maps in memory, with the
//! grants of people and principals (see [`is_durable_owner`]) also written to an
//! [`EncryptedGrantStore`](crate::oauth::store::EncryptedGrantStore) when one is given, so that
//! they survive a restart. `ValkeyStore` (feature `valkey`, module `valkey`) keeps it all in
//! Valkey or Redis, for replicas. Another store is checked against the same rules with
//! `contract::check` (feature `test-util`). When a sign-in completes on a replica that does not
//! hold the session that asked, [`SignInNotices`] tells the one that does. [`GrantFallback`]
//! wraps a store across the network so that a transport session's grant (and a person's whose
//! refresh token does not rotate) is still used, and refreshed, while that store cannot be
//! reached.
//!
//! A state is used once: of the callers that take it, concurrently or not, one gets it.
//!
//! ```
//! use std::time::Duration;
//! use muster_auth::{
//!     oauth::{
//!         discovery::AuthorizationServerMetadata,
//!         flow::{PendingSignIn, SignInRequest},
//!         registration::ClientRegistration,
//!     },
//!     state::{MemorySignInStore, SignInStore},
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let request = SignInRequest {
//!     session: "session-1".into(),
//!     owner: "session-1".into(),
//!     server: "github".into(),
//!     metadata: AuthorizationServerMetadata::pinned(
//!         "https://idp.example.com", "https://idp.example.com/authorize", "https://idp.example.com/token", None,
//!     ),
//!     client: ClientRegistration::pre_registered("muster", None),
//!     redirect_uri: "https://muster.example.com/oauth/proxy/callback".into(),
//!     resource: "https://mcp.github.example/mcp".into(),
//!     scope: None,
//!     expected_issuer: None,
//! };
//! let (started, pending) = PendingSignIn::start(request, Duration::from_secs(600))?;
//! let store = MemorySignInStore::new();
//! store.put_pending(&started.state, pending).await?;
//!
//! // The callback takes the sign-in; a second callback with the same state finds nothing.
//! let taken = store.take_pending(&started.state).await?.expect("waiting");
//! assert_eq!(taken.request.server, "github");
//! assert!(store.take_pending(&started.state).await?.is_none());
//! # Ok(()) }
//! ```

use std::{fmt, time::Duration};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use muster_core::BoxError;

#[cfg(feature = "valkey")]
pub use self::valkey::{ValkeyNotices, ValkeyOptions, ValkeyOptionsError, ValkeyStore};
pub use self::{
    fallback::GrantFallback,
    memory::MemorySignInStore,
    notices::{LocalSignInNotices, SignInNotice, SignInNotices},
    owners::{is_durable_owner, owner_of},
};
use crate::{
    Secret,
    oauth::{flow::PendingSignIn, grant::Grant, registration::ClientRegistration},
};

#[cfg(any(test, feature = "test-util"))]
pub mod contract;
pub mod fallback;
mod locks;
mod memory;
mod notices;
mod owners;
#[cfg(feature = "valkey")]
pub mod valkey;

/// The result of a [`SignInStore`] operation.
pub type Result<T, E = SignInStoreError> = std::result::Result<T, E>;

/// The sign-in state of a gateway: pending sign-ins, client registrations, grants, sign-in
/// attempts, refreshes in flight and exchanged tokens. See the [module docs](self) for what each
/// holds, and `contract::check` for the rules every store keeps.
///
/// Operations are async, because a store may be across the network; the trait is object safe
/// through [`async_trait`](https://docs.rs/async-trait) (implement it under
/// `#[async_trait::async_trait]`), so a gateway holds an `Arc<dyn SignInStore>`. A store that
/// cannot answer says so with [`SignInStoreError::Unavailable`]; the callers decide what goes on
/// without it.
#[async_trait]
pub trait SignInStore: Send + Sync + fmt::Debug {
    /// Keeps `pending` by `state` until its `expires_at`, as the latest sign-in of its session and
    /// server.
    async fn put_pending(&self, state: &str, pending: PendingSignIn) -> Result<()>;

    /// The sign-in of `state`, while it waits (not taken, not expired).
    async fn pending(&self, state: &str) -> Result<Option<PendingSignIn>>;

    /// The latest sign-in `session` started for `server`, with its state, while it waits.
    async fn latest_pending(&self, session: &str, server: &str) -> Result<Option<(String, PendingSignIn)>>;

    /// Sets where the browser goes after the callback of `state`; whether it waits. A sign-in
    /// taken or expired stays so.
    async fn set_browser_redirect(&self, state: &str, redirect: &str) -> Result<bool>;

    /// Takes the sign-in of `state` away, atomically: of every caller that takes a state, one
    /// gets it, and only while it waits.
    async fn take_pending(&self, state: &str) -> Result<Option<PendingSignIn>>;

    /// The gateway's client registration with `issuer`.
    async fn registration(&self, issuer: &str) -> Result<Option<ClientRegistration>>;

    /// Keeps `registration` as the gateway's client with `issuer`, replacing the one before.
    async fn put_registration(&self, issuer: &str, registration: ClientRegistration) -> Result<()>;

    /// Forgets the gateway's client registration with `issuer`.
    async fn remove_registration(&self, issuer: &str) -> Result<()>;

    /// The grant `owner` holds for `server`, with its generation.
    async fn grant(&self, owner: &str, server: &str) -> Result<Option<HeldGrant>>;

    /// Keeps `grant` as `owner`'s for `server`, replacing the one before; its generation, which no
    /// grant of `owner` and `server` had before (a refresh, or a sign-in after a sign-out, is
    /// told apart from what a connection was opened with).
    async fn put_grant(&self, owner: &str, server: &str, grant: Grant) -> Result<u64>;

    /// Keeps `grant` as `owner`'s for `server` only while the grant there is still the one of
    /// `generation`, atomically (compare and put): its new generation, as
    /// [`SignInStore::put_grant`] gives one, or `None`, and nothing kept, when another grant
    /// replaced that one or it was removed. How a grant refreshed while the store could not be
    /// reached is written back ([`GrantFallback`]) without undoing a sign-in that came
    /// meanwhile.
    async fn replace_grant(&self, owner: &str, server: &str, generation: u64, grant: Grant) -> Result<Option<u64>>;

    /// Removes `owner`'s grant for `server`; the grant, for revocation.
    async fn remove_grant(&self, owner: &str, server: &str) -> Result<Option<Grant>>;

    /// The servers `owner` holds grants for, by name.
    async fn servers_of(&self, owner: &str) -> Result<Vec<String>>;

    /// Counts a sign-in attempt of `who` within the last `window`: counted while fewer than
    /// `limit` are; refused, and not counted, at the limit.
    async fn count_attempt(&self, who: &str, limit: usize, window: Duration) -> Result<Attempt>;

    /// Waits until no other refresh of `owner`'s grant for `server` runs, and holds off the next
    /// one until the guard is dropped: a rotated refresh token must never be used twice.
    async fn refresh_guard(&self, owner: &str, server: &str) -> Result<RefreshGuard>;

    /// Waits until no other exchange for `key` runs on another process sharing the store, and
    /// holds off the next one until the guard is dropped, so that replicas exchange a key's
    /// token once and share it. By default nothing is held: in one process, the exchange cache
    /// runs one exchange of a key at a time itself.
    async fn exchange_guard(&self, key: &str) -> Result<RefreshGuard> {
        let _ = key;
        Ok(RefreshGuard::new(()))
    }

    /// The exchanged token kept for `key` (the gateway's `"<session>\0<server>"`), while fresh.
    async fn exchange_entry(&self, key: &str) -> Result<Option<ExchangeEntry>>;

    /// Keeps `entry` for `key` for `fresh_for`, replacing the one before.
    async fn put_exchange_entry(&self, key: &str, entry: ExchangeEntry, fresh_for: Duration) -> Result<()>;

    /// Forgets the exchanged token of `key`.
    ///
    /// Not async, as [`SignInStore::forget_exchange_entries`].
    fn forget_exchange_entry(&self, key: &str);

    /// Forgets the exchanged tokens of every key that starts with `prefix` (a session ended:
    /// `"<session>\0"`).
    ///
    /// Not async: a session's end is told from code that cannot wait. A store across the network
    /// deletes in the background; a read racing it may still find an entry, which is harmless,
    /// since an entry is used only for the subject token and exchange it was made for.
    fn forget_exchange_entries(&self, prefix: &str);
}

/// A grant with its generation (see [`SignInStore::put_grant`]).
#[derive(Debug, Clone)]
pub struct HeldGrant {
    /// The grant.
    pub grant: Grant,
    /// Its generation.
    pub generation: u64,
}

/// What [`SignInStore::count_attempt`] made of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Counted: this many attempts in the window, this one included.
    Counted(usize),
    /// At the limit, not counted.
    Refused {
        /// How long until the oldest attempt leaves the window.
        retry_in: Duration,
    },
}

/// Held while one refresh of a grant runs ([`SignInStore::refresh_guard`]), or one exchange of a
/// key ([`SignInStore::exchange_guard`]); dropping it lets the next one in.
pub struct RefreshGuard {
    _held: Box<dyn Send + Sync>,
}

impl RefreshGuard {
    /// A guard that holds `held` (a lock guard, or a value that releases a lock when dropped)
    /// until it is dropped.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        Self { _held: Box::new(held) }
    }
}

impl fmt::Debug for RefreshGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RefreshGuard")
    }
}

/// The token an RFC 8693 exchange issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangedToken {
    /// The token, for the downstream server's `Authorization`.
    pub token: Secret,
    /// Its issuer (the expected one).
    pub issuer: String,
    /// When it expires: from `expires_in`, else from the token's `exp`.
    pub expires_at: Option<DateTime<Utc>>,
}

/// An exchanged token kept for a key, with what it was exchanged for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeEntry {
    /// The SHA-256 fingerprint of the subject token and the exchange: the entry answers only
    /// for the same ones.
    pub fingerprint: [u8; 32],
    /// The token.
    pub token: ExchangedToken,
}

/// Why a [`SignInStore`] could not answer. The message names the store and never contains a
/// token or a key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignInStoreError {
    /// The store cannot be reached, or refused the operation.
    #[error("the sign-in state store ({store}) is unavailable: {source}")]
    Unavailable {
        /// Which store: its kind and where it is (`valkey at valkey.muster:6379`).
        store: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}

impl SignInStoreError {
    /// The store `store` could not answer, because of `source`.
    pub fn unavailable(store: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            store: store.into(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests;
