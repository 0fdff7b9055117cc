//! [`RegistryOptions`]: what a registry is given besides its definitions: supervision
//! settings, how sessions are reaped, where events go, and which servers may run.

use std::sync::Arc;

use crate::{events::EventLog, upstream::supervision::SupervisorConfig};

/// The parts of a registry besides its definitions.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RegistryOptions {
    /// Reconnect backoff and health checks.
    pub supervision: SupervisorConfig,
    /// Where events go (in memory unless a config directory's log is given).
    pub events: Option<EventLog>,
    /// How often ended and idle sessions are reaped, and when a session is idle.
    pub session_reaping: SessionReaping,
    /// Which servers may run where the gateway runs (none given: any).
    pub server_policy: Option<Arc<dyn super::ServerPolicy>>,
}

/// How the registry reaps sessions, once supervision started
/// (`Supervisor::start`, above the registry): every `interval`, a session whose clients
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
    /// Sets how often sessions are reaped and when one is idle.
    #[must_use]
    pub fn with_session_reaping(mut self, reaping: SessionReaping) -> Self {
        self.session_reaping = reaping;
        self
    }

    /// Sets the reconnect backoff and health checks.
    pub fn with_supervision(mut self, supervision: SupervisorConfig) -> Self {
        self.supervision = supervision;
        self
    }

    /// Sets where events go.
    pub fn with_events(mut self, events: EventLog) -> Self {
        self.events = Some(events);
        self
    }

    /// Sets which servers may run where the gateway runs ([`ServerPolicy`](super::ServerPolicy)).
    pub fn with_server_policy(mut self, policy: Arc<dyn super::ServerPolicy>) -> Self {
        self.server_policy = Some(policy);
        self
    }
}
