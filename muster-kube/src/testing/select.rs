//! Label and field selectors of list, watch and delete-collection requests.
//!
//! Label selectors take the full set-based syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
//! `k notin (a,b)`, `k` and `!k`, joined by commas (all must hold). Field selectors take `=`,
//! `==` and `!=` on `metadata.name`, `metadata.namespace` and the type's selectable fields;
//! another field is refused with 400, as the real server refuses unsupported field labels.

use serde_json::Value;

use super::{resource::ResourceType, status::ApiError};

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_top_level(input) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(
                parse_requirement(term)
                    .ok_or_else(|| ApiError::bad_request(format!("unable to parse requirement: {term:?}")))?,
            );
        }
        Ok(Self(requirements))
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
        })
    }
}

/// Splits at commas outside parentheses (`a in (x,y),b=c` is two terms).
fn split_top_level(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
}

fn parse_requirement(term: &str) -> Option<LabelRequirement> {
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim()).map(LabelRequirement::NotExists);
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Some(LabelRequirement::NotEquals(
            valid_key(key.trim())?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Some(LabelRequirement::Equals(
            valid_key(key.trim())?,
            value.trim().to_owned(),
        ));
    }
    let mut words = term.splitn(2, char::is_whitespace);
    let key = valid_key(words.next()?.trim())?;
    let rest = words.next().map(str::trim).unwrap_or_default();
    if rest.is_empty() {
        return Some(LabelRequirement::Exists(key));
    }
    let (op, set) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let set = set.trim().strip_prefix('(')?.strip_suffix(')')?;
    let values = set.split(',').map(|v| v.trim().to_owned()).collect();
    match op {
        "in" => Some(LabelRequirement::In(key, values)),
        "notin" => Some(LabelRequirement::NotIn(key, values)),
        _ => None,
    }
}

fn valid_key(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    ok.then(|| key.to_owned())
}

/// A parsed `fieldSelector`: `(dotted path, wanted value, equal?)` terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(String, String, bool)>);

impl FieldSelector {
    pub(crate) fn parse(input: &str, rt: &ResourceType) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            let supported = matches!(field, "metadata.name" | "metadata.namespace")
                || rt.selectable_fields.iter().any(|f| f == field);
            if !supported {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(Self(terms))
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, wanted, equal)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *wanted) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels}})
    }

    #[test]
    fn label_selectors_combine_equality_and_set_terms() {
        let selector = LabelSelector::parse("app=muster,tier in (a, b),!legacy").expect("parses");
        assert!(selector.matches(&labelled(json!({"app": "muster", "tier": "a"}))));
        assert!(!selector.matches(&labelled(json!({"app": "muster", "tier": "c"}))));
        assert!(!selector.matches(&labelled(json!({"app": "muster", "tier": "a", "legacy": "1"}))));
        assert!(!selector.matches(&labelled(json!({"app": "other", "tier": "a"}))));
    }

    #[test]
    fn not_equal_and_notin_match_objects_without_the_label() {
        let selector = LabelSelector::parse("app!=x,env notin (prod)").expect("parses");
        assert!(selector.matches(&labelled(json!({}))));
        assert!(!selector.matches(&labelled(json!({"env": "prod"}))));
    }

    #[test]
    fn field_selectors_refuse_unsupported_fields() {
        let rt = ResourceType::defaults().remove(1);
        let selector = FieldSelector::parse("regarding.name=x,metadata.name!=y", &rt).expect("parses");
        assert!(selector.matches(&json!({"metadata": {"name": "z"}, "regarding": {"name": "x"}})));
        let err = FieldSelector::parse("spec.x=1", &rt).expect_err("unsupported");
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.x");
    }
}
