//! The refresh guard across replicas: a lock in Valkey, one key per grant.
//!
//! Taken with `SET key token NX PX 10000`, where the token is 16 random bytes of this holder:
//! a waiter tries again every 20 ms, then less often, up to every 200 ms. While held, a task
//! renews the expiry every 3 s, only while the key still holds this token (a Lua
//! compare-and-`PEXPIRE`); dropping the guard stops it and deletes the key, again only while it
//! holds this token (compare-and-`DEL`), so a holder whose lock lapsed never releases another's.
//! A replica that dies holding the lock holds it at most 10 s more.

use std::{sync::LazyLock, time::Duration};

use redis::Script;

use super::link::Link;

use super::unavailable;
use crate::state::{RefreshGuard, Result};

/// How long a lock lasts without renewal.
const LOCK_TTL: Duration = Duration::from_secs(10);
/// How often a held lock is renewed.
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// The first and the longest wait between two tries of a waiter.
const FIRST_RETRY: Duration = Duration::from_millis(20);
const LONGEST_RETRY: Duration = Duration::from_millis(200);

static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           return redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
         else return 0 end",
    )
});

static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           return redis.call('DEL', KEYS[1]) \
         else return 0 end",
    )
});

/// Waits until `key`'s lock is free and takes it; the guard renews it while held and releases
/// it when dropped.
pub(super) async fn acquire(mut conn: Link, store: &str, key: String) -> Result<RefreshGuard> {
    let token = random_token();
    let mut wait = FIRST_RETRY;
    loop {
        let taken: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(millis(LOCK_TTL))
            .query_async(&mut conn)
            .await
            .map_err(|e| unavailable(store, e))?;
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LONGEST_RETRY);
    }
    let renewal = tokio::spawn(renew(conn.clone(), key.clone(), token.clone()));
    Ok(RefreshGuard::new(HeldLock {
        conn,
        key,
        token,
        renewal,
    }))
}

/// Renews the lock every [`RENEW_EVERY`] until it is no longer this holder's.
async fn renew(mut conn: Link, key: String, token: String) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let renewed: redis::RedisResult<i64> = RENEW
            .key(&key)
            .arg(&token)
            .arg(millis(LOCK_TTL))
            .invoke_async(&mut conn)
            .await;
        match renewed {
            Ok(1) => {}
            Ok(_) => {
                tracing::warn!("a refresh outlived its lock in valkey; another refresh of the grant may run");
                return;
            }
            Err(e) => tracing::warn!(error = %e, "a refresh lock could not be renewed in valkey"),
        }
    }
}

/// A held lock: released (if still this holder's) when dropped.
struct HeldLock {
    conn: Link,
    key: String,
    token: String,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.renewal.abort();
        let (mut conn, key, token) = (
            self.conn.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.token),
        );
        let release = async move {
            let released: redis::RedisResult<i64> = RELEASE.key(&key).arg(&token).invoke_async(&mut conn).await;
            if let Err(e) = released {
                tracing::warn!(error = %e, "a refresh lock could not be released in valkey; it expires by itself");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(release)),
            Err(_) => tracing::warn!("a refresh lock dropped outside a runtime expires by itself"),
        }
    }
}

/// 16 random bytes in hex: a lock holder's token, an attempt's member.
pub(super) fn random_token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
