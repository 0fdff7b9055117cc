//! Type preservation: JSON ⇄ template values, the bare-path test, single-action detection and
//! the `__capture` function that hands an action's real value back to Rust.

use std::{cell::RefCell, collections::BTreeMap, sync::Arc, sync::LazyLock};

use gotmpl::Value as TValue;
use regex::Regex;
use serde_json::{Number, Value};

/// The name of the capture function added to single-action templates.
pub(crate) const CAPTURE: &str = "__capture";

/// A whole (trimmed) leaf that is one bare reference path, e.g. `{{ .results.pods.items[0] }}`.
static BARE_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\{\{\s*\.([A-Za-z0-9_][A-Za-z0-9_.\[\]-]*)\s*\}\}$").expect("valid regex"));

/// The path of a bare reference leaf, without its leading dot.
pub(crate) fn bare_path(trimmed: &str) -> Option<&str> {
    BARE_PATH.captures(trimmed).and_then(|c| c.get(1)).map(|m| m.as_str())
}

/// The pipeline of a leaf whose one action spans the whole (trimmed) string, trim markers
/// removed: `{{- len .x -}}` gives `len .x`. Whether it is a value action (not `if`, a comment
/// or a declaration) is for the parse tree to say.
pub(crate) fn action_pipeline(trimmed: &str) -> Option<&str> {
    let inner = trimmed.strip_prefix("{{")?;
    let end = action_end(inner)?;
    if end + 2 != inner.len() {
        return None;
    }
    let mut pipeline = &inner[..end];
    if let Some(rest) = pipeline.strip_prefix('-')
        && rest.starts_with(char::is_whitespace)
    {
        pipeline = rest;
    }
    if let Some(rest) = pipeline.strip_suffix('-')
        && rest.ends_with(char::is_whitespace)
    {
        pipeline = rest;
    }
    Some(pipeline.trim())
}

/// Byte offset in `s` of the first `}}` outside string, raw-string and char literals.
fn action_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

thread_local! {
    /// The value the last `__capture` call on this thread saw. Rendering is synchronous, so a
    /// thread-local keeps compiled templates shareable across threads without a lock.
    static CAPTURED: RefCell<Option<TValue>> = const { RefCell::new(None) };
}

/// The `__capture` template function: stores its argument, prints nothing.
pub(crate) fn capture(args: &[TValue]) -> gotmpl::Result<TValue> {
    let value = args.first().cloned().unwrap_or(TValue::Nil);
    CAPTURED.with(|c| *c.borrow_mut() = Some(value));
    Ok(TValue::String(Arc::from("")))
}

/// Clears the capture slot before a render.
pub(crate) fn reset_capture() {
    CAPTURED.with(|c| c.borrow_mut().take());
}

/// Takes what the last render captured.
pub(crate) fn take_capture() -> Option<TValue> {
    CAPTURED.with(|c| c.borrow_mut().take())
}

/// Converts JSON into a template value (numbers keep their integer or float kind).
pub(crate) fn to_template(value: &Value) -> TValue {
    match value {
        Value::Null => TValue::Nil,
        Value::Bool(b) => TValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                TValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                TValue::Uint(u)
            } else {
                TValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => TValue::String(Arc::from(s.as_str())),
        Value::Array(items) => TValue::List(items.iter().map(to_template).collect()),
        Value::Object(map) => TValue::Map(Arc::new(
            map.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), to_template(v)))
                .collect::<BTreeMap<_, _>>(),
        )),
    }
}

/// Converts a template value to JSON. Non-finite floats become strings (`NaN`, `+Inf`,
/// `-Inf`, as Go prints them); functions become their printed form.
// The wildcard also covers variants gotmpl adds behind features (`html`'s `Safe`).
#[allow(clippy::match_wildcard_for_single_variants)]
pub(crate) fn to_json(value: &TValue) -> Value {
    match value {
        TValue::Nil => Value::Null,
        TValue::Bool(b) => Value::Bool(*b),
        TValue::Int(i) => Value::from(*i),
        TValue::Uint(u) => Value::from(*u),
        TValue::Float(f) => Number::from_f64(*f).map_or_else(|| Value::String(go_float(*f)), Value::Number),
        TValue::String(s) => Value::String(s.to_string()),
        TValue::List(items) => Value::Array(items.iter().map(to_json).collect()),
        TValue::Map(map) => Value::Object(map.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect()),
        other => Value::String(other.to_string()),
    }
}

/// Go's `%v` of a float, for the non-finite cases that JSON cannot hold.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f == f64::INFINITY {
        "+Inf".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        f.to_string()
    }
}

/// How text/template prints a value: strings bare, nil as `<no value>`, the rest `%v`.
pub(crate) fn print_form(value: &TValue) -> String {
    match value {
        TValue::Nil => "<no value>".to_owned(),
        TValue::String(s) => s.to_string(),
        TValue::Float(f) if !f.is_finite() => go_float(*f),
        other => other.to_string(),
    }
}
