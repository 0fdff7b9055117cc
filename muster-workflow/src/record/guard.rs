//! The payload guard: keeps a stored record within [`MAX_EXECUTION_PAYLOAD_BYTES`].
//!
//! Matches Go's `payload_guard.go`: when the marshalled record is over the limit, each of the
//! run's input and result and every step's input and result whose own JSON is over a eighth of
//! the limit is replaced by a marker, and the record is flagged `truncated`. Only the stored
//! copy is guarded; the live tool response keeps the full payloads.

use std::borrow::Cow;

use muster_core::crd::WorkflowExecution;
use serde_json::{Map, Value};

use super::format::RecordDoc;

/// Size limit of a stored record's JSON (256 KiB).
pub const MAX_EXECUTION_PAYLOAD_BYTES: usize = 256 * 1024;

/// Marker that replaces an oversized result (and is the value of an oversized input's
/// `_truncated` key).
pub const TRUNCATION_MARKER: &str = "[truncated: payload exceeded retention size limit]";

/// The copy of `execution` to store: borrowed unchanged when its JSON fits in
/// [`MAX_EXECUTION_PAYLOAD_BYTES`]; otherwise an owned copy whose input, result, step inputs
/// and step results over a eighth of the limit are replaced by [`TRUNCATION_MARKER`] (results)
/// or `{"_truncated": marker}` (inputs), flagged `truncated` when anything was replaced.
///
/// The result can still exceed the limit when many small fields add up; it is stored anyway.
pub fn guard_payload(execution: &WorkflowExecution) -> Cow<'_, WorkflowExecution> {
    if json_len(&RecordDoc::from_execution(execution)) <= MAX_EXECUTION_PAYLOAD_BYTES {
        return Cow::Borrowed(execution);
    }
    let mut guarded = execution.clone();
    let spec = &mut guarded.spec;
    let mut replaced = truncate_input(&mut spec.input) | truncate_result(&mut spec.result);
    for step in &mut spec.steps {
        replaced |= truncate_input(&mut step.input) | truncate_result(&mut step.result);
    }
    if !replaced {
        return Cow::Borrowed(execution);
    }
    spec.truncated = true;
    Cow::Owned(guarded)
}

const FIELD_LIMIT: usize = MAX_EXECUTION_PAYLOAD_BYTES / 8;

fn truncate_input(field: &mut Option<Value>) -> bool {
    truncate(field, || {
        let mut marker = Map::new();
        marker.insert("_truncated".to_owned(), Value::String(TRUNCATION_MARKER.to_owned()));
        Value::Object(marker)
    })
}

fn truncate_result(field: &mut Option<Value>) -> bool {
    truncate(field, || Value::String(TRUNCATION_MARKER.to_owned()))
}

fn truncate(field: &mut Option<Value>, marker: impl FnOnce() -> Value) -> bool {
    match field {
        Some(value) if json_len(value) > FIELD_LIMIT => {
            *value = marker();
            true
        }
        _ => false,
    }
}

fn json_len<T: serde::Serialize>(value: &T) -> usize {
    // Counting bytes through a sink avoids building the string; serialising plain JSON
    // values cannot fail, and a failure would only mean "not oversized".
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}
