//! The argument types of the core tools that take more than a name: the source of their input
//! schemas.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
