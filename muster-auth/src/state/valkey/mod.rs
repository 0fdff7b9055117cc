//! [`ValkeyStore`]: the sign-in state in Valkey (or Redis), shared by every replica of a gateway
//! (feature `valkey`).
//!
//! Any replica can take a sign-in's callback, use a grant another signed in with, or an
//! exchanged token another obtained:
//!
//! - a pending sign-in is taken with `GETDEL`: of every replica that takes one state, one gets
//!   it. It expires with its link (Valkey's own expiry);
//! - every value that holds a secret (the PKCE verifier, tokens, exchanged tokens, client
//!   secrets) is sealed with AES-256-GCM under the same key, and the same way, as the grant file
//!   store's files ([`GrantStoreKey`]; the replicas share it), bound to its key: no token is in
//!   clear text in Valkey, and a value copied under another key does not open;
//! - key names are the key prefix (`muster:` by default), a kind and an HMAC of what they are for
//!   under a key derived from the same key: no state, session, owner or issuer shows in a name
//!   (the table of keys is in the `keys` module's source);
//! - a grant's generation comes from `INCR`, in the same Lua script that keeps the grant; a grant
//!   is replaced only while unchanged ([`SignInStore::replace_grant`]) by the same script behind
//!   a compare of the generation;
//! - a transport session's grants expire once unused for
//!   [`ValkeyOptions::with_session_grant_ttl`] (a day by default; each read starts it again): a
//!   killed replica's sessions leave nothing forever. People's and principals' grants stay;
//! - sign-in attempts are a sorted set per person, counted and trimmed to the window by one Lua
//!   script on the server's clock;
//! - a refresh of a grant holds a lock in Valkey (`SET NX PX` with a token of its own, renewed
//!   while held, released by compare-and-delete): one refresh of a grant runs at a time across
//!   replicas;
//! - an exchange holds a lock of its key in Valkey, as a refresh does: one exchange for a key
//!   (a person's or a session's, and a server) runs at a time across replicas, and the ones
//!   that waited use the token it kept;
//! - an exchanged token expires with its freshness; the tokens of a session are indexed by a set,
//!   so that a session's end deletes them (in the background);
//! - [`ValkeyStore::notices`] tells the replica holding a session that its sign-in completed on
//!   another, through pub/sub ([`SignInNotices`](super::SignInNotices)).
//!
//! The connection (the `link` module's) connects on first use and again after it broke, over
//! TCP or TLS (the certificate checked for [`ValkeyOptions::with_tls_server_name`] or the URL's
//! host, against [`ValkeyOptions::with_tls_ca`] or the system's roots; never plain text when TLS
//! was asked for). While Valkey cannot be reached, every operation fails with
//! [`SignInStoreError::Unavailable`] naming the store (`valkey at valkey.muster:6379`), never a
//! token or the key; once Valkey is back, the same store answers again. A value that does not open
//! with the store's key (written by a gateway with another key) fails the same way, saying so.
//! Wrapped in a [`GrantFallback`](super::GrantFallback), as the gateway wraps it, a
//! transport session's grant is still used and refreshed on its replica meanwhile, and written
//! back (`replace_grant`, only over the grant it was refreshed from) once Valkey answers; so is a
//! person's or a principal's grant whose refresh token is known not to rotate. Any other
//! person's or principal's grant keeps failing, since every replica uses it.
//!
//! Make the store inside a Tokio runtime.
//!
//! ```no_run
//! use std::sync::Arc;
//! use muster_auth::{
//!     oauth::store::GrantStoreKey,
//!     state::{SignInStore, ValkeyOptions, ValkeyStore},
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let key = GrantStoreKey::from_file(std::path::Path::new("/etc/muster/state.key"))?;
//! let options = ValkeyOptions::new("valkey.muster:6379").with_key_prefix("muster:");
//! let store: Arc<dyn SignInStore> = Arc::new(ValkeyStore::new(&options, &key)?);
//! // Every replica made with the same options and key shares the sign-ins.
//! assert!(store.take_pending("no-such-state").await?.is_none());
//! # Ok(()) }
//! ```

use std::{fmt, sync::LazyLock, time::Duration};

use async_trait::async_trait;
use redis::Script;

use self::{
    keys::Keys,
    link::Link,
    record::{CLIENT, ClientValue, EXCHANGE, ExchangeRecord, GRANT, GrantValue, PENDING, PendingRecord, Sealed},
};
use super::{Attempt, ExchangeEntry, HeldGrant, RefreshGuard, Result, SignInStore, SignInStoreError};
use crate::oauth::{
    flow::PendingSignIn,
    grant::Grant,
    registration::ClientRegistration,
    store::{GrantStoreKey, seal::Sealer},
};

mod keys;
mod link;
mod lock;
mod notices;
mod options;
mod record;

pub use notices::ValkeyNotices;
pub use options::{DEFAULT_KEY_PREFIX, DEFAULT_SESSION_GRANT_TTL, ValkeyOptions, ValkeyOptionsError};

/// How long one connection attempt, and one answer, may take before the operation fails.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Keeps a grant and its owner's index and gives it a new generation; with a time to live (ms,
/// `ARGV[3]` > 0: a transport session's grant), both expire after it. The body of the two
/// scripts below.
const KEEP_GRANT: &str = "local g = redis.call('INCR', KEYS[3]) \
     redis.call('HSET', KEYS[1], 'g', g, 's', ARGV[1]) \
     redis.call('SADD', KEYS[2], ARGV[2]) \
     local ttl = tonumber(ARGV[3]) \
     if ttl > 0 then \
       redis.call('PEXPIRE', KEYS[1], ttl) \
       redis.call('PEXPIRE', KEYS[2], ttl) \
     end \
     return g";

/// Keeps a grant (see [`KEEP_GRANT`]), atomically; its generation.
static PUT_GRANT: LazyLock<Script> = LazyLock::new(|| Script::new(KEEP_GRANT));

/// Keeps a grant (see [`KEEP_GRANT`]) only while the grant there is of generation `ARGV[4]`,
/// atomically: its generation, or nil when another replaced it or none is there.
static REPLACE_GRANT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "if redis.call('HGET', KEYS[1], 'g') ~= ARGV[4] then return false end {KEEP_GRANT}"
    ))
});

/// Removes a grant and its index entry; the sealed grant that was there.
static REMOVE_GRANT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local s = redis.call('HGET', KEYS[1], 's') \
         redis.call('DEL', KEYS[1]) \
         redis.call('SREM', KEYS[2], ARGV[1]) \
         return s",
    )
});

/// Replaces a value that has not changed since it was read, keeping its expiry.
static REPLACE_UNCHANGED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') return 1 \
         else return 0 end",
    )
});

/// Counts an attempt within the window (ms, on the server's clock) up to the limit:
/// `{1, count}` when counted, `{0, ms until the oldest leaves}` when refused.
static COUNT_ATTEMPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') \
         local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
         local window = tonumber(ARGV[2]) \
         redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window) \
         local count = redis.call('ZCARD', KEYS[1]) \
         if count >= tonumber(ARGV[1]) then \
           local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES') \
           return {0, tonumber(oldest[2]) + window - now} \
         end \
         redis.call('ZADD', KEYS[1], now, ARGV[3]) \
         redis.call('PEXPIRE', KEYS[1], window) \
         return {1, count + 1}",
    )
});

/// Keeps an exchange entry for its freshness and indexes it in its group, whose set lasts as
/// long as its longest entry.
static PUT_EXCHANGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
         redis.call('SADD', KEYS[2], KEYS[1]) \
         if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then \
           redis.call('PEXPIRE', KEYS[2], ARGV[2]) \
         end \
         return 1",
    )
});

/// The sign-in state in Valkey or Redis, shared by the replicas that use the same server, key
/// prefix, database and key. See the [module docs](self).
#[derive(Clone)]
pub struct ValkeyStore {
    conn: Link,
    /// `valkey at <host>:<port>`, for errors.
    name: String,
    keys: Keys,
    sealed: Sealed,
    /// How long a transport session's grants stay unused.
    session_grant_ttl: Duration,
}

impl fmt::Debug for ValkeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyStore")
            .field("store", &self.name)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// The error of an operation on the store named `store`.
pub(super) fn unavailable(store: &str, source: impl Into<muster_core::BoxError>) -> SignInStoreError {
    SignInStoreError::unavailable(store, source)
}

impl ValkeyStore {
    /// The store `options` describe, with values sealed under `key`. Connects on first use (a
    /// Valkey that is down does not stop a gateway from starting); refused when the options do
    /// not describe a server, or outside a Tokio runtime.
    pub fn new(options: &ValkeyOptions, key: &GrantStoreKey) -> Result<Self, ValkeyOptionsError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ValkeyOptionsError::NoRuntime);
        }
        let target = options.target(TIMEOUT)?;
        let name = format!("valkey at {}:{}", target.host, target.port);
        let conn = Link::new(target);
        Ok(Self {
            conn,
            name,
            keys: Keys::new(options.key_prefix(), key),
            sealed: Sealed::new(Sealer::new(key)),
            session_grant_ttl: options.session_grant_ttl(),
        })
    }

    /// The sign-in notices of the replicas that share this store, through Valkey's pub/sub
    /// (each call subscribes anew: make it once per gateway).
    pub fn notices(&self) -> ValkeyNotices {
        ValkeyNotices::new(self.conn(), self.name.clone(), self.keys.notices(), self.sealed.clone())
    }

    /// The time to live (ms) of `owner`'s grants: a transport session's, none for a person's or
    /// a principal's.
    fn session_ttl(&self, owner: &str) -> Option<u64> {
        (!super::is_durable_owner(owner)).then(|| lock::millis(self.session_grant_ttl))
    }

    fn conn(&self) -> Link {
        self.conn.clone()
    }

    fn fail(&self, source: impl Into<muster_core::BoxError>) -> SignInStoreError {
        unavailable(&self.name, source)
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn()).await.map_err(|e| self.fail(e))
    }

    /// The pending sign-in of id `state_id`, with its state, while it waits.
    async fn pending_by_id(&self, state_id: &str) -> Result<Option<(String, PendingSignIn)>> {
        let sealed: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(self.keys.pending(state_id))).await?;
        self.open_pending(state_id, sealed)
    }

    fn open_pending(&self, state_id: &str, sealed: Option<Vec<u8>>) -> Result<Option<(String, PendingSignIn)>> {
        let Some(sealed) = sealed else { return Ok(None) };
        let record: PendingRecord = self.sealed.open(PENDING, state_id, sealed).map_err(|e| self.fail(e))?;
        Ok(record.into_pending())
    }

    /// Deletes the exchange entries the group index `index` lists, and the index.
    async fn forget_exchange_group(&self, index: String) -> Result<()> {
        let entries: Vec<String> = self.query(redis::cmd("SMEMBERS").arg(&index)).await?;
        self.query::<()>(redis::cmd("DEL").arg(&index).arg(&entries)).await
    }

    /// Deletes every exchange entry whose key starts with `prefix`, opening each (a prefix that
    /// is not a whole session's, which the gateway never asks).
    async fn forget_exchange_scan(&self, prefix: &str) -> Result<()> {
        let pattern = self.keys.every_exchange();
        let mut cursor = 0u64;
        loop {
            let (next, names): (u64, Vec<String>) = self
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(200),
                )
                .await?;
            for name in names {
                let Some(id) = name.rsplit(':').next() else { continue };
                let sealed: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(&name)).await?;
                let Some(sealed) = sealed else { continue };
                let record: ExchangeRecord = self.sealed.open(EXCHANGE, id, sealed).map_err(|e| self.fail(e))?;
                if record.key.starts_with(prefix) {
                    self.query::<()>(redis::cmd("DEL").arg(&name)).await?;
                }
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// Keeps `grant` as `owner`'s for `server` with `script` ([`PUT_GRANT`], or [`REPLACE_GRANT`]
    /// while the grant there is of generation `expected`): what the script answers.
    async fn keep_grant<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        owner: &str,
        server: &str,
        grant: &Grant,
        expected: Option<u64>,
    ) -> Result<T> {
        let (key, id) = self.keys.grant(owner, server);
        let sealed = self
            .sealed
            .seal(GRANT, &id, &GrantValue::from(grant))
            .map_err(|e| self.fail(e))?;
        let mut invocation = script.key(key);
        invocation
            .key(self.keys.grants_of(owner))
            .key(self.keys.generation())
            .arg(sealed)
            .arg(server)
            .arg(self.session_ttl(owner).unwrap_or(0));
        if let Some(expected) = expected {
            invocation.arg(expected);
        }
        invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail(e))
    }

    /// Runs `work` in the background (the store's forgetting, told from code that cannot wait).
    fn in_background(&self, what: &'static str, work: impl Future<Output = Result<()>> + Send + 'static) {
        let run = async move {
            if let Err(e) = work.await {
                tracing::warn!(error = %e, "{what} failed; the entries expire by themselves");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(run)),
            Err(_) => tracing::warn!("{what} outside a runtime: the entries expire by themselves"),
        }
    }
}

#[async_trait]
impl SignInStore for ValkeyStore {
    async fn put_pending(&self, state: &str, pending: PendingSignIn) -> Result<()> {
        let Ok(lifetime) = (pending.expires_at - chrono::Utc::now()).to_std() else {
            return Ok(()); // expired already: nothing waits
        };
        let ttl = lock::millis(lifetime).max(1);
        let id = self.keys.state_id(state);
        let latest = self.keys.latest(&pending.request.session, &pending.request.server);
        let sealed = self
            .sealed
            .seal(PENDING, &id, &PendingRecord::new(state, &pending))
            .map_err(|e| self.fail(e))?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(self.keys.pending(&id))
            .arg(sealed)
            .arg("PX")
            .arg(ttl)
            .ignore()
            .cmd("SET")
            .arg(latest)
            .arg(&id)
            .arg("PX")
            .arg(ttl)
            .ignore();
        pipe.query_async::<()>(&mut self.conn()).await.map_err(|e| self.fail(e))
    }

    async fn pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        Ok(self.pending_by_id(&self.keys.state_id(state)).await?.map(|(_, p)| p))
    }

    async fn latest_pending(&self, session: &str, server: &str) -> Result<Option<(String, PendingSignIn)>> {
        let id: Option<String> = self
            .query(redis::cmd("GET").arg(self.keys.latest(session, server)))
            .await?;
        match id {
            Some(id) => self.pending_by_id(&id).await,
            None => Ok(None),
        }
    }

    async fn set_browser_redirect(&self, state: &str, redirect: &str) -> Result<bool> {
        let id = self.keys.state_id(state);
        let key = self.keys.pending(&id);
        loop {
            let Some(before): Option<Vec<u8>> = self.query(redis::cmd("GET").arg(&key)).await? else {
                return Ok(false);
            };
            let mut record: PendingRecord = self
                .sealed
                .open(PENDING, &id, before.clone())
                .map_err(|e| self.fail(e))?;
            record.set_browser_redirect(redirect);
            let after = self.sealed.seal(PENDING, &id, &record).map_err(|e| self.fail(e))?;
            let replaced: i64 = REPLACE_UNCHANGED
                .key(&key)
                .arg(before)
                .arg(after)
                .invoke_async(&mut self.conn())
                .await
                .map_err(|e| self.fail(e))?;
            if replaced == 1 {
                return Ok(true);
            }
            // Changed (another redirect) or gone (taken, expired) since it was read: read again.
        }
    }

    async fn take_pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        let id = self.keys.state_id(state);
        let sealed: Option<Vec<u8>> = self.query(redis::cmd("GETDEL").arg(self.keys.pending(&id))).await?;
        Ok(self.open_pending(&id, sealed)?.map(|(_, p)| p))
    }

    async fn registration(&self, issuer: &str) -> Result<Option<ClientRegistration>> {
        let (key, id) = self.keys.registration(issuer);
        let sealed: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(key)).await?;
        let Some(sealed) = sealed else { return Ok(None) };
        let record: ClientValue = self.sealed.open(CLIENT, &id, sealed).map_err(|e| self.fail(e))?;
        Ok(Some(record.into()))
    }

    async fn put_registration(&self, issuer: &str, registration: ClientRegistration) -> Result<()> {
        let (key, id) = self.keys.registration(issuer);
        let sealed = self
            .sealed
            .seal(CLIENT, &id, &ClientValue::from(&registration))
            .map_err(|e| self.fail(e))?;
        self.query(redis::cmd("SET").arg(key).arg(sealed)).await
    }

    async fn remove_registration(&self, issuer: &str) -> Result<()> {
        self.query(redis::cmd("DEL").arg(self.keys.registration(issuer).0))
            .await
    }

    async fn grant(&self, owner: &str, server: &str) -> Result<Option<HeldGrant>> {
        let (key, id) = self.keys.grant(owner, server);
        let read = redis::cmd("HMGET").arg(&key).arg("g").arg("s").to_owned();
        let (generation, sealed): (Option<u64>, Option<Vec<u8>>) = match self.session_ttl(owner) {
            None => self.query(&read).await?,
            // A transport session's grant: reading it starts its time to live again, in the
            // same round trip.
            Some(ttl) => {
                let mut pipe = redis::pipe();
                pipe.add_command(read)
                    .cmd("PEXPIRE")
                    .arg(&key)
                    .arg(ttl)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(self.keys.grants_of(owner))
                    .arg(ttl)
                    .ignore();
                let (answer,): ((Option<u64>, Option<Vec<u8>>),) =
                    pipe.query_async(&mut self.conn()).await.map_err(|e| self.fail(e))?;
                answer
            }
        };
        let (Some(generation), Some(sealed)) = (generation, sealed) else {
            return Ok(None);
        };
        let record: GrantValue = self.sealed.open(GRANT, &id, sealed).map_err(|e| self.fail(e))?;
        Ok(Some(HeldGrant {
            grant: record.into(),
            generation,
        }))
    }

    async fn put_grant(&self, owner: &str, server: &str, grant: Grant) -> Result<u64> {
        self.keep_grant(&PUT_GRANT, owner, server, &grant, None).await
    }

    async fn replace_grant(&self, owner: &str, server: &str, generation: u64, grant: Grant) -> Result<Option<u64>> {
        self.keep_grant(&REPLACE_GRANT, owner, server, &grant, Some(generation))
            .await
    }

    async fn remove_grant(&self, owner: &str, server: &str) -> Result<Option<Grant>> {
        let (key, id) = self.keys.grant(owner, server);
        let sealed: Option<Vec<u8>> = REMOVE_GRANT
            .key(key)
            .key(self.keys.grants_of(owner))
            .arg(server)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail(e))?;
        let Some(sealed) = sealed else { return Ok(None) };
        let record: GrantValue = self.sealed.open(GRANT, &id, sealed).map_err(|e| self.fail(e))?;
        Ok(Some(record.into()))
    }

    async fn servers_of(&self, owner: &str) -> Result<Vec<String>> {
        let mut servers: Vec<String> = self
            .query(redis::cmd("SMEMBERS").arg(self.keys.grants_of(owner)))
            .await?;
        servers.sort();
        Ok(servers)
    }

    async fn count_attempt(&self, who: &str, limit: usize, window: Duration) -> Result<Attempt> {
        let (counted, n): (i64, i64) = COUNT_ATTEMPT
            .key(self.keys.attempts(who))
            .arg(limit)
            .arg(lock::millis(window).max(1))
            .arg(lock::random_token())
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail(e))?;
        let n = u64::try_from(n).unwrap_or(0);
        Ok(if counted == 1 {
            Attempt::Counted(usize::try_from(n).unwrap_or(usize::MAX))
        } else {
            Attempt::Refused {
                retry_in: Duration::from_millis(n.max(1)),
            }
        })
    }

    async fn refresh_guard(&self, owner: &str, server: &str) -> Result<RefreshGuard> {
        lock::acquire(self.conn(), &self.name, self.keys.refresh(owner, server)).await
    }

    async fn exchange_guard(&self, key: &str) -> Result<RefreshGuard> {
        lock::acquire(self.conn(), &self.name, self.keys.exchange_lock(key)).await
    }

    async fn exchange_entry(&self, key: &str) -> Result<Option<ExchangeEntry>> {
        let (name, id, _) = self.keys.exchange(key);
        let sealed: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(name)).await?;
        let Some(sealed) = sealed else { return Ok(None) };
        let record: ExchangeRecord = self.sealed.open(EXCHANGE, &id, sealed).map_err(|e| self.fail(e))?;
        Ok((record.key == key).then(|| record.into_entry()))
    }

    async fn put_exchange_entry(&self, key: &str, entry: ExchangeEntry, fresh_for: Duration) -> Result<()> {
        let (name, id, index) = self.keys.exchange(key);
        let sealed = self
            .sealed
            .seal(EXCHANGE, &id, &ExchangeRecord::new(key, &entry))
            .map_err(|e| self.fail(e))?;
        PUT_EXCHANGE
            .key(name)
            .key(index)
            .arg(sealed)
            .arg(lock::millis(fresh_for).max(1))
            .invoke_async::<i64>(&mut self.conn())
            .await
            .map(drop)
            .map_err(|e| self.fail(e))
    }

    fn forget_exchange_entry(&self, key: &str) {
        let (name, _, index) = self.keys.exchange(key);
        let store = self.clone();
        self.in_background("forgetting an exchanged token", async move {
            let mut pipe = redis::pipe();
            pipe.cmd("DEL")
                .arg(&name)
                .ignore()
                .cmd("SREM")
                .arg(index)
                .arg(&name)
                .ignore();
            pipe.query_async::<()>(&mut store.conn())
                .await
                .map_err(|e| store.fail(e))
        });
    }

    fn forget_exchange_entries(&self, prefix: &str) {
        let store = self.clone();
        let group = keys::exchange_group_of(prefix);
        if group.len() == prefix.len() && prefix.ends_with('\0') {
            let index = self.keys.exchange_index(&self.keys.exchange_group(group));
            self.in_background("forgetting a session's exchanged tokens", async move {
                store.forget_exchange_group(index).await
            });
        } else {
            let prefix = prefix.to_owned();
            self.in_background("forgetting exchanged tokens", async move {
                store.forget_exchange_scan(&prefix).await
            });
        }
    }
}
