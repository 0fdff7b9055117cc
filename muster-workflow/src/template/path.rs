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

/// What a path can be walked through: JSON values and template values.
pub(crate) trait Node: Sized {
    /// The member `key`: `None` when this is not an object, `Some(None)` when the key is absent.
    fn member(&self, key: &str) -> Option<Option<&Self>>;
    /// The element `index`: `None` when this is not an array, `Some(None)` when out of range.
    fn element(&self, index: usize) -> Option<Option<&Self>>;
}

impl Node for Value {
    fn member(&self, key: &str) -> Option<Option<&Self>> {
        self.as_object().map(|map| map.get(key))
    }

    fn element(&self, index: usize) -> Option<Option<&Self>> {
        self.as_array().map(|items| items.get(index))
    }
}

impl Node for gotmpl::Value {
    fn member(&self, key: &str) -> Option<Option<&Self>> {
        match self {
            Self::Map(map) => Some(map.get(key)),
            _ => None,
        }
    }

    fn element(&self, index: usize) -> Option<Option<&Self>> {
        match self {
            Self::List(items) => Some(items.get(index)),
            _ => None,
        }
    }
}

/// Walks `segments` from `start`; `path` is only used in errors.
pub(crate) fn walk<'v, N: Node>(start: &'v N, segments: &[Segment<'_>], path: &str) -> Result<&'v N, PathError> {
    let mut current = start;
    for segment in segments {
        current = match *segment {
            Segment::Key(key) => match current.member(key) {
                Some(Some(next)) => next,
                Some(None) => return Err(PathError::NotFound { path: path.to_owned() }),
                None => {
                    return Err(PathError::NotAnObject {
                        segment: key.to_owned(),
                        path: path.to_owned(),
                    });
                }
            },
            Segment::Index(index) => match current.element(index) {
                Some(Some(next)) => next,
                Some(None) => {
                    return Err(PathError::IndexOutOfRange {
                        index,
                        path: path.to_owned(),
                    });
                }
                None => {
                    return Err(PathError::NotAnArray {
                        index,
                        path: path.to_owned(),
                    });
                }
            },
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
