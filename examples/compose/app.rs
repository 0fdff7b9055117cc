//! The composition of the compose example: everything but the listener, so a test can run it.
//!
//! ```text
//! HTTP /mcp  -> [BearerAuthLayer]  front door (optional): a bearer JWT of a trusted issuer
//!            -> ToolsetHeaderLayer X-muster-Toolset into the request
//!            -> StreamableHttpService(MetaServer)  the meta-tools (MetaService: Discovery, call_tool)
//!                                                  and the catalogue's tools, called directly
//! ToolCall   -> AuditLayer         our own layer: records every call and its outcome
//!            -> ToolsetLayer       refuses a tool outside the request's toolset
//!            -> Dispatcher         downstream tools (x_notes_*), the gateway's core_* tools and
//!                                  our own core_whoami (offered to the catalogue with it)
//! ```

use std::sync::Arc;

use axum::{Router, routing::get};
use muster::{
    auth::{
        jwt::{JwtValidator, TrustedIssuer},
        resource::{BearerAuthLayer, ProtectedResource},
    },
    catalog::{
        CatalogSource,
        discovery::Discovery,
        meta::{MetaServer, MetaService},
        toolset::{ToolsetHeaderLayer, ToolsetLayer},
    },
    core::{
        BoxError, BoxToolService,
        config::{Exposure, MusterConfig},
        crd::{MCPServer, MCPServerSpec, ServerType},
    },
    gateway::{
        core_tools::CoreTools,
        dispatch::Dispatcher,
        meta::call_context,
        registry::{Registry, RegistryOptions},
        supervisor::Supervisor,
    },
};
use rmcp::{
    model::Implementation,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;

use crate::{
    layers::{AuditLayer, AuditLog},
    notes::{self, Downstream},
    whoami,
};

/// Front-door protection of `/mcp`: bearer JWTs of `issuer`, issued for `resource`.
#[derive(Debug, Clone)]
pub(crate) struct FrontDoor {
    /// The trusted issuer (its keys are discovered from its metadata).
    pub(crate) issuer: String,
    /// This endpoint's URL, the audience tokens must name.
    pub(crate) resource: String,
}

/// The composed gateway: its HTTP routes and what a caller may want to inspect or stop.
#[derive(Debug)]
pub(crate) struct Composed {
    /// `/mcp` and `/health` (and the front door's metadata route, when protected).
    pub(crate) router: Router,
    /// The connections to downstream servers and the catalogue built from them.
    pub(crate) registry: Arc<Registry>,
    /// What the audit layer recorded.
    pub(crate) audit: AuditLog,
    /// Cancel it to end the MCP sessions (their streams), so a graceful shutdown can finish.
    pub(crate) end_sessions: CancellationToken,
    downstream: Downstream,
}

impl Composed {
    /// Closes the downstream connections and stops the in-process downstream.
    pub(crate) async fn shutdown(self) {
        self.end_sessions.cancel();
        self.registry.shutdown().await;
        self.downstream.stop().await;
    }
}

/// Starts the notes downstream, connects to it and assembles the stack.
pub(crate) async fn compose(front_door: Option<FrontDoor>) -> Result<Composed, BoxError> {
    // 1. The downstream: an rmcp server of this process, on a loopback port.
    let downstream = notes::serve().await?;

    // 2. The registry: connections to the downstream servers, the gateway's own core tools and
    //    the catalogue built from them. `start` returns once each server made its first attempt.
    let spec = MCPServerSpec {
        server_type: Some(ServerType::StreamableHttp),
        url: Some(downstream.url.clone()),
        ..MCPServerSpec::default()
    };
    let servers = vec![MCPServer::new("notes", spec)];
    let registry = Registry::new(MusterConfig::default(), servers, Vec::new(), RegistryOptions::default())?;
    Supervisor::new(Arc::clone(&registry)).start().await;

    // 3. The tool stack every call goes through, outermost first. The gateway's core tools
    //    are one named service of the dispatcher, our own core tool one more; the dispatcher
    //    offers both to the registry's catalogue: listed, searched and guarded by toolsets like
    //    the others. (Workflows would be one more: `with_workflows(GatewayWorkflows)`, its
    //    steps bound to this stack once built.)
    let catalogue: Arc<dyn CatalogSource> = Arc::clone(&registry) as _;
    let presets = Arc::clone(registry.presets());
    let audit = AuditLog::default();
    let tools = BoxToolService::new(
        ServiceBuilder::new()
            .layer(AuditLayer::new(audit.clone()))
            .layer(ToolsetLayer::new(Arc::clone(&catalogue), Arc::clone(&presets)))
            .service(
                Dispatcher::new(Arc::clone(&registry))
                    .with_tools(CoreTools::entries(), CoreTools::new(Arc::clone(&registry)))
                    .with_tool(whoami::entry(), whoami::service()),
            ),
    );
    // 4. The MCP server clients talk to: the meta-tools (filter_tools, call_tool, ...) over
    //    the registry's catalogue and the stack, and the catalogue's tools listed and called
    //    directly; each call's context names the caller the front door authenticated.
    let meta = MetaService::new(Discovery::new(catalogue, presets), tools);
    let front = MetaServer::new(meta)
        .with_exposure(Exposure::Both)
        .with_call_context(call_context)
        .with_server_info(Implementation::new("muster-compose-example", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools of the notes server (x_notes_*), muster's core tools and core_whoami, callable directly; \
             search them with filter_tools {query}.",
        );
    let end_sessions = CancellationToken::new();
    let mcp = StreamableHttpService::new(
        move || Ok(front.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_cancellation_token(end_sessions.child_token()),
    );
    let mut router = Router::new().nest_service("/mcp", ServiceBuilder::new().layer(ToolsetHeaderLayer).service(mcp));
    if let Some(door) = front_door {
        let resource = ProtectedResource::new(door.resource.clone(), vec![door.issuer.clone()]);
        let validator = JwtValidator::new(vec![TrustedIssuer::new(door.issuer).with_audience(door.resource)]);
        // `layer` wraps the routes added so far: /mcp, not the metadata or /health.
        router = router
            .layer(BearerAuthLayer::new(validator, &resource))
            .merge(resource.metadata_route());
    }
    let router = router.route("/health", get(|| async { "ok" }));
    Ok(Composed {
        router,
        registry,
        audit,
        end_sessions,
        downstream,
    })
}
