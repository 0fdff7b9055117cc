//! The runtime state of one MCPServer ([`ServerRuntime`]) and the CRD status it reads as
//! ([`ServerRuntime::to_status`]): the `Ready` condition with its reason and message.
//!
//! ```
//! use muster_core::crd::{ConditionStatus, MCPServer, MCPServerState};
//! use muster_gateway::registry::ServerRuntime;
//!
//! let mut runtime = ServerRuntime::initial(&MCPServer::default());
//! runtime.state = MCPServerState::Failed;
//! runtime.last_error = Some("connection refused".into());
//! let status = runtime.to_status(false);
//! assert_eq!(status.conditions[0].status, ConditionStatus::False);
//! assert_eq!(status.conditions[0].message, "The server cannot be reached: connection refused.");
//! ```

use chrono::{DateTime, Utc};
use muster_core::crd::{
    Condition, ConditionStatus, MCPServer, MCPServerHealth, MCPServerState, MCPServerStatus, READY_CONDITION,
    ServerType,
};

/// The runtime state of one MCPServer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerRuntime {
    /// Its state.
    pub state: MCPServerState,
    /// Its health (the last MCP ping).
    pub health: MCPServerHealth,
    /// The error of its most recent operation.
    pub last_error: Option<String>,
    /// When it last connected.
    pub last_connected: Option<DateTime<Utc>>,
    /// When the last connection attempt was made.
    pub last_attempt: Option<DateTime<Utc>>,
    /// Connection attempts that failed in a row.
    pub consecutive_failures: u32,
    /// When the next attempt is due, while one is scheduled.
    pub next_retry_after: Option<DateTime<Utc>>,
    /// How many times it was (re)connected after its first connection.
    pub restart_count: u32,
    /// How many tools it offers.
    pub tool_count: usize,
    /// When the state last changed.
    pub state_since: DateTime<Utc>,
    /// The HTTP status the endpoint answered the last failed attempt with, when it answered.
    pub last_failure_http_status: Option<u16>,
    /// The `WWW-Authenticate` challenge of a server that wants people to sign in.
    pub auth_challenge: Option<String>,
    /// The server whose description of the same authorization server is used instead of this
    /// one's, while this one is refused for it (`AuthorizationServerConflict`).
    pub conflicts_with: Option<String>,
    /// For a server Failed by a failure every caller shares (its token exchange), the class of
    /// the failure: the Ready reason (`TokenExchangeEndpoint`, `TokenExchangeCredentials`,
    /// `TokenExchangeConnector`).
    pub failure_class: Option<String>,
    /// For a server served per session (single sign-on), how: the mechanism, and for an exchange
    /// its endpoint and connector.
    pub served_per_session: Option<String>,
    /// When a session's token was last exchanged for this server.
    pub last_exchange: Option<DateTime<Utc>>,
}

impl ServerRuntime {
    /// The state of `server` before its first connection attempt: Starting when the gateway
    /// connects to it by itself, else Stopped.
    pub fn initial(server: &MCPServer) -> Self {
        let state = if server.spec.suspended || !starts_automatically(server) {
            MCPServerState::Stopped
        } else {
            MCPServerState::Starting
        };
        Self {
            state,
            health: MCPServerHealth::Unknown,
            last_error: None,
            last_connected: None,
            last_attempt: None,
            consecutive_failures: 0,
            next_retry_after: None,
            restart_count: 0,
            tool_count: 0,
            state_since: Utc::now(),
            last_failure_http_status: None,
            auth_challenge: None,
            conflicts_with: None,
            failure_class: None,
            served_per_session: None,
            last_exchange: None,
        }
    }
}

impl ServerRuntime {
    /// The CRD status of a server in this runtime state (`suspended` from its spec), with the
    /// `Ready` condition: True while reachable, its reason the state in one word, its message
    /// explaining the state and, for a Failed server with a retry scheduled, the next attempt.
    pub fn to_status(&self, suspended: bool) -> MCPServerStatus {
        let ready = self.state.is_ready();
        let reason = if suspended && !ready {
            "Suspended".to_owned()
        } else if self.state == MCPServerState::Failed && self.conflicts_with.is_some() {
            "AuthorizationServerConflict".to_owned()
        } else if let Some(class) = self
            .failure_class
            .as_ref()
            .filter(|_| self.state == MCPServerState::Failed)
        {
            class.clone()
        } else {
            self.state.as_str().replace(' ', "")
        };
        let mut message = match self.state {
            MCPServerState::Running => "The server process is running and connected.".to_owned(),
            MCPServerState::Connected if self.served_per_session.is_some() => format!(
                "{} A session is connected.",
                self.served_per_session.as_deref().unwrap_or_default()
            ),
            MCPServerState::Connected => "The server is reachable and connected.".to_owned(),
            MCPServerState::Starting => "The server process is starting.".to_owned(),
            MCPServerState::Connecting => "A connection is being established.".to_owned(),
            MCPServerState::Stopped if suspended => "The server is suspended (spec.suspended=true).".to_owned(),
            MCPServerState::Stopped => "The server is stopped.".to_owned(),
            MCPServerState::Disconnected => "The server was disconnected on request.".to_owned(),
            MCPServerState::Failed => format!(
                "The server cannot be reached: {}.",
                self.last_error
                    .as_deref()
                    .unwrap_or("unknown error")
                    .trim_end_matches('.')
            ),
            MCPServerState::AwaitingSession if self.served_per_session.is_some() => {
                let mut message = self.served_per_session.clone().unwrap_or_default();
                message.push_str(" No session is connected");
                match self.last_exchange {
                    Some(at) => message.push_str(&format!(
                        "; the last exchange succeeded at {}.",
                        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )),
                    None => message.push('.'),
                }
                message
            }
            other => format!("The server is {other}."),
        };
        if let Some(at) = self.next_retry_after {
            message.push_str(&format!(
                " Next attempt at {}.",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        let condition = Condition {
            condition_type: READY_CONDITION.to_owned(),
            status: if ready {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason,
            message,
            last_transition_time: self.state_since,
            observed_generation: None,
        };
        MCPServerStatus {
            state: Some(self.state),
            health: Some(self.health),
            last_error: self.last_error.clone(),
            last_connected: self.last_connected,
            restart_count: self.restart_count,
            consecutive_failures: self.consecutive_failures,
            last_attempt: self.last_attempt,
            next_retry_after: self.next_retry_after,
            last_failure_http_status: self.last_failure_http_status,
            conditions: vec![condition],
            ..MCPServerStatus::default()
        }
    }
}

/// Whether the gateway connects to `server` when it starts: remote servers always, stdio servers
/// with `autoStart: true`; a suspended server never.
pub fn starts_automatically(server: &MCPServer) -> bool {
    !server.spec.suspended
        && match server.spec.server_type {
            Some(ServerType::Stdio) | None => server.spec.auto_start,
            Some(_) => true,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(state: MCPServerState) -> ServerRuntime {
        let mut rt = ServerRuntime::initial(&MCPServer::default());
        rt.state = state;
        rt
    }

    #[test]
    fn the_ready_condition_is_true_while_reachable_with_the_state_as_reason() {
        let status = runtime(MCPServerState::Running).to_status(false);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.condition_type.as_str(), ready.status, ready.reason.as_str()),
            ("Ready", ConditionStatus::True, "Running")
        );
        let auth = runtime(MCPServerState::AuthRequired).to_status(false);
        assert_eq!(
            (auth.conditions[0].status, auth.conditions[0].reason.as_str()),
            (ConditionStatus::True, "AuthRequired")
        );
    }

    #[test]
    fn a_failed_server_names_its_error_and_its_next_attempt() {
        let mut rt = runtime(MCPServerState::Failed);
        rt.last_error = Some("connection refused".into());
        rt.next_retry_after = "2026-09-21T12:43:00Z".parse().ok();
        let status = rt.to_status(false);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, "Failed")
        );
        assert_eq!(
            ready.message,
            "The server cannot be reached: connection refused. Next attempt at 2026-09-21T12:43:00Z."
        );
        assert_eq!(status.last_error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn a_stopped_suspended_server_reads_suspended() {
        let status = runtime(MCPServerState::Stopped).to_status(true);
        assert_eq!(
            (status.conditions[0].status, status.conditions[0].reason.as_str()),
            (ConditionStatus::False, "Suspended")
        );
    }
}
