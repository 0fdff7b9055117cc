//! The change bus: how the registry tells the MCP layer that what a client sees changed, without
//! holding the clients.
//!
//! The registry publishes a [`Change`] when the catalogue changes (for every session, or for one
//! session that signed in to a server) and when a session's URL elicitation completed. Each MCP
//! client session subscribes once it is initialized and turns the changes that concern it into
//! its own notifications (`notifications/tools/list_changed` and the others,
//! `notifications/elicitation/complete`). A subscription carries a liveness probe, so the
//! registry can tell which sessions still have clients (to reap the ones that ended) and count
//! them (for the metrics) without knowing what a client is.
//!
//! ```
//! use muster_core::SessionId;
//! use muster_gateway::registry::{Change, ChangeBus};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let bus = ChangeBus::default();
//! let alice = SessionId::new("alice");
//! let mut changes = bus.subscribe(&alice, || true);
//! assert_eq!(bus.live_clients(), 1);
//!
//! bus.publish(Change::SessionLists(SessionId::new("bob")));
//! bus.publish(Change::Lists);
//! // The client of alice skips bob's change and acts on the one for everybody.
//! assert!(!changes.recv().await.unwrap().concerns(&alice));
//! assert!(changes.recv().await.unwrap().concerns(&alice));
//! # }
//! ```

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use muster_core::SessionId;
use tokio::sync::broadcast;

/// How many changes a slow subscriber may fall behind before it misses some (it then treats the
/// gap as a change of every list).
const BACKLOG: usize = 256;

/// Something a client of the gateway should be told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The tools, resources and prompts changed for every session.
    Lists,
    /// The lists of one session changed (it gained or lost a connection of its own).
    SessionLists(SessionId),
    /// The URL elicitation `elicitation_id` of `session` completed (a sign-in finished).
    ElicitationComplete {
        /// The session that was asked.
        session: SessionId,
        /// The elicitation's id.
        elicitation_id: String,
    },
}

impl Change {
    /// Whether a client of `session` is told about this change.
    pub fn concerns(&self, session: &SessionId) -> bool {
        match self {
            Change::Lists => true,
            Change::SessionLists(s) | Change::ElicitationComplete { session: s, .. } => s == session,
        }
    }
}

type Alive = Arc<dyn Fn() -> bool + Send + Sync>;

/// Publishes [`Change`]s to the client sessions that subscribed, and knows which sessions still
/// have a live client.
pub struct ChangeBus {
    sender: broadcast::Sender<Change>,
    /// The liveness probe of each subscription, by session.
    clients: Mutex<BTreeMap<SessionId, Vec<Alive>>>,
}

impl std::fmt::Debug for ChangeBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeBus")
            .field("receivers", &self.sender.receiver_count())
            .finish_non_exhaustive()
    }
}

impl Default for ChangeBus {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
            clients: Mutex::default(),
        }
    }
}

impl ChangeBus {
    /// Subscribes a client of `session`; `alive` says whether it is still connected (checked
    /// when the registry looks for ended sessions and counts clients).
    pub fn subscribe(
        &self,
        session: &SessionId,
        alive: impl Fn() -> bool + Send + Sync + 'static,
    ) -> broadcast::Receiver<Change> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        prune(&mut clients);
        clients.entry(session.clone()).or_default().push(Arc::new(alive));
        self.sender.subscribe()
    }

    /// Every change from now on, for a part of the gateway that acts on them (it is not a client:
    /// it is not counted, and keeps no session alive).
    pub fn listen(&self) -> broadcast::Receiver<Change> {
        self.sender.subscribe()
    }

    /// Tells every subscriber (none listening is fine).
    pub fn publish(&self, change: Change) {
        let _ = self.sender.send(change);
    }

    /// How many subscribed clients are still connected.
    pub fn live_clients(&self) -> usize {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        prune(&mut clients);
        clients.values().map(Vec::len).sum()
    }

    /// Whether `session` has a connected client.
    pub fn has_clients(&self, session: &SessionId) -> bool {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        prune(&mut clients);
        clients.contains_key(session)
    }
}

/// Forgets the clients that are gone, and the sessions left without any.
fn prune(clients: &mut BTreeMap<SessionId, Vec<Alive>>) {
    for list in clients.values_mut() {
        list.retain(|alive| alive());
    }
    clients.retain(|_, list| !list.is_empty());
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_session_without_a_live_client_has_none() {
        let bus = ChangeBus::default();
        let connected = Arc::new(AtomicBool::new(true));
        let probe = Arc::clone(&connected);
        let _changes = bus.subscribe(&SessionId::new("a"), move || probe.load(Ordering::SeqCst));
        assert!(bus.has_clients(&SessionId::new("a")));
        assert!(!bus.has_clients(&SessionId::new("b")));
        connected.store(false, Ordering::SeqCst);
        assert!(!bus.has_clients(&SessionId::new("a")));
        assert_eq!(bus.live_clients(), 0);
    }

    #[test]
    fn a_change_concerns_its_session_or_everybody() {
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let done = Change::ElicitationComplete {
            session: a.clone(),
            elicitation_id: "e1".into(),
        };
        assert!(done.concerns(&a) && !done.concerns(&b));
        assert!(Change::Lists.concerns(&b));
    }
}
