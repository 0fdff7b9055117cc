//! Admission against a registered `openAPIV3Schema`: schema defaults, then the CEL rules
//! (`x-kubernetes-validations`), evaluated with kube's client-side CEL validator.
//!
//! A failing rule answers 422 `Invalid` worded as the API server words it:
//! `MCPServer.muster.giantswarm.io "x" is invalid: spec: Invalid value: "object": <message>`,
//! where `"object"` is the schema type of the field the rule sits on and a rule on the root is
//! reported at `<nil>`. The rule's `reason` picks `Required value`, `Forbidden` or
//! `Duplicate value` instead.

use kube::core::cel::{ValidationError, Validator, apply_defaults};
use serde_json::Value;

use super::{
    resource::ResourceType,
    status::{ApiError, FieldError},
};

thread_local! {
    /// Registering the Kubernetes CEL functions costs more than a validation; once a thread.
    static VALIDATOR: Validator = Validator::new();
}

/// Defaults `object` from `schema` and checks its CEL rules (`old` for transition rules).
pub(crate) fn admit(
    rt: &ResourceType,
    schema: &Value,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    *object = apply_defaults(schema, object);
    let result = VALIDATOR.with(|validator| validator.validate(schema, object, old));
    let Err(errors) = result else { return Ok(()) };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fields: Vec<FieldError> = errors.iter().map(|e| field_error(schema, e)).collect();
    Err(ApiError::invalid(rt, name, &fields))
}

fn field_error(schema: &Value, error: &ValidationError) -> FieldError {
    let field = if error.field_path.is_empty() {
        "<nil>".to_owned()
    } else {
        error.field_path.clone()
    };
    match error.reason.as_deref() {
        Some("FieldValueRequired") => FieldError::required(&field, &error.message),
        Some("FieldValueForbidden") => FieldError::forbidden(&field, &error.message),
        Some("FieldValueDuplicate") => FieldError::duplicate(&field, &error.message),
        _ => {
            let kind = schema_type(schema, &error.field_path).unwrap_or("object");
            FieldError::invalid(&field, &format!("\"{kind}\""), &error.message)
        }
    }
}

/// The `type` of the schema node at a dotted path with `[i]` indexes (`spec.items[0].name`).
fn schema_type<'a>(schema: &'a Value, path: &str) -> Option<&'a str> {
    let mut node = schema;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, indexes) = match segment.find('[') {
            Some(i) => (&segment[..i], segment[i..].matches('[').count()),
            None => (segment, 0),
        };
        if !name.is_empty() {
            node = node.get("properties")?.get(name)?;
        }
        for _ in 0..indexes {
            node = node.get("items")?;
        }
    }
    node.get("type").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schema_type_walks_properties_and_items() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "args": {"type": "array", "items": {"type": "string"}}}}}});
        assert_eq!(schema_type(&schema, "spec"), Some("object"));
        assert_eq!(schema_type(&schema, "spec.args[0]"), Some("string"));
        assert_eq!(schema_type(&schema, ""), Some("object"));
    }
}
