//! [`KeyedLocks`]: one-at-a-time locks of this process, one per owner and server, each in the map
//! only while someone holds or waits for it. The refresh guard of the memory store, and the
//! in-process half of the fallback's.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::OwnedMutexGuard;

use super::RefreshGuard;

/// An owner and a server.
pub(super) type GrantKey = (String, String);

/// The locks by owner and server.
type Locks = Arc<Mutex<HashMap<GrantKey, Arc<tokio::sync::Mutex<()>>>>>;

/// One lock per owner and server, in this process.
#[derive(Debug, Default)]
pub(super) struct KeyedLocks {
    locks: Locks,
}

impl KeyedLocks {
    /// Waits until nobody else holds `key`'s lock and takes it; the guard releases it when
    /// dropped.
    pub(super) async fn lock(&self, key: GrantKey) -> RefreshGuard {
        let lock_of_key = Arc::clone(guard(&self.locks).entry(key.clone()).or_default());
        let held = lock_of_key.lock_owned().await;
        RefreshGuard::new(Held {
            locks: Arc::clone(&self.locks),
            key,
            held: Some(held),
        })
    }

    /// How many locks exist (held or waited for).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        guard(&self.locks).len()
    }
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One held lock: released on drop, and its entry removed when nobody else holds or waits for
/// it.
struct Held {
    locks: Locks,
    key: GrantKey,
    held: Option<OwnedMutexGuard<()>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Unlock first: the guard holds a reference to the lock, which must not count below.
        drop(self.held.take());
        let mut locks = guard(&self.locks);
        // Only the map's reference left: nobody holds or waits (waiters clone under this lock).
        if locks.get(&self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&self.key);
        }
    }
}
