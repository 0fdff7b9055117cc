//! The workflow tools: `core_workflow_list`, `_get`, `_available`, `_create`, `_update`,
//! `_delete`, `_validate`, `_execution_list` and `_execution_get`.
//!
//! Definitions are checked by compiling them ([`CompiledWorkflow::compile`]: the CRD rules,
//! templates and jq programs), so a definition this module accepts is one the registry runs.
//! Writes go to the core tools' [`DefinitionStore`](crate::definitions::DefinitionStore) first,
//! when it has one, on behalf of the caller (in filesystem mode, `workflows/<name>.yaml`, or
//! the file that already defines the workflow, atomically); the registry then rebuilds the
//! catalogue, so `workflow_<name>` is callable as soon as the tool answers. A step tool that
//! does not exist is reported (`missing_tools`), never refused: it may connect later.
//! Each write names its author in its event and log line; answers name files relative to the
//! config directory.

use std::{collections::BTreeMap, sync::Arc};

use muster_core::{
    CallContext, JsonObject, NameRules, ToolError,
    crd::{Workflow, WorkflowSpec, deprecated_spellings},
};
use muster_workflow::{
    engine::CompiledWorkflow,
    record::{ExecutionStore, execution_get_result, execution_list_result},
};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::{Writes, dropped_fields, json_result, report_dropped_fields};
use crate::{
    definitions::{Stored, config_dir::check_name},
    events::{Author, Event, KIND_WORKFLOW, reasons},
    registry::Registry,
};

/// The arguments that are not spec fields.
const NON_SPEC: [&str; 2] = ["name", "labels"];

/// A definition that compiled, with what deserves attention.
struct Checked {
    workflow: Workflow,
    warnings: Vec<String>,
}

fn name_of(args: &JsonObject) -> Result<&str, ToolError> {
    match args.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => Ok(n),
        _ => Err(ToolError::invalid_arguments("name argument is required")),
    }
}

fn not_found(name: &str) -> ToolError {
    ToolError::invalid_arguments(format!("workflow {name} not found"))
}

/// The spec fields of `args` (everything but `name` and `labels`); a null field is left out,
/// so it takes its default.
fn spec_fields(args: &JsonObject) -> Map<String, Value> {
    args.iter()
        .filter(|(k, v)| !NON_SPEC.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether `args` gives `steps` (a null counts as not given).
fn has_steps(args: &JsonObject) -> bool {
    args.get("steps").is_some_and(|s| !s.is_null())
}

/// Parses the spec fields with the CRD's names (and the deprecated snake_case aliases): a
/// mistyped field is an error naming its path; an unknown one is dropped, logged and returned
/// as a warning naming its path.
fn parse_spec(name: &str, fields: Map<String, Value>) -> Result<(WorkflowSpec, Vec<String>), String> {
    let (spec, unknown) = muster_core::crd::parse_spec(&Value::Object(fields))
        .map_err(|e| format!("invalid workflow definition: {e}"))?;
    Ok((spec, dropped_fields(KIND_WORKFLOW, name, &unknown)))
}

/// The `labels` argument: absent (`None`), null (no labels), or an object of strings.
fn parse_labels(args: &JsonObject) -> Result<Option<BTreeMap<String, String>>, String> {
    match args.get("labels") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(BTreeMap::new())),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|_| "labels must be an object whose values are strings".to_owned()),
    }
}

/// The deprecated spellings `fields` uses, as warnings (also logged).
fn deprecation_warnings(name: &str, fields: &Map<String, Value>) -> Vec<String> {
    deprecated_spellings(&Value::Object(fields.clone()))
        .into_iter()
        .map(|d| {
            tracing::warn!(
                workflow = %name,
                field = %d.path,
                replacement = d.replacement,
                "deprecated spelling; still accepted"
            );
            d.to_string()
        })
        .collect()
}

/// Checks `workflow` as the registry will: its name must be a file name, and it must compile.
/// The error lists every problem.
fn check(workflow: Workflow) -> Result<Checked, Vec<String>> {
    let name_error = check_name(&workflow.metadata.name)
        .err()
        .map(|e| format!("metadata.name: {e}"));
    match CompiledWorkflow::compile(workflow) {
        Ok(compiled) => match name_error {
            Some(error) => Err(vec![error]),
            None => Ok(Checked {
                warnings: compiled.warnings().to_vec(),
                workflow: compiled.workflow().clone(),
            }),
        },
        Err(errors) => Err(name_error.into_iter().chain(errors.to_lines()).collect()),
    }
}

/// The refusal of an invalid definition, recorded as a `WorkflowValidationFailed` event.
fn invalid(registry: &Registry, name: &str, errors: &[String]) -> ToolError {
    let joined = errors.join("; ");
    registry.emit(Event::workflow(
        name,
        reasons::WORKFLOW_VALIDATION_FAILED,
        format!("Workflow {name} validation failed: {joined}"),
    ));
    ToolError::invalid_arguments(format!("validation failed: {joined}"))
}

/// Writes `workflow` to the definition store, when there is one, on behalf of the caller of
/// `ctx`: the definition to apply, as the store holds it, and its file.
async fn persist(store: Writes<'_>, workflow: Workflow, ctx: &CallContext) -> Result<Stored<Workflow>, ToolError> {
    match store {
        Some(store) => Ok(store.put_workflow(workflow, ctx).await?),
        None => Ok(Stored::new(workflow)),
    }
}

/// The definition as `core_workflow_get` shows it: the spec fields, `name` and `labels`.
fn definition(workflow: &Workflow) -> Result<Map<String, Value>, ToolError> {
    let mut map = match serde_json::to_value(&workflow.spec).map_err(ToolError::internal)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.insert("name".into(), json!(workflow.metadata.name));
    if !workflow.metadata.labels.is_empty() {
        map.insert("labels".into(), json!(workflow.metadata.labels));
    }
    Ok(map)
}

/// Whether defined workflow `name` can run now, and the tools it lacks.
fn availability(registry: &Registry, name: &str) -> (bool, Vec<String>) {
    registry
        .workflow_availability(name)
        .map_or((false, Vec::new()), |a| (a.available, a.missing))
}

fn insert_availability(registry: &Registry, name: &str, map: &mut Map<String, Value>) {
    let (available, missing) = availability(registry, name);
    map.insert("available".into(), json!(available));
    map.insert("missing_tools".into(), json!(missing));
}

pub(super) fn list(registry: &Registry) -> Value {
    let workflows: Vec<Value> = registry
        .workflows()
        .iter()
        .map(|w| {
            let name = &w.metadata.name;
            let (available, missing) = availability(registry, name);
            json!({
                "name": name,
                "description": w.spec.description.as_deref().unwrap_or_default(),
                "available": available,
                "missing_tools": missing,
                "steps": w.spec.steps.len(),
            })
        })
        .collect();
    json!({"workflows": workflows, "total": workflows.len()})
}

/// The whole definition as structured data (every spec field: description, args with types
/// and defaults, each step with its args, condition and flags, output, onFailure; `name` and
/// `labels`), its availability, and in `yaml` the Workflow document as a file of the config
/// directory holds it, for people reading it.
pub(super) fn get(registry: &Registry, name: &str) -> Result<Value, ToolError> {
    let mut workflow = registry.workflow(name).ok_or_else(|| not_found(name))?;
    let mut map = definition(&workflow)?;
    insert_availability(registry, name, &mut map);
    workflow.status = None;
    let yaml = serde_saphyr::to_string(&workflow).map_err(|e| ToolError::internal(e.to_string()))?;
    map.insert("yaml".into(), json!(yaml));
    Ok(Value::Object(map))
}

pub(super) fn available(registry: &Registry, name: &str) -> Result<Value, ToolError> {
    if registry.workflow(name).is_none() {
        return Err(not_found(name));
    }
    let (available, missing) = availability(registry, name);
    Ok(json!({"name": name, "available": available, "missing_tools": missing}))
}

pub(super) async fn create(
    registry: &Arc<Registry>,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    if !has_steps(args) {
        return Err(ToolError::invalid_arguments("steps argument is required"));
    }
    if registry.workflow(name).is_some() {
        return Err(ToolError::invalid_arguments(format!("workflow {name} already exists")));
    }
    let fields = spec_fields(args);
    let mut warnings = deprecation_warnings(name, &fields);
    let (spec, dropped) = parse_spec(name, fields).map_err(ToolError::invalid_arguments)?;
    let mut workflow = Workflow::new(name, spec);
    if let Some(labels) = parse_labels(args).map_err(ToolError::invalid_arguments)? {
        workflow.metadata.labels = labels;
    }
    let checked = check(workflow).map_err(|errors| invalid(registry, name, &errors))?;
    warnings.extend(checked.warnings);
    let stored = persist(store, checked.workflow, ctx).await?;
    apply(registry, stored.definition, ctx)?;
    report_dropped_fields(registry, KIND_WORKFLOW, name, &dropped);
    warnings.extend(dropped);
    changed(registry, name, "created", warnings, stored.file)
}

pub(super) async fn update(
    registry: &Arc<Registry>,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    let current = registry.workflow(name).ok_or_else(|| not_found(name))?;
    let mut fields = match serde_json::to_value(&current.spec).map_err(ToolError::internal)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let changes = spec_fields(args);
    let mut warnings = deprecation_warnings(name, &changes);
    // A field given as null goes back to its default.
    for (key, value) in args {
        if value.is_null() && !NON_SPEC.contains(&key.as_str()) {
            fields.remove(key);
        }
    }
    fields.extend(changes);
    let (spec, dropped) = parse_spec(name, fields).map_err(ToolError::invalid_arguments)?;
    let mut workflow = current;
    workflow.spec = spec;
    workflow.status = None;
    if let Some(labels) = parse_labels(args).map_err(ToolError::invalid_arguments)? {
        workflow.metadata.labels = labels;
    }
    let checked = check(workflow).map_err(|errors| invalid(registry, name, &errors))?;
    warnings.extend(checked.warnings);
    let stored = persist(store, checked.workflow, ctx).await?;
    let verb = if apply(registry, stored.definition, ctx)? {
        "updated"
    } else {
        "unchanged"
    };
    report_dropped_fields(registry, KIND_WORKFLOW, name, &dropped);
    warnings.extend(dropped);
    changed(registry, name, verb, warnings, stored.file)
}

/// Applies a checked definition; `false` when it was already in force exactly so.
fn apply(registry: &Registry, workflow: Workflow, ctx: &CallContext) -> Result<bool, ToolError> {
    registry
        .apply_workflow_as(workflow, Some(&Author::of(ctx)))
        .map_err(|errors| ToolError::internal(format!("validation failed: {}", errors.to_lines().join("; "))))
}

fn changed(
    registry: &Registry,
    name: &str,
    verb: &str,
    warnings: Vec<String>,
    file: Option<String>,
) -> Result<Value, ToolError> {
    let workflow = registry
        .workflow(name)
        .ok_or_else(|| ToolError::internal(format!("workflow {name} vanished")))?;
    let mut map = definition(&workflow)?;
    insert_availability(registry, name, &mut map);
    map.insert("warnings".into(), json!(warnings));
    map.insert("message".into(), json!(format!("workflow {name} {verb}")));
    if let Some(file) = file {
        map.insert("file".into(), json!(file));
    }
    Ok(Value::Object(map))
}

pub(super) async fn delete(
    registry: &Registry,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    if registry.workflow(name).is_none() {
        return Err(not_found(name));
    }
    if let Some(store) = store {
        store.delete_workflow(name, ctx).await?;
    }
    registry.remove_workflow_as(name, Some(&Author::of(ctx)));
    Ok(json!({"name": name, "deleted": true, "message": format!("workflow {name} deleted")}))
}

/// Validates a definition without creating it. An invalid one is an error result (isError)
/// whose JSON lists every problem; a missing step tool is reported, not an error.
pub(super) fn validate(registry: &Registry, args: &JsonObject) -> Result<CallToolResult, ToolError> {
    let name = name_of(args)?;
    let fields = spec_fields(args);
    let mut warnings = deprecation_warnings(name, &fields);
    let mut referenced: Vec<String> = Vec::new();
    let outcome = if has_steps(args) {
        parse_spec(name, fields)
            .map_err(|e| vec![e])
            .and_then(|(spec, dropped)| {
                warnings.extend(dropped);
                let mut workflow = Workflow::new(name, spec);
                workflow.metadata.labels = parse_labels(args).map_err(|e| vec![e])?.unwrap_or_default();
                referenced = muster_workflow::referenced_tools(&workflow).into_iter().collect();
                check(workflow)
            })
    } else {
        Err(vec!["steps argument is required".to_owned()])
    };
    let errors = match outcome {
        Ok(checked) => {
            warnings.extend(checked.warnings);
            Vec::new()
        }
        Err(errors) => errors,
    };
    let missing: Vec<&String> = referenced
        .iter()
        .filter(|t| !tool_available(registry, name, t))
        .collect();
    let valid = errors.is_empty();
    let message = if valid {
        format!("workflow {name} is valid")
    } else {
        format!("validation failed: {}", errors.join("; "))
    };
    let (reason, event_message) = if valid {
        let mut message = format!("Workflow {name} validation succeeded");
        if !warnings.is_empty() {
            message.push_str(&format!(" with warnings: {}", warnings.join("; ")));
        }
        (reasons::WORKFLOW_VALIDATION_SUCCEEDED, message)
    } else {
        (
            reasons::WORKFLOW_VALIDATION_FAILED,
            format!("Workflow {name} validation failed: {}", errors.join("; ")),
        )
    };
    registry.emit(
        Event::workflow(name, reason, event_message)
            .with_details(crate::events::EventDetails::default().with_warnings(warnings.clone())),
    );
    let answer = json!({
        "valid": valid,
        "name": name,
        "errors": errors,
        "warnings": warnings,
        "referenced_tools": referenced,
        "missing_tools": missing,
        "message": message,
    });
    Ok(if valid {
        json_result(&answer)
    } else {
        CallToolResult::structured_error(answer)
    })
}

/// Whether `tool`, named by workflow `name` (not necessarily defined), can be called now: a
/// defined workflow's tool when that workflow is available (a workflow calling itself counts
/// as present), any other tool when the catalogue has it.
fn tool_available(registry: &Registry, name: &str, tool: &str) -> bool {
    match NameRules::workflow_of(tool) {
        Some(nested) if nested == name => true,
        Some(nested) if registry.workflow(nested).is_some() => availability(registry, nested).0,
        _ => registry.catalog().tool(tool).is_some(),
    }
}

pub(super) async fn execution_list(store: &Arc<dyn ExecutionStore>, args: &JsonObject) -> Result<Value, ToolError> {
    let store = Arc::clone(store);
    let args = args.clone();
    tokio::task::spawn_blocking(move || execution_list_result(store.as_ref(), &args))
        .await
        .map_err(ToolError::internal)?
        .map_err(ToolError::invalid_arguments)
}

pub(super) async fn execution_get(store: &Arc<dyn ExecutionStore>, args: &JsonObject) -> Result<Value, ToolError> {
    let store = Arc::clone(store);
    let args = args.clone();
    tokio::task::spawn_blocking(move || execution_get_result(store.as_ref(), &args))
        .await
        .map_err(ToolError::internal)?
        .map_err(ToolError::invalid_arguments)
}

#[cfg(test)]
mod tests;
