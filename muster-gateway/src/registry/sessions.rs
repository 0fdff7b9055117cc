//! The per-session side of the registry: the connections a session holds to the servers it
//! signed in to, the catalogue it sees, the clients to notify when its lists change, and the
//! reaping of sessions that ended.

use std::sync::Arc;

use muster_catalog::Catalog;
use muster_core::{
    SessionId,
    crd::{MCPServer, MCPServerState},
};

use super::{Registry, SessionObserver};
use crate::upstream::{SharedConnection, UpstreamConnection};

impl Registry {
    /// How many MCP client sessions are connected now (for the metrics).
    pub fn session_count(&self) -> usize {
        self.changes.live_clients()
    }

    /// The catalogue `session` sees: the shared one plus the tools of the servers it signed in
    /// to.
    pub fn catalog_for(&self, session: &SessionId) -> Arc<Catalog> {
        let Some(own) = self.sessions.held_by(session) else {
            return self.catalog();
        };
        if let Some(catalog) = self.sessions.cached_catalog(session) {
            return catalog;
        }
        let (catalog, _, _) = self.build_catalog(&own);
        let catalog = Arc::new(catalog);
        self.sessions.cache_catalog(session, Arc::clone(&catalog));
        catalog
    }

    /// The servers a sign-in would unlock for `session`: waiting for people to sign in, not
    /// suspended, and not signed in to by this session. With `pattern`, only those whose tools'
    /// exposed names the pattern could match.
    pub(crate) fn servers_requiring_auth(
        &self,
        session: &SessionId,
        pattern: Option<&muster_catalog::pattern::NamePattern>,
    ) -> Vec<muster_catalog::tools::ServerAuthHint> {
        self.servers
            .views(|definition, runtime| runtime.state == MCPServerState::AuthRequired && !definition.spec.suspended)
            .into_iter()
            .filter(|s| self.session_connection(session, &s.definition.metadata.name).is_none())
            .filter_map(|s| {
                let d = &s.definition;
                let prefix = d.spec.tool_prefix.clone().unwrap_or_else(|| d.metadata.name.clone());
                let sample = self.names.server_tool(&prefix, "");
                pattern
                    .is_none_or(|p| p.matches(&sample))
                    .then(|| muster_catalog::tools::ServerAuthHint {
                        name: d.metadata.name.clone(),
                        status: "auth_required".to_owned(),
                        auth_tool: "core_auth_login".to_owned(),
                        tool_prefix: Some(prefix),
                        family: d.spec.family.as_ref().map(|f| f.name.clone()),
                    })
            })
            .collect()
    }

    /// The connection a call of `session` to `server` goes through: the session's own, else the
    /// gateway's.
    pub fn connection_for(&self, session: &SessionId, server: &str) -> Option<SharedConnection> {
        self.session_connection(session, server)
            .or_else(|| self.connection(server))
    }

    /// The connection `session` holds to `server`, when it signed in to it.
    pub(crate) fn session_connection(&self, session: &SessionId, server: &str) -> Option<SharedConnection> {
        self.sessions.get(session, server)
    }

    /// Gives `session` its own connection to `server` (after a sign-in), bounded by the
    /// server's concurrency limit; the session's catalogue gains the server's tools and the
    /// session is told its lists changed.
    pub(crate) fn install_session_connection(&self, session: &SessionId, server: &str, conn: UpstreamConnection) {
        self.replace_session_connection(session, server, conn);
        self.session_changed(session);
    }

    /// Gives `session` its own connection to `server` as [`Self::install_session_connection`]
    /// does, or, when it holds one already, replaces it (a refreshed token) without telling the
    /// session anything changed.
    pub(crate) fn put_session_connection(&self, session: &SessionId, server: &str, conn: UpstreamConnection) {
        if self.session_connection(session, server).is_some() {
            self.replace_session_connection(session, server, conn);
        } else {
            self.install_session_connection(session, server, conn);
        }
    }

    fn replace_session_connection(&self, session: &SessionId, server: &str, conn: UpstreamConnection) {
        self.sessions.put(session, server, self.limited(conn));
        self.derive_sso_state(server);
    }

    /// Drops the connection `session` holds to `server`; whether it held one.
    pub(crate) fn remove_session_connection(&self, session: &SessionId, server: &str) -> bool {
        let held = self.sessions.remove(session, server);
        if held {
            self.session_changed(session);
            self.derive_sso_state(server);
        }
        held
    }

    /// Tells `session` that the URL elicitation `elicitation_id` completed
    /// (`notifications/elicitation/complete`).
    pub(crate) fn notify_elicitation_complete(&self, session: &SessionId, elicitation_id: &str) {
        self.changes.publish(super::Change::ElicitationComplete {
            session: session.clone(),
            elicitation_id: elicitation_id.to_owned(),
        });
    }

    fn session_changed(&self, session: &SessionId) {
        self.sessions.forget_catalog(session);
        self.changes.publish(super::Change::SessionLists(session.clone()));
    }

    /// Forgets the sessions whose clients are all gone: their connections are closed and the
    /// grants only they owned are revoked. A principal's session (behind the front door) is
    /// never reaped this way: it comes back with the person's next request; nor is the default
    /// session of stdio.
    pub(crate) fn reap_ended_sessions(&self) {
        self.forget_sessions(&self.ended_sessions(), true);
    }

    /// Notes that `session` made a request now.
    pub(crate) fn touch_session(&self, session: &SessionId) {
        self.sessions.touch(session);
    }

    /// Closes the connections of the sessions that made no request for `idle` (their grants
    /// stay: the next request connects them again).
    pub(crate) fn reap_idle_sessions(&self, idle: std::time::Duration) {
        self.forget_sessions(&self.sessions.idle(idle), false);
    }

    fn ended_sessions(&self) -> Vec<SessionId> {
        self.sessions
            .sessions()
            .into_iter()
            .filter(|s| !s.as_str().starts_with("principal-") && *s != SessionId::default())
            .filter(|s| !self.changes.has_clients(s))
            .collect()
    }

    /// Closes `sessions`' connections and forgets what they carried; for sessions that `ended`,
    /// the grants only they owned too (revoked), while an idle session keeps its grants.
    fn forget_sessions(&self, sessions: &[SessionId], ended: bool) {
        for session in sessions {
            self.sessions.forget(session, ended);
        }
        if !sessions.is_empty() {
            tracing::debug!(sessions = sessions.len(), ended, "reaped sessions");
            let names: Vec<String> = self.servers.states().into_iter().map(|(name, _)| name).collect();
            for name in names {
                self.derive_sso_state(&name);
            }
        }
    }

    /// For a single sign-on server: `Connected` while any session holds a connection to it,
    /// else `Awaiting Session` (other states are the supervisor's).
    pub(crate) fn derive_sso_state(&self, server: &str) {
        let held = self.sessions.any_holds(server);
        self.servers
            .set_session_held(server, held, MCPServer::uses_callers_identity);
    }

    /// Tells `observer` of every session forgotten from now on.
    pub fn observe_sessions(&self, observer: Arc<dyn SessionObserver>) {
        self.sessions.observe(observer);
    }

    /// Reaps ended and idle sessions as `reaping` says, while the registry lives.
    pub(crate) fn spawn_session_reaper(self: &Arc<Self>, reaping: super::SessionReaping) {
        let registry = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(reaping.interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(registry) = registry.upgrade() else { break };
                registry.reap_ended_sessions();
                registry.reap_idle_sessions(reaping.idle);
            }
        });
    }
}
