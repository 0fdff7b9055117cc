//! [`Context`]: the data templates render against, built for incremental updates.
//!
//! A run adds one result per step and sets loop variables per iteration. The context keeps
//! every value in template form behind shared maps, so an update converts only the new value
//! and a clone (a parallel branch, a concurrent loop iteration) copies pointers, never results.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, OnceLock},
};

use gotmpl::Value as TValue;
use serde_json::Value;

use super::{
    path::{self, PathError, Segment},
    typed,
};

type Slots = Arc<BTreeMap<Arc<str>, TValue>>;

/// The data templates see: exactly `.input`, `.results`, `.vars` and `.context` (an alias of
/// `.results`). Any other top-level key (a bare `.foo`) is a missing key.
///
/// Cloning is cheap (shared maps); a clone's updates do not show in the original.
pub struct Context {
    input: TValue,
    results: Slots,
    vars: Slots,
    data: OnceLock<TValue>,
}

impl Context {
    /// A context from the workflow input, the step results so far and the loop variables
    /// (`results` and `vars` are objects; anything else counts as empty).
    pub fn new(input: Value, results: Value, vars: Value) -> Self {
        Self {
            input: typed::to_template(&input),
            results: Arc::new(slots(&results)),
            vars: Arc::new(slots(&vars)),
            data: OnceLock::new(),
        }
    }

    /// A context with `input` and no results or variables yet.
    pub fn with_input(input: &Value) -> Self {
        Self {
            input: typed::to_template(input),
            results: Slots::default(),
            vars: Slots::default(),
            data: OnceLock::new(),
        }
    }

    /// The workflow input (`.input`), as JSON.
    pub fn input(&self) -> Value {
        typed::to_json(&self.input)
    }

    /// Every step result (`.results`), as one JSON object.
    pub fn results(&self) -> Value {
        to_object(&self.results)
    }

    /// The loop variables (`.vars`), as one JSON object.
    pub fn vars(&self) -> Value {
        to_object(&self.vars)
    }

    /// The result of step `step_id`, as JSON.
    pub fn result(&self, step_id: &str) -> Option<Value> {
        self.results.get(step_id).map(typed::to_json)
    }

    /// Records a step result (`.results.<step_id>`), replacing any earlier one.
    pub fn insert_result(&mut self, step_id: &str, result: &Value) {
        self.data.take();
        Arc::make_mut(&mut self.results).insert(Arc::from(step_id), typed::to_template(result));
    }

    /// Forgets the result of `step_id`.
    pub fn remove_result(&mut self, step_id: &str) {
        if self.results.contains_key(step_id) {
            self.data.take();
            Arc::make_mut(&mut self.results).remove(step_id);
        }
    }

    /// Copies the result of `step_id` in `other` into this context (nothing when it has none).
    pub fn copy_result_from(&mut self, other: &Context, step_id: &str) {
        if let Some((key, value)) = other.results.get_key_value(step_id) {
            self.data.take();
            Arc::make_mut(&mut self.results).insert(Arc::clone(key), value.clone());
        }
    }

    /// Makes `to` hold the result `from` holds (shared, not copied); nothing when `from` has
    /// none.
    pub fn alias_result(&mut self, from: &str, to: &str) {
        if let Some(value) = self.results.get(from).cloned() {
            self.data.take();
            Arc::make_mut(&mut self.results).insert(Arc::from(to), value);
        }
    }

    /// The loop variable `name`, as JSON.
    pub fn var(&self, name: &str) -> Option<Value> {
        self.vars.get(name).map(typed::to_json)
    }

    /// Sets a loop variable (`.vars.<name>`).
    pub fn set_var(&mut self, name: &str, value: &Value) {
        self.data.take();
        Arc::make_mut(&mut self.vars).insert(Arc::from(name), typed::to_template(value));
    }

    /// Removes a loop variable.
    pub fn remove_var(&mut self, name: &str) {
        if self.vars.contains_key(name) {
            self.data.take();
            Arc::make_mut(&mut self.vars).remove(name);
        }
    }

    /// Resolves a path whose first key is one of the four context keys, as JSON.
    pub fn resolve(&self, path: &str) -> Result<Value, PathError> {
        let segments = path::segments(path)?;
        let (first, rest) = segments
            .split_first()
            .ok_or_else(|| PathError::Invalid { path: path.to_owned() })?;
        let found = match first {
            Segment::Key("input") => path::walk(&self.input, rest, path)?,
            Segment::Key(root @ ("results" | "context" | "vars")) => {
                let slots = if *root == "vars" { &self.vars } else { &self.results };
                let Some((Segment::Key(key), rest)) = rest.split_first() else {
                    return match rest.first() {
                        Some(Segment::Index(index)) => Err(PathError::NotAnArray {
                            index: *index,
                            path: path.to_owned(),
                        }),
                        _ => Ok(to_object(slots)),
                    };
                };
                let start = slots
                    .get(*key)
                    .ok_or_else(|| PathError::NotFound { path: path.to_owned() })?;
                path::walk(start, rest, path)?
            }
            Segment::Key(_) => return Err(PathError::NotFound { path: path.to_owned() }),
            Segment::Index(index) => {
                return Err(PathError::NotAnArray {
                    index: *index,
                    path: path.to_owned(),
                });
            }
        };
        Ok(typed::to_json(found))
    }

    /// The template value, assembled once per change (four shared maps, no copying).
    pub(super) fn data(&self) -> &TValue {
        self.data.get_or_init(|| {
            let results = TValue::Map(Arc::clone(&self.results));
            let map = [
                ("input", self.input.clone()),
                ("context", results.clone()),
                ("results", results),
                ("vars", TValue::Map(Arc::clone(&self.vars))),
            ];
            TValue::Map(Arc::new(map.into_iter().map(|(k, v)| (Arc::from(k), v)).collect()))
        })
    }
}

fn slots(value: &Value) -> BTreeMap<Arc<str>, TValue> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), typed::to_template(v)))
                .collect()
        })
        .unwrap_or_default()
}

fn to_object(slots: &BTreeMap<Arc<str>, TValue>) -> Value {
    Value::Object(slots.iter().map(|(k, v)| (k.to_string(), typed::to_json(v))).collect())
}

impl Default for Context {
    /// Empty `.input`, `.results` and `.vars` objects.
    fn default() -> Self {
        Self::with_input(&Value::Object(Default::default()))
    }
}

impl Clone for Context {
    fn clone(&self) -> Self {
        Self {
            input: self.input.clone(),
            results: Arc::clone(&self.results),
            vars: Arc::clone(&self.vars),
            data: OnceLock::new(),
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("input", &self.input())
            .field("results", &self.results.keys().collect::<Vec<_>>())
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}
