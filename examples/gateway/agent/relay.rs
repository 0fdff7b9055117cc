//! What the gateway sends the agent outside responses, relayed to the IDE.
//!
//! Progress notifications come back under the progress token the agent put on its call to the
//! gateway and are mapped back to the IDE's own token. `tools/list_changed` goes to the IDE: as a
//! notification on a session (initialize handshake) and to every `subscriptions/listen` stream of
//! a 2026-07-28 client. Logging, sampling and elicitation go to the IDE when it can take them.
//!
//! Logging and sampling are deprecated by the newest MCP revision (SEP-2577), but the gateway
//! still relays them from older downstream servers, so the agent passes them on too.

#![allow(deprecated)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
};

use muster::gateway::upstream::progress::ProgressHook;
use rmcp::{
    ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
        ElicitResult, ElicitationAction, Implementation, LoggingMessageNotificationParam, ProgressNotificationParam,
        ProgressToken,
    },
    service::{NotificationContext, RequestContext},
};
use tokio::sync::broadcast;

/// The agent's client name towards the gateway.
const CLIENT_NAME: &str = "muster-agent";

#[derive(Debug)]
struct State {
    /// The IDE, once it talked to the agent.
    ide: RwLock<Option<Peer<RoleServer>>>,
    /// Calls in flight that asked for progress: the agent's token at the gateway → the IDE's.
    progress: Mutex<HashMap<ProgressToken, ProgressToken>>,
    /// `tools/list_changed` for the IDE's `subscriptions/listen` streams.
    tools_changed: broadcast::Sender<()>,
}

/// What the bridge and its connections to the gateway share.
#[derive(Debug, Clone)]
pub(crate) struct Relay {
    state: Arc<State>,
}

impl Default for Relay {
    fn default() -> Self {
        Self {
            state: Arc::new(State {
                ide: RwLock::new(None),
                progress: Mutex::new(HashMap::new()),
                tools_changed: broadcast::channel(16).0,
            }),
        }
    }
}

/// Stops relaying a call's progress when dropped.
#[derive(Debug)]
pub(crate) struct ProgressGuard {
    relay: Relay,
    token: ProgressToken,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.relay.progress().remove(&self.token);
    }
}

impl Relay {
    fn progress(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressToken>> {
        self.state.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers the IDE (one per agent: stdio has one client).
    pub(crate) fn set_ide(&self, peer: Peer<RoleServer>) {
        *self.state.ide.write().unwrap_or_else(|e| e.into_inner()) = Some(peer);
    }

    fn ide(&self) -> Option<Peer<RoleServer>> {
        self.state.ide.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The IDE when it opened a session with the initialize handshake (only then may the agent
    /// notify it or ask it something outside a request), and declared what `declared` checks.
    fn ide_with(&self, declared: impl Fn(&ClientCapabilities) -> bool) -> Option<Peer<RoleServer>> {
        self.ide()
            .filter(|peer| peer.peer_info().is_some_and(|info| declared(&info.capabilities)))
    }

    /// Relays the progress the gateway reports under `upstream` to the IDE under `ide`, until
    /// the guard is dropped.
    pub(crate) fn track_progress(&self, upstream: ProgressToken, ide: ProgressToken) -> ProgressGuard {
        self.progress().insert(upstream.clone(), ide);
        ProgressGuard {
            relay: self.clone(),
            token: upstream,
        }
    }

    /// A receiver of the gateway's `tools/list_changed`, for a `subscriptions/listen` stream.
    pub(crate) fn subscribe_tools_changed(&self) -> broadcast::Receiver<()> {
        self.state.tools_changed.subscribe()
    }

    async fn tools_changed(&self) {
        let _ = self.state.tools_changed.send(());
        if let Some(peer) = self.ide_with(|_| true)
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %e, "could not tell the IDE that the tools changed");
        }
    }
}

/// The progress the gateway reports on a tracked call goes to the IDE under the IDE's token, in
/// order: the agent's connection hands it over as it is read (`ProgressInOrder`), before the
/// call's result, which the IDE's SDK would otherwise see first and then drop the report.
impl ProgressHook for Relay {
    async fn progress(&self, params: &ProgressNotificationParam) {
        let Some(token) = self.progress().get(&params.progress_token).cloned() else {
            return;
        };
        let Some(ide) = self.ide() else {
            return;
        };
        let mut relayed = ProgressNotificationParam::new(token, params.progress);
        if let Some(total) = params.total {
            relayed = relayed.with_total(total);
        }
        if let Some(message) = params.message.clone() {
            relayed = relayed.with_message(message);
        }
        let _ = ide.notify_progress(relayed).await;
    }

    /// Log lines too, for the same reason: the IDE gets a call's last line before its result.
    async fn logging(&self, params: &LoggingMessageNotificationParam) {
        if let Some(ide) = self.ide_with(|_| true) {
            let _ = ide.notify_logging_message(params.clone()).await;
        }
    }
}

/// The agent's MCP client handler towards the gateway.
#[derive(Debug, Clone)]
pub(crate) struct AgentClient {
    relay: Relay,
}

impl AgentClient {
    pub(crate) fn new(relay: Relay) -> Self {
        Self { relay }
    }
}

impl ClientHandler for AgentClient {
    fn get_info(&self) -> ClientConfig {
        // Sampling and elicitation are declared so the gateway may relay downstream servers'
        // requests; each one is passed to the IDE when it declared it can answer.
        let capabilities = ClientCapabilities::builder()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }

    // Progress and log lines are relayed where they are read (`Relay` is the connection's
    // `ProgressHook`), so the IDE gets a call's last report and log line before its result.

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.relay.tools_changed().await;
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let ide = self
            .relay
            .ide_with(|c| c.sampling.is_some())
            .ok_or_else(|| McpError::invalid_request("the IDE did not declare the sampling capability", None))?;
        ide.create_message(params)
            .await
            .map_err(|e| McpError::internal_error(format!("the IDE did not answer the sampling request: {e}"), None))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let Some(ide) = self.relay.ide_with(|c| c.elicitation.is_some()) else {
            // Nobody who could ask the person: decline rather than guess.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        ide.create_elicitation(params)
            .await
            .map_err(|e| McpError::internal_error(format!("the IDE did not answer the elicitation: {e}"), None))
    }
}
