//! The reasons muster gives its events, and the type each one has.
//!
//! The names are Go muster's (`internal/events/types.go`) unless a constant says otherwise;
//! ServiceClass and ServiceInstance reasons, for resources muster no longer has, are left out.

use super::EventType;

/// An MCPServer definition was created.
pub const MCP_SERVER_CREATED: &str = "MCPServerCreated";
/// An MCPServer definition was updated.
pub const MCP_SERVER_UPDATED: &str = "MCPServerUpdated";
/// An MCPServer definition was deleted.
pub const MCP_SERVER_DELETED: &str = "MCPServerDeleted";
/// An MCPServer's service is beginning to start.
pub const MCP_SERVER_STARTING: &str = "MCPServerStarting";
/// An MCPServer's service started.
pub const MCP_SERVER_STARTED: &str = "MCPServerStarted";
/// An MCPServer's service stopped.
pub const MCP_SERVER_STOPPED: &str = "MCPServerStopped";
/// An MCPServer's service is being restarted.
pub const MCP_SERVER_RESTARTING: &str = "MCPServerRestarting";
/// An operation on an MCPServer failed (Warning).
pub const MCP_SERVER_FAILED: &str = "MCPServerFailed";
/// The tools of an MCPServer were discovered.
pub const MCP_SERVER_TOOLS_DISCOVERED: &str = "MCPServerToolsDiscovered";
/// Tool discovery failed or the tools became unavailable (Warning).
pub const MCP_SERVER_TOOLS_UNAVAILABLE: &str = "MCPServerToolsUnavailable";
/// The connection to an MCPServer was restored.
pub const MCP_SERVER_RECONNECTED: &str = "MCPServerReconnected";
/// A health check of an MCPServer failed (Warning); emitted on the healthy-to-unhealthy
/// transition only.
pub const MCP_SERVER_HEALTH_CHECK_FAILED: &str = "MCPServerHealthCheckFailed";
/// Automatic recovery of an MCPServer began.
pub const MCP_SERVER_RECOVERY_STARTED: &str = "MCPServerRecoveryStarted";
/// Automatic recovery of an MCPServer succeeded.
pub const MCP_SERVER_RECOVERY_SUCCEEDED: &str = "MCPServerRecoverySucceeded";
/// Automatic recovery of an MCPServer failed (Warning).
pub const MCP_SERVER_RECOVERY_FAILED: &str = "MCPServerRecoveryFailed";
/// An MCPServer requires OAuth authentication.
pub const MCP_SERVER_AUTH_REQUIRED: &str = "MCPServerAuthRequired";
/// A session signed in to an MCPServer that wants people to sign in (not in Go muster).
pub const MCP_SERVER_AUTHENTICATED: &str = "MCPServerAuthenticated";
/// A caller's ID token was forwarded to an MCPServer.
pub const MCP_SERVER_TOKEN_FORWARDED: &str = "MCPServerTokenForwarded";
/// Forwarding a caller's ID token to an MCPServer failed.
pub const MCP_SERVER_TOKEN_FORWARDING_FAILED: &str = "MCPServerTokenForwardingFailed";
/// A session's token was exchanged (RFC 8693) for one of an MCP server's issuer.
pub const MCP_SERVER_TOKEN_EXCHANGED: &str = "MCPServerTokenExchanged";
/// A token exchange for an MCP server failed.
pub const MCP_SERVER_TOKEN_EXCHANGE_FAILED: &str = "MCPServerTokenExchangeFailed";
/// A remote MCPServer's connection was established. Not in Go muster, which reports
/// [`MCP_SERVER_STARTED`] for every transport.
pub const MCP_SERVER_CONNECTED: &str = "MCPServerConnected";
/// An MCPServer's tool list changed after it connected. Not in Go muster.
pub const MCP_SERVER_TOOLS_CHANGED: &str = "MCPServerToolsChanged";
/// A connection attempt to an MCPServer is scheduled after a failure (Warning). Not in Go
/// muster; carry [`EventDetails::next_retry_after`](super::EventDetails::next_retry_after).
pub const MCP_SERVER_RECONNECTING: &str = "MCPServerReconnecting";
/// Two servers produced the same exposed tool name; the other server keeps it (muster for Rust).
pub const MCP_SERVER_TOOL_NAME_COLLISION: &str = "MCPServerToolNameCollision";

/// Fields of an MCPServer definition were dropped: unknown to the schema, or not for the
/// server's type (Warning). Not in Go muster, which drops them without a word; the message
/// names each field, and [`EventDetails::warnings`](super::EventDetails::warnings) lists them.
pub const MCP_SERVER_FIELDS_DROPPED: &str = "MCPServerFieldsDropped";

/// A Workflow definition was created.
pub const WORKFLOW_CREATED: &str = "WorkflowCreated";
/// A Workflow definition was updated.
pub const WORKFLOW_UPDATED: &str = "WorkflowUpdated";
/// A Workflow definition was deleted.
pub const WORKFLOW_DELETED: &str = "WorkflowDeleted";
/// A Workflow definition failed validation (Warning).
pub const WORKFLOW_VALIDATION_FAILED: &str = "WorkflowValidationFailed";
/// A Workflow definition passed validation.
pub const WORKFLOW_VALIDATION_SUCCEEDED: &str = "WorkflowValidationSucceeded";
/// A workflow execution began.
pub const WORKFLOW_EXECUTION_STARTED: &str = "WorkflowExecutionStarted";
/// A workflow execution completed.
pub const WORKFLOW_EXECUTION_COMPLETED: &str = "WorkflowExecutionCompleted";
/// A workflow execution failed (Warning); the message carries the error text.
pub const WORKFLOW_EXECUTION_FAILED: &str = "WorkflowExecutionFailed";
/// A workflow execution's record was persisted.
pub const WORKFLOW_EXECUTION_TRACKED: &str = "WorkflowExecutionTracked";
/// A workflow step began (Go's message: `step <id> started ...`).
pub const WORKFLOW_STEP_STARTED: &str = "WorkflowStepStarted";
/// A workflow step completed (Go's message: `step <id> completed ...`).
pub const WORKFLOW_STEP_COMPLETED: &str = "WorkflowStepCompleted";
/// A workflow step failed (Warning).
pub const WORKFLOW_STEP_FAILED: &str = "WorkflowStepFailed";
/// A workflow step was skipped by its condition.
pub const WORKFLOW_STEP_SKIPPED: &str = "WorkflowStepSkipped";
/// A workflow step's condition was evaluated.
pub const WORKFLOW_STEP_CONDITION_EVALUATED: &str = "WorkflowStepConditionEvaluated";
/// Fields of a Workflow definition the schema does not know were dropped (Warning). Not in Go
/// muster; the message names each field, and
/// [`EventDetails::warnings`](super::EventDetails::warnings) lists them.
pub const WORKFLOW_FIELDS_DROPPED: &str = "WorkflowFieldsDropped";
/// Every tool a Workflow needs became available.
pub const WORKFLOW_AVAILABLE: &str = "WorkflowAvailable";
/// A tool a Workflow needs became unavailable (Warning).
pub const WORKFLOW_UNAVAILABLE: &str = "WorkflowUnavailable";
/// Tools a Workflow needs were discovered.
pub const WORKFLOW_TOOLS_DISCOVERED: &str = "WorkflowToolsDiscovered";
/// Tools a Workflow needs are missing (Warning).
pub const WORKFLOW_TOOLS_MISSING: &str = "WorkflowToolsMissing";
/// A Workflow was registered as its `workflow_<name>` tool.
pub const WORKFLOW_TOOL_REGISTERED: &str = "WorkflowToolRegistered";
/// A Workflow's tool was removed.
pub const WORKFLOW_TOOL_UNREGISTERED: &str = "WorkflowToolUnregistered";
/// The gateway's capabilities were refreshed after a Workflow change.
pub const WORKFLOW_CAPABILITIES_REFRESHED: &str = "WorkflowCapabilitiesRefreshed";

/// The reasons whose events are `Warning`; every other reason is `Normal`.
const WARNINGS: [&str; 13] = [
    MCP_SERVER_FAILED,
    MCP_SERVER_FIELDS_DROPPED,
    WORKFLOW_FIELDS_DROPPED,
    MCP_SERVER_TOOL_NAME_COLLISION,
    MCP_SERVER_TOOLS_UNAVAILABLE,
    MCP_SERVER_HEALTH_CHECK_FAILED,
    MCP_SERVER_RECOVERY_FAILED,
    MCP_SERVER_RECONNECTING,
    WORKFLOW_EXECUTION_FAILED,
    WORKFLOW_VALIDATION_FAILED,
    WORKFLOW_UNAVAILABLE,
    WORKFLOW_TOOLS_MISSING,
    WORKFLOW_STEP_FAILED,
];

/// The type of an event with `reason`: `Warning` for failures and lost tools, as Go muster's
/// `getEventType` decides, else `Normal`.
pub fn event_type(reason: &str) -> EventType {
    if WARNINGS.contains(&reason) {
        EventType::Warning
    } else {
        EventType::Normal
    }
}
