//! The registry: every MCPServer with its runtime state and connection, every Workflow, and the
//! catalogue snapshot built from them.
//!
//! The registry names what it aggregates ([`NameRules`]) and rebuilds the catalogue once per
//! change (a server connected or failed), never per request. Requests read the current snapshot
//! with [`Registry::catalog`] and route calls with [`Registry::dispatch`]: a downstream tool goes
//! to its server's connection under the server's own name, a core tool to [`crate::core_tools`].

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use chrono::{DateTime, Utc};
use muster_catalog::{
    Catalog, CatalogSource,
    toolset::{Presets, ToolsetError},
};
use muster_core::{
    NameRules, ToolCall, ToolError, ToolKind,
    config::MusterConfig,
    crd::{MCPServer, MCPServerHealth, MCPServerState, ServerType, Workflow},
};
use rmcp::model::CallToolResult;
use rmcp::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

use crate::{
    core_tools,
    supervisor::{self, Command, SupervisorConfig},
    surface::{self, Contribution},
    upstream::SharedConnection,
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
    runtime: ServerRuntime,
    connection: Option<SharedConnection>,
    control: Option<mpsc::UnboundedSender<Command>>,
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
    config: MusterConfig,
    names: NameRules,
    presets: Arc<Presets>,
    servers: RwLock<BTreeMap<String, ServerSlot>>,
    workflows: RwLock<BTreeMap<String, Workflow>>,
    catalog: RwLock<Arc<Catalog>>,
    sessions: std::sync::Mutex<Vec<Peer<RoleServer>>>,
    supervision: SupervisorConfig,
}

impl Registry {
    /// A registry of `servers` and `workflows` under `config`; nothing is connected yet. Refused
    /// when a configured toolset preset is invalid.
    pub fn new(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
        supervision: SupervisorConfig,
    ) -> Result<Arc<Self>, ToolsetError> {
        let presets = Arc::new(Presets::from_config(&config.toolset_presets)?);
        let names = NameRules::new(config.aggregator.muster_prefix.clone());
        let servers = servers
            .into_iter()
            .map(|s| {
                let slot = ServerSlot {
                    runtime: ServerRuntime::initial(&s),
                    definition: s,
                    connection: None,
                    control: None,
                };
                (slot.definition.metadata.name.clone(), slot)
            })
            .collect();
        let workflows = workflows.into_iter().map(|w| (w.metadata.name.clone(), w)).collect();
        let registry = Arc::new(Self {
            config,
            names,
            presets,
            servers: RwLock::new(servers),
            workflows: RwLock::new(workflows),
            catalog: RwLock::new(Arc::new(Catalog::empty())),
            sessions: std::sync::Mutex::new(Vec::new()),
            supervision,
        });
        registry.rebuild_catalog();
        Ok(registry)
    }

    /// The toolset presets (built-in and configured).
    pub fn presets(&self) -> &Arc<Presets> {
        &self.presets
    }

    /// The configuration in force.
    pub fn config(&self) -> &MusterConfig {
        &self.config
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
        let mut first_attempts = Vec::new();
        {
            let mut servers = self.write_servers();
            for (name, slot) in servers.iter_mut() {
                if slot.control.is_some() {
                    continue;
                }
                let (tx, rx) = mpsc::unbounded_channel();
                let (done_tx, done_rx) = oneshot::channel();
                slot.control = Some(tx);
                let autostart = starts_automatically(&slot.definition);
                tokio::spawn(supervisor::supervise(
                    Arc::downgrade(self),
                    name.clone(),
                    rx,
                    autostart,
                    self.supervision,
                    done_tx,
                ));
                first_attempts.push(done_rx);
            }
        }
        futures::future::join_all(first_attempts).await;
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
    pub(crate) fn definition(&self, name: &str) -> Option<MCPServer> {
        self.read_servers().get(name).map(|s| s.definition.clone())
    }

    /// Updates the runtime state of server `name`.
    pub(crate) fn mark(&self, name: &str, f: impl FnOnce(&mut ServerRuntime)) {
        if let Some(slot) = self.write_servers().get_mut(name) {
            f(&mut slot.runtime);
        }
    }

    /// Makes `conn` the connection of server `name`; `false` when the server is gone.
    pub(crate) fn install(&self, name: &str, conn: SharedConnection, reconnect: bool) -> bool {
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(name) else {
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
            slot.runtime.next_retry_after = None;
            slot.runtime.last_connected = Some(Utc::now());
            slot.runtime.tool_count = conn.tools().len();
            if reconnect {
                slot.runtime.restart_count += 1;
            }
            tracing::info!(server = %name, tools = conn.tools().len(), "connected");
            slot.connection = Some(conn);
        }
        self.changed();
        true
    }

    /// Replaces the connection of `name` with one carrying refreshed lists.
    pub(crate) fn replace_lists(&self, name: &str, conn: SharedConnection) -> bool {
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(name) else {
                return false;
            };
            slot.runtime.tool_count = conn.tools().len();
            slot.connection = Some(conn);
        }
        self.changed();
        true
    }

    /// Drops the connection of `name`, recording why.
    pub(crate) fn uninstall(&self, name: &str, error: Option<String>, state: MCPServerState) {
        {
            let mut servers = self.write_servers();
            let Some(slot) = servers.get_mut(name) else { return };
            slot.connection = None;
            slot.runtime.state = state;
            slot.runtime.tool_count = 0;
            if error.is_some() {
                slot.runtime.health = MCPServerHealth::Unhealthy;
                slot.runtime.last_error = error;
            } else {
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
        self.read_servers()
            .values()
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
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// One Workflow.
    pub fn workflow(&self, name: &str) -> Option<Workflow> {
        self.workflows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Runs `call`: a downstream tool on its server, a core tool here.
    pub async fn dispatch(&self, call: ToolCall) -> Result<CallToolResult, ToolError> {
        let catalog = self.catalog();
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
                                "tool {} has no instance {instance:?}; available: {}",
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
                let conn = self.connection(&server).ok_or_else(|| ToolError::ServerUnavailable {
                    server: server.clone(),
                    reason: self
                        .server(&server)
                        .map_or_else(|| "not defined".to_owned(), |s| s.runtime.state.to_string()),
                })?;
                conn.call_tool(&tool, arguments, &call.ctx).await
            }
            ToolKind::Core => core_tools::call(self, &call).await,
            ToolKind::Workflow => Err(ToolError::not_found(&call.name)),
        }
    }

    /// Rebuilds the catalogue from the connected servers and the core tools, and records name
    /// collisions on the servers that lost them.
    pub fn rebuild_catalog(&self) {
        let (catalog, collisions) = {
            let servers = self.read_servers();
            let contributions: Vec<Contribution<'_>> = servers
                .values()
                .filter_map(|slot| {
                    slot.connection.as_deref().map(|conn| Contribution {
                        definition: &slot.definition,
                        conn,
                    })
                })
                .collect();
            surface::build(&self.names, &contributions, core_tools::entries())
        };
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalog);
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
                tracing::warn!(server, collisions = %names.join(", "), "exposed tool name collision");
                if let Some(slot) = servers.get_mut(server) {
                    slot.runtime.last_error = Some(message);
                }
            }
        }
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
}
