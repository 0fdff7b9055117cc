//! An MCP endpoint as an OAuth 2.1 protected resource: [`BearerAuthLayer`] admits requests
//! whose bearer JWT a [`JwtValidator`] accepts (putting its [`Claims`] into the request's
//! extensions) and answers the rest 401 with a `WWW-Authenticate` challenge naming the RFC 9728
//! metadata, which [`ProtectedResource::metadata_route`] serves.
//!
//! The gateway's front door uses it in front of `/mcp`; so does the protected downstream server
//! of the tests.
//!
//! ```
//! use muster_auth::{jwt::{JwtValidator, TrustedIssuer}, resource::{BearerAuthLayer, ProtectedResource}};
//!
//! let resource = ProtectedResource::new("https://muster.example.com/mcp", vec!["https://idp.example.com".into()]);
//! let validator = JwtValidator::new(vec![
//!     TrustedIssuer::new("https://idp.example.com").with_audience("https://muster.example.com/mcp"),
//! ]);
//! let mcp: axum::Router = axum::Router::new(); // the MCP service
//! let app = mcp
//!     .layer(BearerAuthLayer::new(validator, &resource))
//!     .merge(resource.metadata_route());
//! # let _ = app;
//! ```

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    Json, Router,
    body::Body,
    response::{IntoResponse, Response},
    routing::get,
};
use futures::future::BoxFuture;
use http::{HeaderValue, Request, StatusCode, header};
use serde_json::json;
use tower::{Layer, Service};

use crate::jwt::{Claims, JwtValidator};

/// A protected MCP endpoint and its authorization servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// The resource identifier: the endpoint's URL (e.g. `https://muster.example.com/mcp`).
    pub resource: String,
    /// The issuers of its authorization servers.
    pub authorization_servers: Vec<String>,
    /// The scopes it understands, advertised in the metadata.
    pub scopes_supported: Vec<String>,
}

impl ProtectedResource {
    /// `resource`, protected by `authorization_servers`.
    pub fn new(resource: impl Into<String>, authorization_servers: Vec<String>) -> Self {
        Self {
            resource: resource.into(),
            authorization_servers,
            scopes_supported: Vec::new(),
        }
    }

    /// The path of its metadata document: `/.well-known/oauth-protected-resource{path}`.
    pub fn metadata_path(&self) -> String {
        let path = url::Url::parse(&self.resource)
            .map(|u| u.path().trim_end_matches('/').to_owned())
            .unwrap_or_default();
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// The URL of its metadata document.
    pub fn metadata_url(&self) -> String {
        let origin = url::Url::parse(&self.resource)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default();
        format!("{origin}{}", self.metadata_path())
    }

    /// A router serving the metadata document at [`ProtectedResource::metadata_path`].
    pub fn metadata_route(&self) -> Router {
        let document = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": self.scopes_supported,
            "bearer_methods_supported": ["header"],
        });
        Router::new().route(&self.metadata_path(), get(move || async move { Json(document) }))
    }
}

/// Admits requests with a valid bearer JWT; answers the others 401.
#[derive(Debug, Clone)]
pub struct BearerAuthLayer {
    validator: JwtValidator,
    metadata_url: Arc<str>,
}

impl BearerAuthLayer {
    /// Checks bearers with `validator`; challenges name `resource`'s metadata.
    pub fn new(validator: JwtValidator, resource: &ProtectedResource) -> Self {
        Self {
            validator,
            metadata_url: Arc::from(resource.metadata_url()),
        }
    }
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BearerAuth {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`BearerAuthLayer`].
#[derive(Debug, Clone)]
pub struct BearerAuth<S> {
    inner: S,
    layer: BearerAuthLayer,
}

impl<S> Service<Request<Body>> for BearerAuth<S>
where
    S: Service<Request<Body>, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        // The clone that was polled ready serves this request (tower's usual dance).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let bearer = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .map(str::trim)
                .map(str::to_owned);
            let Some(bearer) = bearer else {
                return Ok(challenge(&layer.metadata_url, None));
            };
            match layer.validator.validate(&bearer).await {
                Ok(claims) => {
                    request.extensions_mut().insert::<Claims>(claims);
                    request
                        .extensions_mut()
                        .insert(ValidatedBearer(crate::Secret::new(bearer)));
                    inner.call(request).await
                }
                Err(e) => {
                    tracing::debug!(reason = %e, "bearer token refused");
                    Ok(challenge(&layer.metadata_url, Some(&e.to_string())))
                }
            }
        })
    }
}

/// The bearer token a [`BearerAuthLayer`] validated, in the request's extensions next to its
/// [`Claims`]: the only token the gateway forwards to a downstream server (`forwardToken`) or
/// exchanges for one (`tokenExchange`). A token that was not validated never becomes one.
#[derive(Debug, Clone)]
pub struct ValidatedBearer(pub crate::Secret);

/// A 401 whose `WWW-Authenticate` names the metadata (and, for a refused token, why).
fn challenge(metadata_url: &str, refused: Option<&str>) -> Response {
    let mut value = format!("Bearer resource_metadata=\"{metadata_url}\"");
    if let Some(reason) = refused {
        let reason = reason.replace(['"', '\\'], "'");
        value.push_str(&format!(", error=\"invalid_token\", error_description=\"{reason}\""));
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "invalid_token", "error_description": refused.unwrap_or("a bearer token is required")})),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    response
}
