//! The agent's connection to the gateway: connect when needed, forward a meta-tool call, and
//! say why there was no answer.

use std::{
    fmt,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use muster::core::complete::MarkComplete;
use rmcp::{
    ErrorData as McpError, Peer, RoleClient, RoleServer,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
        ClientRequest, ContentBlock, JsonObject, ServerResult, Tool,
    },
    service::{PeerRequestOptions, RequestContext, RunningService, ServiceError},
};
use serde_json::Value;

use super::{
    CALL_TOOL, TIMEOUT_ARG, duration,
    relay::{AgentClient, Relay},
};
use crate::connect::{self, ConnectError, reason};

/// Why a forwarded request got no answer from the gateway.
#[derive(Debug)]
pub(crate) enum ForwardError {
    /// The gateway could not be reached, or the connection to it broke.
    Unreachable { endpoint: String, cause: String },
    /// The gateway asks for a sign-in (HTTP 401/403), which the agent cannot do.
    AuthRequired { endpoint: String },
    /// No answer within `after`.
    Timeout {
        tool: String,
        after: Duration,
        per_call: bool,
    },
    /// The IDE cancelled the request.
    Cancelled,
    /// The gateway answered a JSON-RPC error; it goes to the IDE as it is.
    Gateway(McpError),
    /// The MCP client failed otherwise.
    Client(ServiceError),
}

impl fmt::Display for ForwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable { endpoint, cause } => write!(
                f,
                "{} The agent connects again on the next call.",
                connect::unreachable_message(endpoint, cause)
            ),
            Self::AuthRequired { endpoint } => write!(
                f,
                "the muster gateway at {endpoint} requires authentication, which this agent does not do yet; \
                 use a gateway without aggregator.oauth.server, or call it with an authenticating MCP client"
            ),
            Self::Timeout {
                tool,
                after,
                per_call: true,
            } => write!(
                f,
                "{tool} timed out after {} (the `{TIMEOUT_ARG}` argument of this call_tool): the agent stopped \
                 waiting and cancelled the call at the gateway; pass a larger `{TIMEOUT_ARG}` (seconds) for a \
                 longer wait",
                duration::format(*after)
            ),
            Self::Timeout {
                tool,
                after,
                per_call: false,
            } => write!(
                f,
                "{tool} timed out after {} (the agent's --timeout): the agent stopped waiting and cancelled the \
                 call at the gateway; pass call_tool a `{TIMEOUT_ARG}` (seconds) or start the agent with a longer \
                 --timeout",
                duration::format(*after)
            ),
            Self::Cancelled => f.write_str("cancelled by the client"),
            Self::Gateway(e) => write!(f, "the gateway answered an error: {}", e.message),
            Self::Client(e) => write!(f, "the MCP client failed: {e}"),
        }
    }
}

impl ForwardError {
    /// Whether the connection this came from is of no further use.
    pub(crate) fn is_connection_lost(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::AuthRequired { .. })
    }

    /// The answer for the IDE: the gateway's own JSON-RPC errors and cancellations as JSON-RPC
    /// errors, everything else as a tool error the model can read.
    pub(crate) fn into_response(self) -> Result<CallToolResponse, McpError> {
        if self.is_connection_lost() {
            tracing::warn!("{self}");
        }
        match self {
            Self::Gateway(e) => Err(e),
            Self::Cancelled => Err(McpError::internal_error("cancelled by the client", None)),
            other => Ok(CallToolResult::error(vec![ContentBlock::text(other.to_string())]).into()),
        }
    }
}

/// One connection to the gateway.
#[derive(Debug)]
struct Connection {
    generation: u64,
    service: RunningService<RoleClient, AgentClient>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

/// The gateway at one endpoint, connected while it answers.
#[derive(Debug)]
pub(crate) struct Upstream {
    endpoint: String,
    relay: Relay,
    slot: tokio::sync::Mutex<Option<Connection>>,
    generations: AtomicU64,
}

impl Upstream {
    pub(crate) fn new(endpoint: String, relay: Relay) -> Self {
        Self {
            endpoint,
            relay,
            slot: tokio::sync::Mutex::new(None),
            generations: AtomicU64::new(0),
        }
    }

    /// The endpoint.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn unreachable(&self, cause: String) -> ForwardError {
        ForwardError::Unreachable {
            endpoint: self.endpoint.clone(),
            cause,
        }
    }

    /// The gateway's peer, connecting when there is no live connection.
    async fn peer(&self) -> Result<(u64, Peer<RoleClient>), ForwardError> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| c.is_alive()) {
            return Ok((conn.generation, conn.service.peer().clone()));
        }
        *slot = None;
        let client = AgentClient::new(self.relay.clone());
        let service = connect::connect(&self.endpoint, None, client, self.relay.clone())
            .await
            .map_err(|e| match e {
                ConnectError::Unreachable { endpoint, cause } => ForwardError::Unreachable { endpoint, cause },
                ConnectError::AuthRequired { endpoint, .. } => ForwardError::AuthRequired { endpoint },
            })?;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let peer = service.peer().clone();
        *slot = Some(Connection { generation, service });
        Ok((generation, peer))
    }

    /// Connects now (when there is no live connection); the gateway's instructions, if any.
    pub(crate) async fn connect(&self) -> Result<Option<String>, ForwardError> {
        let (_, peer) = self.peer().await?;
        Ok(peer.peer_info().and_then(|info| info.instructions.clone()))
    }

    /// Forgets connection `generation` (when it is still the current one): the next request
    /// connects again.
    async fn disconnect(&self, generation: u64) {
        let old = {
            let mut slot = self.slot.lock().await;
            if slot.as_ref().is_some_and(|c| c.generation == generation) {
                slot.take()
            } else {
                None
            }
        };
        if let Some(conn) = old {
            let _ = tokio::time::timeout(Duration::from_secs(2), conn.service.cancel()).await;
        }
    }

    /// Closes the connection to the gateway (ending its session there).
    pub(crate) async fn close(&self) {
        let old = self.slot.lock().await.take();
        if let Some(conn) = old {
            let _ = tokio::time::timeout(Duration::from_secs(5), conn.service.cancel()).await;
        }
    }

    fn service_error(&self, error: ServiceError, tool: &str, per_call: bool) -> ForwardError {
        if error.auth_challenge().is_some() {
            return ForwardError::AuthRequired {
                endpoint: self.endpoint.clone(),
            };
        }
        match error {
            ServiceError::McpError(e) => ForwardError::Gateway(e),
            ServiceError::Timeout { timeout } => ForwardError::Timeout {
                tool: tool.to_owned(),
                after: timeout,
                per_call,
            },
            ServiceError::TransportClosed => self.unreachable("the connection to the gateway closed".to_owned()),
            ServiceError::TransportSend(e) => self.unreachable(reason(&e)),
            other => ForwardError::Client(other),
        }
    }

    /// The gateway's tools, waiting up to `timeout`; a broken connection is replaced once.
    pub(crate) async fn list_tools(&self, timeout: Duration) -> Result<Vec<Tool>, ForwardError> {
        let mut retried = false;
        loop {
            let (generation, peer) = self.peer().await?;
            let listed = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
                Ok(Ok(tools)) => return Ok(tools),
                Ok(Err(e)) => self.service_error(e, "tools/list", false),
                Err(_) => ForwardError::Timeout {
                    tool: "tools/list".to_owned(),
                    after: timeout,
                    per_call: false,
                },
            };
            if listed.is_connection_lost() {
                self.disconnect(generation).await;
                if !retried {
                    retried = true;
                    continue;
                }
            }
            return Err(listed);
        }
    }

    /// Forwards the call of meta-tool `name` to the gateway and waits up to `timeout` for its
    /// result, relaying progress and the IDE's cancellation. A call the gateway never got (the
    /// connection was found closed) is sent again on a new connection; one that may have reached
    /// it is not, unless it only reads (every meta-tool but `call_tool`).
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        timeout: Duration,
        per_call: bool,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ForwardError> {
        let what = match arguments.get("name").and_then(Value::as_str) {
            Some(tool) if name == CALL_TOOL => format!("call_tool {tool}"),
            _ => name.to_owned(),
        };
        let mut retried = false;
        loop {
            let (generation, peer) = self.peer().await?;
            let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.clone());
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = match peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                .await
            {
                Ok(handle) => handle,
                Err(e) => {
                    // Not sent: safe to send again on a new connection.
                    self.disconnect(generation).await;
                    if !retried {
                        retried = true;
                        continue;
                    }
                    return Err(self.service_error(e, &what, per_call));
                }
            };
            let _progress = ctx
                .meta
                .get_progress_token()
                .map(|ide_token| self.relay.track_progress(handle.progress_token.clone(), ide_token));
            let (id, upstream_peer) = (handle.id.clone(), handle.peer.clone());
            let response = tokio::select! {
                response = handle.await_response() => response,
                () = ctx.ct.cancelled() => {
                    let reason = "cancelled by the IDE".to_owned();
                    let _ = upstream_peer.notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason))).await;
                    return Err(ForwardError::Cancelled);
                }
            };
            let error = match response {
                // The gateway answered on 2025-11-25, without `resultType`; the IDE may speak
                // 2026-07-28, where a result without it does not read.
                Ok(ServerResult::CallToolResult(result)) => return Ok(result.completed()),
                Ok(_) => return Err(ForwardError::Client(ServiceError::UnexpectedResponse)),
                Err(e) => self.service_error(e, &what, per_call),
            };
            if error.is_connection_lost() {
                self.disconnect(generation).await;
                if !retried && name != CALL_TOOL {
                    retried = true;
                    continue;
                }
            }
            return Err(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unreachable_message_names_the_endpoint_and_how_to_start_the_gateway() {
        let e = ForwardError::Unreachable {
            endpoint: "http://127.0.0.1:9/mcp".into(),
            cause: "connection refused".into(),
        };
        let text = e.to_string();
        assert!(text.contains("http://127.0.0.1:9/mcp"), "{text}");
        assert!(text.contains("gateway serve"), "{text}");
        assert!(text.contains("connection refused"), "{text}");
    }

    #[test]
    fn the_timeout_message_names_the_timeout_that_ran_out() {
        let per_call = ForwardError::Timeout {
            tool: "call_tool x_slow".into(),
            after: Duration::from_secs(1),
            per_call: true,
        };
        assert!(
            per_call
                .to_string()
                .contains("timed out after 1s (the `timeout` argument"),
            "{per_call}"
        );
        let default = ForwardError::Timeout {
            tool: "call_tool x_slow".into(),
            after: Duration::from_secs(300),
            per_call: false,
        };
        assert!(
            default
                .to_string()
                .contains("timed out after 5m (the agent's --timeout)"),
            "{default}"
        );
    }
}
