//! The HTTP front: MCP over streamable HTTP at `/mcp`, `GET /health` and the Prometheus metrics
//! at `GET /metrics` (outside the front door's bearer check, like `/health`), as one axum router;
//! with `aggregator.oauth.server` enabled, `/mcp` is an OAuth protected resource (bearer JWTs of
//! the trusted issuers, RFC 9728 metadata), and with `aggregator.oauth.mcpClient` the sign-in
//! routes are added.
//!
//! ```no_run
//! # async fn run(gateway: muster_gateway::Gateway) -> std::io::Result<()> {
//! let app = gateway.router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

use std::{sync::Arc, time::Duration};

use axum::{Json, Router, response::IntoResponse, routing::get};
use muster_catalog::toolset::ToolsetHeaderLayer;
use muster_core::BoxToolService;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use muster_auth::{
    jwt::{JwtValidator, TrustedIssuer},
    resource::{BearerAuthLayer, ProtectedResource},
};
use muster_core::config::OAuthServerConfig;

use crate::{meta::MetaTools, registry::Registry};

pub mod guard;
mod kept;
pub mod serve;
pub mod session_calls;
pub mod sessions;

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";
/// The path of the health check.
pub const HEALTH_PATH: &str = "/health";
/// The path of the Prometheus metrics ([`crate::metrics`]).
pub const METRICS_PATH: &str = "/metrics";

/// The gateway's HTTP routes: `/mcp` (streamable HTTP, sessions and the stateless protocol,
/// behind the [request guard](guard)) and `/health`. Sessions end when `shutdown` is cancelled;
/// `drain` counts the requests in flight and refuses new ones once a shutdown begins.
pub fn router(
    registry: Arc<Registry>,
    tools: BoxToolService,
    shutdown: CancellationToken,
    drain: Arc<guard::Drain>,
) -> Router {
    let aggregator = registry.config().aggregator;
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown);
    match aggregator.allowed_hosts.as_deref() {
        Some([any]) if any == "*" => config = config.disable_allowed_hosts(),
        Some(hosts) => config = config.with_allowed_hosts(hosts.iter().cloned()),
        None => {}
    }
    if !aggregator.allowed_origins.is_empty() {
        config = config
            .with_allowed_origins(aggregator.allowed_origins.iter().cloned())
            .enforce_origin_validation();
    }
    config = config.with_max_request_body_bytes(aggregator.limits.max_request_body_bytes);
    let open_sessions = sessions::Sessions::default();
    let request_guard = guard::Guard {
        max_body_bytes: aggregator.limits.max_request_body_bytes,
        max_json_depth: aggregator.limits.max_json_depth,
        drain,
        sessions: Some((open_sessions.clone(), aggregator.limits.max_sessions)),
    };
    // One handler serves every session; each session is admitted to `sessions` once rmcp set it
    // up, and its calls are answered in front of rmcp from then on.
    let sessions = Arc::new(session_calls::SessionTable::default());
    let handler = MetaTools::new(Arc::clone(&registry), tools).with_session_table(Arc::clone(&sessions));
    let factory_handler = handler.clone();
    let rmcp_service = StreamableHttpService::new(move || Ok(factory_handler.clone()), open_sessions.into(), config);
    let mcp = session_calls::SessionCalls::new(
        rmcp_service,
        Arc::new(handler),
        sessions,
        aggregator.limits.max_request_body_bytes,
    );
    let sign_in = crate::auth::routes(Arc::clone(&registry));
    let mcp = tower::ServiceBuilder::new().layer(ToolsetHeaderLayer).service(mcp);
    // The paths `nest_service` would take, without its rewriting of each request's URI and its
    // `NestedPath` extension (2.5k instructions a call), which nothing behind reads.
    let mut mcp_router = Router::new()
        .route_service(MCP_PATH, mcp.clone())
        .route_service(&format!("{MCP_PATH}/"), mcp.clone())
        .route_service(&format!("{MCP_PATH}/{{*rest}}"), mcp)
        .layer(axum::middleware::from_fn_with_state(request_guard, guard::guard));
    if let Some((layer, metadata)) = front_door(&registry.config().aggregator.oauth.server) {
        mcp_router = mcp_router.layer(layer).merge(metadata);
    }
    let metrics = Arc::clone(registry.metrics());
    mcp_router
        .route(
            METRICS_PATH,
            get(move |headers: http::HeaderMap| metrics_text(Arc::clone(&metrics), headers)),
        )
        .route(HEALTH_PATH, get(move || health(Arc::clone(&registry))))
        .merge(sign_in)
}

/// The bearer check of `/mcp` and its metadata route, when `config` enables them. Enabled with
/// no trusted issuer, every request is refused (fail closed) and the log says why.
fn front_door(config: &OAuthServerConfig) -> Option<(BearerAuthLayer, Router)> {
    if !config.enabled {
        return None;
    }
    let resource = config.resource().unwrap_or_else(|| {
        tracing::error!(
            "aggregator.oauth.server is enabled without baseUrl or resourceIdentifier; tokens cannot name this gateway"
        );
        String::new()
    });
    if config.trusted_issuers.is_empty() {
        tracing::error!(
            "aggregator.oauth.server is enabled without trustedIssuers: this gateway runs no authorization server of \
             its own, so /mcp refuses every request until trusted issuers are configured"
        );
    }
    let issuers: Vec<TrustedIssuer> = config
        .trusted_issuers
        .iter()
        .map(|t| {
            let mut trusted = TrustedIssuer::new(t.issuer()).with_audience(resource.clone());
            for audience in &config.trusted_audiences {
                trusted = trusted.with_audience(audience.clone());
            }
            match t.jwks_uri() {
                Some(uri) => trusted.with_jwks_uri(uri),
                None => trusted,
            }
        })
        .collect();
    let protected = ProtectedResource::new(
        resource,
        config.trusted_issuers.iter().map(|t| t.issuer().to_owned()).collect(),
    );
    let mut validator = JwtValidator::new(issuers);
    if let Some(seconds) = config.clock_skew_seconds {
        validator = validator.with_leeway(Duration::from_secs(seconds));
    }
    if let Some(seconds) = config.jwks_refetch_interval_seconds {
        validator = validator.with_jwks_refetch_interval(Duration::from_secs(seconds));
    }
    if let Some(seconds) = config.jwks_max_age_seconds {
        validator = validator.with_jwks_max_age(Duration::from_secs(seconds));
    }
    let layer = BearerAuthLayer::new(validator, &protected);
    Some((layer, protected.metadata_route()))
}

/// The metrics in the format the scrape's `Accept` asks for (Prometheus text unless it names
/// OpenMetrics).
async fn metrics_text(metrics: Arc<crate::metrics::GatewayMetrics>, headers: http::HeaderMap) -> impl IntoResponse {
    let format =
        crate::metrics::TextFormat::from_accept(headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()));
    (
        [(http::header::CONTENT_TYPE, format.content_type())],
        metrics.render(format),
    )
}

async fn health(registry: Arc<Registry>) -> Json<Value> {
    let servers = registry.servers();
    let ready = servers.iter().filter(|s| s.runtime.state.is_ready()).count();
    Json(json!({"status": "ok", "servers": {"total": servers.len(), "ready": ready}}))
}
