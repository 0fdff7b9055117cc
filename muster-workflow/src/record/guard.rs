//! The payload guard: keeps a stored record within [`MAX_EXECUTION_PAYLOAD_BYTES`].
//!
//! First as Go's `payload_guard.go` does: when the marshalled record is over the limit, each of
//! the run's input and result and every step's input and result whose own JSON is over a eighth
//! of the limit is replaced by a marker, and the record is flagged `truncated`. Where Go stops
//! there (a loop's thousands of small step records still add up past the limit), this goes on:
//! the largest remaining payloads are replaced, biggest first, and if the step records alone are
//! still too many, the middle ones are replaced by one entry saying how many were left out, so
//! a stored record always fits. Only the stored copy is guarded; the live tool response keeps
//! the full payloads.

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
/// [`MAX_EXECUTION_PAYLOAD_BYTES`]; otherwise an owned copy that fits, flagged `truncated`:
/// inputs and results over an eighth of the limit are replaced by [`TRUNCATION_MARKER`]
/// (results) or `{"_truncated": marker}` (inputs); then, while still over, the largest remaining
/// payloads; then the middle step records, replaced by one `_omitted` step record.
pub fn guard_payload(execution: &WorkflowExecution) -> Cow<'_, WorkflowExecution> {
    let total = json_len(&RecordDoc::from_execution(execution));
    if total <= MAX_EXECUTION_PAYLOAD_BYTES {
        return Cow::Borrowed(execution);
    }
    let mut guarded = execution.clone();
    let spec = &mut guarded.spec;
    spec.truncated = true;
    truncate_input(&mut spec.input, FIELD_LIMIT);
    truncate_result(&mut spec.result, FIELD_LIMIT);
    for step in &mut spec.steps {
        truncate_input(&mut step.input, FIELD_LIMIT);
        truncate_result(&mut step.result, FIELD_LIMIT);
    }
    if fits(&guarded) {
        return Cow::Owned(guarded);
    }
    shrink_payloads(&mut guarded);
    if fits(&guarded) {
        return Cow::Owned(guarded);
    }
    omit_middle_steps(&mut guarded);
    Cow::Owned(guarded)
}

/// A payload is not worth replacing below this size: the marker is about as long.
const SMALL_PAYLOAD: usize = 96;

fn fits(execution: &WorkflowExecution) -> bool {
    json_len(&RecordDoc::from_execution(execution)) <= MAX_EXECUTION_PAYLOAD_BYTES
}

/// Replaces payloads, largest first, until the record's estimated size fits.
fn shrink_payloads(execution: &mut WorkflowExecution) {
    let mut over = json_len(&RecordDoc::from_execution(execution)).saturating_sub(MAX_EXECUTION_PAYLOAD_BYTES);
    // (size, step index or None for the run, is input)
    let spec = &mut execution.spec;
    let mut fields: Vec<(usize, Option<usize>, bool)> = Vec::new();
    let mut note = |value: &Option<Value>, step: Option<usize>, input: bool| {
        if let Some(v) = value {
            let len = json_len(v);
            if len > SMALL_PAYLOAD {
                fields.push((len, step, input));
            }
        }
    };
    note(&spec.input, None, true);
    note(&spec.result, None, false);
    for (i, step) in spec.steps.iter().enumerate() {
        note(&step.input, Some(i), true);
        note(&step.result, Some(i), false);
    }
    fields.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (len, step, input) in fields {
        if over == 0 {
            break;
        }
        let field = match step {
            None if input => &mut spec.input,
            None => &mut spec.result,
            Some(i) if input => &mut spec.steps[i].input,
            Some(i) => &mut spec.steps[i].result,
        };
        if input {
            truncate_input(field, 0);
        } else {
            truncate_result(field, 0);
        }
        over = over.saturating_sub(len.saturating_sub(SMALL_PAYLOAD));
    }
}

/// Keeps the first and last step records that fit in the limit and replaces the rest with one
/// record saying how many were omitted.
fn omit_middle_steps(execution: &mut WorkflowExecution) {
    let steps = std::mem::take(&mut execution.spec.steps);
    let base = json_len(&RecordDoc::from_execution(execution));
    let budget = MAX_EXECUTION_PAYLOAD_BYTES.saturating_sub(base + 512) / 2;
    let sizes: Vec<usize> = steps.iter().map(|s| json_len(s) + 1).collect();
    let mut head = 0;
    let mut used = 0;
    while head < steps.len() && used + sizes[head] <= budget {
        used += sizes[head];
        head += 1;
    }
    let mut tail = steps.len();
    used = 0;
    while tail > head && used + sizes[tail - 1] <= budget {
        used += sizes[tail - 1];
        tail -= 1;
    }
    let omitted = tail - head;
    let mut kept = Vec::with_capacity(head + 1 + steps.len() - tail);
    let mut rest = steps.into_iter();
    kept.extend(rest.by_ref().take(head));
    let mut middle = rest.by_ref().take(omitted);
    if let Some(first) = middle.next() {
        let last = middle.last();
        let mut marker = first;
        marker.step_id = OMITTED_STEP_ID.to_owned();
        marker.tool = String::new();
        marker.input = None;
        marker.stored_as = None;
        marker.error = None;
        if let Some(last) = last {
            marker.completed_at = last.completed_at;
        }
        marker.result = Some(Value::String(format!(
            "{omitted} step records omitted: {TRUNCATION_MARKER}"
        )));
        kept.push(marker);
    }
    kept.extend(rest);
    execution.spec.steps = kept;
}

/// The `stepId` of the record that stands for the step records a guard left out.
pub const OMITTED_STEP_ID: &str = "_omitted";

const FIELD_LIMIT: usize = MAX_EXECUTION_PAYLOAD_BYTES / 8;

fn truncate_input(field: &mut Option<Value>, over: usize) {
    truncate(field, over, || {
        let mut marker = Map::new();
        marker.insert("_truncated".to_owned(), Value::String(TRUNCATION_MARKER.to_owned()));
        Value::Object(marker)
    });
}

fn truncate_result(field: &mut Option<Value>, over: usize) {
    truncate(field, over, || Value::String(TRUNCATION_MARKER.to_owned()));
}

/// Replaces `field` by `marker()` when its JSON is longer than `over` bytes.
fn truncate(field: &mut Option<Value>, over: usize, marker: impl FnOnce() -> Value) {
    if let Some(value) = field
        && json_len(value) > over
    {
        *value = marker();
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
