//! Unit tests of the resources and their validation: one test per rule.

use serde::de::DeserializeOwned;

use super::ValidationErrors;

mod execution;
mod mcpserver;
mod workflow;

/// Parses a YAML test document.
fn yaml<T: DeserializeOwned>(doc: &str) -> T {
    match serde_saphyr::from_str(doc) {
        Ok(value) => value,
        Err(e) => panic!("test document does not parse: {e}\n{doc}"),
    }
}

/// The parse error of a YAML document that must not parse, rendered.
fn yaml_error<T: DeserializeOwned + std::fmt::Debug>(doc: &str) -> String {
    match serde_saphyr::from_str::<T>(doc) {
        Ok(value) => panic!("document parsed but must not: {value:?}"),
        Err(e) => e.to_string(),
    }
}

/// The warnings of reading YAML document `doc` with `read` (a `from_document`), rendered.
fn dropped<T>(doc: &str, read: fn(&serde_json::Value) -> super::DefinitionResult<T>) -> Vec<String> {
    let value: serde_json::Value = yaml(doc);
    match read(&value) {
        Ok((_, warnings)) => warnings.iter().map(ToString::to_string).collect(),
        Err(e) => panic!("document must load: {e}\n{doc}"),
    }
}

/// Asserts that validation failed with exactly one error, at `path` with `message`.
#[track_caller]
fn assert_only(result: Result<(), ValidationErrors>, path: &str, message: &str) {
    let errors = match result {
        Ok(()) => panic!("validation passed, expected `{path}: {message}`"),
        Err(errors) => errors,
    };
    assert_eq!(
        errors.to_lines(),
        vec![format!("{path}: {message}")],
        "unexpected validation errors"
    );
}

/// Asserts that validation failed with (at least) an error at `path` with `message`.
#[track_caller]
fn assert_has(result: &Result<(), ValidationErrors>, path: &str, message: &str) {
    match result {
        Ok(()) => panic!("validation passed, expected `{path}: {message}`"),
        Err(errors) => assert!(
            errors.contains(path, message),
            "missing `{path}: {message}` in:\n{errors}"
        ),
    }
}

/// Asserts that validation passed, showing the errors when it did not.
#[track_caller]
fn assert_valid(result: Result<(), ValidationErrors>) {
    if let Err(errors) = result {
        panic!("validation failed:\n{errors}");
    }
}
