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
    NameRules, PromptEntry, ResourceEntry, ToolCall, ToolEntry, ToolError, ToolKind,
    config::MusterConfig,
    crd::{MCPServer, MCPServerState, ServerType, Workflow},
};
use rmcp::model::CallToolResult;

use crate::{
    core_tools,
    upstream::{SharedConnection, UpstreamConnection},
};

/// The runtime state of one MCPServer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerRuntime {
    /// Its state.
    pub state: MCPServerState,
    /// The error of its most recent operation.
    pub last_error: Option<String>,
    /// When it last connected.
    pub last_connected: Option<DateTime<Utc>>,
    /// When the last connection attempt was made.
    pub last_attempt: Option<DateTime<Utc>>,
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
            last_error: None,
            last_connected: None,
            last_attempt: None,
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
}

impl Registry {
    /// A registry of `servers` and `workflows` under `config`; nothing is connected yet. Refused
    /// when a configured toolset preset is invalid.
    pub fn new(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
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

    /// Connects every server that starts automatically, concurrently; returns when each has
    /// connected or failed.
    pub async fn start(self: &Arc<Self>) {
        let names: Vec<String> = self
            .read_servers()
            .values()
            .filter(|s| starts_automatically(&s.definition))
            .map(|s| s.definition.metadata.name.clone())
            .collect();
        futures::future::join_all(names.iter().map(|n| self.connect(n))).await;
    }

    /// Connects server `name` (replacing a previous connection) and rebuilds the catalogue.
    /// Returns its state afterwards, or `None` when no such server is defined.
    pub async fn connect(&self, name: &str) -> Option<MCPServerState> {
        let definition = {
            let mut servers = self.write_servers();
            let slot = servers.get_mut(name)?;
            slot.runtime.state = match slot.definition.spec.server_type {
                Some(ServerType::Stdio) | None => MCPServerState::Starting,
                Some(_) => MCPServerState::Connecting,
            };
            slot.runtime.last_attempt = Some(Utc::now());
            slot.definition.clone()
        };
        let outcome = UpstreamConnection::connect(&definition).await;
        let (state, old) = {
            let mut servers = self.write_servers();
            let slot = servers.get_mut(name)?;
            let old = match outcome {
                Ok(conn) => {
                    tracing::info!(server = %name, tools = conn.tools().len(), "connected");
                    slot.runtime.state = match definition.spec.server_type {
                        Some(ServerType::Stdio) | None => MCPServerState::Running,
                        Some(_) => MCPServerState::Connected,
                    };
                    slot.runtime.last_error = None;
                    slot.runtime.last_connected = Some(Utc::now());
                    slot.runtime.tool_count = conn.tools().len();
                    slot.connection.replace(Arc::new(conn))
                }
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "connection failed");
                    slot.runtime.state = MCPServerState::Failed;
                    slot.runtime.last_error = Some(e.to_string());
                    slot.runtime.tool_count = 0;
                    slot.connection.take()
                }
            };
            (slot.runtime.state, old)
        };
        if let Some(old) = old {
            close_when_unused(old).await;
        }
        self.rebuild_catalog();
        Some(state)
    }

    /// Closes every connection (stdio servers are stopped).
    pub async fn shutdown(&self) {
        let connections: Vec<SharedConnection> = self
            .write_servers()
            .values_mut()
            .filter_map(|s| {
                s.runtime.state = MCPServerState::Stopped;
                s.connection.take()
            })
            .collect();
        futures::future::join_all(connections.into_iter().map(close_when_unused)).await;
        self.rebuild_catalog();
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
                let server = entry.server.as_deref().unwrap_or_default();
                let tool = entry.server_tool.as_deref().unwrap_or_default();
                let conn = self.connection(server).ok_or_else(|| ToolError::ServerUnavailable {
                    server: server.to_owned(),
                    reason: self
                        .server(server)
                        .map_or_else(|| "not defined".to_owned(), |s| s.runtime.state.to_string()),
                })?;
                conn.call_tool(tool, call.arguments, &call.ctx).await
            }
            ToolKind::Core => core_tools::call(self, &call).await,
            ToolKind::Workflow => Err(ToolError::not_found(&call.name)),
        }
    }

    /// Rebuilds the catalogue from the connected servers and the core tools.
    pub fn rebuild_catalog(&self) {
        let mut builder = Catalog::builder();
        {
            let servers = self.read_servers();
            for slot in servers.values() {
                let Some(conn) = &slot.connection else { continue };
                let name = &slot.definition.metadata.name;
                builder.set_server_labels(name.clone(), slot.definition.metadata.labels.clone());
                let prefix = slot.definition.spec.tool_prefix.as_deref().unwrap_or(name);
                for tool in conn.tools() {
                    let exposed = self.names.server_tool(prefix, &tool.name);
                    builder.push_tool(ToolEntry::downstream(exposed, name.clone(), tool.clone()));
                }
                for resource in conn.resources() {
                    let exposed = self.names.server_resource_uri(prefix, &resource.uri);
                    builder.push_resource(ResourceEntry::downstream(exposed, name.clone(), resource.clone()));
                }
                for prompt in conn.prompts() {
                    let exposed = self.names.server_prompt(prefix, &prompt.name);
                    builder.push_prompt(PromptEntry::downstream(exposed, name.clone(), prompt.clone()));
                }
            }
        }
        for entry in core_tools::entries() {
            builder.push_tool(entry.clone());
        }
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(builder.build());
    }

    fn read_servers(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ServerSlot>> {
        self.servers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_servers(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, ServerSlot>> {
        self.servers.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Closes a connection once no in-flight call holds it any more (or right away when unshared).
async fn close_when_unused(conn: SharedConnection) {
    match Arc::try_unwrap(conn) {
        Ok(conn) => conn.close().await,
        // In-flight calls still hold it; the last one to finish drops it, which ends the
        // transport (and a stdio child process) as well.
        Err(shared) => drop(shared),
    }
}

impl CatalogSource for Registry {
    fn catalog(&self) -> Arc<Catalog> {
        Registry::catalog(self)
    }
}
