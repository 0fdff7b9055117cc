//! What the API server requires of an `events.k8s.io/v1` Event it creates (the strict
//! validation of Events created through `events.k8s.io/v1`): `eventTime`, a type of `Normal`
//! or `Warning`, a `reportingController` that is a qualified name, a `reportingInstance`, an
//! `action` and a `reason` of at most 128 characters each, and a `note` of at most 1 KiB.

use serde_json::Value;

use super::{
    resource::ResourceType,
    status::{ApiError, FieldError},
};

/// The longest `action`, `reason` and `reportingInstance`, in characters.
const FIELD_MAX: usize = 128;
/// The longest `note`, in bytes.
const NOTE_MAX: usize = 1024;

/// Whether `rt` is the type these rules are about.
pub(crate) fn applies(rt: &ResourceType) -> bool {
    rt.group == "events.k8s.io" && rt.kind == "Event"
}

/// The create of Event `name` with `body`: refused with every broken rule, as the API server
/// refuses it (422 `Invalid`).
pub(crate) fn check_create(rt: &ResourceType, name: &str, body: &Value) -> Result<(), ApiError> {
    let text = |field: &str| body.get(field).and_then(Value::as_str).unwrap_or_default();
    let mut errors = Vec::new();
    if text("eventTime").is_empty() {
        errors.push(FieldError::required("eventTime", "eventTime is required"));
    }
    let event_type = text("type");
    if event_type != "Normal" && event_type != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            "\"\"",
            &format!("has invalid value: {event_type}"),
        ));
    }
    let controller = text("reportingController");
    if controller.is_empty() {
        errors.push(FieldError::required(
            "reportingController",
            "reportingController is required",
        ));
    } else if !is_qualified_name(controller) {
        errors.push(FieldError::invalid(
            "reportingController",
            &format!("\"{controller}\""),
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
             with an alphanumeric character, with an optional DNS subdomain prefix and '/'",
        ));
    }
    for field in ["reportingInstance", "action", "reason"] {
        let value = text(field);
        if value.is_empty() {
            errors.push(FieldError::required(field, &format!("{field} is required")));
        } else if value.chars().count() > FIELD_MAX {
            errors.push(FieldError::invalid(
                field,
                "\"\"",
                &format!("can have at most {FIELD_MAX} characters"),
            ));
        }
    }
    if text("note").len() > NOTE_MAX {
        errors.push(FieldError::invalid(
            "note",
            "\"\"",
            &format!("can have at most {NOTE_MAX} characters"),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(rt, name, &errors))
    }
}

/// `[prefix/]name`: a name of at most 63 characters of `[A-Za-z0-9-_.]` beginning and ending
/// with a letter or digit, after an optional DNS subdomain prefix.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(crate::executions::is_resource_name);
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn events() -> ResourceType {
        ResourceType::defaults()
            .into_iter()
            .find(applies)
            .expect("the double serves Events")
    }

    fn valid() -> Value {
        json!({
            "eventTime": "2026-12-01T10:00:00.000000Z", "type": "Normal",
            "reportingController": "muster.giantswarm.io/muster", "reportingInstance": "muster-0",
            "action": "Started", "reason": "Started", "note": "started",
        })
    }

    #[test]
    fn a_complete_event_is_admitted_and_each_broken_rule_is_named() {
        assert!(check_create(&events(), "x.1", &valid()).is_ok());
        for (field, value, expected) in [
            ("eventTime", json!(null), "eventTime: Required value"),
            (
                "type",
                json!("Error"),
                "type: Invalid value: \"\": has invalid value: Error",
            ),
            (
                "reportingController",
                json!("muster/"),
                "reportingController: Invalid value",
            ),
            (
                "reportingController",
                json!("Bad_Prefix/x"),
                "reportingController: Invalid value",
            ),
            ("reportingInstance", json!(""), "reportingInstance: Required value"),
            (
                "action",
                json!("a".repeat(129)),
                "action: Invalid value: \"\": can have at most 128",
            ),
            ("reason", json!(null), "reason: Required value"),
            (
                "note",
                json!("é".repeat(513)),
                "note: Invalid value: \"\": can have at most 1024",
            ),
        ] {
            let mut body = valid();
            body[field] = value;
            let error = check_create(&events(), "x.1", &body).expect_err(field);
            assert_eq!(error.code, 422);
            assert!(error.message.contains(expected), "{field}: {}", error.message);
        }
        let mut body = valid();
        body["note"] = json!("é".repeat(512));
        assert!(check_create(&events(), "x.1", &body).is_ok(), "1024 bytes are allowed");
    }

    #[test]
    fn qualified_names_may_have_a_dns_prefix() {
        for good in ["muster", "muster.giantswarm.io/muster", "a/B_c.d-1"] {
            assert!(is_qualified_name(good), "{good}");
        }
        for bad in ["", "/x", "x/", "-x", "x/-y", "UPPER.io/x", &"a".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
