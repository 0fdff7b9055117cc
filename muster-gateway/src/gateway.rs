//! [`Gateway`]: the composition of registry, dispatcher, meta-tools and HTTP front.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use muster_gateway::{Gateway, config_dir};
//!
//! let loaded = config_dir::load(std::path::Path::new("examples/config"))?;
//! let gateway = Gateway::new(loaded.config, loaded.servers, loaded.workflows)?;
//! gateway.start().await;            // connect the downstream servers
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use axum::Router;
use muster_catalog::{
    CatalogSource,
    toolset::{ToolsetError, ToolsetLayer},
};
use muster_core::{
    BoxToolService,
    config::MusterConfig,
    crd::{MCPServer, Workflow},
};
use tokio_util::sync::CancellationToken;

use crate::{dispatch::Dispatcher, http, meta::MetaTools, registry::Registry, supervisor::SupervisorConfig};

/// A muster gateway: its registry and the tool service stack calls go through.
#[derive(Debug, Clone)]
pub struct Gateway {
    registry: Arc<Registry>,
    tools: BoxToolService,
    shutdown: CancellationToken,
}

impl Gateway {
    /// A gateway over `servers` and `workflows` with `config`; call [`Gateway::start`] to
    /// connect. Refused (naming the preset) when a configured toolset preset is invalid.
    ///
    /// Every call goes through this stack: toolset enforcement, then the dispatcher.
    pub fn new(config: MusterConfig, servers: Vec<MCPServer>, workflows: Vec<Workflow>) -> Result<Self, ToolsetError> {
        Self::with_supervision(config, servers, workflows, SupervisorConfig::from_env())
    }

    /// [`Gateway::new`] with explicit reconnect backoff and health-check settings.
    pub fn with_supervision(
        config: MusterConfig,
        servers: Vec<MCPServer>,
        workflows: Vec<Workflow>,
        supervision: SupervisorConfig,
    ) -> Result<Self, ToolsetError> {
        let registry = Registry::new(config, servers, workflows, supervision)?;
        let catalog: Arc<dyn CatalogSource> = Arc::clone(&registry) as Arc<dyn CatalogSource>;
        let tools = BoxToolService::new(
            tower::ServiceBuilder::new()
                .layer(ToolsetLayer::new(catalog, Arc::clone(registry.presets())))
                .service(Dispatcher::new(Arc::clone(&registry))),
        );
        Ok(Self {
            registry,
            tools,
            shutdown: CancellationToken::new(),
        })
    }

    /// Starts supervising every downstream server; those that start automatically connect.
    /// Returns when each has made its first attempt (a failed server is reported in its status
    /// and retried on its backoff, never fatal).
    pub async fn start(&self) {
        self.registry.start().await;
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The tool service stack every call goes through.
    pub fn tools(&self) -> BoxToolService {
        self.tools.clone()
    }

    /// The meta-tools MCP server, for serving over another transport (stdio, say).
    pub fn meta_tools(&self) -> MetaTools {
        MetaTools::new(Arc::clone(&self.registry), self.tools.clone())
    }

    /// The HTTP routes (`/mcp`, `/health`).
    pub fn router(&self) -> Router {
        http::router(
            Arc::clone(&self.registry),
            self.tools.clone(),
            self.shutdown.child_token(),
        )
    }

    /// Ends the MCP sessions and closes every downstream connection.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.registry.shutdown().await;
    }
}
