//! The non-apply patch formats: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).
//!
//! Strategic merge patches of built-in types are applied as merge patches: the types the
//! double serves by default (Secret, Event, Lease) have no lists with merge keys where the two
//! differ, and `$patch` directives are not interpreted.

use serde_json::Value;

use super::status::ApiError;

/// How a `PATCH` body is to be read, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl PatchKind {
    pub(crate) fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/json-patch+json" => Some(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// RFC 7386: objects merge key by key, `null` removes, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// RFC 6902 operations (`add`, `remove`, `replace`, `move`, `copy`, `test`).
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ApiError::bad_request("json patch must be an array of operations"))?;
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_request("json patch operation without a path"))?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| ApiError::bad_request(format!("json patch {name} without a value")))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("json patch {name} without from")))
        };
        match name {
            "add" => add(target, path, value()?)?,
            "remove" => {
                remove(target, path)?;
            }
            "replace" => {
                remove(target, path)?;
                add(target, path, value()?)?;
            }
            "move" => {
                let moved = remove(target, from()?)?;
                add(target, path, moved)?;
            }
            "copy" => {
                let copied = target
                    .pointer(from()?)
                    .cloned()
                    .ok_or_else(|| missing(from().unwrap_or_default()))?;
                add(target, path, copied)?;
            }
            "test" => {
                if target.pointer(path) != Some(&value()?) {
                    return Err(ApiError::internal(format!("testing value {path} failed: test failed")));
                }
            }
            other => {
                return Err(ApiError::bad_request(format!("Unexpected kind: {other}")));
            }
        }
    }
    Ok(())
}

fn missing(path: &str) -> ApiError {
    ApiError::internal(format!("doc is missing path: \"{path}\": missing value"))
}

fn split_parent(path: &str) -> Result<(&str, String), ApiError> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| ApiError::bad_request(format!("invalid json pointer {path:?}")))?;
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn add(target: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, key) = split_parent(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if key == "-" {
                items.len()
            } else {
                key.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= items.len())
                    .ok_or_else(|| missing(path))?
            };
            items.insert(index, value);
            Ok(())
        }
        _ => Err(missing(path)),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, key) = split_parent(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&key).ok_or_else(|| missing(path)),
        Some(Value::Array(items)) => {
            let index = key
                .parse::<usize>()
                .ok()
                .filter(|i| *i < items.len())
                .ok_or_else(|| missing(path))?;
            Ok(items.remove(index))
        }
        _ => Err(missing(path)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_removes_nulls_and_merges_objects() {
        let mut doc = json!({"spec": {"a": 1, "b": {"c": 2}}, "keep": true});
        merge_patch(&mut doc, &json!({"spec": {"a": null, "b": {"d": 3}}}));
        assert_eq!(doc, json!({"spec": {"b": {"c": 2, "d": 3}}, "keep": true}));
    }

    #[test]
    fn json_patch_adds_replaces_and_tests() {
        let mut doc = json!({"spec": {"args": ["a"]}});
        json_patch(
            &mut doc,
            &json!([
                {"op": "add", "path": "/spec/args/-", "value": "b"},
                {"op": "replace", "path": "/spec/args/0", "value": "z"},
                {"op": "test", "path": "/spec/args/1", "value": "b"},
            ]),
        )
        .expect("applies");
        assert_eq!(doc, json!({"spec": {"args": ["z", "b"]}}));
        let err = json_patch(&mut doc, &json!([{"op": "remove", "path": "/spec/nope"}])).expect_err("missing path");
        assert_eq!(err.code, 500);
    }
}
