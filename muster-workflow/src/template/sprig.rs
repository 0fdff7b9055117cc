//! The sprig functions muster templates use, written against sprig's documented behaviour.
//!
//! Argument order is sprig's: the piped value arrives last (`{{ .x | replace "/" "-" }}` is
//! `replace "/" "-" .x`). `eq`, `ne`, `lt`, `le`, `gt`, `ge`, `and`, `or`, `not`, `len`,
//! `index`, `slice`, `print`, `printf` and `println` are gotmpl built-ins.

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use chrono::{DateTime, SecondsFormat, TimeZone as _, Utc};
use gotmpl::{FuncMap, TemplateError, Value};
use regex::Regex;

use super::typed;

type Res = gotmpl::Result<Value>;

/// A sprig function.
type SprigFn = fn(&[Value]) -> Res;

/// Every function this module adds, in name order (the gotmpl built-ins come on top).
pub const SPRIG_FUNCTIONS: &[&str] = &[
    "add",
    "atoi",
    "b64dec",
    "b64enc",
    "coalesce",
    "contains",
    "date",
    "default",
    "dict",
    "div",
    "empty",
    "first",
    "float64",
    "fromJson",
    "get",
    "hasKey",
    "hasPrefix",
    "hasSuffix",
    "int",
    "join",
    "keys",
    "last",
    "list",
    "lower",
    "max",
    "min",
    "mod",
    "mul",
    "now",
    "quote",
    "regexMatch",
    "regexReplaceAll",
    "repeat",
    "replace",
    "set",
    "split",
    "splitList",
    "sub",
    "ternary",
    "title",
    "toJson",
    "toPrettyJson",
    "toString",
    "trim",
    "trimPrefix",
    "trimSuffix",
    "upper",
    "values",
];

/// The function map, built once.
pub(crate) fn func_map() -> &'static FuncMap {
    static MAP: LazyLock<FuncMap> = LazyLock::new(build);
    &MAP
}

fn build() -> FuncMap {
    let entries: [(&str, SprigFn); 48] = [
        ("add", add),
        ("atoi", atoi),
        ("b64dec", b64dec),
        ("b64enc", b64enc),
        ("coalesce", coalesce),
        ("contains", contains),
        ("date", date),
        ("default", default),
        ("dict", dict),
        ("div", div),
        ("empty", empty),
        ("first", first),
        ("float64", float64),
        ("fromJson", from_json),
        ("get", get),
        ("hasKey", has_key),
        ("hasPrefix", has_prefix),
        ("hasSuffix", has_suffix),
        ("int", int),
        ("join", join),
        ("keys", keys),
        ("last", last),
        ("list", list),
        ("lower", lower),
        ("max", max),
        ("min", min),
        ("mod", modulo),
        ("mul", mul),
        ("now", now),
        ("quote", quote),
        ("regexMatch", regex_match),
        ("regexReplaceAll", regex_replace_all),
        ("repeat", repeat),
        ("replace", replace),
        ("set", set),
        ("split", split),
        ("splitList", split_list),
        ("sub", sub),
        ("ternary", ternary),
        ("title", title),
        ("toJson", to_json),
        ("toPrettyJson", to_pretty_json),
        ("toString", to_string),
        ("trim", trim),
        ("trimPrefix", trim_prefix),
        ("trimSuffix", trim_suffix),
        ("upper", upper),
        ("values", values),
    ];
    entries
        .into_iter()
        .map(|(name, f)| (name.to_owned(), Arc::new(f) as gotmpl::ValueFunc))
        .collect()
}

// ---------- helpers ----------

fn fail(name: &str, message: impl std::fmt::Display) -> TemplateError {
    TemplateError::Exec(format!("{name}: {message}"))
}

fn arity(name: &str, args: &[Value], n: usize) -> gotmpl::Result<()> {
    if args.len() == n {
        Ok(())
    } else {
        Err(TemplateError::ArgCount {
            name: name.to_owned(),
            expected: n,
            got: args.len(),
        })
    }
}

fn string(s: impl Into<Arc<str>>) -> Value {
    Value::String(s.into())
}

/// sprig's `strval`: strings as they are, everything else `%v` (nil is `<nil>`).
fn strval(v: &Value) -> String {
    match v {
        Value::Nil => "<nil>".to_owned(),
        other => typed::print_form(other),
    }
}

/// sprig's emptiness: nil, false, 0, "", and empty lists and maps.
fn is_empty(v: &Value) -> bool {
    !v.is_truthy()
}

/// sprig's `toInt64` (cast): numbers truncate, integer strings parse (`"3.0"` too, as cast
/// trims a zero decimal part), anything else is 0.
fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => {
            let s = s.trim();
            let s = match s.split_once('.') {
                Some((whole, decimals)) if decimals.bytes().all(|b| b == b'0') => whole,
                _ => s,
            };
            s.parse().unwrap_or(0)
        }
        other => other.as_int().unwrap_or(0),
    }
}

fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        other => other.as_float().unwrap_or(0.0),
    }
}

fn str_args<const N: usize>(name: &str, args: &[Value]) -> gotmpl::Result<[String; N]> {
    arity(name, args, N)?;
    Ok(std::array::from_fn(|i| strval(&args[i])))
}

fn map_arg<'a>(name: &str, v: &'a Value) -> gotmpl::Result<&'a BTreeMap<Arc<str>, Value>> {
    match v {
        Value::Map(m) => Ok(m),
        other => Err(fail(name, format_args!("expected a map, got {}", other.type_name()))),
    }
}

fn list_arg<'a>(name: &str, v: &'a Value) -> gotmpl::Result<&'a [Value]> {
    match v {
        Value::List(items) => Ok(items),
        Value::Nil => Ok(&[]),
        other => Err(fail(name, format_args!("expected a list, got {}", other.type_name()))),
    }
}

fn compile_regex(name: &str, pattern: &str) -> gotmpl::Result<Regex> {
    Regex::new(pattern).map_err(|e| fail(name, e))
}

// ---------- defaults and flow ----------

fn default(args: &[Value]) -> Res {
    match args {
        [fallback] => Ok(fallback.clone()),
        [fallback, given] => Ok(if is_empty(given) {
            fallback.clone()
        } else {
            given.clone()
        }),
        _ => Err(fail("default", "expects 1 or 2 arguments")),
    }
}

fn empty(args: &[Value]) -> Res {
    arity("empty", args, 1)?;
    Ok(Value::Bool(is_empty(&args[0])))
}

fn coalesce(args: &[Value]) -> Res {
    Ok(args.iter().find(|v| !is_empty(v)).cloned().unwrap_or(Value::Nil))
}

fn ternary(args: &[Value]) -> Res {
    arity("ternary", args, 3)?;
    Ok(if args[2].is_truthy() {
        args[0].clone()
    } else {
        args[1].clone()
    })
}

// ---------- conversions ----------

fn to_json(args: &[Value]) -> Res {
    arity("toJson", args, 1)?;
    serde_json::to_string(&typed::to_json(&args[0]))
        .map(string)
        .map_err(|e| fail("toJson", e))
}

fn to_pretty_json(args: &[Value]) -> Res {
    arity("toPrettyJson", args, 1)?;
    serde_json::to_string_pretty(&typed::to_json(&args[0]))
        .map(string)
        .map_err(|e| fail("toPrettyJson", e))
}

fn from_json(args: &[Value]) -> Res {
    let [text] = str_args::<1>("fromJson", args)?;
    // sprig's fromJson yields nil for input that is not JSON.
    Ok(serde_json::from_str(&text)
        .map(|v| typed::to_template(&v))
        .unwrap_or(Value::Nil))
}

fn to_string(args: &[Value]) -> Res {
    arity("toString", args, 1)?;
    Ok(string(strval(&args[0])))
}

fn int(args: &[Value]) -> Res {
    arity("int", args, 1)?;
    Ok(Value::Int(to_i64(&args[0])))
}

fn float64(args: &[Value]) -> Res {
    arity("float64", args, 1)?;
    Ok(Value::Float(to_f64(&args[0])))
}

fn atoi(args: &[Value]) -> Res {
    let [text] = str_args::<1>("atoi", args)?;
    Ok(Value::Int(text.parse().unwrap_or(0)))
}

fn b64enc(args: &[Value]) -> Res {
    let [text] = str_args::<1>("b64enc", args)?;
    Ok(string(B64.encode(text)))
}

fn b64dec(args: &[Value]) -> Res {
    let [text] = str_args::<1>("b64dec", args)?;
    let bytes = B64.decode(text).map_err(|e| fail("b64dec", e))?;
    Ok(string(String::from_utf8_lossy(&bytes).as_ref()))
}

// ---------- strings ----------

fn quote(args: &[Value]) -> Res {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(|v| serde_json::Value::String(strval(v)).to_string())
        .collect();
    Ok(string(quoted.join(" ")))
}

fn upper(args: &[Value]) -> Res {
    let [s] = str_args::<1>("upper", args)?;
    Ok(string(s.to_uppercase()))
}

fn lower(args: &[Value]) -> Res {
    let [s] = str_args::<1>("lower", args)?;
    Ok(string(s.to_lowercase()))
}

fn title(args: &[Value]) -> Res {
    let [s] = str_args::<1>("title", args)?;
    let mut out = String::with_capacity(s.len());
    let mut at_word_start = true;
    for c in s.chars() {
        if at_word_start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        // Go's strings.Title: letters, digits and `_` continue a word; anything else
        // separates words.
        at_word_start = !c.is_alphanumeric() && c != '_';
    }
    Ok(string(out))
}

fn trim(args: &[Value]) -> Res {
    let [s] = str_args::<1>("trim", args)?;
    Ok(string(s.trim()))
}

fn trim_prefix(args: &[Value]) -> Res {
    let [prefix, s] = str_args::<2>("trimPrefix", args)?;
    Ok(string(s.strip_prefix(prefix.as_str()).unwrap_or(&s)))
}

fn trim_suffix(args: &[Value]) -> Res {
    let [suffix, s] = str_args::<2>("trimSuffix", args)?;
    Ok(string(s.strip_suffix(suffix.as_str()).unwrap_or(&s)))
}

fn replace(args: &[Value]) -> Res {
    let [old, new, s] = str_args::<3>("replace", args)?;
    Ok(string(s.replace(old.as_str(), &new)))
}

/// Most bytes `repeat` produces; a bigger result is refused rather than exhausting memory.
pub(crate) const MAX_REPEAT_BYTES: usize = 10_000_000;

/// `repeat COUNT STR`: STR COUNT times (`{{ "ab" | repeat 3 }}` is `ababab`). A negative
/// count is an error, as in Go; so is a result over [`MAX_REPEAT_BYTES`].
fn repeat(args: &[Value]) -> Res {
    arity("repeat", args, 2)?;
    let count = to_i64(&args[0]);
    let s = strval(&args[1]);
    let count = usize::try_from(count).map_err(|_| fail("repeat", format_args!("negative repeat count {count}")))?;
    match count.checked_mul(s.len()) {
        Some(bytes) if bytes <= MAX_REPEAT_BYTES => Ok(string(s.repeat(count))),
        _ => Err(fail(
            "repeat",
            format_args!(
                "{count} copies of a {}-byte string exceed the {MAX_REPEAT_BYTES}-byte limit",
                s.len()
            ),
        )),
    }
}

fn contains(args: &[Value]) -> Res {
    let [needle, s] = str_args::<2>("contains", args)?;
    Ok(Value::Bool(s.contains(needle.as_str())))
}

fn has_prefix(args: &[Value]) -> Res {
    let [prefix, s] = str_args::<2>("hasPrefix", args)?;
    Ok(Value::Bool(s.starts_with(prefix.as_str())))
}

fn has_suffix(args: &[Value]) -> Res {
    let [suffix, s] = str_args::<2>("hasSuffix", args)?;
    Ok(Value::Bool(s.ends_with(suffix.as_str())))
}

fn split(args: &[Value]) -> Res {
    let [sep, s] = str_args::<2>("split", args)?;
    let parts = s
        .split(sep.as_str())
        .enumerate()
        .map(|(i, p)| (Arc::from(format!("_{i}")), string(p)))
        .collect();
    Ok(Value::Map(Arc::new(parts)))
}

fn split_list(args: &[Value]) -> Res {
    let [sep, s] = str_args::<2>("splitList", args)?;
    Ok(Value::List(s.split(sep.as_str()).map(string).collect()))
}

fn join(args: &[Value]) -> Res {
    arity("join", args, 2)?;
    let sep = strval(&args[0]);
    let parts: Vec<String> = match &args[1] {
        Value::List(items) => items.iter().filter(|v| !matches!(v, Value::Nil)).map(strval).collect(),
        other => vec![strval(other)],
    };
    Ok(string(parts.join(&sep)))
}

fn regex_match(args: &[Value]) -> Res {
    let [pattern, s] = str_args::<2>("regexMatch", args)?;
    Ok(Value::Bool(compile_regex("regexMatch", &pattern)?.is_match(&s)))
}

fn regex_replace_all(args: &[Value]) -> Res {
    let [pattern, s, replacement] = str_args::<3>("regexReplaceAll", args)?;
    let re = compile_regex("regexReplaceAll", &pattern)?;
    Ok(string(re.replace_all(&s, replacement.as_str()).as_ref()))
}

// ---------- lists and dicts ----------

fn list(args: &[Value]) -> Res {
    Ok(Value::List(args.iter().cloned().collect()))
}

fn first(args: &[Value]) -> Res {
    arity("first", args, 1)?;
    Ok(list_arg("first", &args[0])?.first().cloned().unwrap_or(Value::Nil))
}

fn last(args: &[Value]) -> Res {
    arity("last", args, 1)?;
    Ok(list_arg("last", &args[0])?.last().cloned().unwrap_or(Value::Nil))
}

fn dict(args: &[Value]) -> Res {
    let mut map = BTreeMap::new();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| string(""));
        map.insert(Arc::from(strval(&pair[0])), value);
    }
    Ok(Value::Map(Arc::new(map)))
}

fn get(args: &[Value]) -> Res {
    arity("get", args, 2)?;
    let map = map_arg("get", &args[0])?;
    Ok(map
        .get(strval(&args[1]).as_str())
        .cloned()
        .unwrap_or_else(|| string("")))
}

fn set(args: &[Value]) -> Res {
    arity("set", args, 3)?;
    let mut map = map_arg("set", &args[0])?.clone();
    map.insert(Arc::from(strval(&args[1])), args[2].clone());
    Ok(Value::Map(Arc::new(map)))
}

fn has_key(args: &[Value]) -> Res {
    arity("hasKey", args, 2)?;
    let map = map_arg("hasKey", &args[0])?;
    Ok(Value::Bool(map.contains_key(strval(&args[1]).as_str())))
}

fn keys(args: &[Value]) -> Res {
    let mut out = Vec::new();
    for arg in args {
        out.extend(map_arg("keys", arg)?.keys().map(|k| Value::String(k.clone())));
    }
    Ok(Value::List(out.into()))
}

fn values(args: &[Value]) -> Res {
    arity("values", args, 1)?;
    Ok(Value::List(map_arg("values", &args[0])?.values().cloned().collect()))
}

// ---------- math (int64, as sprig) ----------

fn add(args: &[Value]) -> Res {
    Ok(Value::Int(args.iter().map(to_i64).fold(0, i64::wrapping_add)))
}

fn mul(args: &[Value]) -> Res {
    Ok(Value::Int(args.iter().map(to_i64).fold(1, i64::wrapping_mul)))
}

fn sub(args: &[Value]) -> Res {
    arity("sub", args, 2)?;
    Ok(Value::Int(to_i64(&args[0]).wrapping_sub(to_i64(&args[1]))))
}

fn div(args: &[Value]) -> Res {
    arity("div", args, 2)?;
    to_i64(&args[0])
        .checked_div(to_i64(&args[1]))
        .map(Value::Int)
        .ok_or_else(|| fail("div", "integer divide by zero"))
}

fn modulo(args: &[Value]) -> Res {
    arity("mod", args, 2)?;
    to_i64(&args[0])
        .checked_rem(to_i64(&args[1]))
        .map(Value::Int)
        .ok_or_else(|| fail("mod", "integer divide by zero"))
}

fn max(args: &[Value]) -> Res {
    args.iter()
        .map(to_i64)
        .max()
        .map(Value::Int)
        .ok_or_else(|| fail("max", "expects at least 1 argument"))
}

fn min(args: &[Value]) -> Res {
    args.iter()
        .map(to_i64)
        .min()
        .map(Value::Int)
        .ok_or_else(|| fail("min", "expects at least 1 argument"))
}

// ---------- time ----------

/// The current time, as an RFC 3339 string (templates have no time type).
fn now(args: &[Value]) -> Res {
    arity("now", args, 0)?;
    Ok(string(Utc::now().to_rfc3339_opts(SecondsFormat::AutoSi, true)))
}

/// `date LAYOUT TIME`: TIME is an RFC 3339 string or unix seconds; LAYOUT is a Go layout.
/// Times are formatted in UTC.
fn date(args: &[Value]) -> Res {
    arity("date", args, 2)?;
    let layout = strval(&args[0]);
    let time: DateTime<Utc> = match &args[1] {
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .map_err(|e| fail("date", format_args!("'{s}' is not an RFC 3339 time: {e}")))?
            .with_timezone(&Utc),
        Value::Float(f) => Utc
            .timestamp_opt(f.trunc() as i64, (f.fract() * 1e9) as u32)
            .single()
            .ok_or_else(|| fail("date", "timestamp out of range"))?,
        other => Utc
            .timestamp_opt(to_i64(other), 0)
            .single()
            .ok_or_else(|| fail("date", "timestamp out of range"))?,
    };
    Ok(string(time.format(&go_layout_to_strftime(&layout)).to_string()))
}

/// Translates a Go reference-time layout (`2006-01-02T15:04:05Z07:00`) to a chrono format.
pub(crate) fn go_layout_to_strftime(layout: &str) -> String {
    const TOKENS: &[(&str, &str)] = &[
        ("January", "%B"),
        ("Monday", "%A"),
        ("2006", "%Y"),
        ("-07:00", "%:z"),
        ("-0700", "%z"),
        ("Z07:00", "%:z"),
        ("Z0700", "%z"),
        (".000000000", "%.9f"),
        (".000000", "%.6f"),
        (".000", "%.3f"),
        ("Jan", "%b"),
        ("Mon", "%a"),
        ("MST", "%Z"),
        ("01", "%m"),
        ("02", "%d"),
        ("_2", "%e"),
        ("15", "%H"),
        ("03", "%I"),
        ("04", "%M"),
        ("05", "%S"),
        ("06", "%y"),
        ("PM", "%p"),
        ("pm", "%P"),
        ("1", "%-m"),
        ("2", "%-d"),
        ("3", "%-I"),
        ("4", "%-M"),
        ("5", "%-S"),
    ];
    let mut out = String::with_capacity(layout.len() * 2);
    let mut rest = layout;
    'outer: while let Some(c) = rest.chars().next() {
        for (go, chrono) in TOKENS {
            if let Some(after) = rest.strip_prefix(go) {
                out.push_str(chrono);
                rest = after;
                continue 'outer;
            }
        }
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}
