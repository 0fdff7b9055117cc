//! Field ownership: server-side apply and the `managedFields` every write keeps.
//!
//! Ownership is tracked per leaf: a path of object keys down to a scalar, a list or an empty
//! object. Lists are atomic (one leaf), which is what a CRD schema without
//! `x-kubernetes-list-type` gives; maps and objects are granular. The sets are stored on the
//! object as `metadata.managedFields` entries in the `FieldsV1` encoding
//! (`{"f:spec":{"f:x":{}}}`), one entry per manager, operation (`Apply` or `Update`) and
//! subresource, as the real server keys them.
//!
//! - **Apply** by manager M (`apply`): M's applied set becomes exactly the leaves of the
//!   applied configuration (null leaves count as omitted). A leaf another manager owns with a
//!   different value is a conflict (409) unless `force`, which moves the ownership to M. Shared
//!   values are co-owned. Leaves M applied before and omits now are removed from the object
//!   unless another manager owns them.
//! - **Update** (create, replace, merge/JSON patch; `record_update`): the leaves whose value
//!   changed move to the writer's `Update` entry, taken from every other manager. Updates never
//!   conflict.
//! - After either, ownership of paths the object no longer has is dropped, and entries left
//!   empty disappear.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::status::ApiError;

/// A path of object keys from the object's root.
pub(crate) type FieldPath = Vec<String>;
/// A set of owned paths.
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// The metadata fields the server sets itself; they are never owned.
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// `Apply` or `Update`, as `managedFields[].operation` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedEntry {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) subresource: Option<String>,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) fields: FieldSet,
}

/// Who writes: the manager, its operation and the subresource written to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    pub(crate) manager: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) api_version: &'a str,
    pub(crate) now: &'a str,
}

impl ManagedEntry {
    fn is(&self, writer: &Writer<'_>, operation: Operation) -> bool {
        self.manager == writer.manager
            && self.operation == operation
            && self.subresource.as_deref() == writer.subresource
    }

    fn same_identity(&self, other: &ManagedEntry) -> bool {
        self.manager == other.manager && self.operation == other.operation && self.subresource == other.subresource
    }

    /// The manager as conflict messages print it (`printManager` in apimachinery).
    fn describe(&self) -> String {
        let mut text = format!("\"{}\"", self.manager);
        if let Some(subresource) = &self.subresource {
            text.push_str(&format!(" with subresource \"{subresource}\""));
        }
        if self.operation == Operation::Update {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }

    fn to_json(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(&self.fields),
        });
        if let (Some(subresource), Some(map)) = (&self.subresource, entry.as_object_mut()) {
            map.insert("subresource".into(), json!(subresource));
        }
        entry
    }

    fn from_json(entry: &Value) -> Option<Self> {
        let operation = match entry.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let mut fields = FieldSet::new();
        decode_fields(entry.get("fieldsV1")?, &mut Vec::new(), &mut fields);
        Some(Self {
            manager: entry.get("manager")?.as_str()?.to_owned(),
            operation,
            subresource: entry.get("subresource").and_then(Value::as_str).map(str::to_owned),
            api_version: entry
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            time: entry.get("time").and_then(Value::as_str).unwrap_or_default().to_owned(),
            fields,
        })
    }
}

/// `FieldsV1`: nested `f:<key>` maps, `{}` at owned leaves, `.` where a path that is also a
/// prefix of another owned path is owned itself.
fn encode_fields(fields: &FieldSet) -> Value {
    fn insert(node: &mut Map<String, Value>, path: &[String]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let child = node
            .entry(format!("f:{first}"))
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = child {
            insert(map, rest);
        }
    }
    let mut root = Map::new();
    for path in fields {
        insert(&mut root, path);
    }
    // A node that gained children after being marked a leaf needs its `.`.
    fn mark_owned_parents(node: &mut Map<String, Value>, owned: &FieldSet, path: &mut FieldPath) {
        for (key, child) in node.iter_mut() {
            let Some(name) = key.strip_prefix("f:") else { continue };
            path.push(name.to_owned());
            if let Value::Object(map) = child {
                let has_children = map.keys().any(|k| k.starts_with("f:"));
                if has_children && owned.contains(path) {
                    map.insert(".".into(), Value::Object(Map::new()));
                }
                mark_owned_parents(map, owned, path);
            }
            path.pop();
        }
    }
    mark_owned_parents(&mut root, fields, &mut Vec::new());
    Value::Object(root)
}

fn decode_fields(node: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    let Some(map) = node.as_object() else { return };
    let children: Vec<_> = map.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    if (children.is_empty() || map.contains_key(".")) && !path.is_empty() {
        out.insert(path.clone());
    }
    for (key, child) in children {
        path.push(key.trim_start_matches("f:").to_owned());
        decode_fields(child, path, out);
        path.pop();
    }
}

/// The entries stored on `object`.
pub(crate) fn read_entries(object: &Value) -> Vec<ManagedEntry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(ManagedEntry::from_json).collect())
        .unwrap_or_default()
}

fn write_entries(object: &mut Value, entries: &[ManagedEntry]) {
    let Some(map) = object.as_object_mut() else { return };
    let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        let list = entries.iter().map(ManagedEntry::to_json).collect();
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

/// The part of an object that ownership covers: no `apiVersion`, `kind` or system metadata.
pub(crate) fn tracked(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            for key in SYSTEM_METADATA {
                metadata.remove(*key);
            }
            if metadata.is_empty() {
                map.remove("metadata");
            }
        }
    }
    copy
}

/// The leaves under `value` (nulls left out when `skip_nulls`).
fn leaves(value: &Value, path: &mut FieldPath, skip_nulls: bool, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(key.clone());
                leaves(child, path, skip_nulls, out);
                path.pop();
            }
        }
        Value::Null if skip_nulls => {}
        _ if path.is_empty() => {}
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The leaves whose value differs between `old` and `new` (on either side).
fn diff_leaves(old: Option<&Value>, new: Option<&Value>, path: &mut FieldPath, out: &mut FieldSet) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) if !path.is_empty() || a != b => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                path.push(key.clone());
                diff_leaves(a.get(key), b.get(key), path, out);
                path.pop();
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            for side in [a, b].into_iter().flatten() {
                leaves(side, path, false, out);
            }
        }
    }
}

pub(crate) fn get_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |node, key| node.get(key))
}

fn remove_path(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = value;
    for key in parents {
        match node.get_mut(key) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Some(map) = node.as_object_mut() {
        map.remove(last);
    }
}

/// Deep-merges an applied configuration: objects key by key, other values replace, nulls are
/// left out.
fn merge_applied(target: &mut Value, applied: &Value) {
    let Value::Object(applied_map) = applied else { return };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else { return };
    for (key, value) in applied_map {
        match value {
            Value::Null => {}
            Value::Object(_) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge_applied(slot, value);
            }
            other => {
                target_map.insert(key.clone(), other.clone());
            }
        }
    }
}

fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Server-side apply of `applied` (already cut to the subresource's scope) onto `old`.
///
/// `base` is what the apply starts from: `old` itself, or a fresh object (metadata stamped)
/// when the apply creates it. Returns the new object with its `managedFields`.
pub(crate) fn apply(
    old: Option<&Value>,
    base: Value,
    applied: &Value,
    writer: &Writer<'_>,
    force: bool,
) -> Result<Value, ApiError> {
    let applied = tracked(applied);
    let mut applied_leaves = FieldSet::new();
    leaves(&applied, &mut Vec::new(), true, &mut applied_leaves);

    let old_entries = old.map(read_entries).unwrap_or_default();
    let mut entries = old_entries.clone();
    let mine = entries.iter().position(|e| e.is(writer, Operation::Apply));

    let mut result = base;
    // Leaves this manager applied before, omits now, and no one else owns: removed.
    if let Some(index) = mine {
        for path in &entries[index].fields {
            let owned_elsewhere = entries
                .iter()
                .enumerate()
                .any(|(i, e)| i != index && e.fields.contains(path));
            if !applied_leaves.contains(path) && !owned_elsewhere {
                remove_path(&mut result, path);
            }
        }
    }
    merge_applied(&mut result, &applied);

    let before = old.cloned().unwrap_or(Value::Null);
    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) == mine {
            continue;
        }
        for owned in &entry.fields {
            let touched = applied_leaves.iter().any(|p| related(p, owned));
            if touched && get_path(&before, owned) != get_path(&result, owned) {
                conflicts.push((i, owned.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(&entries, &conflicts));
        }
        for (i, path) in conflicts {
            entries[i].fields.remove(&path);
        }
    }

    let entry = ManagedEntry {
        manager: writer.manager.to_owned(),
        operation: Operation::Apply,
        subresource: writer.subresource.map(str::to_owned),
        api_version: writer.api_version.to_owned(),
        time: writer.now.to_owned(),
        fields: applied_leaves,
    };
    match mine {
        Some(index) => entries[index] = entry,
        None => entries.push(entry),
    }
    finish(&mut result, &old_entries, entries);
    Ok(result)
}

/// Records an update (create, replace, patch) by `writer` that turned `old` into `new`.
pub(crate) fn record_update(old: Option<&Value>, new: &mut Value, writer: &Writer<'_>) {
    let old_entries = old.map(read_entries).unwrap_or_default();
    let before = old.map(tracked).unwrap_or_else(|| json!({}));
    let after = tracked(new);
    let mut changed = FieldSet::new();
    diff_leaves(Some(&before), Some(&after), &mut Vec::new(), &mut changed);

    let mut entries = old_entries.clone();
    if !changed.is_empty() {
        for entry in entries.iter_mut() {
            if !entry.is(writer, Operation::Update) {
                entry.fields.retain(|p| !changed.contains(p));
            }
        }
        let gained: FieldSet = changed.into_iter().filter(|p| get_path(&after, p).is_some()).collect();
        match entries.iter_mut().find(|e| e.is(writer, Operation::Update)) {
            Some(entry) => entry.fields.extend(gained),
            None => entries.push(ManagedEntry {
                manager: writer.manager.to_owned(),
                operation: Operation::Update,
                subresource: writer.subresource.map(str::to_owned),
                api_version: writer.api_version.to_owned(),
                time: writer.now.to_owned(),
                fields: gained,
            }),
        }
    }
    finish(new, &old_entries, entries);
}

/// Drops ownership of paths `object` no longer has and empty entries, keeps the time of
/// entries that did not change, and stores the entries on the object.
pub(crate) fn finish(object: &mut Value, old_entries: &[ManagedEntry], mut entries: Vec<ManagedEntry>) {
    let scope = tracked(object);
    for entry in entries.iter_mut() {
        entry.fields.retain(|p| get_path(&scope, p).is_some());
        if let Some(previous) = old_entries.iter().find(|o| o.same_identity(entry))
            && previous.fields == entry.fields
        {
            entry.time = previous.time.clone();
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    write_entries(object, &entries);
}

fn path_string(path: &[String]) -> String {
    path.iter().map(|k| format!(".{k}")).collect()
}

/// The 409 of an apply, worded as `merge.Conflicts` and `getConflictMessage` word it.
fn conflict_error(entries: &[ManagedEntry], conflicts: &[(usize, FieldPath)]) -> ApiError {
    let causes = conflicts
        .iter()
        .map(|(i, path)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", entries[*i].describe()),
                "field": path_string(path),
            })
        })
        .collect();
    let message = if let [(i, path)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            entries[*i].describe(),
            path_string(path)
        )
    } else {
        let mut by_manager: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (i, path) in conflicts {
            by_manager
                .entry(entries[*i].describe())
                .or_default()
                .push(path_string(path));
        }
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    ApiError::apply_conflict(message, causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "example.com/v1";

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            subresource: None,
            api_version: V,
            now: "2026-12-03T00:00:00Z",
        }
    }

    fn owned(object: &Value, manager: &str) -> Vec<String> {
        read_entries(object)
            .into_iter()
            .filter(|e| e.manager == manager)
            .flat_map(|e| e.fields.into_iter().map(|p| path_string(&p)))
            .collect()
    }

    #[test]
    fn fields_v1_round_trips_leaves_and_owned_parents() {
        let mut fields = FieldSet::new();
        fields.insert(vec!["spec".into(), "x".into()]);
        fields.insert(vec!["metadata".into(), "labels".into()]);
        fields.insert(vec!["metadata".into(), "labels".into(), "a".into()]);
        let encoded = encode_fields(&fields);
        assert_eq!(
            encoded,
            json!({"f:spec": {"f:x": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );
        let mut decoded = FieldSet::new();
        decode_fields(&encoded, &mut Vec::new(), &mut decoded);
        assert_eq!(decoded, fields);
    }

    #[test]
    fn a_second_manager_changing_an_owned_field_conflicts_unless_forced() {
        let first =
            apply(None, json!({}), &json!({"spec": {"x": 1, "y": 2}}), &writer("a"), false).expect("first apply");
        let err = apply(
            Some(&first),
            first.clone(),
            &json!({"spec": {"x": 5}}),
            &writer("b"),
            false,
        )
        .expect_err("conflict");
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"a\": .spec.x"
        );
        let shared = apply(
            Some(&first),
            first.clone(),
            &json!({"spec": {"x": 1}}),
            &writer("b"),
            false,
        )
        .expect("same value is shared");
        assert_eq!(owned(&shared, "a"), [".spec.x", ".spec.y"]);
        assert_eq!(owned(&shared, "b"), [".spec.x"]);
        let forced = apply(
            Some(&first),
            first.clone(),
            &json!({"spec": {"x": 5}}),
            &writer("b"),
            true,
        )
        .expect("forced");
        assert_eq!(forced["spec"]["x"], 5);
        assert_eq!(owned(&forced, "a"), [".spec.y"]);
    }

    #[test]
    fn an_update_takes_changed_fields_from_appliers() {
        let applied = apply(None, json!({}), &json!({"spec": {"x": 1}}), &writer("a"), false).expect("apply");
        let mut updated = applied.clone();
        updated["spec"]["x"] = json!(2);
        record_update(Some(&applied), &mut updated, &writer("kubectl"));
        assert!(owned(&updated, "a").is_empty());
        let err = apply(
            Some(&updated),
            updated.clone(),
            &json!({"spec": {"x": 3}}),
            &writer("a"),
            false,
        )
        .expect_err("conflict with the updater");
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"kubectl\" using example.com/v1: .spec.x"
        );
    }

    #[test]
    fn fields_a_manager_stops_applying_are_removed_unless_shared() {
        let first = apply(None, json!({}), &json!({"spec": {"x": 1, "y": 2}}), &writer("a"), false).expect("apply");
        let shared = apply(
            Some(&first),
            first.clone(),
            &json!({"spec": {"y": 2}}),
            &writer("b"),
            false,
        )
        .expect("b shares y");
        let second =
            apply(Some(&shared), shared.clone(), &json!({"spec": {}}), &writer("a"), false).expect("a applies nothing");
        assert_eq!(second["spec"], json!({"y": 2}));
    }
}
