//! Direct conversions between `serde_json::Value` and jaq's `Val`.

use jaq_json::{Map, Num, Val};
use serde_json::{Number, Value};

use super::JqError;

/// How deeply a program's result may nest arrays and objects: serde_json's own parser refuses
/// deeper documents, so a deeper result could be stored but never read back.
pub const MAX_RESULT_DEPTH: usize = 128;

/// A `serde_json` value as a jaq value.
pub(super) fn to_val(value: &Value) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => Val::Num(to_num(n)),
        Value::String(s) => string(s),
        Value::Array(items) => items.iter().map(to_val).collect(),
        Value::Object(map) => Val::obj(map.iter().map(|(k, v)| (string(k), to_val(v))).collect::<Map>()),
    }
}

/// A string as jaq text: one copy of the bytes (`Val::from(String)` would add an owner box).
fn string(s: &str) -> Val {
    Val::utf8_str(s.as_bytes().to_vec())
}

fn to_num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::from_integral(i)
    } else if let Some(u) = n.as_u64() {
        Num::from_integral(u)
    } else {
        // Without serde_json's `arbitrary_precision`, a number that is not an integer is an f64.
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A jaq value as a `serde_json` value; fails when it nests deeper than [`MAX_RESULT_DEPTH`].
pub(super) fn to_json(val: &Val) -> Result<Value, JqError> {
    to_json_at(val, 0)
}

fn to_json_at(val: &Val, depth: usize) -> Result<Value, JqError> {
    let nested = |depth: usize| {
        if depth >= MAX_RESULT_DEPTH {
            Err(JqError::TooDeep {
                limit: MAX_RESULT_DEPTH,
            })
        } else {
            Ok(depth + 1)
        }
    };
    Ok(match val {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => from_num(n),
        Val::TStr(bytes) | Val::BStr(bytes) => Value::String(utf8(bytes)),
        Val::Arr(items) => {
            let depth = nested(depth)?;
            Value::Array(items.iter().map(|v| to_json_at(v, depth)).collect::<Result<_, _>>()?)
        }
        Val::Obj(map) => {
            let depth = nested(depth)?;
            let mut out = serde_json::Map::new();
            for (k, v) in map.iter() {
                out.insert(key(k), to_json_at(v, depth)?);
            }
            Value::Object(out)
        }
    })
}

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An object key: jaq allows any value as a key; a string stays itself, anything else becomes
/// its JSON text (`{(1): 2}` gives `{"1": 2}`).
fn key(k: &Val) -> String {
    match k {
        Val::TStr(bytes) | Val::BStr(bytes) => utf8(bytes),
        other => other.to_string(),
    }
}

fn from_num(n: &Num) -> Value {
    match n {
        Num::Int(i) => match i64::try_from(*i) {
            Ok(i) => Value::from(i),
            Err(_) => from_text(&n.to_string()),
        },
        Num::Float(f) => from_f64(*f),
        // Big integers and decimal literals (`1.50` in a program) carry their digits as text.
        Num::BigInt(_) | Num::Dec(_) => from_text(&n.to_string()),
    }
}

/// A number's decimal text as serde_json reads it: an integer that fits in `u64`/`i64` stays an
/// integer, anything else becomes the nearest f64.
fn from_text(text: &str) -> Value {
    match text.parse::<Number>() {
        Ok(n) => Value::Number(n),
        Err(_) => text.parse::<f64>().map_or(Value::Null, from_f64),
    }
}

/// A float as jq prints it: NaN is `null`, ±infinity the largest finite float.
fn from_f64(f: f64) -> Value {
    let f = if f.is_infinite() { f64::MAX.copysign(f) } else { f };
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}
