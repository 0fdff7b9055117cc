//! Supervision of one downstream server: connect, watch, reconnect with backoff.
//!
//! Each MCPServer gets a supervisor task. It connects (Starting/Connecting), then watches the
//! connection: the connection closing (a stdio process exiting, a transport failing), a failed
//! MCP ping (health check), a downstream `list_changed`, or a command (stop, start, restart).
//! A lost or failed connection is retried after a backoff that starts at 30 s and doubles per
//! consecutive failure, capped at 2 minutes (`MUSTER_MCPSERVER_INITIAL_BACKOFF`,
//! `MUSTER_MCPSERVER_MAX_BACKOFF`); a remote server is Failed from its third consecutive
//! failure, a stdio server as soon as it cannot start or exits. Stdio servers are restarted on
//! the same backoff (Go muster leaves them down).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use chrono::Utc;
use muster_core::crd::{MCPServerHealth, MCPServerState, ServerType};
use tokio::sync::{mpsc, oneshot};

use crate::{
    events::{Event, EventDetails, reasons},
    registry::Registry,
    upstream::{Egress, ListChanged, UpstreamConnection, UpstreamError},
};

/// A remote server is Failed from this many consecutive failed attempts.
pub const FAILED_THRESHOLD: u32 = 3;

/// How supervisors retry and check health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisorConfig {
    /// The wait after the first failure; doubled for each further one.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// How often a connected server is pinged.
    pub health_interval: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(120),
            health_interval: Duration::from_secs(30),
        }
    }
}

impl SupervisorConfig {
    /// The defaults, overridden by `MUSTER_MCPSERVER_INITIAL_BACKOFF` and
    /// `MUSTER_MCPSERVER_MAX_BACKOFF` (`500ms`, `1s`, `2m`, `1h`; a bad value is logged and
    /// ignored).
    pub fn from_env() -> Self {
        let mut config = Self::default();
        let read = |name: &str| {
            let value = std::env::var(name).ok()?;
            match parse_duration(&value) {
                Some(d) => Some(d),
                None => {
                    tracing::warn!(variable = name, value = %value, "not a duration (e.g. 500ms, 1s, 2m); ignored");
                    None
                }
            }
        };
        if let Some(d) = read("MUSTER_MCPSERVER_INITIAL_BACKOFF") {
            config.initial_backoff = d;
        }
        if let Some(d) = read("MUSTER_MCPSERVER_MAX_BACKOFF") {
            config.max_backoff = d;
        }
        config.max_backoff = config.max_backoff.max(config.initial_backoff);
        config
    }

    /// Sets the first backoff.
    pub fn with_initial_backoff(mut self, d: Duration) -> Self {
        self.initial_backoff = d;
        self.max_backoff = self.max_backoff.max(d);
        self
    }

    /// Sets the backoff cap.
    pub fn with_max_backoff(mut self, d: Duration) -> Self {
        self.max_backoff = d.max(self.initial_backoff);
        self
    }

    /// Sets the health check interval.
    pub fn with_health_interval(mut self, d: Duration) -> Self {
        self.health_interval = d;
        self
    }

    /// The wait before the next attempt after `failures` consecutive failures (at least one).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        self.initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// Parses `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// What a supervisor is asked to do.
#[derive(Debug)]
pub(crate) enum Command {
    /// Run the server (no-op when it runs).
    Start,
    /// Stop the server and keep it stopped.
    Stop,
    /// Stop it and start it again now.
    Restart,
}

enum Outcome {
    /// The connection ended on its own, for this reason.
    Lost(String),
    /// A command ended it.
    Commanded,
    /// The registry or the server's definition is gone.
    Gone,
}

/// Which supervisor: a server's name and the generation of its definition. A supervisor whose
/// generation is not the slot's current one (the definition changed, the server was removed)
/// changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) generation: u64,
}

/// Runs the supervisor of server `key.name` until the registry drops it. `first_attempt` is
/// answered once the first connection attempt (or the decision not to start) is done.
pub(crate) async fn supervise(
    registry: Weak<Registry>,
    key: Key,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut want_running: bool,
    config: SupervisorConfig,
    first_attempt: oneshot::Sender<()>,
) {
    let mut first_attempt = Some(first_attempt);
    let mut failures: u32 = 0;
    let mut connected_before = false;
    loop {
        if !want_running {
            // A stdio server's process is Stopped; a remote server is Disconnected (intentionally).
            let stopped = match with_registry(&registry, |r| r.definition(&key)) {
                Some(Some(d)) if d.spec.server_type.is_some_and(|t| t.is_remote()) => MCPServerState::Disconnected,
                _ => MCPServerState::Stopped,
            };
            with_registry(&registry, |r| {
                r.mark(&key, |rt| {
                    rt.state = stopped;
                    rt.health = MCPServerHealth::Unknown;
                    rt.next_retry_after = None;
                })
            });
            if let Some(tx) = first_attempt.take() {
                let _ = tx.send(());
            }
            match commands.recv().await {
                Some(Command::Start | Command::Restart) => want_running = true,
                Some(Command::Stop) => continue,
                None => return,
            }
        }
        let Some(Some(definition)) = with_registry(&registry, |r| r.definition(&key)) else {
            return;
        };
        let is_stdio = matches!(definition.spec.server_type, Some(ServerType::Stdio) | None);
        with_registry(&registry, |r| {
            r.mark(&key, |rt| {
                rt.state = if is_stdio {
                    MCPServerState::Starting
                } else {
                    MCPServerState::Connecting
                };
                rt.last_attempt = Some(Utc::now());
                rt.next_retry_after = None;
            })
        });
        let Some(egress) = with_registry(&registry, |r| Egress::of(&definition, &r.config().aggregator)) else {
            return;
        };
        let (changes_tx, mut changes) = mpsc::unbounded_channel();
        let attempt = tokio::select! {
            result = tracing::Instrument::instrument(
                UpstreamConnection::connect(&definition, Some(changes_tx), egress),
                tracing::info_span!("upstream_connect", server = %key.name),
            ) => Some(result),
            command = commands.recv() => {
                match command {
                    Some(Command::Stop) => want_running = false,
                    Some(Command::Start | Command::Restart) => {}
                    None => return,
                }
                None
            }
        };
        let Some(attempt) = attempt else { continue };
        if crate::auth::sso::is_sso(&definition) {
            // Served per session with each caller's identity: the probe only shows the endpoint
            // answers (a 401, or a connection that is not kept); no connection of the gateway's.
            let reachable = match &attempt {
                Ok(conn) => {
                    conn.close();
                    true
                }
                Err(e) => matches!(e, UpstreamError::AuthRequired { .. }),
            };
            // A token exchange whose client credentials cannot be read fails every caller alike.
            let credentials = with_registry(&registry, |r| r.sso().credentials_problem(&definition)).flatten();
            if let (true, Some(problem)) = (reachable, credentials) {
                failures += 1;
                let delay = config.backoff(failures);
                let at =
                    Utc::now() + chrono::Duration::from_std(delay).unwrap_or_else(|_| chrono::Duration::seconds(120));
                with_registry(&registry, |r| {
                    r.fail_shared(&key.name, "TokenExchangeCredentials", &problem);
                    r.mark(&key, |rt| {
                        rt.consecutive_failures = failures;
                        rt.next_retry_after = Some(at);
                    });
                });
                if let Some(tx) = first_attempt.take() {
                    let _ = tx.send(());
                }
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    command = commands.recv() => match command {
                        Some(Command::Stop) => want_running = false,
                        Some(Command::Start | Command::Restart) => {}
                        None => return,
                    }
                }
                continue;
            }
            if reachable {
                failures = 0;
                let note = crate::auth::sso::served_per_session(&definition);
                with_registry(&registry, |r| {
                    r.mark(&key, |rt| {
                        rt.served_per_session = Some(note);
                        rt.next_retry_after = None;
                        rt.state = MCPServerState::AwaitingSession;
                        rt.state_since = Utc::now();
                        rt.health = MCPServerHealth::Unknown;
                        rt.last_error = None;
                        rt.failure_class = None;
                        rt.consecutive_failures = 0;
                        rt.last_failure_http_status = None;
                    });
                    r.derive_sso_state(&key.name);
                });
                match park(&mut first_attempt, &mut commands).await {
                    None => return,
                    Some(run) => want_running = want_running && run,
                }
                continue;
            }
        }
        let lost = match attempt {
            Ok(conn) => {
                failures = 0;
                let Some(conn) = with_registry(&registry, |r| r.limited(conn)) else {
                    return;
                };
                let installed = with_registry(&registry, |r| r.install(&key, Arc::clone(&conn), connected_before));
                if installed != Some(true) {
                    conn.close();
                    return;
                }
                connected_before = true;
                if let Some(tx) = first_attempt.take() {
                    let _ = tx.send(());
                }
                let outcome = watch(
                    &registry,
                    &key,
                    &conn,
                    &mut changes,
                    &mut commands,
                    &mut want_running,
                    config,
                )
                .await;
                conn.close();
                match outcome {
                    Outcome::Lost(reason) => {
                        tracing::warn!(server = %key.name, %reason, "connection lost");
                        failures = 1;
                        with_registry(&registry, |r| r.uninstall(&key, Some(reason), MCPServerState::Failed));
                        true
                    }
                    Outcome::Commanded => {
                        with_registry(&registry, |r| r.uninstall(&key, None, MCPServerState::Disconnected));
                        false
                    }
                    Outcome::Gone => {
                        with_registry(&registry, |r| r.uninstall(&key, None, MCPServerState::Stopped));
                        return;
                    }
                }
            }
            Err(UpstreamError::AuthRequired { status, challenge, .. }) => {
                // The server wants each person to sign in: nothing to retry until a session
                // holds a grant (its connections are that session's, not this supervisor's).
                tracing::info!(server = %key.name, "the server requires people to sign in");
                with_registry(&registry, |r| {
                    if let Some(conflict) = r.issuer_conflict(&key.name) {
                        // One description per issuer: refused until the servers agree.
                        r.emit(Event::mcp_server(
                            &key.name,
                            reasons::MCP_SERVER_FAILED,
                            conflict.to_string(),
                        ));
                        r.mark(&key, |rt| {
                            rt.state = MCPServerState::Failed;
                            rt.health = MCPServerHealth::Unknown;
                            rt.last_error = Some(conflict.to_string());
                            rt.last_failure_http_status = Some(status.as_u16());
                            rt.auth_challenge = challenge.clone();
                            rt.conflicts_with = Some(conflict.used.clone());
                        });
                        return;
                    }
                    r.emit(Event::mcp_server(
                        &key.name,
                        reasons::MCP_SERVER_AUTH_REQUIRED,
                        format!(
                            "MCP server {} requires authentication; people sign in with core_auth_login",
                            key.name
                        ),
                    ));
                    r.mark(&key, |rt| {
                        rt.state = MCPServerState::AuthRequired;
                        rt.health = MCPServerHealth::Unknown;
                        rt.last_error = None;
                        rt.last_failure_http_status = Some(status.as_u16());
                        rt.consecutive_failures = 0;
                        rt.auth_challenge = challenge;
                        rt.conflicts_with = None;
                    });
                });
                match park(&mut first_attempt, &mut commands).await {
                    None => return,
                    Some(run) => want_running = want_running && run,
                }
                continue;
            }
            Err(e) => {
                failures += 1;
                let state = if is_stdio || failures >= FAILED_THRESHOLD {
                    MCPServerState::Failed
                } else {
                    MCPServerState::Connecting
                };
                tracing::warn!(server = %key.name, error = %e, failures, "connection attempt failed");
                with_registry(&registry, |r| {
                    r.metrics().record_connect_failure(&key.name);
                    r.emit(
                        Event::mcp_server(
                            &key.name,
                            reasons::MCP_SERVER_FAILED,
                            format!("MCP server {} failed to connect: {e}", key.name),
                        )
                        .with_details(EventDetails::default().with_error(e.to_string())),
                    )
                });
                with_registry(&registry, |r| {
                    r.mark(&key, |rt| {
                        rt.state = state;
                        rt.health = MCPServerHealth::Unhealthy;
                        rt.last_error = Some(e.to_string());
                        rt.last_failure_http_status = e.http_status().map(|s| s.as_u16());
                        rt.consecutive_failures = failures;
                    })
                });
                if let Some(tx) = first_attempt.take() {
                    let _ = tx.send(());
                }
                true
            }
        };
        if lost && want_running {
            let delay = config.backoff(failures.max(1));
            let at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_else(|_| chrono::Duration::seconds(120));
            with_registry(&registry, |r| r.mark(&key, |rt| rt.next_retry_after = Some(at)));
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                command = commands.recv() => match command {
                    Some(Command::Stop) => want_running = false,
                    Some(Command::Start | Command::Restart) => {}
                    None => return,
                }
            }
        }
    }
}

async fn watch(
    registry: &Weak<Registry>,
    key: &Key,
    conn: &Arc<UpstreamConnection>,
    changes: &mut mpsc::UnboundedReceiver<ListChanged>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    want_running: &mut bool,
    config: SupervisorConfig,
) -> Outcome {
    let mut health = tokio::time::interval(config.health_interval);
    health.tick().await;
    let mut current = Arc::clone(conn);
    loop {
        tokio::select! {
            reason = current.closed() => return Outcome::Lost(reason),
            change = changes.recv() => {
                let Some(change) = change else { continue };
                // Coalesce a burst of notifications into one refresh.
                while changes.try_recv().is_ok() {}
                match current.refreshed().await {
                    Ok(fresh) => {
                        let fresh = Arc::new(fresh);
                        tracing::info!(server = %key.name, ?change, tools = fresh.tools().len(), "downstream lists changed");
                        if with_registry(registry, |r| r.replace_lists(key, Arc::clone(&fresh))) != Some(true) {
                            return Outcome::Gone;
                        }
                        current = fresh;
                    }
                    Err(e) => tracing::warn!(server = %key.name, error = %e, "refreshing after list_changed failed"),
                }
            }
            _ = health.tick() => {
                match current.ping().await {
                    Ok(()) => { with_registry(registry, |r| r.mark(key, |rt| rt.health = MCPServerHealth::Healthy)); }
                    Err(e) => {
                        with_registry(registry, |r| r.emit(Event::mcp_server(
                            &key.name,
                            reasons::MCP_SERVER_HEALTH_CHECK_FAILED,
                            format!("MCP server {} did not answer its health check: {e}", key.name),
                        )));
                        return Outcome::Lost(format!("health check failed: {e}"));
                    }
                }
            }
            command = commands.recv() => match command {
                Some(Command::Start) => {}
                Some(Command::Stop) => { *want_running = false; return Outcome::Commanded; }
                Some(Command::Restart) => return Outcome::Commanded,
                None => return Outcome::Gone,
            },
        }
    }
}

/// Reports the first attempt done, then waits for the next command: `None` when the registry
/// is gone, else whether to keep running (`false` after a stop).
async fn park(
    first_attempt: &mut Option<oneshot::Sender<()>>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> Option<bool> {
    if let Some(tx) = first_attempt.take() {
        let _ = tx.send(());
    }
    match commands.recv().await {
        Some(Command::Stop) => Some(false),
        Some(Command::Start | Command::Restart) => Some(true),
        None => None,
    }
}

fn with_registry<T>(registry: &Weak<Registry>, f: impl FnOnce(&Registry) -> T) -> Option<T> {
    registry.upgrade().map(|r| f(&r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_at_thirty_seconds_doubles_and_caps_at_two_minutes() {
        let c = SupervisorConfig::default();
        let secs: Vec<u64> = (1..=5).map(|n| c.backoff(n).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 120, 120]);
        let fast = SupervisorConfig::default()
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_millis(250));
        assert_eq!(fast.backoff(1), Duration::from_millis(100));
        assert_eq!(fast.backoff(3), Duration::from_millis(250));
        assert_eq!(fast.backoff(u32::MAX), Duration::from_millis(250));
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
