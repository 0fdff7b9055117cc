//! [`VectorCache`]: tool vectors kept from one snapshot build to the next, so that a rebuild
//! embeds only the tools that are new or changed.
//!
//! A gateway builds a snapshot on every change (a server connected, a list changed) and one for
//! each session that signed in to a server of its own. Embedding every tool again each time
//! costs a schema walk, a tokenisation and a sum of token vectors per tool (tens of
//! milliseconds at 10,000 tools); with the cache a rebuild of the same tools costs a hash of
//! each tool's name, description and schema text.
//!
//! A row is found by that hash, so a tool whose description or schema changed is embedded
//! again. The cache keeps the rows of the tools its last builds asked for: when it holds more
//! than twice the rows a build asked for (and more than [`VectorCache::SLACK`]), it keeps only
//! that build's rows.
//!
//! ```
//! use muster_catalog::rank::semantic::VectorCache;
//!
//! let cache = VectorCache::default();
//! assert!(cache.is_empty());
//! ```

use std::{
    collections::{HashMap, HashSet},
    hash::{DefaultHasher, Hash, Hasher},
    sync::Mutex,
};

use muster_core::ToolEntry;

/// One tool's quantised unit vector and its scale.
pub(super) type Row = (Box<[i8]>, f32);

/// Tool vectors by a hash of what each is computed from (the tool's name, description and
/// schema text), so that a rebuild embeds only new or changed tools. Shared by every snapshot
/// built with one [`SemanticRanking`](super::SemanticRanking) (its clones share it too); trimmed
/// to a build's rows once it holds more than twice them (and more than [`Self::SLACK`]).
#[derive(Debug, Default)]
pub struct VectorCache {
    rows: Mutex<HashMap<u64, Row>>,
}

impl VectorCache {
    /// Rows kept beyond twice a build's before the cache is trimmed.
    pub const SLACK: usize = 1024;

    /// How many tool vectors are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of `entry`'s row: what its vector is computed from (its name, description and
    /// input schema).
    pub(super) fn key(entry: &ToolEntry) -> u64 {
        let mut hasher = DefaultHasher::new();
        entry.name().hash(&mut hasher);
        entry.server_tool.hash(&mut hasher);
        entry.description().hash(&mut hasher);
        entry.tool.input_schema().as_str().hash(&mut hasher);
        hasher.finish()
    }

    /// The rows of `keys` that are kept (`None` where one is not).
    pub(super) fn get_all(&self, keys: &[u64]) -> Vec<Option<Row>> {
        let rows = self.lock();
        keys.iter().map(|key| rows.get(key).cloned()).collect()
    }

    /// Keeps `computed` rows, then trims to the rows of `used` (a build's keys) when the cache
    /// outgrew them.
    pub(super) fn keep(&self, computed: Vec<(u64, Row)>, used: &[u64]) {
        let mut rows = self.lock();
        rows.extend(computed);
        if rows.len() > used.len().saturating_mul(2).max(Self::SLACK) {
            let used: HashSet<u64> = used.iter().copied().collect();
            rows.retain(|key, _| used.contains(key));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Row>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}
