//! [`Copies`]: the last-known copies of grants a
//! [`GrantFallback`](super::GrantFallback) keeps, by owner and server, at most
//! `capacity` of them; and which of them were changed here and wait to be written back.

use std::collections::HashMap;

use super::super::{HeldGrant, locks::GrantKey};
use crate::oauth::grant::Grant;

/// How many copies are kept by default.
pub(super) const DEFAULT_CAPACITY: usize = 10_000;

/// The copies, and whether a write-back retry runs in the background.
#[derive(Debug)]
pub(super) struct Copies {
    entries: HashMap<GrantKey, Kept>,
    capacity: usize,
    /// Advanced by every use, for eviction (the least recently used goes first).
    clock: u64,
    /// A background task retries the write-backs.
    pub(super) retrying: bool,
}

#[derive(Debug)]
struct Kept {
    held: HeldGrant,
    /// Set while the grant was changed here and not written to the store yet: the store's
    /// generation the change started from.
    unsynced_from: Option<u64>,
    /// A write-back of it runs.
    writing: bool,
    /// Advanced by every change, so that a write-back knows whether it wrote the copy as it is.
    version: u64,
    /// The clock at its last use.
    used: u64,
}

/// A write-back begun: what it writes, and over which generation.
#[derive(Debug)]
pub(super) struct WriteBack {
    pub(super) grant: Grant,
    pub(super) from: u64,
    version: u64,
}

/// What a write-back made of the copy.
#[derive(Debug)]
pub(super) enum Written {
    /// Written: the copy is the store's grant now, of this generation.
    Landed(Box<HeldGrant>),
    /// Not written, and the copy dropped: the grant it was changed from was replaced (a new
    /// sign-in) or removed.
    Dropped,
    /// Nothing for this call to tell: another write-back runs, the copy changed again meanwhile
    /// (the newer change waits for its own write-back), or it went.
    Elsewhere,
}

impl Copies {
    pub(super) fn new() -> Self {
        Self {
            entries: HashMap::new(),
            capacity: DEFAULT_CAPACITY,
            clock: 0,
            retrying: false,
        }
    }

    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The copy of `key`, if any.
    pub(super) fn get(&mut self, key: &GrantKey) -> Option<HeldGrant> {
        let now = self.tick();
        let copy = self.entries.get_mut(key)?;
        copy.used = now;
        Some(copy.held.clone())
    }

    /// The copy of `key` when it waits to be written back.
    pub(super) fn unsynced(&mut self, key: &GrantKey) -> Option<HeldGrant> {
        self.entries
            .get(key)
            .is_some_and(|c| c.unsynced_from.is_some())
            .then(|| self.get(key))
            .flatten()
    }

    pub(super) fn is_unsynced(&self, key: &GrantKey) -> bool {
        self.entries.get(key).is_some_and(|c| c.unsynced_from.is_some())
    }

    /// Whether any copy waits to be written back.
    pub(super) fn any_unsynced(&self) -> bool {
        self.entries.values().any(|c| c.unsynced_from.is_some())
    }

    /// The copies that wait to be written back.
    pub(super) fn unsynced_keys(&self) -> Vec<GrantKey> {
        self.entries
            .iter()
            .filter(|(_, c)| c.unsynced_from.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The servers `owner` holds copies for, by name.
    pub(super) fn servers_of(&self, owner: &str) -> Vec<String> {
        let mut servers: Vec<String> = self
            .entries
            .keys()
            .filter(|(o, _)| o == owner)
            .map(|(_, server)| server.clone())
            .collect();
        servers.sort();
        servers
    }

    /// The store answered `held` for `key`: kept when `copied` (else any copy goes), unless a
    /// change of this process waits to be written back, which is newer; what the caller gets.
    pub(super) fn read(&mut self, key: GrantKey, held: HeldGrant, copied: bool) -> HeldGrant {
        if let Some(newer) = self.unsynced(&key) {
            return newer;
        }
        self.written(key, held.clone(), copied);
        held
    }

    /// The store kept `held` for `key`: the copy, whatever it was, when `copied`; else no copy.
    pub(super) fn written(&mut self, key: GrantKey, held: HeldGrant, copied: bool) {
        if copied {
            self.keep(key, held);
        } else {
            self.entries.remove(&key);
        }
    }

    fn keep(&mut self, key: GrantKey, held: HeldGrant) {
        let now = self.tick();
        if let Some(copy) = self.entries.get_mut(&key) {
            copy.held = held;
            copy.unsynced_from = None;
            copy.version += 1;
            copy.used = now;
            return;
        }
        if self.entries.len() >= self.capacity {
            self.evict();
        }
        let copy = Kept {
            held,
            unsynced_from: None,
            writing: false,
            version: 0,
            used: now,
        };
        self.entries.insert(key, copy);
    }

    /// Drops the least recently used copy, one written to the store if there is one.
    fn evict(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, c)| (c.unsynced_from.is_some(), c.used))
            .map(|(k, c)| (k.clone(), c.unsynced_from.is_some()));
        if let Some((key, unsynced)) = oldest {
            if unsynced {
                tracing::warn!(
                    server = key.1,
                    capacity = self.capacity,
                    "a grant refreshed here is dropped before it was written back: every kept copy waits"
                );
            }
            self.entries.remove(&key);
        }
    }

    /// `key`'s grant was changed here to `grant`, of this process's generation `generation`,
    /// while the store could not keep it: whether there was a copy to change (a grant this
    /// process knows).
    pub(super) fn changed_here(&mut self, key: &GrantKey, grant: Grant, generation: u64) -> bool {
        let now = self.tick();
        let Some(copy) = self.entries.get_mut(key) else {
            return false;
        };
        copy.unsynced_from = copy.unsynced_from.or(Some(copy.held.generation));
        copy.held = HeldGrant { grant, generation };
        copy.version += 1;
        copy.used = now;
        true
    }

    /// Begins the write-back of `key`'s copy, when it waits for one and none runs.
    pub(super) fn begin_write_back(&mut self, key: &GrantKey) -> Option<WriteBack> {
        let copy = self.entries.get_mut(key)?;
        let from = copy.unsynced_from?;
        if copy.writing {
            return None;
        }
        copy.writing = true;
        Some(WriteBack {
            grant: copy.held.grant.clone(),
            from,
            version: copy.version,
        })
    }

    /// Ends `write_back` of `key`: the store answered `outcome` (the generation it kept, or
    /// `None` when the grant there was not the one the copy changed from), or failed (`None`).
    pub(super) fn end_write_back(
        &mut self,
        key: &GrantKey,
        write_back: &WriteBack,
        outcome: Option<Option<u64>>,
    ) -> Written {
        let Some(copy) = self.entries.get_mut(key) else {
            return Written::Elsewhere;
        };
        copy.writing = false;
        match outcome {
            None => Written::Elsewhere,
            Some(Some(generation)) if copy.version == write_back.version => {
                copy.unsynced_from = None;
                copy.held.generation = generation;
                Written::Landed(Box::new(copy.held.clone()))
            }
            Some(Some(generation)) => {
                // Changed here again meanwhile: the newer change is over what was written now.
                if copy.unsynced_from.is_some() {
                    copy.unsynced_from = Some(generation);
                }
                Written::Elsewhere
            }
            Some(None) if copy.unsynced_from == Some(write_back.from) => {
                self.entries.remove(key);
                Written::Dropped
            }
            Some(None) => Written::Elsewhere,
        }
    }

    /// The store has no grant for `key`: its copy goes, unless it waits to be written back
    /// (the write-back finds out).
    pub(super) fn gone(&mut self, key: &GrantKey) {
        if !self.is_unsynced(key) {
            self.entries.remove(key);
        }
    }

    /// The grant of `key` was removed: its copy goes.
    pub(super) fn remove(&mut self, key: &GrantKey) {
        self.entries.remove(key);
    }
}
