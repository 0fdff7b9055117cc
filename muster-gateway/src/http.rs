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

use std::{
    convert::Infallible,
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Json, Router,
    body::Body,
    response::{IntoResponse, Response},
    routing::{future::RouteFuture, get},
};
use muster_catalog::toolset::{ToolsetHeader, ToolsetHeaderLayer};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use muster_auth::{
    jwt::{JwtValidator, TrustedIssuer},
    resource::{BearerAuth, BearerAuthLayer, ProtectedResource},
};
use muster_core::config::OAuthServerConfig;

use tower::{Layer, util::Either};

use crate::{meta::MetaTools, metrics::GatewayMetrics, registry::Registry};
use guard::Guarded;
use session_calls::SessionCalls;

pub(crate) mod guard;
mod kept_events;
pub(crate) mod request_head;
pub(crate) mod serve;
pub(crate) mod session_calls;
pub(crate) mod sessions;

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";
/// The path of the health check.
pub const HEALTH_PATH: &str = "/health";
/// The path of the Prometheus metrics ([`crate::metrics`]).
pub const METRICS_PATH: &str = "/metrics";

/// The MCP service of `/mcp`: the bearer check when `aggregator.oauth.server` enables it, the
/// [request guard](guard), the toolset header, then the calls answered in front of rmcp
/// ([`session_calls`]) and rmcp's streamable-HTTP service behind them.
type Mcp = Either<BearerAuth<Guarded<ToolsetMcp>>, Guarded<ToolsetMcp>>;
type ToolsetMcp = ToolsetHeader<SessionCalls<StreamableHttpService<MetaTools, sessions::Sessions>, MetaTools>>;

/// The gateway's HTTP service, as [`Gateway::serve`](crate::Gateway::serve) serves it: a request
/// to `/mcp` or a path under it goes straight to the MCP service, any other to the router of the
/// other routes (`/health`, `/metrics`, sign-in, the protected resource's metadata).
/// [`Front::into_router`] puts the same MCP service on axum's routes instead, for an
/// app that has routes of its own; past axum's router, a call skips its path lookup, the
/// extensions it inserts and the boxed route service it clones for every request.
///
/// ```no_run
/// # async fn run(gateway: muster_gateway::Gateway) -> Result<(), Box<dyn std::error::Error>> {
/// // Nested in an app of your own, next to its routes:
/// let app = axum::Router::new()
///     .route("/hello", axum::routing::get(|| async { "hello" }))
///     .merge(gateway.front().into_router());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
/// axum::serve(listener, app).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Front {
    mcp: Mcp,
    rest: Router,
    /// `aggregator.limits.maxRequestHeadBytes`: a larger head gets 431 on every route.
    max_head_bytes: usize,
}

impl fmt::Debug for Front {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Front").finish_non_exhaustive()
    }
}

impl Front {
    /// The service of the gateway of `registry`: `/mcp` served by `handler` (streamable HTTP,
    /// sessions and the stateless protocol, behind the request guard), `/health` (the
    /// registry's servers), `/metrics` (`metrics`),
    /// and `routes` of the gateway's own (the sign-in routes of
    /// [`auth::routes`](crate::auth::routes)). Sessions end when `shutdown` is cancelled;
    /// `drain` counts the requests in flight and refuses new ones once a shutdown begins.
    pub fn new(
        registry: Arc<Registry>,
        metrics: Arc<GatewayMetrics>,
        handler: MetaTools,
        routes: Router,
        shutdown: CancellationToken,
        drain: Arc<guard::Drain>,
    ) -> Self {
        let aggregator = registry.config().aggregator;
        // The request guard checks the Host (its 403 names aggregator.allowedHosts).
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown)
            .disable_allowed_hosts();
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
            hosts: Some(request_head::HostCheck::from_config(
                aggregator.allowed_hosts.as_deref(),
            )),
        };
        // One handler serves every session; each session is admitted to `sessions` once rmcp set
        // it up, and its calls are answered in front of rmcp from then on.
        let sessions = Arc::new(session_calls::SessionTable::default());
        let handler = handler.with_session_table(Arc::clone(&sessions));
        let factory_handler = handler.clone();
        let rmcp_service =
            StreamableHttpService::new(move || Ok(factory_handler.clone()), open_sessions.into(), config);
        let calls = SessionCalls::new(
            rmcp_service,
            Arc::new(handler),
            sessions,
            aggregator.limits.max_request_body_bytes,
        );
        let guarded = request_guard.layer(ToolsetHeaderLayer.layer(calls));
        let mut rest = Router::new()
            .route(
                METRICS_PATH,
                get(move |headers: http::HeaderMap| metrics_text(Arc::clone(&metrics), headers)),
            )
            .merge(routes);
        let mcp = match front_door(&aggregator.oauth.server) {
            Some((bearer, metadata)) => {
                rest = rest.merge(metadata);
                Either::Left(bearer.layer(guarded))
            }
            None => Either::Right(guarded),
        };
        let rest = rest.route(HEALTH_PATH, get(move || health(Arc::clone(&registry))));
        Self {
            mcp,
            rest,
            max_head_bytes: aggregator.limits.max_request_head_bytes,
        }
    }

    /// The same routes as an axum router: the MCP service on `/mcp`, `/mcp/` and `/mcp/*`, the
    /// paths `nest_service` would take, without its rewriting of each request's URI and its
    /// `NestedPath` extension (2.5k instructions a call), which nothing behind reads.
    /// A head over `maxRequestHeadBytes` gets 431 on each of them, as under [`Front`].
    pub fn into_router(self) -> Router {
        let max_head_bytes = self.max_head_bytes;
        Router::new()
            .route_service(MCP_PATH, self.mcp.clone())
            .route_service(&format!("{MCP_PATH}/"), self.mcp.clone())
            .route_service(&format!("{MCP_PATH}/{{*rest}}"), self.mcp)
            .merge(self.rest)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                    match request_head::head_too_large(&request, max_head_bytes) {
                        Some(refused) => refused,
                        None => next.run(request).await,
                    }
                },
            ))
    }
}

/// Whether `path` is `/mcp` or under it.
fn is_mcp_path(path: &str) -> bool {
    path.strip_prefix(MCP_PATH)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl tower::Service<http::Request<Body>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match (
            tower::Service::<http::Request<Body>>::poll_ready(&mut self.mcp, cx),
            tower::Service::<http::Request<Body>>::poll_ready(&mut self.rest, cx),
        ) {
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => Poll::Pending,
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if let Some(refused) = request_head::head_too_large(&request, self.max_head_bytes) {
            FrontFuture {
                answer: Answer::Refused { refused: Some(refused) },
            }
        } else if is_mcp_path(request.uri().path()) {
            FrontFuture {
                answer: Answer::Mcp {
                    answer: self.mcp.call(request),
                },
            }
        } else {
            FrontFuture {
                answer: Answer::Rest {
                    answer: self.rest.call(request),
                },
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of a [`Front`]: the MCP service's or the router's.
    pub struct FrontFuture {
        #[pin]
        answer: Answer,
    }
}

pin_project_lite::pin_project! {
    #[project = AnswerOf]
    enum Answer {
        Mcp { #[pin] answer: <Mcp as tower::Service<http::Request<Body>>>::Future },
        Rest { #[pin] answer: RouteFuture<Infallible> },
        Refused { refused: Option<Response> },
    }
}

impl Future for FrontFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().answer.project() {
            AnswerOf::Mcp { answer } => answer.poll(cx),
            AnswerOf::Rest { answer } => answer.poll(cx),
            AnswerOf::Refused { refused } => match refused.take() {
                Some(refused) => Poll::Ready(Ok(refused)),
                None => Poll::Pending,
            },
        }
    }
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
async fn metrics_text(metrics: Arc<GatewayMetrics>, headers: http::HeaderMap) -> impl IntoResponse {
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

#[cfg(test)]
mod tests {
    #[test]
    fn mcp_paths_are_mcp_and_under_it() {
        for path in ["/mcp", "/mcp/", "/mcp/a/b"] {
            assert!(super::is_mcp_path(path), "{path}");
        }
        for path in ["/", "/mcpx", "/mc", "/health", "/x/mcp", ""] {
            assert!(!super::is_mcp_path(path), "{path}");
        }
    }
}
