//! The argument types of the core tools that take more than a name: the source of their input
//! schemas.

use std::collections::BTreeMap;

use muster_core::crd::{ArgDefinition, WorkflowStep, WorkflowSubStep};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The arguments of `core_mcpserver_create`, `_update` and `_validate` (the MCPServer spec
/// fields, camelCase, plus `name` and `displayName`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct McpServerArgs {
    /// Unique server name (the service identifier).
    pub(crate) name: String,
    /// stdio, streamable-http or sse (required on create).
    #[serde(rename = "type")]
    pub(crate) server_type: Option<String>,
    /// Human-friendly name UIs show (the ui.giantswarm.io/display-name annotation); blank removes it.
    pub(crate) display_name: Option<String>,
    /// What the server is for (at most 500 characters).
    pub(crate) description: Option<String>,
    /// The executable of a stdio server (a string, or an array whose first item is the executable).
    pub(crate) command: Option<Value>,
    /// Its arguments (stdio).
    pub(crate) args: Option<Vec<String>>,
    /// The endpoint of a remote server.
    pub(crate) url: Option<String>,
    /// Environment variables (stdio only).
    pub(crate) env: Option<BTreeMap<String, String>>,
    /// HTTP headers (remote only; no credentials).
    pub(crate) headers: Option<BTreeMap<String, String>>,
    /// Prefix of the server's tools.
    pub(crate) tool_prefix: Option<String>,
    /// Budget of every operation in seconds (1 to 300, default 30).
    pub(crate) timeout: Option<u32>,
    /// Whether a stdio server starts with muster.
    pub(crate) auto_start: Option<bool>,
    /// true stops the server and keeps it stopped.
    pub(crate) suspended: Option<bool>,
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

/// The arguments of `core_workflow_create` and `core_workflow_validate`: the Workflow spec
/// fields with the CRD's camelCase names (a step copied from a manifest works unchanged), plus
/// `name` and `labels`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowArgs {
    /// Unique workflow name; the workflow runs as the tool workflow_<name>.
    pub(crate) name: String,
    /// The steps, in order (at least one). Each is exactly one of a tool call (tool), a loop
    /// (forEach) or a concurrent group (parallel), with a unique id. Step args are templates:
    /// inputs as {{ .input.<arg> }}, earlier results as {{ .results.<step-id>.<field> }}. The
    /// snake_case spellings allow_failure, from_step, expect_not and json_path are deprecated
    /// aliases, still accepted.
    pub(crate) steps: Vec<WorkflowStep>,
    /// The optional fields.
    #[serde(flatten)]
    pub(crate) fields: WorkflowFields,
}

/// The arguments of `core_workflow_update`: the name, and the fields to replace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowUpdateArgs {
    /// Name of the workflow to update.
    pub(crate) name: String,
    /// Updated steps; replaces every existing step.
    pub(crate) steps: Option<Vec<WorkflowStep>>,
    /// The other fields to replace; a field not given keeps its value.
    #[serde(flatten)]
    pub(crate) fields: WorkflowFields,
}

/// The optional fields of a workflow definition.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowFields {
    /// Workflow description (at most 1000 characters); the workflow tool's description.
    pub(crate) description: Option<String>,
    /// Argument schema, by argument name: each has type (string, integer, boolean, number,
    /// object or array), required, default and description.
    pub(crate) args: Option<BTreeMap<String, ArgDefinition>>,
    /// Cleanup or rollback sub-steps run, each allowed to fail, when the workflow fails on a
    /// step that does not allow failure.
    pub(crate) on_failure: Option<Vec<WorkflowSubStep>>,
    /// Output template rendered after all steps and returned in place of the default answer;
    /// each leaf is a template over .input, .results and .vars, its JSON type preserved.
    pub(crate) output: Option<Map<String, Value>>,
    /// Labels of the workflow (shown on its tool and used by filter_tools).
    pub(crate) labels: Option<BTreeMap<String, String>>,
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
