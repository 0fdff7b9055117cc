//! The registry: every MCPServer with its runtime state and connection, every Workflow, and the
//! catalogue snapshot built from them.
//!
//! The registry names what it aggregates ([`NameRules`]) and rebuilds the catalogue once per
//! change (a server connected or failed), never per request. Requests read the current snapshot
//! with [`Registry::catalog`] and route calls with [`Registry::dispatch`]: a downstream tool goes
//! to its server's connection under the server's own name, a core tool to [`crate::core_tools`].

mod sessions;
pub use sessions::SESSION_IDLE;

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use chrono::{DateTime, Utc};
use muster_catalog::{Catalog, CatalogSource, toolset::Presets};
use muster_core::ToolOutput;
use muster_core::{BoxToolService, SessionId, crd::ValidationErrors};
use muster_core::{
    NameRules, ToolCall, ToolError, ToolKind,
    config::MusterConfig,
    crd::{
        Condition, ConditionStatus, MCPServer, MCPServerHealth, MCPServerState, MCPServerStatus, READY_CONDITION,
        ServerType, Workflow,
    },
};
use muster_workflow::{
    engine::{CompiledWorkflow, WorkflowEngine},
    record::{ExecutionStore, MemoryExecutionStore},
    tools::{Applied as WorkflowApplied, Availability, LateBoundTools, WorkflowTable, WorkflowTools},
};
use rmcp::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

use crate::{
    core_tools,
    events::{Author, Event, EventDetails, EventLog, reasons},
    store::ConfigStore,
    supervisor::{self, Command, Key, SupervisorConfig},
    surface::{self, Contribution},
    upstream::SharedConnection,
    workflows::{self, EventObserver},
};

/// The runtime state of one MCPServer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerRuntime {
    /// Its state.
    pub state: MCPServerState,
    /// Its health (the last MCP ping).
    pub health: MCPServerHealth,
    /// The error of its most recent operation.
    pub last_error: Option<String>,
    /// When it last connected.
    pub last_connected: Option<DateTime<Utc>>,
    /// When the last connection attempt was made.
    pub last_attempt: Option<DateTime<Utc>>,
    /// Connection attempts that failed in a row.
    pub consecutive_failures: u32,
    /// When the next attempt is due, while one is scheduled.
    pub next_retry_after: Option<DateTime<Utc>>,
    /// How many times it was (re)connected after its first connection.
    pub restart_count: u32,
    /// How many tools it offers.
    pub tool_count: usize,
    /// When the state last changed.
    pub state_since: DateTime<Utc>,
    /// The HTTP status the endpoint answered the last failed attempt with, when it answered.
    pub last_failure_http_status: Option<u16>,
    /// The `WWW-Authenticate` challenge of a server that wants people to sign in.
    pub auth_challenge: Option<String>,
    /// The server whose description of the same authorization server is used instead of this
    /// one's, while this one is refused for it (`AuthorizationServerConflict`).
    pub conflicts_with: Option<String>,
    /// For a server Failed by a failure every caller shares (its token exchange), the class of
    /// the failure: the Ready reason (`TokenExchangeEndpoint`, `TokenExchangeCredentials`,
    /// `TokenExchangeConnector`).
    pub failure_class: Option<String>,
    /// For a server served per session (single sign-on), how: the mechanism, and for an exchange
    /// its endpoint and connector.
    pub served_per_session: Option<String>,
    /// When a session's token was last exchanged for this server.
    pub last_exchange: Option<DateTime<Utc>>,
}

impl ServerRuntime {
    fn initial(server: &MCPServer) -> Self {
        let state = if server.spec.suspended || !starts_automatically(server) {
            MCPServerState::Stopped
        } else {
            MCPServerState::Starting
        };
        Self {
            state,
            health: MCPServerHealth::Unknown,
            last_error: None,
            last_connected: None,
            last_attempt: None,
            consecutive_failures: 0,
            next_retry_after: None,
            restart_count: 0,
            tool_count: 0,
            state_since: Utc::now(),
            last_failure_http_status: None,
            auth_challenge: None,
            conflicts_with: None,
            failure_class: None,
            served_per_session: None,
            last_exchange: None,
        }
    }
}

impl ServerRuntime {
    /// The CRD status of a server in this runtime state (`suspended` from its spec), with the
    /// `Ready` condition: True while reachable, its reason the state in one word, its message
    /// explaining the state and, for a Failed server with a retry scheduled, the next attempt.
    pub fn to_status(&self, suspended: bool) -> MCPServerStatus {
        let ready = self.state.is_ready();
        let reason = if suspended && !ready {
            "Suspended".to_owned()
        } else if self.state == MCPServerState::Failed && self.conflicts_with.is_some() {
            "AuthorizationServerConflict".to_owned()
        } else if let Some(class) = self
            .failure_class
            .as_ref()
            .filter(|_| self.state == MCPServerState::Failed)
        {
            class.clone()
        } else {
            self.state.as_str().replace(' ', "")
        };
        let mut message = match self.state {
            MCPServerState::Running => "The server process is running and connected.".to_owned(),
            MCPServerState::Connected if self.served_per_session.is_some() => format!(
                "{} A session is connected.",
                self.served_per_session.as_deref().unwrap_or_default()
            ),
            MCPServerState::Connected => "The server is reachable and connected.".to_owned(),
            MCPServerState::Starting => "The server process is starting.".to_owned(),
            MCPServerState::Connecting => "A connection is being established.".to_owned(),
            MCPServerState::Stopped if suspended => "The server is suspended (spec.suspended=true).".to_owned(),
            MCPServerState::Stopped => "The server is stopped.".to_owned(),
            MCPServerState::Disconnected => "The server was disconnected on request.".to_owned(),
            MCPServerState::Failed => format!(
                "The server cannot be reached: {}.",
                self.last_error
                    .as_deref()
                    .unwrap_or("unknown error")
                    .trim_end_matches('.')
            ),
            MCPServerState::AwaitingSession if self.served_per_session.is_some() => {
                let mut message = self.served_per_session.clone().unwrap_or_default();
                message.push_str(" No session is connected");
                match self.last_exchange {
                    Some(at) => message.push_str(&format!(
                        "; the last exchange succeeded at {}.",
                        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )),
                    None => message.push('.'),
                }
                message
            }
            other => format!("The server is {other}."),
        };
        if let Some(at) = self.next_retry_after {
            message.push_str(&format!(
                " Next attempt at {}.",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        let condition = Condition {
            condition_type: READY_CONDITION.to_owned(),
            status: if ready {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason,
            message,
            last_transition_time: self.state_since,
            observed_generation: None,
        };
        MCPServerStatus {
            state: Some(self.state),
            health: Some(self.health),
            last_error: self.last_error.clone(),
            last_connected: self.last_connected,
            restart_count: self.restart_count,
            consecutive_failures: self.consecutive_failures,
            last_attempt: self.last_attempt,
            next_retry_after: self.next_retry_after,
            last_failure_http_status: self.last_failure_http_status,
            conditions: vec![condition],
            ..MCPServerStatus::default()
        }
    }
}

/// Whether the gateway connects to `server` when it starts: remote servers always, stdio servers
/// with `autoStart: true`; a suspended server never.
pub fn starts_automatically(server: &MCPServer) -> bool {
    !server.spec.suspended
        && match server.spec.server_type {
            Some(ServerType::Stdio) | None => server.spec.auto_start,
            Some(_) => true,
        }
}

#[derive(Debug)]
struct ServerSlot {
    definition: MCPServer,
    /// When the registry first learned of the server (lower is older), for the one description
    /// per issuer rule.
    since: u64,
    runtime: ServerRuntime,
    connection: Option<SharedConnection>,
    control: Option<mpsc::UnboundedSender<Command>>,
    generation: u64,
}

/// One MCPServer as the registry sees it now.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerView {
    /// Its definition.
    pub definition: MCPServer,
    /// Its runtime state.
    pub runtime: ServerRuntime,
}

/// Every definition the gateway serves, their runtime state, and the catalogue built from them.
#[derive(Debug)]
pub struct Registry {
    config: RwLock<MusterConfig>,
    names: NameRules,
    sources: std::sync::Mutex<Sources>,
    presets: Arc<Presets>,
    servers: RwLock<BTreeMap<String, ServerSlot>>,
    /// The `workflow_<name>` tools: the workflow table, and the engine that runs them.
    workflows: WorkflowTools,
    availability: RwLock<BTreeMap<String, Availability>>,
    /// What workflow steps call: the tool stack, bound weakly once built.
    workflow_steps: LateBoundTools,
    executions: Arc<dyn ExecutionStore>,
    catalog: RwLock<Arc<Catalog>>,
    sessions: std::sync::Mutex<Vec<Peer<RoleServer>>>,
    /// The connections sessions hold to servers people sign in to, by session then server.
    session_connections: RwLock<BTreeMap<String, BTreeMap<String, SharedConnection>>>,
    /// The catalogue each of those sessions sees, built on first use after a change.
    session_catalogs: RwLock<BTreeMap<String, Arc<Catalog>>>,
    /// The client of each MCP session, for telling one session its lists changed.
    session_peers: std::sync::Mutex<BTreeMap<String, Vec<Peer<RoleServer>>>>,
    /// How many servers the registry has learned of (their arrival order).
    arrivals: std::sync::atomic::AtomicU64,
    /// When each session last made a request, for idle reaping.
    last_seen: std::sync::Mutex<BTreeMap<String, std::time::Instant>>,
    sign_in: Option<Arc<crate::auth::SignInService>>,
    /// The per-session connections of single sign-on servers.
    sso: crate::auth::sso::SsoService,
    supervision: SupervisorConfig,
    started: std::sync::atomic::AtomicBool,
    events: EventLog,
    /// The sessions following the events (`core_events` with `follow: true`).
    event_followers: crate::events::EventFollowers,
    store: Option<ConfigStore>,
    /// The concurrency limits of sessions and servers (`aggregator.limits`, read at start).
    limits: Arc<muster_upstream::limits::CallLimits>,
    /// Cancelled when a shutdown's deadline ends the calls still running.
    calls_ended: tokio_util::sync::CancellationToken,
    /// The metrics served at `/metrics`.
    metrics: Arc<crate::metrics::GatewayMetrics>,
}

/// Which file of the config directory defined which server and workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sources {
    pub(crate) servers: BTreeMap<std::path::PathBuf, String>,
    pub(crate) workflows: BTreeMap<std::path::PathBuf, String>,
}

/// The parts of a registry besides its definitions.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RegistryOptions {
    /// Reconnect backoff and health checks.
    pub supervision: SupervisorConfig,
    /// Where events go (in memory unless a config directory's log is given).
    pub events: Option<EventLog>,
    /// Where definition writes go (none: changes are kept in memory only).
    pub store: Option<ConfigStore>,
    /// Where workflow execution records go (in memory unless given).
    pub executions: Option<Arc<dyn ExecutionStore>>,
    /// Where the Secrets servers name are read (none: every read fails naming the Secret).
    pub secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
}

impl RegistryOptions {
    /// Sets the reconnect backoff and health checks.
    pub fn with_supervision(mut self, supervision: SupervisorConfig) -> Self {
        self.supervision = supervision;
        self
    }

    /// Keeps events in `dir/events/` and workflow run records in `dir/workflow_executions/`
    /// (creating them; a run an earlier process left unfinished is marked failed), as filesystem
    /// mode does beside its definitions. Refused when either cannot be opened.
    pub fn with_data_dir(self, dir: &std::path::Path) -> Result<Self, crate::error::GatewayError> {
        let events = EventLog::open(dir).map_err(|source| crate::error::GatewayError::DataDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let executions = crate::workflows::open_executions(dir, &events)?;
        Ok(self.with_events(events).with_executions(executions))
    }

    /// Sets where events go.
    pub fn with_events(mut self, events: EventLog) -> Self {
        self.events = Some(events);
        self
    }

    /// Sets where definition writes go.
    pub fn with_store(mut self, store: ConfigStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets where workflow execution records go.
    pub fn with_executions(mut self, executions: Arc<dyn ExecutionStore>) -> Self {
        self.executions = Some(executions);
        self
    }

    /// Sets where the Secrets servers name are read.
    pub fn with_secrets(mut self, secrets: Arc<dyn crate::secrets::SecretSource>) -> Self {
        self.secrets = Some(secrets);
        self
    }
}

/// What [`Registry::apply_server`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// A new server; its supervisor started.
    Added,
    /// A changed definition; the server was reconnected with it.
    Updated,
    /// The same definition; nothing was touched.
    Unchanged,
}

impl Registry {
    /// A registry of `servers` and `workflows` under `config`; nothing is connected yet. Refused
    /// when a configured toolset preset is invalid or the grant store cannot be opened.
    pub fn new(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
        options: RegistryOptions,
    ) -> Result<Arc<Self>, crate::error::GatewayError> {
        let supervision = options.supervision;
        let presets = Arc::new(Presets::from_config(&config.toolset_presets)?);
        let names = NameRules::new(config.aggregator.muster_prefix.clone())
            .unprefixed(config.aggregator.prefix_mode == muster_core::config::PrefixMode::Never);
        let arrivals = servers.len() as u64;
        let servers = servers
            .into_iter()
            .zip(0u64..)
            .map(|(s, since)| {
                let slot = ServerSlot {
                    since,
                    runtime: ServerRuntime::initial(&s),
                    definition: s,
                    connection: None,
                    control: None,
                    generation: 0,
                };
                (slot.definition.metadata.name.clone(), slot)
            })
            .collect();
        let events = options.events.unwrap_or_else(EventLog::in_memory);
        let sign_in = crate::auth::SignInService::from_config(&config)?;
        let sso =
            crate::auth::sso::SsoService::new(options.secrets.unwrap_or_else(|| Arc::new(crate::secrets::NoSecrets)));
        let table = Arc::new(WorkflowTable::new());
        for workflow in workflows {
            let name = workflow.metadata.name.clone();
            if let Err(errors) = table.apply(workflow) {
                let message = format!("Workflow {name} is invalid: {}", errors.to_lines().join("; "));
                tracing::warn!(workflow = %name, "{message}");
                events.emit(Event::workflow(&name, reasons::WORKFLOW_VALIDATION_FAILED, message));
            }
        }
        let limits = Arc::new(muster_upstream::limits::CallLimits::new(
            config.aggregator.limits.clone(),
        ));
        let metrics = Arc::new(crate::metrics::GatewayMetrics::new());
        let executions: Arc<dyn ExecutionStore> = Arc::new(crate::metrics::CountingStore::new(
            options
                .executions
                .unwrap_or_else(|| Arc::new(MemoryExecutionStore::new())),
            Arc::clone(&metrics),
        ));
        let workflow_steps = LateBoundTools::new();
        let run_events: Arc<dyn muster_workflow::engine::RunObserver> = Arc::new(EventObserver::new(events.clone()));
        let engine = WorkflowEngine::new(BoxToolService::new(workflow_steps.clone()))
            .with_store(Arc::clone(&executions))
            .with_observer(Arc::new(crate::metrics::MeteredObserver::new(
                Arc::clone(&metrics),
                Some(run_events),
            )));
        let registry = Arc::new(Self {
            metrics,
            limits,
            calls_ended: tokio_util::sync::CancellationToken::new(),
            config: RwLock::new(config),
            sources: std::sync::Mutex::new(Sources::default()),
            names,
            presets,
            servers: RwLock::new(servers),
            workflows: WorkflowTools::new(table, engine),
            availability: RwLock::new(BTreeMap::new()),
            workflow_steps,
            executions,
            catalog: RwLock::new(Arc::new(Catalog::empty())),
            sessions: std::sync::Mutex::new(Vec::new()),
            session_connections: RwLock::new(BTreeMap::new()),
            session_catalogs: RwLock::new(BTreeMap::new()),
            session_peers: std::sync::Mutex::new(BTreeMap::new()),
            arrivals: std::sync::atomic::AtomicU64::new(arrivals),
            last_seen: std::sync::Mutex::new(BTreeMap::new()),
            sign_in,
            sso,
            supervision,
            started: std::sync::atomic::AtomicBool::new(false),
            events,
            event_followers: crate::events::EventFollowers::default(),
            store: options.store,
        });
        registry.rebuild_catalog();
        let source: std::sync::Weak<dyn crate::metrics::MetricsSource> = Arc::downgrade(&registry) as _;
        registry.metrics.set_source(source);
        Ok(registry)
    }

    /// The metrics of this gateway (served at `/metrics`).
    pub fn metrics(&self) -> &Arc<crate::metrics::GatewayMetrics> {
        &self.metrics
    }

    /// Every defined server's name and state, without copying definitions (for the metrics).
    pub fn server_states(&self) -> Vec<(String, MCPServerState)> {
        self.read_servers()
            .iter()
            .map(|(name, slot)| (name.clone(), slot.runtime.state))
            .collect()
    }

    /// The event log.
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The sessions following the events.
    pub fn event_followers(&self) -> &crate::events::EventFollowers {
        &self.event_followers
    }

    /// Records an event.
    pub fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    /// Where definition writes go, in filesystem mode.
    pub fn store(&self) -> Option<&ConfigStore> {
        self.store.as_ref()
    }

    /// The toolset presets (built-in and configured).
    pub fn presets(&self) -> &Arc<Presets> {
        &self.presets
    }

    /// The configuration in force.
    pub fn config(&self) -> MusterConfig {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `aggregator.exposure`, read without copying the configuration (on every request).
    pub fn exposure(&self) -> muster_core::config::Exposure {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .aggregator
            .exposure
    }

    /// Replaces the running configuration (a new listener address takes effect at the next
    /// start; the name rules and presets are fixed at start).
    pub fn set_config(&self, config: MusterConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// Which file defined which server and workflow, as last loaded.
    pub(crate) fn sources(&self) -> Sources {
        self.sources.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records which file defined which server and workflow.
    pub(crate) fn set_sources(&self, sources: Sources) {
        *self.sources.lock().unwrap_or_else(|e| e.into_inner()) = sources;
    }

    /// The naming rules in force.
    pub fn names(&self) -> &NameRules {
        &self.names
    }

    /// The current catalogue snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Starts a supervisor for every server: those that start automatically connect, the others
    /// wait for `core_service_start`. Returns once each has made its first attempt.
    pub async fn start(self: &Arc<Self>) {
        if !self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.spawn_session_reaper();
        }
        let first_attempts: Vec<oneshot::Receiver<()>> = {
            let mut servers = self.write_servers();
            servers
                .iter_mut()
                .filter(|(_, slot)| slot.control.is_none())
                .map(|(name, slot)| self.spawn_supervisor(name, slot))
                .collect()
        };
        futures::future::join_all(first_attempts).await;
    }

    fn spawn_supervisor(self: &Arc<Self>, name: &str, slot: &mut ServerSlot) -> oneshot::Receiver<()> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        slot.control = Some(tx);
        let key = Key {
            name: name.to_owned(),
            generation: slot.generation,
        };
        let autostart = starts_automatically(&slot.definition);
        tokio::spawn(supervisor::supervise(
            Arc::downgrade(self),
            key,
            rx,
            autostart,
            self.supervision,
            done_tx,
        ));
        done_rx
    }

    /// Adds server `definition`, or replaces the definition of the server of that name (its
    /// connection is closed and it reconnects with the new one). The others are untouched.
    pub fn apply_server(self: &Arc<Self>, definition: MCPServer) -> Applied {
        self.apply_server_as(definition, None)
    }

    /// As [`Self::apply_server`], for `author` (a write through a core tool): its event and log
    /// line name the author.
    pub fn apply_server_as(self: &Arc<Self>, definition: MCPServer, author: Option<&Author>) -> Applied {
        let name = definition.metadata.name.clone();
        let mut issuers_before = self.server_issuer(&name).into_iter().collect::<Vec<_>>();
        issuers_before.extend(crate::auth::issuers::Description::of(&definition).map(|d| d.issuer));
        let applied = {
            let mut servers = self.write_servers();
            let (applied, generation, since) = match servers.get(&name) {
                Some(old)
                    if old.definition.spec == definition.spec && old.definition.metadata == definition.metadata =>
                {
                    return Applied::Unchanged;
                }
                Some(old) => (Applied::Updated, old.generation + 1, old.since),
                None => (
                    Applied::Added,
                    0,
                    self.arrivals.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                ),
            };
            // Dropping the old slot's control channel ends its supervisor, which closes its
            // connection; its late updates carry an old generation and are ignored.
            let mut slot = ServerSlot {
                since,
                runtime: ServerRuntime::initial(&definition),
                definition,
                connection: None,
                control: None,
                generation,
            };
            if self.started.load(std::sync::atomic::Ordering::SeqCst) {
                drop(self.spawn_supervisor(&name, &mut slot));
            }
            servers.insert(name.clone(), slot);
            applied
        };
        self.recheck_issuer_peers(&name, &issuers_before);
        match author {
            Some(author) => tracing::info!(server = %name, ?applied, %author, "MCPServer definition applied"),
            None => tracing::info!(server = %name, ?applied, "MCPServer definition applied"),
        }
        let reason = match applied {
            Applied::Added => reasons::MCP_SERVER_CREATED,
            _ => reasons::MCP_SERVER_UPDATED,
        };
        self.events.emit(authored(
            Event::mcp_server(
                &name,
                reason,
                format!(
                    "MCPServer {name} {}",
                    match applied {
                        Applied::Added => "created",
                        _ => "updated",
                    }
                ),
            ),
            author,
        ));
        self.changed();
        applied
    }

    /// Removes server `name`: its supervisor stops and its connection closes. `false` when no
    /// such server is defined.
    pub fn remove_server(&self, name: &str) -> bool {
        self.remove_server_as(name, None)
    }

    /// As [`Self::remove_server`], for `author` (a write through a core tool).
    pub fn remove_server_as(&self, name: &str, author: Option<&Author>) -> bool {
        let issuers = self.server_issuer(name).into_iter().collect::<Vec<_>>();
        let removed = self.write_servers().remove(name);
        self.recheck_issuer_peers(name, &issuers);
        if let Some(slot) = &removed
            && let Some(conn) = &slot.connection
        {
            conn.close();
        }
        if removed.is_some() {
            match author {
                Some(author) => tracing::info!(server = %name, %author, "MCPServer removed"),
                None => tracing::info!(server = %name, "MCPServer removed"),
            }
            self.events.emit(authored(
                Event::mcp_server(name, reasons::MCP_SERVER_DELETED, format!("MCPServer {name} deleted")),
                author,
            ));
            self.changed();
        }
        removed.is_some()
    }

    /// The issuer server `name` pins, if it pins one.
    fn server_issuer(&self, name: &str) -> Option<String> {
        self.read_servers()
            .get(name)
            .and_then(|s| crate::auth::issuers::Description::of(&s.definition))
            .map(|d| d.issuer)
    }

    /// Whether server `name` describes its authorization server otherwise than the server whose
    /// description is used for that issuer (one description per issuer).
    pub fn issuer_conflict(&self, name: &str) -> Option<crate::auth::issuers::AuthorizationServerConflict> {
        let servers = self.read_servers();
        crate::auth::issuers::conflict(servers.values().map(|s| (&s.definition, s.since)), name)
    }

    /// After server `changed` (naming `issuers`) was added, changed or removed, the other servers
    /// of those issuers that wait for a sign-in or are refused for a conflict try again: a
    /// conflict may have begun or ended.
    fn recheck_issuer_peers(&self, changed: &str, issuers: &[String]) {
        if issuers.is_empty() {
            return;
        }
        let peers: Vec<String> = self
            .read_servers()
            .values()
            .filter(|s| s.definition.metadata.name != changed)
            .filter(|s| matches!(s.runtime.state, MCPServerState::AuthRequired | MCPServerState::Failed))
            .filter(|s| {
                crate::auth::issuers::Description::of(&s.definition).is_some_and(|d| issuers.contains(&d.issuer))
            })
            .map(|s| s.definition.metadata.name.clone())
            .collect();
        for peer in peers {
            self.command(&peer, Command::Restart);
        }
    }

    /// Adds or replaces a Workflow, compiling it first: refused (and nothing changes) when it
    /// breaks a rule or a template or jq program does not compile; `false` when it was already
    /// defined exactly so.
    pub fn apply_workflow(&self, workflow: Workflow) -> Result<bool, ValidationErrors> {
        self.apply_workflow_as(workflow, None)
    }

    /// As [`Self::apply_workflow`], for `author` (a write through a core tool): its event and
    /// log line name the author.
    pub fn apply_workflow_as(&self, workflow: Workflow, author: Option<&Author>) -> Result<bool, ValidationErrors> {
        let name = workflow.metadata.name.clone();
        let compiled = Arc::new(CompiledWorkflow::compile(workflow)?);
        for warning in compiled.warnings() {
            tracing::warn!(workflow = %name, "{warning}");
        }
        let steps = compiled.workflow().spec.steps.len();
        let (reason, message) = match self.workflows.table().apply_compiled(compiled) {
            WorkflowApplied::Added => (
                reasons::WORKFLOW_CREATED,
                format!("Workflow {name} successfully created with {steps} steps"),
            ),
            WorkflowApplied::Updated => (
                reasons::WORKFLOW_UPDATED,
                format!("Workflow {name} successfully updated with {steps} steps"),
            ),
            _ => return Ok(false),
        };
        if let Some(author) = author {
            tracing::info!(workflow = %name, %author, "{message}");
        }
        self.events
            .emit(authored(Event::workflow(&name, reason, message), author));
        self.changed();
        Ok(true)
    }

    /// Removes a Workflow; `false` when none has that name.
    pub fn remove_workflow(&self, name: &str) -> bool {
        self.remove_workflow_as(name, None)
    }

    /// As [`Self::remove_workflow`], for `author` (a write through a core tool).
    pub fn remove_workflow_as(&self, name: &str, author: Option<&Author>) -> bool {
        let removed = self.workflows.table().remove(name).is_some();
        if removed {
            if let Some(author) = author {
                tracing::info!(workflow = %name, %author, "Workflow removed");
            }
            self.events.emit(authored(
                Event::workflow(name, reasons::WORKFLOW_DELETED, format!("Workflow {name} deleted")),
                author,
            ));
            self.changed();
        }
        removed
    }

    /// Asks the supervisor of `name` to start, stop or restart it. `false` when no such server
    /// is supervised.
    pub(crate) fn command(&self, name: &str, command: Command) -> bool {
        self.read_servers()
            .get(name)
            .and_then(|s| s.control.as_ref())
            .is_some_and(|c| c.send(command).is_ok())
    }

    /// Stops every supervisor and closes every connection (stdio servers are stopped).
    pub async fn shutdown(&self) {
        let connections: Vec<SharedConnection> = self
            .write_servers()
            .values_mut()
            .filter_map(|s| {
                s.control = None;
                s.runtime.state = MCPServerState::Stopped;
                s.connection.take()
            })
            .collect();
        for conn in &connections {
            conn.close();
        }
        // Give the transports a moment to end their processes.
        for conn in connections {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.closed()).await;
        }
        self.rebuild_catalog();
    }

    /// Registers an MCP client session to notify when the catalogue changes.
    pub fn add_session(&self, peer: Peer<RoleServer>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|p| !p.is_transport_closed());
        sessions.push(peer);
    }

    /// Ends every call still running: each answers that the gateway is shutting down (a
    /// shutdown's deadline).
    pub fn end_calls(&self) {
        self.calls_ended.cancel();
    }

    /// Resolves once [`Registry::end_calls`] has been called.
    pub async fn calls_ended(&self) {
        self.calls_ended.cancelled().await;
    }

    /// The concurrency limits of sessions and servers.
    pub fn call_limits(&self) -> &Arc<muster_upstream::limits::CallLimits> {
        &self.limits
    }

    /// `conn` bounded by its server's concurrency limit: every connection to a server is
    /// installed through here.
    pub(crate) fn limited(&self, conn: crate::upstream::UpstreamConnection) -> SharedConnection {
        let limiter = self.limits.server(conn.server());
        Arc::new(conn.with_limiter(limiter))
    }

    /// The per-session connections of single sign-on servers.
    pub fn sso(&self) -> &crate::auth::sso::SsoService {
        &self.sso
    }

    /// Puts server `name` in Failed for a failure every caller shares (`class` is the Ready
    /// reason), unless it is already.
    pub(crate) fn fail_shared(&self, name: &str, class: &str, message: &str) {
        let changed = {
            let mut servers = self.write_servers();
            match servers.get_mut(name) {
                Some(slot)
                    if slot.runtime.last_error.as_deref() != Some(message)
                        || slot.runtime.state != MCPServerState::Failed =>
                {
                    slot.runtime.state = MCPServerState::Failed;
                    slot.runtime.state_since = Utc::now();
                    slot.runtime.last_error = Some(message.to_owned());
                    slot.runtime.failure_class = Some(class.to_owned());
                    true
                }
                _ => false,
            }
        };
        if changed {
            self.emit(Event::mcp_server(
                name,
                reasons::MCP_SERVER_FAILED,
                format!("MCP server {name} failed for every caller: {message}"),
            ));
        }
    }

    /// Records that a session's token was just exchanged for server `name`.
    pub(crate) fn note_exchange(&self, name: &str) {
        if let Some(slot) = self.write_servers().get_mut(name) {
            slot.runtime.last_exchange = Some(Utc::now());
        }
    }

    /// Takes server `name` out of a Failed state that a shared failure caused: it serves
    /// sessions again (`Connected` while one holds a connection, else `Awaiting Session`).
    pub(crate) fn recover_shared(&self, name: &str) {
        let mut servers = self.write_servers();
        if let Some(slot) = servers.get_mut(name)
            && slot.runtime.failure_class.is_some()
        {
            slot.runtime.failure_class = None;
            slot.runtime.last_error = None;
            slot.runtime.state = MCPServerState::AwaitingSession;
            slot.runtime.state_since = Utc::now();
        }
        drop(servers);
        self.derive_sso_state(name);
    }

    /// The sign-in service, when `aggregator.oauth.mcpClient` is enabled.
    pub fn sign_in(&self) -> Option<&Arc<crate::auth::SignInService>> {
        self.sign_in.as_ref()
    }

    /// Tells every connected client session that the tools, resources and prompts changed.
    fn notify_sessions(&self) {
        let sessions: Vec<Peer<RoleServer>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.retain(|p| !p.is_transport_closed());
            sessions.clone()
        };
        if sessions.is_empty() {
            return;
        }
        tokio::spawn(async move {
            for peer in sessions {
                let _ = peer.notify_tool_list_changed().await;
                let _ = peer.notify_resource_list_changed().await;
                let _ = peer.notify_prompt_list_changed().await;
            }
        });
    }

    /// The definition of server `name`.
    pub(crate) fn definition(&self, key: &Key) -> Option<MCPServer> {
        self.read_servers()
            .get(&key.name)
            .filter(|s| s.generation == key.generation)
            .map(|s| s.definition.clone())
    }

    /// Updates the runtime state of server `name`.
    pub(crate) fn mark(&self, key: &Key, f: impl FnOnce(&mut ServerRuntime)) {
        if let Some(slot) = self
            .write_servers()
            .get_mut(&key.name)
            .filter(|s| s.generation == key.generation)
        {
            f(&mut slot.runtime);
        }
    }

    /// Makes `conn` the connection of server `name`; `false` when the server is gone.
    pub(crate) fn install(&self, key: &Key, conn: SharedConnection, reconnect: bool) -> bool {
        let name = key.name.as_str();
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(name).filter(|s| s.generation == key.generation) else {
                return false;
            };
            let stdio = matches!(slot.definition.spec.server_type, Some(ServerType::Stdio) | None);
            slot.runtime.state = if stdio {
                MCPServerState::Running
            } else {
                MCPServerState::Connected
            };
            slot.runtime.health = MCPServerHealth::Healthy;
            slot.runtime.last_error = None;
            slot.runtime.consecutive_failures = 0;
            slot.runtime.last_failure_http_status = None;
            slot.runtime.next_retry_after = None;
            slot.runtime.last_connected = Some(Utc::now());
            slot.runtime.tool_count = conn.tools().len();
            if reconnect {
                slot.runtime.restart_count += 1;
                self.metrics.record_reconnect(name);
            }
            tracing::info!(server = %name, tools = conn.tools().len(), "connected");
            let (reason, verb) = if reconnect {
                (reasons::MCP_SERVER_RECONNECTED, "reconnected")
            } else {
                (reasons::MCP_SERVER_STARTED, "started")
            };
            self.events.emit(Event::mcp_server(
                name,
                reason,
                format!("MCP server {name} {verb}; it offers {} tools", conn.tools().len()),
            ));
            slot.connection = Some(conn);
        }
        self.changed();
        true
    }

    /// Replaces the connection of `name` with one carrying refreshed lists.
    pub(crate) fn replace_lists(&self, key: &Key, conn: SharedConnection) -> bool {
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(&key.name).filter(|s| s.generation == key.generation) else {
                return false;
            };
            slot.runtime.tool_count = conn.tools().len();
            self.events.emit(Event::mcp_server(
                &key.name,
                reasons::MCP_SERVER_TOOLS_CHANGED,
                format!(
                    "MCP server {} changed its lists; it now offers {} tools",
                    key.name,
                    conn.tools().len()
                ),
            ));
            slot.connection = Some(conn);
        }
        self.changed();
        true
    }

    /// Drops the connection of `name`, recording why.
    pub(crate) fn uninstall(&self, key: &Key, error: Option<String>, state: MCPServerState) {
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(&key.name).filter(|s| s.generation == key.generation) else {
                return;
            };
            slot.connection = None;
            slot.runtime.state = state;
            slot.runtime.state_since = Utc::now();
            slot.runtime.tool_count = 0;
            if let Some(error) = error {
                self.events.emit(
                    Event::mcp_server(
                        &key.name,
                        reasons::MCP_SERVER_FAILED,
                        format!("MCP server {} failed: {error}", key.name),
                    )
                    .with_details(EventDetails::default().with_error(error.clone())),
                );
                slot.runtime.health = MCPServerHealth::Unhealthy;
                slot.runtime.last_error = Some(error);
            } else {
                self.events.emit(Event::mcp_server(
                    &key.name,
                    reasons::MCP_SERVER_STOPPED,
                    format!("MCP server {} stopped", key.name),
                ));
                slot.runtime.health = MCPServerHealth::Unknown;
            }
        }
        self.changed();
    }

    fn changed(&self) {
        self.rebuild_catalog();
        self.notify_sessions();
    }

    /// Every MCPServer with its runtime state, by name.
    pub fn servers(&self) -> Vec<ServerView> {
        self.servers_where(|_| true)
    }

    /// The servers whose definition `keep` accepts, copying only those.
    pub fn servers_where(&self, keep: impl Fn(&MCPServer) -> bool) -> Vec<ServerView> {
        self.read_servers()
            .values()
            .filter(|s| keep(&s.definition))
            .map(|s| ServerView {
                definition: s.definition.clone(),
                runtime: s.runtime.clone(),
            })
            .collect()
    }

    /// One MCPServer with its runtime state.
    pub fn server(&self, name: &str) -> Option<ServerView> {
        self.read_servers().get(name).map(|s| ServerView {
            definition: s.definition.clone(),
            runtime: s.runtime.clone(),
        })
    }

    /// The live connection to server `name`.
    pub fn connection(&self, name: &str) -> Option<SharedConnection> {
        self.read_servers().get(name).and_then(|s| s.connection.clone())
    }

    /// Every Workflow, by name.
    pub fn workflows(&self) -> Vec<Workflow> {
        self.workflows
            .table()
            .list()
            .iter()
            .map(|w| w.workflow().clone())
            .collect()
    }

    /// One Workflow.
    pub fn workflow(&self, name: &str) -> Option<Workflow> {
        self.compiled_workflow(name).map(|w| w.workflow().clone())
    }

    /// One Workflow, compiled.
    pub fn compiled_workflow(&self, name: &str) -> Option<Arc<CompiledWorkflow>> {
        self.workflows.table().get(name)
    }

    /// Whether workflow `name` can run now, as of the current catalogue.
    pub fn workflow_availability(&self, name: &str) -> Option<Availability> {
        self.availability
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Where workflow execution records go.
    pub fn executions(&self) -> &Arc<dyn ExecutionStore> {
        &self.executions
    }

    /// Binds the tool stack workflow steps call through (the gateway's whole stack, so a step
    /// is treated like a client's call; runs are recorded in [`Registry::executions`] and their
    /// events go to the event log), and answers the stack to serve calls with.
    ///
    /// Serve every call through the answer, not through `stack`: every clone of the answer
    /// keeps the stack alive, while the registry holds it only weakly (the stack holds the
    /// registry, through its dispatcher). When the last clone is dropped, the stack goes and
    /// then the registry, with no cycle to break; a workflow called after that is refused as
    /// the gateway shutting down.
    #[must_use = "serve calls through the stack answered: it is what keeps the stack alive"]
    pub fn bind_tool_stack(&self, stack: BoxToolService) -> BoxToolService {
        self.workflow_steps.bind(stack)
    }

    /// The `workflow_<name>` tools: the workflow table and the engine that runs them, its steps
    /// calling the stack given to [`Registry::bind_tool_stack`].
    pub fn workflow_tools(&self) -> &WorkflowTools {
        &self.workflows
    }

    /// Why `name`, absent from the catalogue, cannot run: it belongs (by its exposed prefix) to a
    /// defined server that is not connected. `None` when no defined server claims it.
    pub fn unavailable_tool(&self, name: &str) -> Option<ToolError> {
        if let Some(workflow) = NameRules::workflow_of(name)
            && let Some(availability) = self.workflow_availability(workflow)
            && !availability.available
        {
            self.events.emit(Event::workflow(
                workflow,
                reasons::WORKFLOW_UNAVAILABLE,
                format!(
                    "Workflow {workflow} cannot run: missing required tools {}",
                    availability.missing.join(", ")
                ),
            ));
            return Some(workflows::unavailable(workflow, &availability.missing));
        }
        let servers = self.read_servers();
        servers
            .values()
            .filter(|s| s.connection.is_none())
            .find(|s| {
                let d = &s.definition;
                let own = d.spec.tool_prefix.as_deref().unwrap_or(&d.metadata.name);
                let mut prefixes = vec![own.to_owned()];
                if let Some(ns) = &d.metadata.namespace {
                    prefixes.push(format!("{ns}_{own}"));
                }
                if let Some(family) = &d.spec.family {
                    prefixes.push(family.name.clone());
                }
                prefixes.iter().any(|p| {
                    let head = self.names.server_tool(p, "");
                    name.starts_with(&head) && name.len() > head.len()
                })
            })
            .map(|s| ToolError::ServerUnavailable {
                server: s.definition.metadata.name.clone(),
                reason: format!(
                    "server not found among the connected servers (it is {})",
                    s.runtime.state
                ),
            })
    }

    /// Runs `call`: a downstream tool on its server, a core tool here.
    pub async fn dispatch(self: &Arc<Self>, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let catalog = self.catalog_for(&call.ctx.session);
        let entry = catalog
            .tool(&call.name)
            .ok_or_else(|| ToolError::not_found(&call.name))?;
        match entry.kind {
            ToolKind::Tool => {
                let mut arguments = call.arguments;
                let (server, tool) = match &entry.family {
                    Some(route) => {
                        let members: Vec<&str> = route.members.keys().map(String::as_str).collect();
                        let instance = match arguments.remove(&route.instance_arg) {
                            Some(serde_json::Value::String(s)) => s,
                            _ => {
                                return Err(ToolError::invalid_arguments(format!(
                                    "tool {} is provided by a family on servers {}; the \"{}\" parameter is required",
                                    call.name,
                                    members.join(", "),
                                    route.instance_arg
                                )));
                            }
                        };
                        let tool = route.members.get(&instance).ok_or_else(|| {
                            ToolError::invalid_arguments(format!(
                                "tool {} is not available on server {instance:?}; available: {}",
                                call.name,
                                members.join(", ")
                            ))
                        })?;
                        (instance.clone(), tool.clone())
                    }
                    None => (
                        entry.server.clone().unwrap_or_default(),
                        entry.server_tool.clone().unwrap_or_default(),
                    ),
                };
                if let Some(sign_in) = &self.sign_in {
                    sign_in.prepare_call(self, &call.ctx, &server).await?;
                }
                let conn = self
                    .session_connection(&call.ctx.session, &server)
                    .or_else(|| self.connection(&server))
                    .ok_or_else(|| ToolError::ServerUnavailable {
                        server: server.clone(),
                        reason: self
                            .server(&server)
                            .map_or_else(|| "not defined".to_owned(), |s| s.runtime.state.to_string()),
                    })?;
                conn.call_tool(&tool, arguments, &call.ctx).await
            }
            // Boxed: both are large futures, and a downstream call's future should not carry them.
            ToolKind::Core => Box::pin(core_tools::call(self, &call)).await.map(Into::into),
            ToolKind::Workflow => Box::pin(workflows::run(&self.workflows, &self.workflow_steps, call)).await,
        }
    }

    /// Rebuilds the catalogue from the connected servers and the core tools, and records name
    /// collisions on the servers that lost them.
    pub fn rebuild_catalog(&self) {
        let (catalog, collisions, availability) = self.build_catalog(&BTreeMap::new());
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalog);
        self.session_catalogs.write().unwrap_or_else(|e| e.into_inner()).clear();
        *self.availability.write().unwrap_or_else(|e| e.into_inner()) = availability;
        if !collisions.is_empty() {
            let mut by_server: BTreeMap<&str, Vec<&surface::Collision>> = BTreeMap::new();
            for c in &collisions {
                by_server.entry(c.server.as_str()).or_default().push(c);
            }
            let mut servers = self.write_servers();
            for (server, lost) in by_server {
                let names: Vec<String> = lost
                    .iter()
                    .map(|c| format!("{} (kept by {})", c.name, c.kept_by))
                    .collect();
                let message = format!(
                    "exposed tool name collision: {} also produced by another server; this server's tools of those names are not exposed",
                    names.join(", ")
                );
                if let Some(slot) = servers.get_mut(server)
                    && slot.runtime.last_error.as_deref() != Some(message.as_str())
                {
                    tracing::warn!(server, collisions = %names.join(", "), "exposed tool name collision");
                    self.events.emit(Event::mcp_server(
                        server,
                        reasons::MCP_SERVER_TOOL_NAME_COLLISION,
                        message.clone(),
                    ));
                    slot.runtime.last_error = Some(message);
                }
            }
        }
    }

    /// The exposed names two connected servers both produce, one sentence each naming the tool
    /// and both servers: with `prefixMode: never` the gateway refuses to start while there are any.
    pub fn name_collisions(&self) -> Vec<String> {
        let (_, collisions, _) = self.build_catalog(&BTreeMap::new());
        collisions
            .iter()
            .map(|c| {
                format!(
                    "The tool name {:?} is exposed by both MCPServer {:?} and MCPServer {:?}.",
                    c.name, c.kept_by, c.server
                )
            })
            .collect()
    }

    /// A catalogue of the connected servers, plus `own` (a session's connections to servers
    /// people sign in to), the core tools and the workflows.
    fn build_catalog(
        &self,
        own: &BTreeMap<String, SharedConnection>,
    ) -> (Catalog, Vec<surface::Collision>, BTreeMap<String, Availability>) {
        let home_namespace = self.config.read().unwrap_or_else(|e| e.into_inner()).namespace.clone();
        let servers = self.read_servers();
        let contributions: Vec<Contribution<'_>> = servers
            .values()
            .filter_map(|slot| {
                let conn = slot
                    .connection
                    .as_deref()
                    .or_else(|| own.get(&slot.definition.metadata.name).map(|c| &**c))?;
                Some(Contribution {
                    definition: &slot.definition,
                    conn,
                    home_namespace: home_namespace.as_deref(),
                })
            })
            .collect();
        surface::build(&self.names, &contributions, core_tools::entries(), &self.workflows)
    }

    fn read_servers(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ServerSlot>> {
        self.servers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_servers(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, ServerSlot>> {
        self.servers.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl CatalogSource for Registry {
    fn catalog(&self) -> Arc<Catalog> {
        Registry::catalog(self)
    }

    fn catalog_for(&self, session: &SessionId) -> Arc<Catalog> {
        Registry::catalog_for(self, session)
    }
}

/// `event`, naming `author` in its details when a core tool made the change.
fn authored(event: Event, author: Option<&Author>) -> Event {
    match author {
        Some(author) => {
            let details = event.data.clone().with_author(author.clone());
            event.with_details(details)
        }
        None => event,
    }
}

/// The gauges at each scrape of `/metrics`.
impl crate::metrics::MetricsSource for Registry {
    fn gauge_snapshot(&self) -> crate::metrics::GaugeSnapshot {
        let catalog = self.catalog();
        crate::metrics::GaugeSnapshot {
            upstreams: self.server_states(),
            catalog_tools: catalog.tools().len(),
            catalog_resources: catalog.resources().len(),
            catalog_prompts: catalog.prompts().len(),
            sessions: self.session_count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(state: MCPServerState) -> ServerRuntime {
        let mut rt = ServerRuntime::initial(&MCPServer::default());
        rt.state = state;
        rt
    }

    #[test]
    fn the_ready_condition_is_true_while_reachable_with_the_state_as_reason() {
        let status = runtime(MCPServerState::Running).to_status(false);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.condition_type.as_str(), ready.status, ready.reason.as_str()),
            ("Ready", ConditionStatus::True, "Running")
        );
        let auth = runtime(MCPServerState::AuthRequired).to_status(false);
        assert_eq!(
            (auth.conditions[0].status, auth.conditions[0].reason.as_str()),
            (ConditionStatus::True, "AuthRequired")
        );
    }

    #[test]
    fn a_failed_server_names_its_error_and_its_next_attempt() {
        let mut rt = runtime(MCPServerState::Failed);
        rt.last_error = Some("connection refused".into());
        rt.next_retry_after = "2026-09-21T12:43:00Z".parse().ok();
        let status = rt.to_status(false);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, "Failed")
        );
        assert_eq!(
            ready.message,
            "The server cannot be reached: connection refused. Next attempt at 2026-09-21T12:43:00Z."
        );
        assert_eq!(status.last_error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn a_stopped_suspended_server_reads_suspended() {
        let status = runtime(MCPServerState::Stopped).to_status(true);
        assert_eq!(
            (status.conditions[0].status, status.conditions[0].reason.as_str()),
            (ConditionStatus::False, "Suspended")
        );
    }
}
