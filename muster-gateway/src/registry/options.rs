//! [`RegistryOptions`]: what a registry is given besides its definitions: where events go,
//! which servers may run, and how its catalogues rank. [`SessionReaping`]: how the supervision reaps the registry's sessions.

use std::sync::Arc;

use muster_catalog::rank::RankingConfig;

use crate::events::EventLog;

/// The parts of a registry besides its definitions.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RegistryOptions {
    /// Where events go (in memory unless a config directory's log is given).
    pub events: Option<EventLog>,
    /// Which servers may run where the gateway runs (none given: any).
    pub server_policy: Option<Arc<dyn super::ServerPolicy>>,
    /// How `filter_tools {query}` ranks the catalogues the registry builds (none given: as
    /// `aggregator.ranking` says, BM25F alone without a model).
    pub ranking: Option<RankingConfig>,
}

/// How a registry's sessions are reaped once its supervision started
/// (`Supervisor::with_session_reaping`, above the registry): every `interval`, a session whose clients
/// are all gone is forgotten, its connections closed and the grants only it owned revoked; a
/// session without a request for `idle` (a principal's, which does not end with a transport)
/// has its connections closed and keeps its grants, and its next request connects it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionReaping {
    /// How often sessions are looked at. Default 30 s.
    pub interval: std::time::Duration,
    /// How long without a request makes a session idle. Default 15 min.
    pub idle: std::time::Duration,
}

impl Default for SessionReaping {
    fn default() -> Self {
        Self {
            interval: std::time::Duration::from_secs(30),
            idle: std::time::Duration::from_secs(15 * 60),
        }
    }
}

impl RegistryOptions {
    /// Sets where events go.
    pub fn with_events(mut self, events: EventLog) -> Self {
        self.events = Some(events);
        self
    }

    /// Ranks the catalogues with `ranking` instead of what `aggregator.ranking` says (a
    /// semantic model already loaded, other BM25F parameters).
    #[must_use]
    pub fn with_ranking(mut self, ranking: RankingConfig) -> Self {
        self.ranking = Some(ranking);
        self
    }

    /// Sets which servers may run where the gateway runs ([`ServerPolicy`](super::ServerPolicy)).
    pub fn with_server_policy(mut self, policy: Arc<dyn super::ServerPolicy>) -> Self {
        self.server_policy = Some(policy);
        self
    }
}
