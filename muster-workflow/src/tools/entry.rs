//! A workflow's catalogue entry: the `workflow_<name>` tool, its input schema from `spec.args`,
//! its labels, and the derived `readOnlyHint`.

use std::sync::Arc;

use muster_core::{NameRules, ToolEntry, ToolKind, crd::ArgType};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::engine::CompiledWorkflow;

/// The catalogue entry of `workflow`'s tool, named by `names`, annotated `readOnlyHint: true`
/// when `read_only` (see [`Availability::read_only`](super::Availability::read_only)).
///
/// The description is `spec.description`, or `Run workflow <name>` when there is none; the
/// labels are the workflow's `metadata.labels`.
pub fn entry(names: &NameRules, workflow: &CompiledWorkflow, read_only: bool) -> ToolEntry {
    let spec = &workflow.workflow().spec;
    let description = spec
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| format!("Run workflow {}", workflow.name()));
    let mut tool = Tool::new(
        names.workflow_tool(workflow.name()),
        description,
        Arc::new(input_schema(workflow)),
    );
    if read_only {
        tool = tool.with_annotations(ToolAnnotations::new().read_only(true));
    }
    ToolEntry::builtin(ToolKind::Workflow, tool).with_labels(workflow.workflow().metadata.labels.clone())
}

/// The input schema of a workflow's tool, from `spec.args`: each argument a property with its
/// type (an array's items unconstrained), description and default; an argument is required
/// when it says so and has no default.
fn input_schema(workflow: &CompiledWorkflow) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, arg) in &workflow.workflow().spec.args {
        let mut property = Map::new();
        if let Some(kind) = arg.arg_type {
            property.insert("type".into(), Value::String(kind.as_str().into()));
            if kind == ArgType::Array {
                property.insert("items".into(), json!({}));
            }
        }
        if let Some(description) = &arg.description {
            property.insert("description".into(), Value::String(description.clone()));
        }
        if let Some(default) = &arg.default {
            property.insert("default".into(), default.clone());
        }
        if arg.required && arg.default.is_none() {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name.clone(), Value::Object(property));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema
}
