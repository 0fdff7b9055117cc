//! What a downstream server sends while a call runs, relayed to the client that made the call.
//!
//! The gateway stamps a progress token on every downstream call and registers the call here
//! under it. The downstream's progress notifications are mapped back to the calling client's own
//! token ([`ProgressSink`]; a call on a stdio server's lane gets its reports from the lane,
//! which reads them); its logging notifications go to every client with a call in flight
//! on that connection; its sampling and elicitation requests go to the client of the most recent
//! call in flight, and the answer goes back down. A downstream `list_changed` is reported to the
//! registry, which refreshes the catalogue.
//!
//! Logging and sampling are deprecated by the newest MCP revision (SEP-2577) but downstream
//! servers of older revisions still use them, so the gateway keeps relaying them.

#![allow(deprecated)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use muster_core::{ProgressSink, call::ProgressUpdate};
use rmcp::{
    ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
        ElicitResult, ElicitationAction, Implementation, LoggingMessageNotificationParam, ProgressNotificationParam,
        ProgressToken, ResourceUpdatedNotificationParam,
    },
    service::{NotificationContext, RequestContext},
};

use super::progress::ProgressHook;
use tokio::sync::mpsc;

/// The client identity the gateway presents to downstream servers.
pub(crate) const CLIENT_NAME: &str = "muster";

/// The MCP client of a request, as the meta-tools server put it in the call's extensions: where
/// relayed logging, sampling and elicitation go.
#[derive(Debug, Clone)]
pub struct ClientPeer(pub Peer<RoleServer>);

/// What a downstream announced changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChanged {
    /// Its tools.
    Tools,
    /// Its resources.
    Resources,
    /// Its prompts.
    Prompts,
}

#[derive(Debug, Clone)]
struct InFlight {
    progress: Option<ProgressSink>,
    client: Option<ClientPeer>,
    order: u64,
}

#[derive(Debug, Default)]
struct Calls {
    by_token: HashMap<ProgressToken, InFlight>,
    next: u64,
}

/// The clients subscribed to each resource URI (the server's own), with their sessions.
type Subscriptions = HashMap<String, Vec<(String, ClientPeer)>>;

/// The calls in flight on one connection, and the clients subscribed to its resources.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallRelay {
    calls: Arc<Mutex<Calls>>,
    subscribers: Arc<Mutex<Subscriptions>>,
}

/// Unregisters a call when dropped.
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    relay: CallRelay,
    token: ProgressToken,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.relay.lock().by_token.remove(&self.token);
    }
}

impl CallRelay {
    fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a call under the progress token the gateway sent downstream.
    pub(crate) fn register(
        &self,
        token: ProgressToken,
        progress: Option<ProgressSink>,
        client: Option<ClientPeer>,
    ) -> InFlightGuard {
        let mut calls = self.lock();
        calls.next += 1;
        let order = calls.next;
        calls.by_token.insert(
            token.clone(),
            InFlight {
                progress,
                client,
                order,
            },
        );
        InFlightGuard {
            relay: self.clone(),
            token,
        }
    }

    fn progress(&self, token: &ProgressToken) -> Option<ProgressSink> {
        self.lock().by_token.get(token).and_then(|c| c.progress.clone())
    }

    /// Hands a downstream progress notification to the sink of the call it belongs to, if that
    /// call is in flight and its client asked for progress.
    fn report_progress(&self, params: &ProgressNotificationParam) {
        if let Some(sink) = self.progress(&params.progress_token) {
            sink.report(progress_update(params));
        }
    }

    fn clients(&self) -> Vec<ClientPeer> {
        self.lock().by_token.values().filter_map(|c| c.client.clone()).collect()
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, Subscriptions> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `client` (of session `session`) to the subscribers of `uri`; whether it is the first
    /// (the server must be asked).
    pub(crate) fn add_subscriber(&self, uri: &str, session: &str, client: ClientPeer) -> bool {
        let mut subscriptions = self.subscriptions();
        let list = subscriptions.entry(uri.to_owned()).or_default();
        list.retain(|(_, ClientPeer(p))| !p.is_transport_closed());
        let first = list.is_empty();
        list.retain(|(s, _)| s != session);
        list.push((session.to_owned(), client));
        first
    }

    /// Removes session `session`'s subscription to `uri`; whether none is left (the server may
    /// be told).
    pub(crate) fn remove_subscriber(&self, uri: &str, session: &str) -> bool {
        let mut subscriptions = self.subscriptions();
        let Some(list) = subscriptions.get_mut(uri) else {
            return false;
        };
        let before = list.len();
        list.retain(|(s, ClientPeer(p))| s != session && !p.is_transport_closed());
        let removed = list.len() < before;
        let empty = list.is_empty();
        if empty {
            subscriptions.remove(uri);
        }
        removed && empty
    }

    /// The clients subscribed to `uri`.
    fn subscribers_of(&self, uri: &str) -> Vec<ClientPeer> {
        self.subscriptions()
            .get(uri)
            .map(|list| list.iter().map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// The client of the most recent call in flight that declared what `declared` checks in
    /// its capabilities (a request is only forwarded to a client that said it can answer it).
    fn latest_client(&self, declared: impl Fn(&ClientCapabilities) -> bool) -> Option<ClientPeer> {
        self.lock()
            .by_token
            .values()
            .filter(|c| {
                c.client
                    .as_ref()
                    .and_then(|ClientPeer(peer)| peer.peer_info())
                    .is_some_and(|info| declared(&info.capabilities))
            })
            .max_by_key(|c| c.order)
            .and_then(|c| c.client.clone())
    }
}

/// A downstream's progress notification as the update a [`ProgressSink`] takes.
pub(crate) fn progress_update(params: &ProgressNotificationParam) -> ProgressUpdate {
    let update = ProgressUpdate::new(params.progress, params.total);
    match &params.message {
        Some(message) => update.with_message(message.clone()),
        None => update,
    }
}

/// How long relaying one log line to one client may hold up the downstream's next message.
const LOG_RELAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl ProgressHook for CallRelay {
    async fn progress(&self, params: &ProgressNotificationParam) {
        self.report_progress(params);
    }

    /// To every client with a call in flight on the connection, queued before the result behind
    /// it is read (a client that cannot take it within a second misses it).
    async fn logging(&self, params: &LoggingMessageNotificationParam) {
        for ClientPeer(peer) in self.clients() {
            let _ = tokio::time::timeout(LOG_RELAY_WAIT, peer.notify_logging_message(params.clone())).await;
        }
    }
}

/// The gateway's MCP client handler towards one downstream server.
#[derive(Debug, Clone)]
pub struct UpstreamClient {
    relay: CallRelay,
    changes: Option<mpsc::UnboundedSender<ListChanged>>,
}

impl UpstreamClient {
    pub(crate) fn new(relay: CallRelay, changes: Option<mpsc::UnboundedSender<ListChanged>>) -> Self {
        Self { relay, changes }
    }

    fn changed(&self, what: ListChanged) {
        if let Some(tx) = &self.changes {
            let _ = tx.send(what);
        }
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // Sampling and elicitation are declared so downstream servers may ask; each request is
        // forwarded to the client of the call in flight, and refused when there is none.
        let capabilities = ClientCapabilities::builder()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }

    // Progress and logging are not handled here but where they are read (`upstream::progress`):
    // rmcp runs each notification handler in a task of its own, which may run after the call's
    // result arrived and the call was unregistered, losing its last report or log line.

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        for ClientPeer(peer) in self.relay.subscribers_of(&params.uri) {
            let _ = peer.notify_resource_updated(params.clone()).await;
        }
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changed(ListChanged::Tools);
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changed(ListChanged::Resources);
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changed(ListChanged::Prompts);
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let ClientPeer(peer) = self.relay.latest_client(|c| c.sampling.is_some()).ok_or_else(|| {
            McpError::invalid_request(
                "no client with a call in flight declared the sampling capability to answer this sampling request",
                None,
            )
        })?;
        peer.create_message(params)
            .await
            .map_err(|e| McpError::internal_error(format!("the client did not answer the sampling request: {e}"), None))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let Some(ClientPeer(peer)) = self.relay.latest_client(|c| c.elicitation.is_some()) else {
            // Nobody who could ask the person is on the line: decline rather than guess.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        peer.create_elicitation(params)
            .await
            .map_err(|e| McpError::internal_error(format!("the client did not answer the elicitation: {e}"), None))
    }
}
