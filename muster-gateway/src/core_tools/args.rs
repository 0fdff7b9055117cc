//! The argument types of the core tools that take more than a name: the source of their input
//! schemas.
//!
//! The create, update and validate tools of MCP servers and workflows take a definition's spec
//! fields as their arguments, so their schemas are generated from the CRD types themselves
//! ([`MCPServerSpec`], [`WorkflowSpec`]) with every nested object inlined (`auth`,
//! `auth.authorizationServer`, a step's `condition`, ...), plus the few arguments that are
//! not spec fields ([`McpServerNaming`], [`WorkflowNaming`]). Nothing is written by hand, so
//! the advertised schema cannot drift from what the tools read.

use std::{collections::BTreeMap, sync::Arc};

use muster_core::crd::{MCPServerSpec, WorkflowSpec};
use rmcp::model::JsonObject;
use schemars::{JsonSchema, generate::SchemaSettings};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The arguments of `core_mcpserver_create`, `_update` and `_validate` that are not spec
/// fields, and the one spec field the tools take in a second shape (`command` as an array).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct McpServerNaming {
    /// Unique server name (the service identifier).
    pub(crate) name: String,
    /// Human-friendly name UIs show (the ui.giantswarm.io/display-name annotation), trimmed; a
    /// blank value removes it, and omitting it on update keeps the current one.
    pub(crate) display_name: Option<String>,
    /// Executable of a stdio server (required when type is stdio): a string, or an array whose
    /// first item is the executable and the rest its arguments (put before args).
    pub(crate) command: Option<CommandArg>,
}

/// `command` as the MCP server tools take it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum CommandArg {
    /// The executable.
    Executable(String),
    /// The executable and its arguments.
    WithArgs(Vec<String>),
}

/// The arguments of `core_workflow_create`, `_update` and `_validate` that are not spec fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct WorkflowNaming {
    /// Unique workflow name; the workflow runs as the tool workflow_<name>.
    pub(crate) name: String,
    /// Labels of the workflow (shown on its tool and used by filter_tools).
    pub(crate) labels: Option<BTreeMap<String, String>>,
}

/// The input schema of a tool whose arguments are the spec fields of `Spec` plus those of
/// `Naming` (which wins where both have a field), with `required` required. Nested objects are
/// inlined (a recursive type stays a `$ref` into `$defs`).
pub(crate) fn definition_schema<Spec: JsonSchema, Naming: JsonSchema>(required: &[&str]) -> Arc<JsonObject> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let Value::Object(mut schema) = generator.root_schema_for::<Spec>().to_value() else {
        unreachable!("a struct's schema is an object")
    };
    let naming = generator.root_schema_for::<Naming>().to_value();
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(extra)) = naming.get(key) {
            let target = schema.entry(key).or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(target) = target {
                target.extend(extra.clone());
            }
        }
    }
    schema.remove("title");
    schema.insert("required".into(), Value::from(required.to_vec()));
    drop_kubernetes_keywords(&mut schema);
    Arc::new(schema)
}

/// Removes the CustomResourceDefinition's own keywords (`x-kubernetes-validations`, the CEL
/// rules `kubectl apply` enforces, and `x-kubernetes-list-type`): they mean nothing to an agent
/// reading the tool's schema, and the tools check the same rules themselves.
fn drop_kubernetes_keywords(schema: &mut JsonObject) {
    schema.retain(|key, _| !key.starts_with("x-kubernetes-"));
    for value in schema.values_mut() {
        match value {
            Value::Object(object) => drop_kubernetes_keywords(object),
            Value::Array(items) => items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(drop_kubernetes_keywords),
            _ => {}
        }
    }
}

/// The schema of `core_mcpserver_create` and `_validate` (`required`: name, type) or `_update`
/// (name).
pub(crate) fn mcpserver_schema(required: &[&str]) -> Arc<JsonObject> {
    definition_schema::<MCPServerSpec, McpServerNaming>(required)
}

/// The schema of `core_workflow_create` and `_validate` (`required`: name, steps) or `_update`
/// (name).
pub(crate) fn workflow_schema(required: &[&str]) -> Arc<JsonObject> {
    definition_schema::<WorkflowSpec, WorkflowNaming>(required)
}

/// The arguments of `core_mcpserver_detect`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct DetectArgs {
    /// The endpoint URL to probe.
    pub(crate) url: String,
    /// HTTP headers to send with the probes.
    pub(crate) headers: Option<BTreeMap<String, String>>,
    /// Overall detection timeout in seconds (default 10).
    pub(crate) timeout: Option<f64>,
}

/// The arguments of `core_config_update_aggregator`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct UpdateAggregatorArgs {
    /// Aggregator settings to change: port, host, transport, musterPrefix (Go's Port, Host, ... too).
    pub(crate) aggregator: serde_json::Map<String, Value>,
}

/// The arguments of `core_events`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventsArgs {
    /// Only events of this kind of resource (MCPServer, Workflow).
    pub(crate) resource_type: Option<String>,
    /// Only events of this resource.
    pub(crate) resource_name: Option<String>,
    /// Only events in this namespace.
    pub(crate) namespace: Option<String>,
    /// Normal or Warning.
    pub(crate) event_type: Option<String>,
    /// Only events at or after this time (RFC 3339, a date, or a duration back from now such as 5m).
    pub(crate) since: Option<String>,
    /// Only events at or before this time.
    pub(crate) until: Option<String>,
    /// The most events to return (default 50).
    pub(crate) limit: Option<u32>,
}

/// The arguments of `core_workflow_get`, `_available` and `_delete`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct WorkflowNameArgs {
    /// Name of the workflow.
    pub(crate) name: String,
}

/// The arguments of `core_workflow_execution_list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ExecutionListArgs {
    /// Maximum number of executions to return (1 to 1000, default 50).
    #[schemars(range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
    /// Number of executions to skip, newest first (pagination; default 0).
    pub(crate) offset: Option<u32>,
    /// Only executions with this status: inprogress (or running), completed or failed.
    pub(crate) status: Option<String>,
    /// Only executions of this workflow.
    pub(crate) workflow_name: Option<String>,
}

/// The arguments of `core_workflow_execution_get`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ExecutionGetArgs {
    /// ID of the execution to retrieve.
    pub(crate) execution_id: String,
    /// Whether to include the steps (default true).
    pub(crate) include_steps: Option<bool>,
    /// Get only this step of the execution.
    pub(crate) step_id: Option<String>,
}
