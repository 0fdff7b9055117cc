//! The arguments of a run: defaults applied and types checked against `spec.args`, with the
//! documented messages (`required field 'x' is missing`, `field 'x' has wrong type, expected
//! integer`). Unknown arguments are kept, as muster does.

use std::collections::BTreeMap;

use muster_core::{
    JsonObject,
    crd::{ArgDefinition, ArgType},
};
use serde_json::Value;

/// The reserved argument that asks for every step result in the response.
pub const DEBUG_ARG: &str = "_debug";

/// The run's input: `arguments` without [`DEBUG_ARG`], defaults filled in, types checked.
/// Returns the input and whether debug output was asked for. The error is the full message,
/// `input validation failed: ...`.
pub fn prepare_input(
    args: &BTreeMap<String, ArgDefinition>,
    mut arguments: JsonObject,
) -> Result<(JsonObject, bool), String> {
    let debug = match arguments.remove(DEBUG_ARG) {
        Some(Value::Bool(b)) => b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    let mut problems = Vec::new();
    for (name, def) in args {
        match arguments.get(name) {
            None | Some(Value::Null) => {
                if let Some(default) = &def.default {
                    arguments.insert(name.clone(), default.clone());
                } else if def.required {
                    problems.push(format!("required field '{name}' is missing"));
                }
            }
            Some(value) => {
                if let Some(expected) = def.arg_type
                    && !has_type(value, expected)
                {
                    problems.push(format!("field '{name}' has wrong type, expected {expected}"));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok((arguments, debug))
    } else {
        Err(format!("input validation failed: {}", problems.join("; ")))
    }
}

fn has_type(value: &Value, expected: ArgType) -> bool {
    match expected {
        ArgType::String => value.is_string(),
        // As muster does: any number passes as an integer.
        ArgType::Integer | ArgType::Number => value.is_number(),
        ArgType::Boolean => value.is_boolean(),
        ArgType::Array => value.is_array(),
        ArgType::Object => value.is_object(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs() -> BTreeMap<String, ArgDefinition> {
        serde_json::from_value(json!({
            "name": {"type": "string", "required": true},
            "env": {"type": "string", "default": "development"},
            "replicas": {"type": "integer"},
            "debug_mode": {"type": "boolean", "default": false},
        }))
        .expect("valid definitions")
    }

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn defaults_are_applied_and_unknown_arguments_kept() {
        let (input, debug) = prepare_input(&defs(), obj(json!({"name": "shop", "extra": 1}))).expect("valid");
        assert_eq!(
            Value::Object(input),
            json!({"name": "shop", "env": "development", "debug_mode": false, "extra": 1})
        );
        assert!(!debug);
    }

    #[test]
    fn missing_and_mistyped_arguments_are_reported_together() {
        let err = prepare_input(&defs(), obj(json!({"replicas": "three"}))).expect_err("invalid");
        assert_eq!(
            err,
            "input validation failed: required field 'name' is missing; field 'replicas' has wrong type, expected integer"
        );
    }

    #[test]
    fn a_float_passes_as_an_integer_and_debug_is_consumed() {
        let (input, debug) =
            prepare_input(&defs(), obj(json!({"name": "a", "replicas": 2.5, "_debug": "true"}))).expect("valid");
        assert!(debug);
        assert!(!input.contains_key(DEBUG_ARG));
    }
}
