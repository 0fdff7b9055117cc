//! The path navigator: dotted keys with `[n]` indexes (`results.pods.items[0].name`).
//!
//! This is muster's own path syntax (Go templates have no `[n]` form); it serves bare reference
//! leaves (`{{ .results.pods.items[0] }}`) and the `jsonPath` keys of conditions.

use serde_json::Value;

/// Why a path could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// A key along the path is absent (or the path is empty).
    #[error("path '{path}' not found")]
    NotFound {
        /// The whole path.
        path: String,
    },
    /// A key was applied to something that is not an object.
    #[error("cannot access '{segment}' in path '{path}': not an object")]
    NotAnObject {
        /// The key that could not be applied.
        segment: String,
        /// The whole path.
        path: String,
    },
    /// An `[n]` index was applied to something that is not an array.
    #[error("cannot index [{index}] in path '{path}': not an array")]
    NotAnArray {
        /// The index that could not be applied.
        index: usize,
        /// The whole path.
        path: String,
    },
    /// An `[n]` index is past the end of its array.
    #[error("index {index} out of range in path '{path}'")]
    IndexOutOfRange {
        /// The index.
        index: usize,
        /// The whole path.
        path: String,
    },
    /// The path is not dotted keys with `[n]` indexes.
    #[error("invalid path '{path}'")]
    Invalid {
        /// The whole path.
        path: String,
    },
}

/// One step of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// Splits `path` into keys and indexes; a leading `.` is allowed.
pub(crate) fn segments(path: &str) -> Result<Vec<Segment<'_>>, PathError> {
    let invalid = || PathError::Invalid { path: path.to_owned() };
    let body = path.strip_prefix('.').unwrap_or(path);
    if body.is_empty() {
        return Err(invalid());
    }
    let mut out = Vec::new();
    for (n, part) in body.split('.').enumerate() {
        let (key, mut rest) = match part.find('[') {
            Some(at) => part.split_at(at),
            None => (part, ""),
        };
        if key.is_empty() && (n > 0 || rest.is_empty()) {
            return Err(invalid());
        }
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while !rest.is_empty() {
            let inner = rest.strip_prefix('[').ok_or_else(invalid)?;
            let close = inner.find(']').ok_or_else(invalid)?;
            let index = inner[..close].parse().map_err(|_| invalid())?;
            out.push(Segment::Index(index));
            rest = &inner[close + 1..];
        }
    }
    Ok(out)
}

/// Walks `segments` from `start`; `path` is only used in errors.
pub(crate) fn walk<'v>(start: &'v Value, segments: &[Segment<'_>], path: &str) -> Result<&'v Value, PathError> {
    let mut current = start;
    for segment in segments {
        current = match (*segment, current) {
            (Segment::Key(key), Value::Object(map)) => map
                .get(key)
                .ok_or_else(|| PathError::NotFound { path: path.to_owned() })?,
            (Segment::Key(key), _) => {
                return Err(PathError::NotAnObject {
                    segment: key.to_owned(),
                    path: path.to_owned(),
                });
            }
            (Segment::Index(index), Value::Array(items)) => {
                items.get(index).ok_or_else(|| PathError::IndexOutOfRange {
                    index,
                    path: path.to_owned(),
                })?
            }
            (Segment::Index(index), _) => {
                return Err(PathError::NotAnArray {
                    index,
                    path: path.to_owned(),
                });
            }
        };
    }
    Ok(current)
}

/// Resolves `path` (`results.pods.items[0].name`, a leading `.` allowed) inside `root`.
///
/// ```
/// use muster_workflow::template::resolve_path;
/// use serde_json::json;
///
/// let root = json!({"results": {"pods": {"items": [{"name": "p1"}]}}});
/// assert_eq!(resolve_path(&root, "results.pods.items[0].name").unwrap(), "p1");
/// assert_eq!(
///     resolve_path(&root, "results.pods.items[3]").unwrap_err().to_string(),
///     "index 3 out of range in path 'results.pods.items[3]'"
/// );
/// ```
pub fn resolve_path<'v>(root: &'v Value, path: &str) -> Result<&'v Value, PathError> {
    walk(root, &segments(path)?, path)
}
