//! [`Gateway`]: the composition of registry, dispatcher, meta-tools and HTTP front.
//!
//! The whole stack, outermost first, each piece public and usable alone; the tool stack is built
//! in [`Gateway::with_options`], the meta-tools server over it in [`Gateway::meta_tools`], and
//! the HTTP front around that in [`Gateway::front`] (its layers in [`http::Front::new`]):
//!
//! ```text
//! HTTP /mcp   BearerAuthLayer              muster_auth::resource   (aggregator.oauth.server)
//!             request guard                Host, body size, JSON depth, sessions, drain
//!             ToolsetHeaderLayer           muster_catalog::toolset (X-muster-Toolset)
//!             rmcp StreamableHttpService   sessions; calls answered in front of it
//!             MetaTools (ServerHandler)    meta::MetaTools::with_auth
//!               tools/call                 URL elicitation (auth::elicitation), session limits
//!               the 13 meta-tools          muster_catalog::meta::MetaService: Discovery,
//!                                          call_tool over the ToolCall stack below,
//!                                          get_resource/get_prompt over the session's connections
//! ToolCall    MetricsLayer                 metrics: counts and spans, refusals too
//!             ToolsetLayer                 muster_catalog::toolset
//!             Dispatcher::with_auth        dispatch: DownstreamTools (the servers' connections),
//!                                          GatewayWorkflows (workflows: muster_workflow's
//!                                          engine, runs recorded and counted), and the
//!                                          tools run in process: CoreTools (core_tools, with
//!                                          the definition store and config directory), own tools
//! below       Registry                     server table, session connections, change bus,
//!                                          workflow table; Supervisor supervises it
//!             GatewayMetrics               counted by the layers above and the supervisors
//!             DownstreamAuth               sign-in by link and single sign-on
//!             definitions                  where definitions come from (and CoreTools write)
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use muster_gateway::{Gateway, definitions::config_dir};
//!
//! let loaded = config_dir::load(std::path::Path::new("examples/config"))?;
//! let gateway = Gateway::new(loaded.config, loaded.servers, loaded.workflows)?;
//! gateway.start().await;            // connect the downstream servers
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```

use std::sync::{Arc, Weak};

use axum::Router;
use muster_catalog::{CatalogSource, toolset::ToolsetLayer};
use muster_core::{
    BoxToolService,
    config::MusterConfig,
    crd::{MCPServer, Workflow},
};
use tokio_util::sync::CancellationToken;

use crate::{
    auth::DownstreamAuth,
    core_tools::CoreTools,
    definitions::{DefinitionStore, config_dir},
    dispatch::Dispatcher,
    error::GatewayError,
    events::{KIND_MCP_SERVER, KIND_WORKFLOW},
    http,
    meta::MetaTools,
    metrics::{CountingStore, GatewayMetrics, MeteredObserver, MetricsLayer, MetricsSource},
    registry::{Registry, RegistryOptions, SessionReaping},
    secrets::{DirectorySecrets, NoSecrets, SecretSource},
    supervisor::{Supervisor, SupervisorConfig},
    workflows::{EventObserver, GatewayWorkflows},
};
use muster_workflow::record::{ExecutionStore, MemoryExecutionStore};

/// How a [`Gateway::serve`] shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Requests in flight when the signal came.
    pub in_flight_at_signal: usize,
    /// Requests still in flight at the deadline, which were ended unfinished.
    pub ended_in_flight: usize,
    /// From the signal to the end of the last downstream server.
    pub took: std::time::Duration,
}

/// What a gateway is given besides its definitions and configuration: its registry's options,
/// how its servers are supervised and its sessions reaped, where workflow runs are recorded and
/// Secrets read, and where its core tools write definitions and find the config directory.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Where events go, which servers run.
    pub registry: RegistryOptions,
    /// Reconnect backoff and health checks.
    pub supervision: SupervisorConfig,
    /// How often ended and idle sessions are reaped, and when a session is idle.
    pub session_reaping: SessionReaping,
    /// Where workflow execution records go (in memory unless given).
    pub executions: Option<Arc<dyn ExecutionStore>>,
    /// Where the Secrets servers name are read (none: every read fails naming the Secret).
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// Where the core tools write definitions; when unset, the config directory if there is
    /// one, else nowhere (changes are kept in memory only).
    pub definitions: Option<Arc<dyn DefinitionStore>>,
    /// The config directory, in filesystem mode: where `core_config_save` writes and
    /// `core_config_reload` and [`Gateway::watch_config_dir`] read.
    pub config_dir: Option<config_dir::ConfigStore>,
}

impl From<RegistryOptions> for GatewayOptions {
    fn from(registry: RegistryOptions) -> Self {
        Self {
            registry,
            ..Self::default()
        }
    }
}

impl GatewayOptions {
    /// Sets the reconnect backoff and health checks.
    #[must_use]
    pub fn with_supervision(mut self, supervision: SupervisorConfig) -> Self {
        self.supervision = supervision;
        self
    }

    /// Sets how often sessions are reaped and when one is idle.
    #[must_use]
    pub fn with_session_reaping(mut self, reaping: SessionReaping) -> Self {
        self.session_reaping = reaping;
        self
    }

    /// Keeps events in `dir/events/` and workflow run records in `dir/workflow_executions/`
    /// (creating them; a run an earlier process left unfinished is marked failed), as filesystem
    /// mode does beside its definitions. Refused when either cannot be opened.
    pub fn with_data_dir(mut self, dir: &std::path::Path) -> Result<Self, GatewayError> {
        let events = crate::events::EventLog::open(dir).map_err(|source| GatewayError::DataDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let executions = crate::workflows::open_executions(dir, &events)?;
        self.registry = self.registry.with_events(events);
        Ok(self.with_executions(executions))
    }

    /// Sets where the Secrets servers name are read (`headersFrom`, token-exchange client
    /// credentials), by the supervisors and the sign-in services.
    #[must_use]
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretSource>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Sets where workflow execution records go.
    #[must_use]
    pub fn with_executions(mut self, executions: Arc<dyn ExecutionStore>) -> Self {
        self.executions = Some(executions);
        self
    }

    /// Filesystem mode: sets the config directory (`config.yaml`, reloads, the watch, and the
    /// definitions unless [`Self::with_definition_store`] sets another store).
    #[must_use]
    pub fn with_config_dir(mut self, store: config_dir::ConfigStore) -> Self {
        self.config_dir = Some(store);
        self
    }

    /// Sets where the core tools write definitions.
    #[must_use]
    pub fn with_definition_store(mut self, store: Arc<dyn DefinitionStore>) -> Self {
        self.definitions = Some(store);
        self
    }
}

/// A muster gateway: its registry and the tool service stack calls go through.
#[derive(Debug, Clone)]
pub struct Gateway {
    registry: Arc<Registry>,
    metrics: Arc<GatewayMetrics>,
    executions: Arc<dyn ExecutionStore>,
    /// Connects the servers and keeps them connected, from [`Gateway::start`] on.
    supervisor: Supervisor,
    workflows: GatewayWorkflows,
    auth: DownstreamAuth,
    core_tools: CoreTools,
    tools: BoxToolService,
    shutdown: CancellationToken,
    /// Cancelled when a shutdown's deadline ends the calls still running.
    calls_ended: CancellationToken,
    /// Each client session's call slots, shared by every transport's meta-tools.
    session_limits: Arc<muster_upstream::limits::CallLimits>,
    drain: Arc<http::guard::Drain>,
}

impl Gateway {
    /// A gateway over `servers` and `workflows` with `config`; call [`Gateway::start`] to
    /// connect. Refused (naming the preset) when a configured toolset preset is invalid.
    ///
    /// Every call goes through this stack: toolset enforcement, then the dispatcher.
    pub fn new(config: MusterConfig, servers: Vec<MCPServer>, workflows: Vec<Workflow>) -> Result<Self, GatewayError> {
        Self::with_supervision(config, servers, workflows, SupervisorConfig::from_env())
    }

    /// [`Gateway::new`] with explicit reconnect backoff and health-check settings.
    pub fn with_supervision(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
        supervision: SupervisorConfig,
    ) -> Result<Self, GatewayError> {
        Self::with_options(
            config,
            servers,
            workflows,
            GatewayOptions::default().with_supervision(supervision),
        )
    }

    /// A gateway with every option: supervision, the event log, the definition store and the
    /// config directory ([`GatewayOptions`], or only the registry's [`RegistryOptions`]).
    ///
    /// Every call goes through this stack: metrics and the call's span (outermost, so refusals
    /// are counted too), toolset enforcement, then the dispatcher, which routes the core tools
    /// to [`CoreTools`] and the workflows to [`GatewayWorkflows`].
    pub fn with_options(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
        options: impl Into<GatewayOptions>,
    ) -> Result<Self, GatewayError> {
        let options = options.into();
        // Below the stack: the server table, the catalogue and the sessions' connections.
        let session_limits = Arc::new(muster_upstream::limits::CallLimits::new(
            config.aggregator.limits.clone(),
        ));
        let registry = Registry::new(config, servers, workflows, options.registry)?;
        let metrics = Arc::new(GatewayMetrics::new());
        metrics.set_source(Arc::downgrade(&registry) as Weak<dyn MetricsSource>);
        // Workflow runs: recorded (and counted), their step events in the event log.
        let executions: Arc<dyn ExecutionStore> = Arc::new(CountingStore::new(
            options
                .executions
                .unwrap_or_else(|| Arc::new(MemoryExecutionStore::new())),
            Arc::clone(&metrics),
        ));
        let run_events = Arc::new(EventObserver::new(registry.events().clone()));
        let workflows = GatewayWorkflows::with_engine(Arc::clone(registry.workflow_table()), |engine| {
            engine
                .with_store(Arc::clone(&executions))
                .with_observer(Arc::new(MeteredObserver::new(Arc::clone(&metrics), Some(run_events))))
        });
        let secrets = options.secrets.unwrap_or_else(|| Arc::new(NoSecrets));
        let auth = DownstreamAuth::for_registry(&registry, Arc::clone(&secrets))?;
        let supervisor = Supervisor::new(Arc::clone(&registry))
            .with_config(options.supervision)
            .with_session_reaping(options.session_reaping)
            .with_secrets(secrets)
            .with_metrics(Arc::clone(&metrics));
        let mut core_tools = CoreTools::new(Arc::clone(&registry))
            .with_auth(&auth)
            .with_executions(Arc::clone(&executions));
        if let Some(store) = options.definitions {
            core_tools = core_tools.with_definition_store(store);
        }
        if let Some(dir) = options.config_dir {
            core_tools = core_tools.with_config_dir(dir);
        }
        let catalog: Arc<dyn CatalogSource> = Arc::clone(&registry) as Arc<dyn CatalogSource>;
        let tools = BoxToolService::new(
            tower::ServiceBuilder::new()
                .layer(MetricsLayer::new(Arc::clone(&metrics), Arc::clone(&catalog)))
                .layer(ToolsetLayer::new(catalog, Arc::clone(registry.presets())))
                .service(
                    Dispatcher::new(Arc::clone(&registry))
                        .with_auth(auth.clone())
                        .with_workflows(workflows.clone())
                        .with_tools(CoreTools::entries(), core_tools.clone()),
                ),
        );
        // Workflow steps call this stack too; the workflows hold it weakly, and the stack
        // answered (with every clone of it) is what keeps it alive.
        let tools = workflows.bind(tools);
        Ok(Self {
            registry,
            metrics,
            executions,
            supervisor,
            workflows,
            auth,
            core_tools,
            tools,
            shutdown: CancellationToken::new(),
            calls_ended: CancellationToken::new(),
            session_limits,
            drain: Arc::default(),
        })
    }

    /// Filesystem mode, as the reference gateway runs: loads the config directory `dir` (a bad
    /// file is reported in the returned problems and left out), keeps events in `dir/events/`
    /// and workflow run records in `dir/workflow_executions/` (runs cut off by a crash marked
    /// failed), writes definition changes back to `dir` atomically, reads the Secrets of
    /// `dir/secrets/`, and (with [`Gateway::watch_config_dir`]) reloads it when it changes.
    pub fn from_config_dir(
        dir: &std::path::Path,
        supervision: SupervisorConfig,
    ) -> Result<(Self, Vec<config_dir::LoadProblem>), GatewayError> {
        let loaded = config_dir::load(dir).map_err(|source| GatewayError::ConfigDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let store = config_dir::ConfigStore::new(dir);
        let snapshot = store.snapshot(&loaded);
        let options = GatewayOptions::default()
            .with_supervision(supervision)
            .with_secrets(Arc::new(DirectorySecrets::new(dir.join("secrets"))))
            .with_data_dir(dir)?
            .with_config_dir(store);
        let gateway = Self::with_options(
            loaded.config,
            snapshot.servers.iter().map(|s| s.definition.clone()).collect(),
            snapshot.workflows.iter().map(|w| w.definition.clone()).collect(),
            options,
        )?;
        let sourced = snapshot
            .servers
            .iter()
            .map(|s| (KIND_MCP_SERVER, &s.definition.metadata.name, &s.dropped_fields))
            .chain(
                snapshot
                    .workflows
                    .iter()
                    .map(|w| (KIND_WORKFLOW, &w.definition.metadata.name, &w.dropped_fields)),
            );
        for (kind, name, dropped) in sourced {
            let dropped: Vec<String> = dropped.iter().map(ToString::to_string).collect();
            gateway.registry.report_dropped_fields(kind, name, &dropped, true);
        }
        Ok((gateway, loaded.problems))
    }

    /// Watches the config directory and applies each change to the registry
    /// ([`config_dir::watch`], [`Registry::apply_snapshot`]); stops when the handle is dropped
    /// (or the gateway is gone).
    pub fn watch_config_dir(&self) -> Result<config_dir::WatchHandle, GatewayError> {
        let store = self.core_tools.config_dir().ok_or(GatewayError::NoConfigDir)?;
        let registry = Arc::downgrade(&self.registry);
        config_dir::watch(store, move |snapshot| {
            registry.upgrade().map(|registry| registry.apply_snapshot(snapshot))
        })
        .map_err(|e| GatewayError::Watch(e.to_string()))
    }

    /// Starts supervising every downstream server; those that start automatically connect.
    /// Returns when each has made its first attempt (a failed server is reported in its status
    /// and retried on its backoff, never fatal).
    pub async fn start(&self) {
        crate::workflows::spawn_retention(Arc::clone(&self.executions), self.shutdown.child_token());
        self.supervisor.start().await;
    }

    /// Refuses a started gateway whose `prefixMode: never` left two servers exposing the same
    /// name (with prefixes, names cannot collide this way). Run it after [`Gateway::start`].
    pub fn check_unique_names(&self) -> Result<(), GatewayError> {
        if self.registry.config().aggregator.prefix_mode != muster_core::config::PrefixMode::Never {
            return Ok(());
        }
        let collisions = self.registry.name_collisions();
        if collisions.is_empty() {
            Ok(())
        } else {
            Err(GatewayError::NameCollisions(collisions))
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The metrics of this gateway (served at `/metrics`).
    pub fn metrics(&self) -> &Arc<GatewayMetrics> {
        &self.metrics
    }

    /// The `workflow_<name>` tools: bind a stack of your own that wraps [`Gateway::tools`] with
    /// [`GatewayWorkflows::bind`] for workflow steps to pass through it too.
    pub fn workflows(&self) -> &GatewayWorkflows {
        &self.workflows
    }

    /// Where workflow runs are recorded (counted in the metrics).
    pub fn executions(&self) -> &Arc<dyn ExecutionStore> {
        &self.executions
    }

    /// Signing people in to downstream servers (by link, and with their own identity).
    pub fn auth(&self) -> &DownstreamAuth {
        &self.auth
    }

    /// muster's own `core_*` tools, as the dispatcher runs them.
    pub fn core_tools(&self) -> &CoreTools {
        &self.core_tools
    }

    /// The tool service stack every call goes through.
    pub fn tools(&self) -> BoxToolService {
        self.tools.clone()
    }

    /// The meta-tools MCP server over the tool stack, taking part in signing people in
    /// (URL elicitation of a call that needs a sign-in): what [`Gateway::front`] serves at
    /// `/mcp`, and what serves another transport (stdio, say).
    pub fn meta_tools(&self) -> MetaTools {
        MetaTools::new(Arc::clone(&self.registry), self.tools.clone())
            .with_metrics(Arc::clone(&self.metrics))
            .with_calls_ended(self.calls_ended.clone())
            .with_session_limits(Arc::clone(&self.session_limits))
            .with_auth(self.auth.clone())
    }

    /// The HTTP routes (`/mcp`, `/health`, `/metrics`).
    pub fn router(&self) -> Router {
        self.front().into_router()
    }

    /// The HTTP routes as the gateway's own server serves them ([`http::Front`]): the
    /// meta-tools server ([`Gateway::meta_tools`]) at `/mcp`, behind the front door, the request
    /// guard and the toolset header; the sign-in routes beside it.
    pub fn front(&self) -> http::Front {
        http::Front::new(
            Arc::clone(&self.registry),
            Arc::clone(&self.metrics),
            self.meta_tools(),
            crate::auth::routes(Arc::clone(&self.registry), &self.auth),
            self.shutdown.child_token(),
            Arc::clone(&self.drain),
        )
    }

    /// Serves [`Gateway::front`] (the routes of [`Gateway::router`]) on `listener` until `signal`
    /// resolves, then shuts down gracefully: new connections and requests are refused (503), the requests in flight get up
    /// to `aggregator.limits.shutdownTimeoutSeconds` to finish, then the sessions end and every
    /// downstream server is stopped (a stdio server with the processes it started). Answers go
    /// out without Nagle's delay (`TCP_NODELAY`); the connection loop is the gateway's own (bounded read buffers, graceful stop).
    ///
    /// ```no_run
    /// # async fn run(gateway: muster_gateway::Gateway) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
    /// let report = gateway.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
    /// assert_eq!(report.ended_in_flight, 0, "every call finished in time");
    /// # Ok(()) }
    /// ```
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        signal: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<ShutdownReport> {
        let stop_accepting = CancellationToken::new();
        let mut server = tokio::spawn(crate::http::serve::serve(
            listener,
            self.front(),
            self.registry.config().aggregator.limits.max_request_head_bytes,
            stop_accepting.clone(),
        ));
        signal.await;
        let started = std::time::Instant::now();
        self.drain.begin();
        stop_accepting.cancel();
        let deadline =
            std::time::Duration::from_secs(self.registry.config().aggregator.limits.shutdown_timeout_seconds);
        let in_flight = self.drain.in_flight();
        tracing::info!(
            in_flight,
            deadline_s = deadline.as_secs(),
            "shutting down: finishing the requests in flight"
        );
        let ended_in_flight = match tokio::time::timeout(deadline, self.drain.settled()).await {
            Ok(()) => 0,
            Err(_) => {
                let left = self.drain.in_flight();
                tracing::warn!(left, "shutdown deadline reached: ending the requests still in flight");
                // Each is answered that it was ended; a moment for those answers to go out.
                self.calls_ended.cancel();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.drain.settled()).await;
                left
            }
        };
        self.shutdown().await;
        // The sessions' streams end with the sessions; connections close after their last answer.
        let served = match tokio::time::timeout(std::time::Duration::from_secs(5), &mut server).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(std::io::Error::other(join)),
            Err(_) => {
                server.abort();
                Ok(())
            }
        };
        served.map(|()| ShutdownReport {
            in_flight_at_signal: in_flight,
            ended_in_flight,
            took: started.elapsed(),
        })
    }

    /// Ends the MCP sessions and closes every downstream connection.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.registry.shutdown().await;
    }
}
