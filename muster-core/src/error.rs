//! [`ToolError`]: why a tool call did not produce a result, and the one table that maps each
//! failure to a JSON-RPC error.
//!
//! A failure *inside* a tool (the tool ran and reported `isError`) is a [`CallToolResult`], not a
//! `ToolError`. A `ToolError` means the gateway could not run the call at all: the name is
//! unknown, the arguments are not an object, the toolset refuses it, the server is down or did
//! not answer in time. The meta-tools answer these as error results naming what is wrong
//! ([`ToolError::into_call_result`]); a native `tools/call` answers them as JSON-RPC errors
//! ([`ToolError::to_error_data`]).
//!
//! ```
//! use muster_core::ToolError;
//! use rmcp::model::ErrorCode;
//!
//! let err = ToolError::not_found("x_nope");
//! assert_eq!(err.to_string(), "tool not found: x_nope");
//! assert_eq!(err.to_error_data().code, ErrorCode::INVALID_PARAMS);
//! ```

use std::{fmt, time::Duration};

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData};

use crate::BoxError;

/// The JSON-RPC code of [`ToolError::Busy`] (in the implementation-defined server-error range).
pub const BUSY: ErrorCode = ErrorCode(-32000);

/// Why a tool call could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of that name is in the caller's catalogue.
    #[error("tool not found: {name}")]
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// The arguments are not acceptable (not an object, a required one missing, ...).
    #[error("{message}")]
    InvalidArguments {
        /// What is wrong, naming the argument.
        message: String,
    },
    /// The request's toolset does not include the tool.
    #[error("tool \"{name}\" is outside the toolset [{}]", selectors.join(", "))]
    OutsideToolset {
        /// The tool asked for.
        name: String,
        /// The request's selectors.
        selectors: Vec<String>,
    },
    /// The server that provides the tool is not connected.
    #[error("server {server} is not available: {reason}")]
    ServerUnavailable {
        /// The MCPServer's name.
        server: String,
        /// Its state or last error.
        reason: String,
    },
    /// The call did not finish within its budget.
    #[error("tool call timed out after {}s", after.as_secs_f64())]
    Timeout {
        /// The budget that ran out.
        after: Duration,
    },
    /// The caller cancelled the call.
    #[error("tool call cancelled")]
    Cancelled,
    /// Too many calls of the same session, or to the same server, are in flight and waiting:
    /// the call was not run. Retrying later may succeed.
    #[error("{scope} is busy: {in_flight} calls in flight (aggregator.limits.{limit_key}) and {why}; retry later")]
    Busy {
        /// Whose slots ran out: `session <id>` or `server <name>`.
        scope: String,
        /// The limit in flight.
        in_flight: usize,
        /// The `aggregator.limits` key that sets the limit in flight.
        limit_key: &'static str,
        /// Why the call could not wait for a slot.
        why: BusyReason,
    },
    /// The downstream server answered the call with a JSON-RPC error.
    #[error("server {server} refused the call: {}", error.message)]
    Downstream {
        /// The MCPServer's name.
        server: String,
        /// The error it answered with, passed through.
        error: ErrorData,
    },
    /// The connection to the downstream server failed during the call.
    #[error("server {server} failed during the call: {source}")]
    Transport {
        /// The MCPServer's name.
        server: String,
        /// What failed.
        #[source]
        source: BoxError,
    },
    /// A result passed on from a downstream server as it came
    /// ([`ToolOutput::from_json`](crate::ToolOutput::from_json)) does not read as a typed
    /// `CallToolResult`, where one was needed: a detail the shape check leaves to rmcp is wrong.
    #[error("the tool's result does not read as a CallToolResult: {source}")]
    UnreadableResult {
        /// Why it does not read.
        #[source]
        source: serde_json::Error,
    },
    /// Anything else: a bug or an unexpected state, reported rather than hidden.
    #[error("internal error: {source}")]
    Internal {
        /// What failed.
        #[source]
        source: BoxError,
    },
}

/// Why a [`ToolError::Busy`] call could not wait for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyReason {
    /// As many calls as `aggregator.limits.maxQueuedCalls` allows were waiting already.
    QueueFull {
        /// The calls waiting.
        queued: usize,
    },
    /// No slot freed within `aggregator.limits.queueTimeoutSeconds`.
    WaitedOut {
        /// How long the call waited.
        waited: Duration,
    },
}

impl fmt::Display for BusyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::QueueFull { queued } => write!(
                f,
                "{queued} more waiting, as many as aggregator.limits.maxQueuedCalls allows"
            ),
            Self::WaitedOut { waited } => write!(
                f,
                "no slot freed within {:.1}s (aggregator.limits.queueTimeoutSeconds)",
                waited.as_secs_f64()
            ),
        }
    }
}

impl ToolError {
    /// `NotFound` for `name`.
    pub fn not_found(name: impl Into<String>) -> Self {
        Self::NotFound { name: name.into() }
    }

    /// `InvalidArguments` with `message`.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::InvalidArguments {
            message: message.into(),
        }
    }

    /// `Internal` from any error.
    pub fn internal(source: impl Into<BoxError>) -> Self {
        Self::Internal { source: source.into() }
    }

    /// The JSON-RPC error a native request answers this failure with. This is the one table.
    ///
    /// | failure | code |
    /// |---|---|
    /// | `NotFound`, `InvalidArguments`, `OutsideToolset` | -32602 invalid params |
    /// | `Timeout` | -32001 request timeout |
    /// | `Cancelled` | -32800 request cancelled |
    /// | `Busy` | -32000 server busy |
    /// | `Downstream` | the downstream's own code and data |
    /// | `ServerUnavailable`, `Transport`, `UnreadableResult`, `Internal` | -32603 internal error |
    pub fn to_error_data(&self) -> ErrorData {
        let message = self.to_string();
        match self {
            Self::NotFound { .. } | Self::InvalidArguments { .. } | Self::OutsideToolset { .. } => {
                ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)
            }
            Self::Timeout { .. } => ErrorData::new(ErrorCode(-32001), message, None),
            Self::Cancelled => ErrorData::new(ErrorCode(-32800), message, None),
            Self::Busy { .. } => ErrorData::new(BUSY, message, None),
            Self::Downstream { error, .. } => error.clone(),
            Self::ServerUnavailable { .. }
            | Self::Transport { .. }
            | Self::UnreadableResult { .. }
            | Self::Internal { .. } => ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None),
        }
    }

    /// The error result a meta-tool answers this failure with: `isError: true` and the message.
    pub fn into_call_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.to_string())])
    }
}

impl From<ToolError> for ErrorData {
    fn from(err: ToolError) -> Self {
        err.to_error_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_maps_to_its_json_rpc_code() {
        let cases: Vec<(ToolError, ErrorCode)> = vec![
            (ToolError::not_found("t"), ErrorCode::INVALID_PARAMS),
            (
                ToolError::invalid_arguments("arguments must be a JSON object"),
                ErrorCode::INVALID_PARAMS,
            ),
            (
                ToolError::OutsideToolset {
                    name: "t".into(),
                    selectors: vec!["preset:none".into()],
                },
                ErrorCode::INVALID_PARAMS,
            ),
            (
                ToolError::Timeout {
                    after: Duration::from_secs(30),
                },
                ErrorCode(-32001),
            ),
            (ToolError::Cancelled, ErrorCode(-32800)),
            (
                ToolError::Busy {
                    scope: "server k8s".into(),
                    in_flight: 4,
                    limit_key: "maxConcurrentCallsPerServer",
                    why: BusyReason::WaitedOut {
                        waited: Duration::from_secs(1),
                    },
                },
                BUSY,
            ),
            (
                ToolError::ServerUnavailable {
                    server: "k8s".into(),
                    reason: "Failed".into(),
                },
                ErrorCode::INTERNAL_ERROR,
            ),
            (ToolError::internal("boom"), ErrorCode::INTERNAL_ERROR),
        ];
        for (err, code) in cases {
            assert_eq!(err.to_error_data().code, code, "{err}");
        }
    }

    #[test]
    fn a_downstream_error_passes_through_unchanged() {
        let inner = ErrorData::new(ErrorCode(-32042), "URL elicitation required", None);
        let err = ToolError::Downstream {
            server: "github".into(),
            error: inner.clone(),
        };
        assert_eq!(err.to_error_data(), inner);
    }

    #[test]
    fn the_toolset_refusal_names_the_tool_and_the_selectors() {
        let err = ToolError::OutsideToolset {
            name: "x_k8s_delete".into(),
            selectors: vec!["preset:read-only".into(), "server:github".into()],
        };
        assert_eq!(
            err.to_string(),
            "tool \"x_k8s_delete\" is outside the toolset [preset:read-only, server:github]"
        );
    }

    #[test]
    fn a_meta_tool_answers_a_failure_as_an_error_result() {
        let result = ToolError::not_found("x_nope").into_call_result();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("tool not found: x_nope")
        );
    }
}
