//! `core_events` with `follow: true`: the matching events that happen from then on, pushed to
//! the caller's MCP session as `notifications/muster/event` notifications (the params are an
//! event as `core_events` lists it, [`Event::to_display_json`]), as Go muster does.
//!
//! One follower per session: asking again with the same filters keeps it (a client that also
//! polls with `follow: true`, as `gateway events -f` does, gets each event once), asking with
//! other filters replaces it. A follower ends when its session's transport closes.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use rmcp::{
    Peer, RoleServer,
    model::{CustomNotification, ServerNotification},
};
use tokio::{sync::broadcast::error::RecvError, task::AbortHandle};

use super::{Event, EventLog, EventQuery};

/// The method of the notification that carries a followed event.
pub const EVENT_NOTIFICATION: &str = "notifications/muster/event";

/// How often an idle follower checks that its session is still there.
const CHECK: Duration = Duration::from_secs(5);

/// The followers of the sessions that asked to follow: one per session, kept while the same
/// filters are asked for again, replaced when others are, ended with the session.
#[derive(Debug, Default)]
pub struct EventFollowers {
    by_session: Mutex<HashMap<String, (EventQuery, AbortHandle)>>,
}

impl EventFollowers {
    /// Sends `session`'s client (`peer`) the events of `log` that `query`'s filters select,
    /// from now on. The time window and limit of `query` are about the answer, not the
    /// following: a follower keeps only the filters.
    pub fn follow(&self, log: &EventLog, session: &str, query: &EventQuery, peer: Peer<RoleServer>) {
        let filters = EventQuery {
            since: None,
            until: None,
            limit: EventQuery::DEFAULT_LIMIT,
            follow: true,
            ..query.clone()
        };
        let mut by_session = self.by_session.lock().unwrap_or_else(|e| e.into_inner());
        by_session.retain(|_, (_, task)| !task.is_finished());
        if by_session.get(session).is_some_and(|(same, _)| *same == filters) {
            return;
        }
        if let Some((_, old)) = by_session.remove(session) {
            old.abort();
        }
        let mut events = log.subscribe();
        let selected = filters.clone();
        let task = tokio::spawn(async move {
            let mut check = tokio::time::interval(CHECK);
            loop {
                tokio::select! {
                    received = events.recv() => match received {
                        Ok(event) if selected.matches(&event) => {
                            if send(&peer, &event).await.is_err() {
                                break;
                            }
                        }
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => break,
                    },
                    _ = check.tick() => if peer.is_transport_closed() {
                        break;
                    },
                }
            }
        });
        by_session.insert(session.to_owned(), (filters, task.abort_handle()));
    }

    /// Sessions with a follower running now.
    pub fn len(&self) -> usize {
        let by_session = self.by_session.lock().unwrap_or_else(|e| e.into_inner());
        by_session.values().filter(|(_, task)| !task.is_finished()).count()
    }

    /// Whether no session follows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for EventFollowers {
    fn drop(&mut self) {
        let by_session = self.by_session.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, task) in by_session.values() {
            task.abort();
        }
    }
}

async fn send(peer: &Peer<RoleServer>, event: &Event) -> Result<(), rmcp::service::ServiceError> {
    let notification = CustomNotification::new(EVENT_NOTIFICATION, Some(event.to_display_json()));
    peer.send_notification(ServerNotification::CustomNotification(notification))
        .await
}
