//! Finding deprecated spellings in a raw Workflow document.
//!
//! serde's `alias` accepts `allow_failure` for `allowFailure` but cannot say which
//! spelling a document used, so the loader scans the raw document with
//! [`deprecated_spellings`] and warns once per use.

use std::fmt;

use serde_json::{Map, Value};

/// One use of a deprecated spelling in a Workflow document.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeprecatedField {
    /// Path of the deprecated key, e.g. `spec.steps[1].allow_failure`.
    pub path: String,
    /// The deprecated spelling, e.g. `allow_failure`.
    pub deprecated: &'static str,
    /// The spelling to use instead, e.g. `allowFailure`.
    pub replacement: &'static str,
}

impl fmt::Display for DeprecatedField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is deprecated: use {} instead of {}",
            self.path, self.replacement, self.deprecated
        )
    }
}

/// Deprecated keys of the spec itself and their replacements. `input_schema` is ignored, not
/// translated: the arguments belong in `spec.args`.
const SPEC_SPELLINGS: [(&str, &str); 1] = [("input_schema", "spec.args")];
/// Deprecated spellings of a step or sub-step and their replacements.
const STEP_SPELLINGS: [(&str, &str); 2] = [("allow_failure", "allowFailure"), ("store", "output")];
/// Deprecated spellings of a condition and their replacements.
const CONDITION_SPELLINGS: [(&str, &str); 2] = [("from_step", "fromStep"), ("expect_not", "expectNot")];
/// Deprecated spellings of an expectation and their replacements.
const EXPECTATION_SPELLINGS: [(&str, &str); 1] = [("json_path", "jsonPath")];

/// Every deprecated spelling a Workflow document uses: keys of the spec itself (the legacy
/// `input_schema`) first, then step by step in document order.
///
/// `doc` is a whole Workflow document (the spec is read from its `spec` key) or, when it
/// has no `spec` key, a bare spec (`steps`, `onFailure` at the top, as the structured
/// create/validate tools take it); the paths start with `spec.` in the first case and
/// with the spec's own keys in the second.
///
/// Only keys in the places the workflow schema defines them are reported: a key named
/// `store` inside a step's `args` is the tool's business, not a deprecated flag.
pub fn deprecated_spellings(doc: &Value) -> Vec<DeprecatedField> {
    let mut found = Vec::new();
    let Some(object) = doc.as_object() else {
        return found;
    };
    match object.get("spec") {
        Some(Value::Object(spec)) => scan_spec(spec, "spec.", &mut found),
        Some(_) => {}
        None => scan_spec(object, "", &mut found),
    }
    found
}

fn scan_spec(spec: &Map<String, Value>, prefix: &str, found: &mut Vec<DeprecatedField>) {
    for &(deprecated, replacement) in &SPEC_SPELLINGS {
        if spec.contains_key(deprecated) {
            found.push(DeprecatedField {
                path: format!("{prefix}{deprecated}"),
                deprecated,
                replacement,
            });
        }
    }
    scan_steps(spec.get("steps"), &format!("{prefix}steps"), found);
    scan_steps(spec.get("onFailure"), &format!("{prefix}onFailure"), found);
}

/// Scans a list of steps or sub-steps and everything nested in them.
fn scan_steps(steps: Option<&Value>, path: &str, found: &mut Vec<DeprecatedField>) {
    let Some(Value::Array(steps)) = steps else {
        return;
    };
    for (i, step) in steps.iter().enumerate() {
        let Value::Object(step) = step else { continue };
        let p = format!("{path}[{i}]");
        report(step, &p, &STEP_SPELLINGS, found);
        if let Some(Value::Object(condition)) = step.get("condition") {
            scan_condition(condition, &format!("{p}.condition"), found);
        }
        if let Some(Value::Object(for_each)) = step.get("forEach") {
            scan_steps(for_each.get("steps"), &format!("{p}.forEach.steps"), found);
        }
        scan_steps(step.get("parallel"), &format!("{p}.parallel"), found);
    }
}

fn scan_condition(condition: &Map<String, Value>, p: &str, found: &mut Vec<DeprecatedField>) {
    report(condition, p, &CONDITION_SPELLINGS, found);
    for key in ["expect", "expectNot", "expect_not"] {
        if let Some(Value::Object(expectation)) = condition.get(key) {
            report(expectation, &format!("{p}.{key}"), &EXPECTATION_SPELLINGS, found);
        }
    }
}

fn report(
    object: &Map<String, Value>,
    p: &str,
    spellings: &[(&'static str, &'static str)],
    found: &mut Vec<DeprecatedField>,
) {
    for &(deprecated, replacement) in spellings {
        if object.contains_key(deprecated) {
            found.push(DeprecatedField {
                path: format!("{p}.{deprecated}"),
                deprecated,
                replacement,
            });
        }
    }
}
