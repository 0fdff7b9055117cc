//! [`ExchangeCache`]: exchanged tokens by key, one exchange at a time per key, failures
//! remembered with backoff.

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::{ExchangeError, ExchangedToken, TokenExchange};
use crate::{
    Secret,
    oauth::http::OAuthHttp,
    state::{ExchangeEntry, MemorySignInStore, SignInStore},
};

/// An exchanged token is exchanged again this long before it expires (or at half its lifetime,
/// when that is shorter).
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// After a failed exchange, the same subject token is answered with the same error for this
/// long without asking the endpoint; each further failure doubles the wait.
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(1);

/// The longest wait after failed exchanges.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Exchanged tokens by key (the gateway uses `"<session>\0<server>"`).
///
/// [`ExchangeCache::token`] answers from the cache while the token is fresh (until
/// [`REFRESH_MARGIN`] before it expires, or half its lifetime when that is shorter; a token
/// without a known expiry is not kept) and the subject token and exchange are the ones it was
/// exchanged for (compared by a SHA-256 fingerprint). Otherwise it exchanges, one exchange at a
/// time per key: callers that arrive while one runs wait for it and share its outcome (twenty
/// concurrent calls make one request). A failure is remembered for its key and fingerprint and
/// answered without contacting the endpoint for a backoff: [`BACKOFF_INITIAL`], doubling to
/// [`BACKOFF_MAX`], reset by a success, a new subject token or a changed exchange.
///
/// The fresh tokens are kept in a [`SignInStore`] (in memory by default, or the one of
/// [`ExchangeCache::with_store`], shared by replicas). With a shared store, an exchange also
/// holds the store's lock of its key ([`SignInStore::exchange_guard`]): one exchange of a key at
/// a time across replicas, and a replica that waited for another's uses the token it kept. The
/// failures and their backoff are this process's.
pub struct ExchangeCache {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    store: Arc<dyn SignInStore>,
}

impl Default for ExchangeCache {
    fn default() -> Self {
        Self::with_store(Arc::new(MemorySignInStore::new()))
    }
}

impl fmt::Debug for ExchangeCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangeCache")
            .field("keys", &self.lock().len())
            .finish_non_exhaustive()
    }
}

/// One key's state in this process.
#[derive(Default)]
struct Slot {
    /// Exchanges completed for this key, read before waiting for `state`: a caller that
    /// finds it moved on while it waited shares the outcome of the exchange it waited for.
    completed: AtomicU64,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// What subject token and exchange everything below is for.
    fingerprint: Option<[u8; 32]>,
    /// The last failure, its backoff and when the endpoint may be asked again.
    failure: Option<Failure>,
    /// The outcome of the last exchange.
    last: Option<Result<ExchangedToken, ExchangeError>>,
}

struct Failure {
    error: ExchangeError,
    backoff: Duration,
    retry_at: Instant,
}

impl ExchangeCache {
    /// A cache that keeps its tokens in `store`.
    pub fn with_store(store: Arc<dyn SignInStore>) -> Self {
        Self {
            slots: Mutex::default(),
            store,
        }
    }

    /// The exchanged token for `key`: from the cache, or from one exchange of `subject_token`
    /// shared by the callers that wait for it (see the type's documentation). A store that
    /// cannot answer is exchanged around (with a warning): the token is exchanged, not cached.
    pub async fn token(
        &self,
        key: &str,
        exchange: &TokenExchange,
        http: &OAuthHttp,
        subject_token: &Secret,
    ) -> Result<ExchangedToken, ExchangeError> {
        let print = fingerprint(exchange, subject_token);
        let slot = Arc::clone(self.lock().entry(key.to_owned()).or_default());
        let seen = slot.completed.load(Ordering::Acquire);
        let mut state = slot.state.lock().await;

        if state.fingerprint != Some(print) {
            *state = State {
                fingerprint: Some(print),
                ..State::default()
            };
        } else if slot.completed.load(Ordering::Acquire) != seen
            && let Some(outcome) = &state.last
        {
            return outcome.clone();
        }
        match self.store.exchange_entry(key).await {
            Ok(Some(entry)) if entry.fingerprint == print => return Ok(entry.token),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "exchanged tokens cannot be read; exchanging"),
        }
        if let Some(failure) = &state.failure
            && Instant::now() < failure.retry_at
        {
            return Err(failure.error.clone());
        }

        // One exchange of the key across the replicas sharing the store: the ones that waited
        // find the token the first one kept.
        let exchanging = match self.store.exchange_guard(key).await {
            Ok(guard) => Some(guard),
            Err(e) => {
                tracing::warn!(error = %e, "no exchange lock across replicas; exchanging");
                None
            }
        };
        if exchanging.is_some()
            && let Ok(Some(entry)) = self.store.exchange_entry(key).await
            && entry.fingerprint == print
        {
            state.failure = None;
            state.last = Some(Ok(entry.token.clone()));
            slot.completed.fetch_add(1, Ordering::Release);
            return Ok(entry.token);
        }
        let outcome = exchange.exchange(http, subject_token).await;
        match &outcome {
            Ok(token) => {
                state.failure = None;
                if let Some(fresh) = fresh_for(token) {
                    let entry = ExchangeEntry {
                        fingerprint: print,
                        token: token.clone(),
                    };
                    if let Err(e) = self.store.put_exchange_entry(key, entry, fresh).await {
                        tracing::warn!(error = %e, "an exchanged token cannot be cached");
                    }
                }
            }
            Err(error) => {
                let backoff = state
                    .failure
                    .as_ref()
                    .map_or(BACKOFF_INITIAL, |f| (f.backoff * 2).min(BACKOFF_MAX));
                state.failure = Some(Failure {
                    error: error.clone(),
                    backoff,
                    retry_at: Instant::now() + backoff,
                });
            }
        }
        state.last = Some(outcome.clone());
        slot.completed.fetch_add(1, Ordering::Release);
        outcome
    }

    /// Drops what is kept for `key` (an exchange running for it completes unseen).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
        self.store.forget_exchange_entry(key);
    }

    /// Drops every key starting with `prefix` (a session ended: `"<session>\0"`).
    pub fn forget_prefix(&self, prefix: &str) {
        self.lock().retain(|key, _| !key.starts_with(prefix));
        self.store.forget_exchange_entries(prefix);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How long a token just received stays fresh: its lifetime less [`REFRESH_MARGIN`], or half
/// its lifetime when that is shorter; `None` without a known expiry.
fn fresh_for(token: &ExchangedToken) -> Option<Duration> {
    let lifetime = (token.expires_at? - chrono::Utc::now()).to_std().ok()?;
    fresh_within(lifetime)
}

pub(super) fn fresh_within(lifetime: Duration) -> Option<Duration> {
    let fresh = lifetime - REFRESH_MARGIN.min(lifetime / 2);
    (!fresh.is_zero()).then_some(fresh)
}

/// What a cached token or failure is for: the subject token and every part of the exchange
/// that changes the answer (a rotated client secret starts afresh). Hashed, so the cache holds
/// no copy of the subject token.
fn fingerprint(exchange: &TokenExchange, subject_token: &Secret) -> [u8; 32] {
    let mut digest = Sha256::new();
    let (client_id, client_secret) = match &exchange.client {
        Some((id, secret)) => (id.as_str(), secret.expose()),
        None => ("", ""),
    };
    for part in [
        exchange.token_endpoint.as_str(),
        &exchange.expected_issuer(),
        &exchange.connector_id,
        &exchange.scope(),
        &exchange.subject_token_type,
        client_id,
        client_secret,
        subject_token.expose(),
    ] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    digest.finalize().into()
}
