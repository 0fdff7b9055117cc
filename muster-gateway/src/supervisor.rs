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

use std::sync::{Arc, Weak};

use chrono::Utc;
use muster_core::crd::{MCPServerHealth, MCPServerState, ServerType};
use tokio::sync::{mpsc, oneshot};

use crate::{
    events::{Event, EventDetails, reasons},
    metrics::GatewayMetrics,
    registry::{Change, Command, Key, Registry, SessionReaping, Unsupervised},
    secrets::{
        HeadersFor, NoSecrets, SECRET_REFERENCE, SecretError, SecretSource, TOKEN_EXCHANGE_CREDENTIALS,
        with_secret_headers,
    },
    upstream::{Egress, ListChanged, UpstreamConnection, UpstreamError},
};

/// A remote server is Failed from this many consecutive failed attempts.
pub const FAILED_THRESHOLD: u32 = 3;

pub use muster_upstream::supervision::{SupervisorConfig, parse_duration};

enum Outcome {
    /// The connection ended on its own, for this reason.
    Lost(String),
    /// A command ended it.
    Commanded,
    /// The registry or the server's definition is gone.
    Gone,
}

/// Supervises the servers of a registry: one task per server, which connects it, watches the
/// connection and reconnects on backoff ([`SupervisorConfig`]), counting connection failures and
/// reconnects in the gateway's metrics when given them. While the registry lives it also reaps
/// its ended and idle sessions ([`SessionReaping`]).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use muster_core::config::MusterConfig;
/// use muster_gateway::{metrics::GatewayMetrics, registry::{Registry, RegistryOptions}, supervisor::{Supervisor, SupervisorConfig}};
///
/// let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
/// let metrics = Arc::new(GatewayMetrics::new());
/// Supervisor::new(Arc::clone(&registry))
///     .with_config(SupervisorConfig::from_env())
///     .with_metrics(metrics)
///     .start()
///     .await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Supervisor {
    registry: Arc<Registry>,
    config: SupervisorConfig,
    reaping: SessionReaping,
    secrets: Arc<dyn SecretSource>,
    metrics: Option<Arc<GatewayMetrics>>,
}

/// What each supervisor task holds: the registry (weakly: a supervisor ends with it), how it
/// retries, where it reads Secrets and where it counts.
#[derive(Clone)]
struct Watched {
    registry: Weak<Registry>,
    config: SupervisorConfig,
    secrets: Arc<dyn SecretSource>,
    metrics: Option<Arc<GatewayMetrics>>,
}

impl Supervisor {
    /// The supervision of `registry`'s servers with the default [`SupervisorConfig`] and
    /// [`SessionReaping`], reading no Secret until [`Supervisor::with_secrets`].
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            config: SupervisorConfig::default(),
            reaping: SessionReaping::default(),
            secrets: Arc::new(NoSecrets),
            metrics: None,
        }
    }

    /// Retries and checks health as `config` says.
    #[must_use]
    pub fn with_config(mut self, config: SupervisorConfig) -> Self {
        self.config = config;
        self
    }

    /// Reaps the registry's ended and idle sessions as `reaping` says.
    #[must_use]
    pub fn with_session_reaping(mut self, reaping: SessionReaping) -> Self {
        self.reaping = reaping;
        self
    }

    /// Reads the Secrets the servers name (`headersFrom`, token-exchange client credentials)
    /// from `secrets`, each time a server connects.
    #[must_use]
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretSource>) -> Self {
        self.secrets = secrets;
        self
    }

    /// Counts connection failures and reconnects in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<GatewayMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Starts a supervisor for every server of the registry that has none: those that start
    /// automatically connect, the others wait for `core_service_start`. Returns once each has
    /// made its first attempt. The first call also starts what runs while the registry lives: a
    /// supervisor for each server added or changed later, and the reaping of ended sessions.
    pub async fn start(&self) {
        let registry = &self.registry;
        let watched = Watched {
            registry: Arc::downgrade(registry),
            config: self.config,
            secrets: Arc::clone(&self.secrets),
            metrics: self.metrics.clone(),
        };
        if registry.mark_started() {
            registry.spawn_session_reaper(self.reaping);
            tokio::spawn(supervise_new_servers(watched.clone(), registry.changes().listen()));
        }
        let first_attempts: Vec<_> = registry
            .take_unsupervised()
            .into_iter()
            .map(|server| spawn(&watched, server))
            .collect();
        futures::future::join_all(first_attempts).await;
    }
}

/// Starts the supervisor of `server`; the receiver is answered after its first attempt.
fn spawn(watched: &Watched, server: Unsupervised) -> oneshot::Receiver<()> {
    let (done, first_attempt) = oneshot::channel();
    tokio::spawn(supervise(
        watched.clone(),
        server.key,
        server.commands,
        server.autostart,
        done,
    ));
    first_attempt
}

/// After each change of the registry, supervises the servers added or changed since.
async fn supervise_new_servers(watched: Watched, mut changes: tokio::sync::broadcast::Receiver<Change>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match changes.recv().await {
            Ok(Change::Lists) | Err(RecvError::Lagged(_)) => {}
            Ok(_) => continue,
            Err(RecvError::Closed) => break,
        }
        let Some(registry) = watched.registry.upgrade() else {
            break;
        };
        for server in registry.take_unsupervised() {
            drop(spawn(&watched, server));
        }
    }
}

/// Runs the supervisor of server `key.name` until the registry drops it. `first_attempt` is
/// answered once the first connection attempt (or the decision not to start) is done.
async fn supervise(
    watched: Watched,
    key: Key,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut want_running: bool,
    first_attempt: oneshot::Sender<()>,
) {
    let Watched {
        registry,
        config,
        secrets,
        metrics,
    } = watched;
    let mut first_attempt = Some(first_attempt);
    let mut failures: u32 = 0;
    let mut connected_before = false;
    loop {
        let refusal = with_registry(&registry, |r| r.definition(&key).and_then(|d| r.refusal(&d))).flatten();
        if let Some(reason) = refusal {
            // Refused where the gateway runs (a stdio server in Kubernetes mode): Failed with
            // the reason, started or not, and not tried until its definition changes (which
            // gives it a new supervisor).
            tracing::warn!(server = %key.name, %reason, "MCPServer refused");
            with_registry(&registry, |r| {
                r.emit(Event::mcp_server(&key.name, reasons::MCP_SERVER_FAILED, reason.clone()));
                r.mark(&key, |rt| {
                    rt.state = MCPServerState::Failed;
                    rt.health = MCPServerHealth::Unknown;
                    rt.last_error = Some(reason.clone());
                    rt.next_retry_after = None;
                });
            });
            if let Some(tx) = first_attempt.take() {
                let _ = tx.send(());
            }
            match commands.recv().await {
                Some(Command::Stop) => want_running = false,
                Some(Command::Start | Command::Restart) => want_running = true,
                None => return,
            }
            continue;
        }
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
        // The values of its headersFrom, read from their Secrets each time it connects.
        let connecting = match secret_references(&*secrets, &definition).await {
            Ok(connecting) => connecting,
            Err((class, problem)) => {
                failures += 1;
                tracing::warn!(server = %key.name, %problem, "cannot read the server's Secret references");
                let retry = fail_until_retry(
                    &registry,
                    &key,
                    class,
                    &problem,
                    failures,
                    config,
                    &mut first_attempt,
                    &mut commands,
                );
                match retry.await {
                    None => return,
                    Some(run) => want_running = run,
                }
                continue;
            }
        };
        let (changes_tx, mut changes) = mpsc::unbounded_channel();
        let attempt = tokio::select! {
            result = tracing::Instrument::instrument(
                UpstreamConnection::connect(&connecting, Some(changes_tx), egress),
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
        if definition.uses_callers_identity() {
            // Served per session with each caller's identity: the probe only shows the endpoint
            // answers (a 401, or a connection that is not kept); no connection of the gateway's.
            let reachable = match &attempt {
                Ok(conn) => {
                    conn.close();
                    true
                }
                Err(e) => matches!(e, UpstreamError::AuthRequired { .. }),
            };
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
                let Some(Some(conn)) = with_registry(&registry, |r| r.install(&key, conn, connected_before)) else {
                    return;
                };
                if let Some(metrics) = metrics.as_ref().filter(|_| connected_before) {
                    metrics.record_reconnect(&key.name);
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
                if let Some(metrics) = &metrics {
                    metrics.record_connect_failure(&key.name);
                }
                with_registry(&registry, |r| {
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
            match back_off(&registry, &key, failures, config, &mut commands).await {
                None => return,
                Some(run) => want_running = run,
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

/// `definition` as the gateway connects to it, its `headersFrom` values read from `secrets`;
/// else why it cannot connect (a Ready reason and the problem). A token exchange whose client
/// credentials cannot be read fails every caller alike, and so fails here too.
async fn secret_references(
    secrets: &dyn crate::secrets::SecretSource,
    definition: &muster_core::crd::MCPServer,
) -> Result<muster_core::crd::MCPServer, (&'static str, String)> {
    let classify = |problem: SecretError, class| (problem.ready_reason(class), problem.to_string());
    let connecting = with_secret_headers(secrets, definition.clone(), HeadersFor::Gateway)
        .await
        .map_err(|problem| classify(problem, SECRET_REFERENCE))?;
    if definition.uses_callers_identity()
        && let Some(problem) = crate::auth::sso::credentials_problem(secrets, definition).await
    {
        return Err(classify(problem, TOKEN_EXCHANGE_CREDENTIALS));
    }
    Ok(connecting)
}

/// Marks the server of `key` Failed for `problem`, which stops every attempt before it is
/// made (a Secret that cannot be read), and waits its backoff: `None` when the registry is
/// gone, else whether to keep running (`false` after a stop).
#[allow(clippy::too_many_arguments)]
async fn fail_until_retry(
    registry: &Weak<Registry>,
    key: &Key,
    class: &str,
    problem: &str,
    failures: u32,
    config: SupervisorConfig,
    first_attempt: &mut Option<oneshot::Sender<()>>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> Option<bool> {
    with_registry(registry, |r| {
        r.fail_shared(&key.name, class, problem);
        r.mark(key, |rt| rt.consecutive_failures = failures);
    })?;
    if let Some(tx) = first_attempt.take() {
        let _ = tx.send(());
    }
    back_off(registry, key, failures, config, commands).await
}

/// Waits the reconnect backoff after `failures` consecutive failures, the next attempt's time
/// shown in the server's status (a command ends the wait): `None` when the registry is gone,
/// else whether to keep running (`false` after a stop).
async fn back_off(
    registry: &Weak<Registry>,
    key: &Key,
    failures: u32,
    config: SupervisorConfig,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> Option<bool> {
    let delay = config.backoff(failures.max(1));
    let at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_else(|_| chrono::Duration::seconds(120));
    with_registry(registry, |r| r.mark(key, |rt| rt.next_retry_after = Some(at)))?;
    tokio::select! {
        () = tokio::time::sleep(delay) => Some(true),
        command = commands.recv() => match command {
            Some(Command::Stop) => Some(false),
            Some(Command::Start | Command::Restart) => Some(true),
            None => None,
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
