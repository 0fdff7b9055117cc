//! The registry: every MCPServer with its runtime state and connection, every Workflow, and the
//! catalogue snapshot built from them.
//!
//! The registry names what it aggregates ([`NameRules`]) and rebuilds the catalogue once per
//! change (a server connected or failed), never per request; requests read the current snapshot
//! with [`Registry::catalog`], and the dispatcher (`dispatch::Dispatcher`) routes calls through it. Its
//! parts each do one job:
//!
//! - the server table (`servers`): definitions, runtime state, connections, supervisors' control
//!   channels; supervisors (the `supervisor` module, above the registry) take over each server it
//!   holds;
//! - [`ServerRuntime`]: one server's state and the CRD status it reads as;
//! - the catalogue publisher (`publisher`): the shared catalogue as last published, the tools
//!   run in this process offered to it, and the workflows' availability as of it;
//! - [`ChangeBus`]: what the MCP client sessions are told when their lists change;
//! - what a definition source says changed (`apply`): [`Registry::apply_changes`] and
//!   [`Registry::apply_snapshot`] touch only the definitions that changed;
//! - the session connections (`session_connections`): the connections a session holds of its
//!   own (to the servers it signed in to), the catalogue it sees, when it last made a request;
//! - the per-session side of the registry (`sessions`): those joined with the server table, and
//!   the reaping of sessions that ended, told to each [`SessionObserver`] (the sign-in services,
//!   which sit above the registry).
//!
//! Besides these it keeps what its own changes need: the running configuration (a snapshot's
//! `config.yaml` replaces it; the core tools and the sign-in services read it through
//! [`Registry::config`]), the event log each change is recorded in ([`Registry::events`]), the
//! servers' call limits (every connection it installs is bounded by them), and which servers may
//! run ([`ServerPolicy`]). How servers are supervised and sessions reaped is the `Supervisor`'s
//! (given to it, not to the registry); each session's call slots are the meta-tools'.

mod apply;
mod changes;
mod options;
mod policy;
mod publisher;
mod runtime;
mod servers;
mod session_connections;
mod sessions;
pub use changes::{Change, ChangeBus};
pub use muster_core::crd::Applied;
pub use options::{RegistryOptions, SessionReaping};
pub use policy::{AnyServer, ServerPolicy};
use publisher::CataloguePublisher;
pub use runtime::{ServerRuntime, starts_automatically};
use servers::ServerTable;
pub use servers::ServerView;
pub(crate) use servers::{Command, Key, Unsupervised};
use session_connections::SessionConnections;
pub use session_connections::SessionObserver;

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use muster_catalog::{Catalog, CatalogSource, toolset::Presets};
use muster_core::{
    NameRules, ToolError,
    config::MusterConfig,
    crd::{MCPServer, MCPServerState, Workflow},
};
use muster_core::{SessionId, crd::ValidationErrors};
use muster_workflow::{
    engine::CompiledWorkflow,
    tools::{Availability, WorkflowTable},
};

use crate::{
    events::{Author, Event, EventLog, reasons},
    upstream::SharedConnection,
    workflows,
};

/// Every definition the gateway serves, their runtime state, and the catalogue built from them.
#[derive(Debug)]
pub struct Registry {
    config: RwLock<MusterConfig>,
    names: NameRules,
    presets: Arc<Presets>,
    servers: ServerTable,
    /// The workflows, compiled: what the `workflow_<name>` tools run, offered to the catalogue.
    workflows: Arc<WorkflowTable>,
    /// The published catalogue, the in-process tools offered to it, the workflows'
    /// availability as of it.
    catalogue: CataloguePublisher,
    /// The connections sessions hold of their own, and the catalogue each of them sees.
    sessions: SessionConnections,
    /// What the MCP client sessions are told, and which of them are still connected.
    changes: ChangeBus,
    /// Which servers may run where the gateway runs.
    server_policy: Arc<dyn ServerPolicy>,
    /// Whether supervision started (`Supervisor::start`).
    started: std::sync::atomic::AtomicBool,
    events: EventLog,
    /// The concurrency limits of the servers (`aggregator.limits`, read at start).
    limits: Arc<muster_upstream::limits::CallLimits>,
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
        let presets = Arc::new(Presets::from_config(&config.toolset_presets)?);
        let names = NameRules::new(config.aggregator.muster_prefix.clone())
            .unprefixed(config.aggregator.prefix_mode == muster_core::config::PrefixMode::Never);
        let events = options.events.unwrap_or_else(EventLog::in_memory);
        let table = Arc::new(WorkflowTable::new());
        for workflow in workflows {
            let name = workflow.metadata.name.clone();
            if let Err(errors) = table.apply(workflow) {
                let message = format!("Workflow {name} is invalid: {}", errors.to_lines().join("; "));
                tracing::warn!(workflow = %name, "{message}");
                events.emit(Event::workflow(&name, reasons::WORKFLOW_VALIDATION_FAILED, message));
            }
        }
        let ranking = match options.ranking {
            Some(ranking) => ranking,
            None => configured_ranking(&config.aggregator.ranking)?,
        };
        let limits = Arc::new(muster_upstream::limits::CallLimits::new(
            config.aggregator.limits.clone(),
        ));
        let registry = Arc::new(Self {
            limits,
            config: RwLock::new(config),
            names,
            presets,
            servers: ServerTable::new(servers, events.clone()),
            workflows: table,
            catalogue: CataloguePublisher::new(ranking),
            sessions: SessionConnections::default(),
            changes: ChangeBus::default(),
            server_policy: options.server_policy.unwrap_or_else(|| Arc::new(AnyServer)),
            started: std::sync::atomic::AtomicBool::new(false),
            events,
        });
        registry.rebuild_catalog();
        Ok(registry)
    }

    /// Every defined server's name and state, without copying definitions (for the metrics).
    pub(crate) fn server_states(&self) -> Vec<(String, MCPServerState)> {
        self.servers.states()
    }

    /// The event log.
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// Records an event.
    pub(crate) fn emit(&self, event: Event) {
        self.events.emit(event);
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
    pub(crate) fn exposure(&self) -> muster_core::config::Exposure {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .aggregator
            .exposure
    }

    /// Replaces the running configuration (a new listener address takes effect at the next
    /// start; the name rules, presets and ranking model are fixed at start).
    pub(crate) fn set_config(&self, config: MusterConfig) {
        let ranking_changed =
            self.config.read().unwrap_or_else(|e| e.into_inner()).aggregator.ranking != config.aggregator.ranking;
        if ranking_changed {
            tracing::warn!(
                "aggregator.ranking changed; the ranking model is loaded when the gateway starts, so the change \
                 takes effect at the next start"
            );
        }
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// The naming rules in force.
    pub fn names(&self) -> &NameRules {
        &self.names
    }

    /// The current catalogue snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalogue.current()
    }

    /// The servers whose supervisor has not started yet (each a new server or a changed
    /// definition), handing over their commands: `Supervisor::start` takes them.
    pub(crate) fn take_unsupervised(&self) -> Vec<Unsupervised> {
        self.servers.take_unsupervised()
    }

    /// Notes that supervision started; `true` the first time.
    pub(crate) fn mark_started(&self) -> bool {
        !self.started.swap(true, std::sync::atomic::Ordering::SeqCst)
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
        issuers_before.extend(muster_auth::issuers::Description::of(&definition).map(|d| d.issuer));
        let applied = self.servers.insert(definition);
        if applied == Applied::Unchanged {
            return applied;
        }
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
        let removed = self.servers.remove(name);
        self.recheck_issuer_peers(name, &issuers);
        if removed {
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
        removed
    }

    /// The issuer server `name` pins, if it pins one.
    fn server_issuer(&self, name: &str) -> Option<String> {
        self.servers
            .view(name)
            .and_then(|s| muster_auth::issuers::Description::of(&s.definition))
            .map(|d| d.issuer)
    }

    /// Whether server `name` describes its authorization server otherwise than the server whose
    /// description is used for that issuer (one description per issuer).
    pub(crate) fn issuer_conflict(&self, name: &str) -> Option<muster_auth::issuers::AuthorizationServerConflict> {
        let servers = self.servers.read();
        muster_auth::issuers::conflict(servers.values().map(|s| (&s.definition, s.since)), name)
    }

    /// After server `changed` (naming `issuers`) was added, changed or removed, the other servers
    /// of those issuers that wait for a sign-in or are refused for a conflict try again: a
    /// conflict may have begun or ended.
    fn recheck_issuer_peers(&self, changed: &str, issuers: &[String]) {
        if issuers.is_empty() {
            return;
        }
        let peers: Vec<String> = self
            .servers
            .views(|definition, runtime| {
                definition.metadata.name != changed
                    && matches!(runtime.state, MCPServerState::AuthRequired | MCPServerState::Failed)
                    && muster_auth::issuers::Description::of(definition).is_some_and(|d| issuers.contains(&d.issuer))
            })
            .into_iter()
            .map(|s| s.definition.metadata.name)
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
        let (reason, message) = match self.workflows.apply_compiled(compiled) {
            Applied::Added => (
                reasons::WORKFLOW_CREATED,
                format!("Workflow {name} successfully created with {steps} steps"),
            ),
            Applied::Updated => (
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
        let removed = self.workflows.remove(name).is_some();
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
        self.servers
            .command(name, command, self.started.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Stops every supervisor and closes every connection (stdio servers are stopped).
    pub async fn shutdown(&self) {
        let connections = self.servers.stop_all();
        for conn in &connections {
            conn.close();
        }
        // Give the transports a moment to end their processes.
        for conn in connections {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.closed()).await;
        }
        self.rebuild_catalog();
    }

    /// What the MCP client sessions are told: each subscribes once initialized.
    pub fn changes(&self) -> &ChangeBus {
        &self.changes
    }

    /// `conn` bounded by its server's concurrency limit: every connection the registry installs
    /// goes through here.
    fn limited(&self, conn: crate::upstream::UpstreamConnection) -> SharedConnection {
        let limiter = self.limits.server(conn.server());
        Arc::new(conn.with_limiter(limiter))
    }

    /// Why `server` may not run where the gateway runs, as its [`ServerPolicy`] says; `None`
    /// when it may.
    pub(crate) fn refusal(&self, server: &MCPServer) -> Option<String> {
        self.server_policy.refusal(server)
    }

    /// Puts server `name` in Failed for a failure every caller shares (`class` is the Ready
    /// reason), unless it is already.
    pub(crate) fn fail_shared(&self, name: &str, class: &str, message: &str) {
        self.servers.fail_shared(name, class, message);
    }

    /// Records that a session's token was just exchanged for server `name`.
    pub(crate) fn note_exchange(&self, name: &str) {
        self.servers.note_exchange(name);
    }

    /// Takes server `name` out of a Failed state that a shared failure caused: it serves
    /// sessions again (`Connected` while one holds a connection, else `Awaiting Session`).
    pub(crate) fn recover_shared(&self, name: &str) {
        self.servers.recover_shared(name);
        self.derive_sso_state(name);
    }

    /// The definition of the server of `key`, while that generation is current.
    pub(crate) fn definition(&self, key: &Key) -> Option<MCPServer> {
        self.servers.definition(key)
    }

    /// Updates the runtime state of the server of `key`.
    pub(crate) fn mark(&self, key: &Key, f: impl FnOnce(&mut ServerRuntime)) {
        self.servers.mark(key, f);
    }

    /// Makes `conn`, bounded by the server's concurrency limit, the connection of the server of
    /// `key`, and answers it; `None` (and `conn` closed) when the server is gone.
    pub(crate) fn install(
        &self,
        key: &Key,
        conn: crate::upstream::UpstreamConnection,
        reconnect: bool,
    ) -> Option<SharedConnection> {
        let conn = self.limited(conn);
        if !self.servers.install(key, Arc::clone(&conn), reconnect) {
            conn.close();
            return None;
        }
        self.changed();
        Some(conn)
    }

    /// Replaces the connection of the server of `key` with one carrying refreshed lists.
    pub(crate) fn replace_lists(&self, key: &Key, conn: SharedConnection) -> bool {
        let replaced = self.servers.replace_lists(key, conn);
        if replaced {
            self.changed();
        }
        replaced
    }

    /// Drops the connection of the server of `key`, recording why.
    pub(crate) fn uninstall(&self, key: &Key, error: Option<String>, state: MCPServerState) {
        if self.servers.uninstall(key, error, state) {
            self.changed();
        }
    }

    fn changed(&self) {
        self.rebuild_catalog();
        self.changes.publish(Change::Lists);
    }

    /// Every MCPServer with its runtime state, by name.
    pub fn servers(&self) -> Vec<ServerView> {
        self.servers_where(|_| true)
    }

    /// The servers whose definition `keep` accepts, copying only those.
    pub fn servers_where(&self, keep: impl Fn(&MCPServer) -> bool) -> Vec<ServerView> {
        self.servers.views(|definition, _| keep(definition))
    }

    /// One MCPServer with its runtime state.
    pub fn server(&self, name: &str) -> Option<ServerView> {
        self.servers.view(name)
    }

    /// The live connection to server `name`.
    pub fn connection(&self, name: &str) -> Option<SharedConnection> {
        self.servers.connection(name)
    }

    /// Every Workflow, by name.
    pub fn workflows(&self) -> Vec<Workflow> {
        self.workflows.list().iter().map(|w| w.workflow().clone()).collect()
    }

    /// One Workflow.
    pub fn workflow(&self, name: &str) -> Option<Workflow> {
        self.compiled_workflow(name).map(|w| w.workflow().clone())
    }

    /// One Workflow, compiled.
    pub fn compiled_workflow(&self, name: &str) -> Option<Arc<CompiledWorkflow>> {
        self.workflows.get(name)
    }

    /// Whether workflow `name` can run now, as of the current catalogue.
    pub fn workflow_availability(&self, name: &str) -> Option<Availability> {
        self.catalogue.availability(name)
    }

    /// The workflows, compiled: the table a [`WorkflowTools`](muster_workflow::tools::WorkflowTools)
    /// serves, the registry keeping it (definition changes, the catalogue's entries).
    pub fn workflow_table(&self) -> &Arc<WorkflowTable> {
        &self.workflows
    }

    /// Why `name`, absent from the catalogue, cannot run: it belongs (by its exposed prefix) to a
    /// defined server that is not connected. `None` when no defined server claims it.
    pub(crate) fn unavailable_tool(&self, name: &str) -> Option<ToolError> {
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
        self.servers.unavailable(&self.names, name)
    }

    /// Offers tools that run in this process (core tools, an embedder's own) to the catalogue:
    /// each is listed beside the servers' tools, replacing an offered tool of the same name.
    /// The dispatcher (`dispatch::Dispatcher`) offers the tools it runs.
    pub(crate) fn offer_tools(&self, entries: impl IntoIterator<Item = muster_core::ToolEntry>) {
        self.catalogue.offer(entries);
        self.changed();
    }

    /// Rebuilds the catalogue from the connected servers and the core tools, and records name
    /// collisions on the servers that lost them.
    pub(crate) fn rebuild_catalog(&self) {
        let (catalog, collisions, availability) = self.build_catalog(&BTreeMap::new());
        self.catalogue.publish(catalog, availability);
        self.sessions.forget_catalogs();
        let mut lost: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for c in &collisions {
            lost.entry(c.server.as_str())
                .or_default()
                .push(format!("{} (kept by {})", c.name, c.kept_by));
        }
        if !lost.is_empty() {
            self.servers.record_collisions(lost);
        }
    }

    /// The exposed names two connected servers both produce, one sentence each naming the tool
    /// and both servers: with `prefixMode: never` the gateway refuses to start while there are any.
    pub(crate) fn name_collisions(&self) -> Vec<String> {
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
    fn build_catalog(&self, own: &BTreeMap<String, SharedConnection>) -> publisher::Built {
        let home_namespace = self.config.read().unwrap_or_else(|e| e.into_inner()).namespace.clone();
        self.catalogue.build(
            &self.names,
            &self.servers,
            own,
            &self.workflows,
            home_namespace.as_deref(),
        )
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

/// The ranking `aggregator.ranking` asks for: BM25F alone, or fused with the static embedding
/// model of `model` (a relative path is taken from the working folder), loaded now, by a weighted
/// sum with `semanticWeight` and `semanticDepth` where they are set. The settings are checked
/// here too: a configuration built in code may never have been validated.
fn configured_ranking(
    settings: &muster_core::config::RankingSettings,
) -> Result<muster_catalog::rank::RankingConfig, crate::error::GatewayError> {
    use muster_catalog::rank::{Fusion, semantic::SemanticRanking};
    settings
        .validate()
        .map_err(crate::error::GatewayError::RankingSettings)?;
    let ranking = muster_catalog::rank::RankingConfig::default();
    let Some(path) = &settings.model else {
        return Ok(ranking);
    };
    let mut semantic = SemanticRanking::load(path).map_err(|source| crate::error::GatewayError::RankingModel {
        path: path.clone(),
        source,
    })?;
    if let Some(semantic_weight) = settings.semantic_weight {
        semantic = semantic.with_fusion(Fusion::WeightedSum { semantic_weight });
    }
    if let Some(depth) = settings.semantic_depth {
        semantic = semantic.with_depth(depth);
    }
    tracing::info!(
        model = %path.display(),
        dimensions = semantic.model.dimensions(),
        fusion = ?semantic.fusion,
        depth = semantic.depth,
        "filter_tools ranks by BM25F fused with the static embedding model"
    );
    Ok(ranking.with_semantic(semantic))
}
