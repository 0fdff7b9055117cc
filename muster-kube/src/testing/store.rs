//! The object store: JSON objects by type, namespace and name, one resourceVersion counter, and
//! the bounded history of changes that watches resume from.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    hash::{BuildHasher, RandomState},
    sync::Arc,
};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{
    resource::{Registry, ResourceType},
    select::{FieldSelector, LabelSelector},
    status::ApiError,
};

/// How many list snapshots (paginated lists in progress) are kept for `continue` tokens.
const SNAPSHOT_LIMIT: usize = 64;

/// Where an object lives: its type (index into the registry), namespace (empty when
/// cluster-scoped) and name. Ordered as etcd orders keys, so lists come out sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) type_index: usize,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// What a change did to its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One change, as the history keeps it and watches replay it.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) resource_version: u64,
    pub(crate) kind: ChangeKind,
    pub(crate) type_index: usize,
    pub(crate) namespace: String,
    /// The object after the change (for a deletion: its last state, at the deletion's
    /// resourceVersion).
    pub(crate) object: Value,
    /// The object before the change, for watches with selectors.
    pub(crate) previous: Option<Value>,
}

/// What open watches receive.
#[derive(Debug, Clone)]
pub(crate) enum Signal {
    Change(Arc<Change>),
    /// Send a bookmark at this resourceVersion (every change up to it was sent before).
    Bookmark(u64),
}

/// A paginated list in progress: the matching objects at one resourceVersion.
#[derive(Debug)]
struct Snapshot {
    resource_version: u64,
    items: Vec<Value>,
}

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) items: Vec<Value>,
    pub(crate) resource_version: u64,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining: Option<usize>,
}

/// Which objects a list or watch wants.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub(crate) type_index: usize,
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Filter {
    pub(crate) fn everything(type_index: usize, namespace: Option<String>) -> Self {
        Self {
            type_index,
            namespace,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
        }
    }

    pub(crate) fn matches(&self, type_index: usize, namespace: &str, object: &Value) -> bool {
        type_index == self.type_index
            && self.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }
}

/// The objects, the counter and the history.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) registry: Registry,
    objects: BTreeMap<Key, Value>,
    resource_version: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Watches from a resourceVersion below this are answered with 410 Expired.
    floor: u64,
    snapshots: BTreeMap<u64, Snapshot>,
    next_snapshot: u64,
    /// `openAPIV3Schema`s registered for CEL validation and defaulting, by type.
    pub(crate) schemas: HashMap<usize, Value>,
    signals: broadcast::Sender<Signal>,
    uid_hasher: RandomState,
    uid_counter: u64,
}

impl Store {
    pub(crate) fn new(registry: Registry, history_limit: usize, signals: broadcast::Sender<Signal>) -> Self {
        Self {
            registry,
            objects: BTreeMap::new(),
            resource_version: 0,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            floor: 0,
            snapshots: BTreeMap::new(),
            next_snapshot: 0,
            schemas: HashMap::new(),
            signals,
            uid_hasher: RandomState::new(),
            uid_counter: 0,
        }
    }

    pub(crate) fn resource_type(&self, index: usize) -> &ResourceType {
        self.registry.get(index)
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.signals.subscribe()
    }

    /// A fresh uid in the UUID v4 text form.
    pub(crate) fn new_uid(&mut self) -> String {
        self.uid_counter += 1;
        let high = self.uid_hasher.hash_one(self.uid_counter);
        let low = self.uid_hasher.hash_one((self.uid_counter, high));
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xffff,
            high & 0x0fff,
            ((low >> 48) & 0x3fff) | 0x8000,
            low & 0xffff_ffff_ffff
        )
    }

    /// Five characters as `generateName` appends them.
    pub(crate) fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.uid_counter += 1;
        let mut bits = self.uid_hasher.hash_one(("suffix", self.uid_counter));
        (0..5)
            .map(|_| {
                let c = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
                bits /= ALPHABET.len() as u64;
                c as char
            })
            .collect()
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Stores `object` under `key` (or removes it, for `None`) at the next resourceVersion,
    /// records the change and tells the watches. Returns the stored object (for a deletion:
    /// the last state at the deletion's resourceVersion).
    pub(crate) fn commit(&mut self, key: Key, object: Option<Value>) -> Option<Value> {
        let previous = self.objects.get(&key).cloned();
        let (kind, mut object) = match (object, previous.clone()) {
            (Some(object), None) => (ChangeKind::Added, object),
            (Some(object), Some(_)) => (ChangeKind::Modified, object),
            (None, Some(last)) => (ChangeKind::Deleted, last),
            (None, None) => return None,
        };
        self.resource_version += 1;
        let rv = self.resource_version;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        if kind == ChangeKind::Deleted {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key.clone(), object.clone());
        }
        let change = Arc::new(Change {
            resource_version: rv,
            kind,
            type_index: key.type_index,
            namespace: key.namespace,
            object: object.clone(),
            previous,
        });
        if self.history.len() >= self.history_limit
            && let Some(dropped) = self.history.pop_front()
        {
            self.floor = dropped.resource_version;
        }
        self.history.push_back(Arc::clone(&change));
        // No receiver (no watch open) is not an error.
        let _ = self.signals.send(Signal::Change(change));
        Some(object)
    }

    /// The changes after `resource_version` that `filter`'s type has, or 410 when the history
    /// no longer reaches back that far.
    pub(crate) fn changes_since(&self, resource_version: u64, type_index: usize) -> Result<Vec<Arc<Change>>, ApiError> {
        if resource_version < self.floor {
            return Err(ApiError::expired(format!(
                "too old resource version: {resource_version} ({})",
                self.floor
            )));
        }
        Ok(self
            .history
            .iter()
            .filter(|c| c.resource_version > resource_version && c.type_index == type_index)
            .cloned()
            .collect())
    }

    /// Every object `filter` matches, in key order.
    pub(crate) fn matching(&self, filter: &Filter) -> Vec<Value> {
        let start = Key {
            type_index: filter.type_index,
            namespace: filter.namespace.clone().unwrap_or_default(),
            name: String::new(),
        };
        self.objects
            .range(start..)
            .take_while(|(k, _)| {
                k.type_index == filter.type_index && filter.namespace.as_deref().is_none_or(|ns| ns == k.namespace)
            })
            .filter(|(k, v)| filter.matches(k.type_index, &k.namespace, v))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// A list page: the first (`continue_token` `None`) takes a snapshot when `limit` cuts it.
    pub(crate) fn list(
        &mut self,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Page, ApiError> {
        let (snapshot_id, offset) = match continue_token {
            Some(token) => {
                let parsed = token
                    .split_once(':')
                    .and_then(|(id, offset)| Some((id.parse::<u64>().ok()?, offset.parse::<usize>().ok()?)));
                let (id, offset) =
                    parsed.ok_or_else(|| ApiError::bad_request(format!("invalid continue token {token:?}")))?;
                if !self.snapshots.contains_key(&id) {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    ));
                }
                (id, offset)
            }
            None => {
                let items = self.matching(filter);
                let resource_version = self.resource_version;
                if limit.is_none_or(|l| l == 0 || items.len() <= l) {
                    return Ok(Page {
                        items,
                        resource_version,
                        continue_token: None,
                        remaining: None,
                    });
                }
                self.next_snapshot += 1;
                let id = self.next_snapshot;
                self.snapshots.insert(
                    id,
                    Snapshot {
                        resource_version,
                        items,
                    },
                );
                while self.snapshots.len() > SNAPSHOT_LIMIT {
                    self.snapshots.pop_first();
                }
                (id, 0)
            }
        };
        let Some(snapshot) = self.snapshots.get(&snapshot_id) else {
            return Err(ApiError::internal("list snapshot vanished"));
        };
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let end = offset.saturating_add(limit).min(snapshot.items.len());
        let items = snapshot
            .items
            .get(offset..end)
            .map(<[Value]>::to_vec)
            .unwrap_or_default();
        let resource_version = snapshot.resource_version;
        if end < snapshot.items.len() {
            let remaining = snapshot.items.len() - end;
            Ok(Page {
                items,
                resource_version,
                continue_token: Some(format!("{snapshot_id}:{end}")),
                remaining: Some(remaining),
            })
        } else {
            self.snapshots.remove(&snapshot_id);
            Ok(Page {
                items,
                resource_version,
                continue_token: None,
                remaining: None,
            })
        }
    }

    /// Forgets the history and list snapshots: watches resuming from before now get 410.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.snapshots.clear();
        self.floor = self.resource_version;
    }

    /// Asks every open watch for a bookmark at the current resourceVersion.
    pub(crate) fn bookmark(&self) {
        let _ = self.signals.send(Signal::Bookmark(self.resource_version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(history: usize) -> Store {
        let (tx, _) = broadcast::channel(16);
        Store::new(Registry::new(ResourceType::defaults()), history, tx)
    }

    fn key(name: &str) -> Key {
        Key {
            type_index: 3,
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn history_beyond_its_limit_expires_old_resource_versions() {
        let mut store = store(2);
        for name in ["a", "b", "c"] {
            store.commit(key(name), Some(json!({"metadata": {"name": name}})));
        }
        assert_eq!(store.changes_since(1, 3).expect("kept").len(), 2);
        let err = store.changes_since(0, 3).expect_err("expired");
        assert_eq!((err.code, err.reason), (410, "Expired"));
        assert_eq!(err.message, "too old resource version: 0 (1)");
    }

    #[test]
    fn pages_come_from_one_snapshot() {
        let mut store = store(10);
        for name in ["a", "b", "c"] {
            store.commit(key(name), Some(json!({"metadata": {"name": name}})));
        }
        let filter = Filter::everything(3, Some("default".into()));
        let first = store.list(&filter, Some(2), None).expect("first page");
        assert_eq!((first.items.len(), first.remaining), (2, Some(1)));
        store.commit(key("d"), Some(json!({"metadata": {"name": "d"}})));
        let token = first.continue_token.expect("more");
        let second = store.list(&filter, Some(2), Some(&token)).expect("second page");
        assert_eq!(second.items.len(), 1, "d came after the snapshot");
        assert_eq!(second.resource_version, first.resource_version);
        assert!(second.continue_token.is_none());
    }

    #[test]
    fn uids_look_like_uuids_and_differ() {
        let mut store = store(1);
        let (a, b) = (store.new_uid(), store.new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
