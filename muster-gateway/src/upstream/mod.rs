//! Upstream connections: the gateway as an MCP client of each downstream server.
//!
//! [`UpstreamConnection::connect`] starts a stdio server as a child process (`command`, `args`,
//! `env`) or reaches a remote one over streamable HTTP (`url`, `headers`), performs the MCP
//! handshake and reads the server's tools, resources and prompts, following pagination cursors.
//! Every operation is bounded by the server's `spec.timeout`. A connection then runs calls for the
//! dispatcher; a call the caller cancels is cancelled downstream.
//!
//! ```no_run
//! # async fn demo(server: &muster_core::crd::MCPServer) -> Result<(), Box<dyn std::error::Error>> {
//! use muster_gateway::upstream::UpstreamConnection;
//!
//! let conn = UpstreamConnection::connect(server).await?;
//! println!("{} tools", conn.tools().len());
//! # Ok(()) }
//! ```

mod transport;

use std::{sync::Arc, time::Duration};

use muster_core::{
    CallContext, ToolError,
    crd::{MCPServer, ServerType},
};
use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, GetPromptRequestParams,
        GetPromptResult, Implementation, JsonObject, Prompt, ReadResourceRequestParams, ReadResourceResult, Resource,
        Tool,
    },
    service::{RunningService, ServiceError},
};

pub use transport::TransportError;

/// The client identity the gateway presents to downstream servers.
pub const CLIENT_NAME: &str = "muster";

/// Why a connection to a downstream server could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The transport could not be set up (the command does not start, the URL is invalid, ...).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The MCP handshake failed.
    #[error("MCP initialize failed: {0}")]
    Initialize(String),
    /// Reading the server's tools, resources or prompts failed.
    #[error("listing {what} failed: {source}")]
    List {
        /// tools, resources or prompts.
        what: &'static str,
        /// The failure.
        #[source]
        source: ServiceError,
    },
    /// The server did not answer within its timeout.
    #[error("{what} timed out after {}s", after.as_secs())]
    Timeout {
        /// What was being done.
        what: &'static str,
        /// The budget.
        after: Duration,
    },
}

/// The gateway's MCP client handler towards one downstream server.
#[derive(Debug, Clone, Default)]
pub struct UpstreamClient;

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live MCP connection to one downstream server, with what it offered when it connected.
#[derive(Debug)]
pub struct UpstreamConnection {
    server: String,
    timeout: Duration,
    service: RunningService<RoleClient, UpstreamClient>,
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    prompts: Vec<Prompt>,
}

impl UpstreamConnection {
    /// Connects to `server` and reads what it offers.
    pub async fn connect(server: &MCPServer) -> Result<Self, UpstreamError> {
        let name = server.metadata.name.clone();
        let timeout = Duration::from_secs(u64::from(server.spec.timeout.max(1)));
        let handshake = async {
            match server.spec.server_type {
                Some(ServerType::Stdio) | None => {
                    let t = transport::stdio(&name, &server.spec)?;
                    UpstreamClient
                        .serve(t)
                        .await
                        .map_err(|e| UpstreamError::Initialize(e.to_string()))
                }
                Some(ServerType::StreamableHttp) => {
                    let t = transport::streamable_http(&server.spec)?;
                    UpstreamClient
                        .serve(t)
                        .await
                        .map_err(|e| UpstreamError::Initialize(e.to_string()))
                }
                Some(ServerType::Sse) => Err(TransportError::LegacySseUnsupported.into()),
                Some(_) => Err(TransportError::LegacySseUnsupported.into()),
            }
        };
        let service = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| UpstreamError::Timeout {
                what: "MCP initialize",
                after: timeout,
            })??;
        let mut conn = Self {
            server: name,
            timeout,
            service,
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
        };
        conn.refresh().await?;
        Ok(conn)
    }

    /// Reads the server's tools, resources and prompts again (all pages).
    pub async fn refresh(&mut self) -> Result<(), UpstreamError> {
        let caps = self
            .service
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let peer = self.service.peer().clone();
        self.tools = if caps.tools.is_some() {
            self.bounded("tools/list", peer.list_all_tools())
                .await?
                .map_err(|source| UpstreamError::List { what: "tools", source })?
        } else {
            Vec::new()
        };
        self.resources = if caps.resources.is_some() {
            self.bounded("resources/list", peer.list_all_resources())
                .await?
                .map_err(|source| UpstreamError::List {
                    what: "resources",
                    source,
                })?
        } else {
            Vec::new()
        };
        self.prompts = if caps.prompts.is_some() {
            self.bounded("prompts/list", peer.list_all_prompts())
                .await?
                .map_err(|source| UpstreamError::List {
                    what: "prompts",
                    source,
                })?
        } else {
            Vec::new()
        };
        Ok(())
    }

    async fn bounded<T>(&self, what: &'static str, fut: impl Future<Output = T>) -> Result<T, UpstreamError> {
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| UpstreamError::Timeout {
                what,
                after: self.timeout,
            })
    }

    /// The MCPServer's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tools the server offered, under its own names.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The resources the server offered.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The prompts the server offered.
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    /// The server's self-description from the handshake (name, version), when it gave one.
    pub fn server_info(&self) -> Option<Implementation> {
        self.service.peer_info().and_then(|i| i.server_info.clone())
    }

    /// Whether the connection is closed (the process exited, the transport failed).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// Calls the server's tool `tool` (its own name) with `arguments`, within the server's
    /// timeout and the caller's cancellation.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: &CallContext,
    ) -> Result<CallToolResult, ToolError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = self.run(ctx, self.service.peer().call_tool(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    /// Reads the server's resource `uri` (its own URI).
    pub async fn read_resource(&self, uri: &str, ctx: &CallContext) -> Result<ReadResourceResult, ToolError> {
        let params = ReadResourceRequestParams::new(uri);
        let result = self.run(ctx, self.service.peer().read_resource(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    /// Gets the server's prompt `name` (its own name) with string arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        ctx: &CallContext,
    ) -> Result<GetPromptResult, ToolError> {
        let mut params = GetPromptRequestParams::new(name);
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let result = self.run(ctx, self.service.peer().get_prompt(params)).await?;
        result.map_err(|e| self.service_error(e))
    }

    async fn run<T>(&self, ctx: &CallContext, fut: impl Future<Output = T>) -> Result<T, ToolError> {
        let budget = match ctx.deadline {
            Some(deadline) => self
                .timeout
                .min(deadline.saturating_duration_since(std::time::Instant::now())),
            None => self.timeout,
        };
        tokio::select! {
            // Dropping the request future makes rmcp send notifications/cancelled downstream.
            () = ctx.cancellation.cancelled() => Err(ToolError::Cancelled),
            r = tokio::time::timeout(budget, fut) => r.map_err(|_| ToolError::Timeout { after: budget }),
        }
    }

    fn service_error(&self, e: ServiceError) -> ToolError {
        match e {
            ServiceError::McpError(error) => ToolError::Downstream {
                server: self.server.clone(),
                error,
            },
            other => ToolError::Transport {
                server: self.server.clone(),
                source: Box::new(other),
            },
        }
    }

    /// Closes the connection (a stdio server's process is stopped).
    pub async fn close(self) {
        let mut service = self.service;
        if let Err(e) = service.close().await {
            tracing::debug!(server = %self.server, error = %e, "closing the upstream connection");
        }
    }
}

/// A shared connection.
pub type SharedConnection = Arc<UpstreamConnection>;
