//! muster's resources, shaped exactly like its Kubernetes custom resources.
//!
//! Three kinds share the API version [`API_VERSION`] (`muster.giantswarm.io/v1alpha1`):
//!
//! | Kind | Type | Spec | Status |
//! |------|------|------|--------|
//! | `MCPServer` | [`MCPServer`] | [`MCPServerSpec`] | [`MCPServerStatus`] |
//! | `Workflow` | [`Workflow`] | [`WorkflowSpec`] | [`WorkflowStatus`] |
//! | `WorkflowExecution` | [`WorkflowExecution`] | [`WorkflowExecutionSpec`] | none (an immutable record) |
//!
//! Each document has the Kubernetes shape `apiVersion`, `kind`, `metadata`, `spec`,
//! `status`, so one file works in filesystem mode and with `kubectl apply`.
//!
//! Reading follows Kubernetes' server-side field validation `Warn`:
//! [`MCPServer::from_document`], [`Workflow::from_document`] and [`parse_spec`] accept a
//! field the schema does not know, drop it and report it by its path as a [`FieldWarning`],
//! so a typo (`comand:`) is never ignored silently; a known field whose value does not fit is
//! a [`DefinitionError`] naming its path. `metadata` fields of Kubernetes' `ObjectMeta` this
//! crate does not model (`uid`, `resourceVersion`, `managedFields`, ...) are not reported.
//! Plain serde (`serde_json::from_value`) drops unknown fields without a word: read
//! definitions from people through these functions.
//!
//! Parsing checks types; [`MCPServer::validate`] and [`Workflow::validate`] check the
//! documented rules and report every violation at once as [`ValidationErrors`].
//!
//! Deprecated spellings (`allow_failure`, `from_step`, `expect_not`, `json_path`,
//! `store`) parse; [`deprecated_spellings`] tells the loader which ones a document
//! used, so it can warn about each.
//!
//! # Example
//!
//! ```
//! use muster_core::crd::{MCPServer, ServerType};
//!
//! let json = r#"{
//!   "apiVersion": "muster.giantswarm.io/v1alpha1",
//!   "kind": "MCPServer",
//!   "metadata": { "name": "api-tools", "uid": "ignored" },
//!   "spec": { "type": "streamable-http", "url": "https://api.example.com/mcp" }
//! }"#;
//! let server: MCPServer = serde_json::from_str(json)?;
//! assert_eq!(server.spec.server_type, Some(ServerType::StreamableHttp));
//! assert_eq!(server.spec.timeout, 30); // the documented default
//! server.validate()?;
//!
//! // A typo inside spec is dropped and named.
//! let typo = serde_json::json!({"kind": "MCPServer", "metadata": {"name": "x"},
//!                "spec": {"type": "stdio", "command": "npx", "comand": "npx"}});
//! let (_, warnings) = MCPServer::from_document(&typo)?;
//! assert_eq!(warnings[0].to_string(), r#"unknown field "spec.comand" (dropped)"#);
//!
//! // Validation reports every violation at once.
//! let mut broken = server.clone();
//! broken.metadata.name.clear();
//! broken.spec.timeout = 0;
//! let errors = broken.validate().unwrap_err();
//! assert_eq!(errors.len(), 2);
//! assert!(errors.contains("spec.timeout", "timeout must be between 1 and 300 seconds (is 0)"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod definition;
mod deprecated;
mod execution;
mod mcpserver;
mod mcpserver_validate;
pub(crate) mod validate;
mod workflow;
mod workflow_validate;

#[cfg(test)]
mod tests;

pub use definition::{DefinitionError, DefinitionResult, DroppedBecause, FieldWarning, parse_spec};
pub use deprecated::{DeprecatedField, deprecated_spellings};
pub use execution::{
    ExecutionStatus, WORKFLOW_LABEL, WORKFLOW_STATUS_LABEL, WorkflowExecution, WorkflowExecutionSpec,
    WorkflowExecutionStep,
};
pub use mcpserver::{
    AuthType, ClientCredentialsSecretRef, GrantScope, HeaderValueFrom, HeaderValueSourceType, MCPServer, MCPServerAuth,
    MCPServerAuthAuthorizationServer, MCPServerFamily, MCPServerHeaderFrom, MCPServerHealth, MCPServerProgress,
    MCPServerSpec, MCPServerState, MCPServerStatus, ServerType, TokenExchangeConfig,
};
pub use validate::{FieldError, ValidationErrors};
pub use workflow::{
    ArgDefinition, ArgType, Workflow, WorkflowCondition, WorkflowConditionExpectation, WorkflowForEach,
    WorkflowNestedForEach, WorkflowNestedStep, WorkflowPaginate, WorkflowSpec, WorkflowStatus, WorkflowStep,
    WorkflowSubStep,
};

/// What applying a definition (an MCPServer, a Workflow) to the table that holds it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// A definition of a new name.
    Added,
    /// A changed definition replaced the one of that name.
    Updated,
    /// The same definition (spec and metadata) was there already; nothing changed.
    Unchanged,
}

/// The API version of every muster resource.
pub const API_VERSION: &str = "muster.giantswarm.io/v1alpha1";
/// The `spec.command` of a stdio MCPServer that names the running gateway's own executable
/// (`std::env::current_exe`), so that a configuration can start a server the gateway binary
/// itself contains from any directory and any install location.
pub const SELF_COMMAND: &str = "@self";

/// Annotation holding the human-friendly name UIs show in place of `metadata.name`.
pub const DISPLAY_NAME_ANNOTATION: &str = "ui.giantswarm.io/display-name";
/// Annotation muster stamps with the subject of the caller that created a server.
pub const REGISTERED_BY_ANNOTATION: &str = "ui.giantswarm.io/registered-by";
/// Annotation muster stamps with the email claim of the caller that created a server.
pub const REGISTERED_BY_EMAIL_ANNOTATION: &str = "ui.giantswarm.io/registered-by-email";

/// The `type` of the `Ready` condition muster keeps in `status.conditions`.
pub const READY_CONDITION: &str = "Ready";

/// The part of Kubernetes `ObjectMeta` muster uses.
///
/// Other metadata fields (`uid`, `resourceVersion`, `creationTimestamp`, `managedFields`,
/// ...) are accepted and ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Name of the resource; required. A WorkflowExecution is named by its execution UUID.
    #[serde(default)]
    pub name: String,
    /// Namespace of the resource (Kubernetes mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels, e.g. `muster.giantswarm.io/workflow` on a WorkflowExecution.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations, e.g. `ui.giantswarm.io/display-name` ([`DISPLAY_NAME_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ObjectMeta {
    /// Metadata with only a name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The display name annotation, when set and not blank.
    pub fn display_name(&self) -> Option<&str> {
        self.annotations
            .get(DISPLAY_NAME_ANNOTATION)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

/// Status of a [`Condition`], as in Kubernetes `metav1.ConditionStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    #[default]
    Unknown,
}

/// A standard Kubernetes condition (`metav1.Condition`), e.g. the `Ready` condition of an
/// MCPServer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, e.g. `Ready` ([`READY_CONDITION`]).
    #[serde(rename = "type")]
    pub condition_type: String,
    /// Whether the condition holds.
    pub status: ConditionStatus,
    /// The reason in one CamelCase word, e.g. `Connected`, `AwaitingSession`, `Failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable explanation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the condition last changed status.
    #[serde(deserialize_with = "time::deserialize")]
    pub last_transition_time: DateTime<Utc>,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Timestamp parsing with an error that says what was expected.
pub(crate) mod time {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, de::Error};

    fn parse(value: &str) -> Result<DateTime<Utc>, String> {
        DateTime::parse_from_rfc3339(value)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                format!(
                    "invalid timestamp \"{value}\": expected an RFC 3339 timestamp such as \
                     2026-09-21T12:43:00Z ({e})"
                )
            })
    }

    /// Deserializes a required RFC 3339 timestamp.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
        let value = String::deserialize(deserializer)?;
        parse(&value).map_err(D::Error::custom)
    }

    /// Deserializes an optional RFC 3339 timestamp (`null` or absent is `None`).
    pub(crate) fn deserialize_option<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|value| parse(&value).map_err(D::Error::custom))
            .transpose()
    }
}

/// `skip_serializing_if` helper for `false` booleans.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

/// `skip_serializing_if` helper for zero counters.
pub(crate) fn is_zero(value: &u32) -> bool {
    *value == 0
}
