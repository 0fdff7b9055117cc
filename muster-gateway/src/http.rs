//! The HTTP front: MCP over streamable HTTP at `/mcp` and `GET /health`, as one axum router.
//!
//! ```no_run
//! # async fn run(gateway: muster_gateway::Gateway) -> std::io::Result<()> {
//! let app = gateway.router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

use std::sync::Arc;

use axum::{Json, Router, routing::get};
use muster_catalog::toolset::ToolsetHeaderLayer;
use muster_core::BoxToolService;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{meta::MetaTools, registry::Registry};

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";
/// The path of the health check.
pub const HEALTH_PATH: &str = "/health";

/// The gateway's HTTP routes: `/mcp` (streamable HTTP, sessions and the stateless protocol) and
/// `/health`. Sessions end when `shutdown` is cancelled.
pub fn router(registry: Arc<Registry>, tools: BoxToolService, shutdown: CancellationToken) -> Router {
    let config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown);
    let factory_registry = Arc::clone(&registry);
    let mcp = StreamableHttpService::new(
        move || Ok(MetaTools::new(Arc::clone(&factory_registry), tools.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    let sign_in = crate::auth::routes(Arc::clone(&registry));
    Router::new()
        .nest_service(
            MCP_PATH,
            tower::ServiceBuilder::new().layer(ToolsetHeaderLayer).service(mcp),
        )
        .route(HEALTH_PATH, get(move || health(Arc::clone(&registry))))
        .merge(sign_in)
}

async fn health(registry: Arc<Registry>) -> Json<Value> {
    let servers = registry.servers();
    let ready = servers.iter().filter(|s| s.runtime.state.is_ready()).count();
    Json(json!({"status": "ok", "servers": {"total": servers.len(), "ready": ready}}))
}
