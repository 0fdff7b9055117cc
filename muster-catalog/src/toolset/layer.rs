//! The toolset as tower layers: [`ToolsetHeaderLayer`] reads `X-muster-Toolset` into an HTTP
//! request's extensions; [`ToolsetLayer`] refuses, on any [`ToolService`], a call outside the
//! call's toolset (see the [crate documentation](crate) for it at work).
//!
//! ```
//! use http::Request;
//! use muster_catalog::toolset::{DeclaredToolset, ToolsetHeaderLayer};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Whatever serves MCP behind it (rmcp's StreamableHttpService in the gateway) finds the
//! // declared toolset in the request's extensions.
//! let mcp = tower::service_fn(|request: Request<()>| async move {
//!     Ok::<_, std::convert::Infallible>(request.extensions().get::<DeclaredToolset>().cloned())
//! });
//! let app = ServiceBuilder::new().layer(ToolsetHeaderLayer).service(mcp);
//! let request = Request::post("/mcp").header("X-muster-Toolset", "preset:read-only, server:github").body(());
//! let declared = app.clone().oneshot(request.unwrap()).await.unwrap().expect("a toolset was declared");
//! assert_eq!(declared.0.unwrap().declared(), ["preset:read-only", "server:github"]);
//!
//! // A malformed one is kept as the refusal every MCP call then answers.
//! let request = Request::post("/mcp").header("X-muster-Toolset", "kubernetes").body(());
//! let declared = app.oneshot(request.unwrap()).await.unwrap().expect("a toolset was declared");
//! assert!(declared.0.unwrap_err().to_string().contains("is malformed"));
//! # }
//! ```

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::{Either, Ready, ready};
use http::HeaderMap;
use muster_core::{ToolCall, ToolError, ToolOutput};
use tower::{Layer, Service};

use super::{InlineToolset, Presets, ToolsetError, selects};
use crate::CatalogSource;

/// The request header that declares a toolset (`X-muster-Toolset`; any case).
pub const TOOLSET_HEADER: &str = "x-muster-toolset";

/// A request's declared toolset, parsed, or why it is refused. Absent when the request declared
/// none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredToolset(pub Result<InlineToolset, ToolsetError>);

impl DeclaredToolset {
    /// The toolset `headers` declare, if any (several header lines are joined with commas).
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let mut values = headers.get_all(TOOLSET_HEADER).iter().peekable();
        values.peek()?;
        let joined: Vec<String> = values
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        Some(Self(InlineToolset::from_header_value(&joined.join(","))))
    }
}

/// Reads `X-muster-Toolset` into the request's extensions as a [`DeclaredToolset`], for any
/// axum/hyper stack. A refused toolset is kept (as `Err`) so every MCP call reports it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolsetHeaderLayer;

impl<S> Layer<S> for ToolsetHeaderLayer {
    type Service = ToolsetHeader<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ToolsetHeader { inner }
    }
}

/// The service of [`ToolsetHeaderLayer`].
#[derive(Debug, Clone)]
pub struct ToolsetHeader<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for ToolsetHeader<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(declared) = DeclaredToolset::from_headers(request.headers()) {
            request.extensions_mut().insert(declared);
        }
        self.inner.call(request)
    }
}

/// Refuses a call of a tool outside the call's toolset (`ToolCall::ctx.toolset`) with
/// `tool "<name>" is outside the toolset [<selectors>]`; calls without a toolset pass.
#[derive(Clone)]
pub struct ToolsetLayer {
    catalog: Arc<dyn CatalogSource>,
    presets: Arc<Presets>,
}

impl std::fmt::Debug for ToolsetLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetLayer")
            .field("presets", &self.presets.names())
            .finish_non_exhaustive()
    }
}

impl ToolsetLayer {
    /// Enforces toolsets resolved against `catalog`'s current snapshot with `presets`.
    pub fn new(catalog: Arc<dyn CatalogSource>, presets: Arc<Presets>) -> Self {
        Self { catalog, presets }
    }
}

impl<S> Layer<S> for ToolsetLayer {
    type Service = ToolsetService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ToolsetService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`ToolsetLayer`].
#[derive(Clone)]
pub struct ToolsetService<S> {
    inner: S,
    layer: ToolsetLayer,
}

impl<S: std::fmt::Debug> std::fmt::Debug for ToolsetService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> ToolsetService<S> {
    fn check(&self, call: &ToolCall) -> Result<(), ToolError> {
        let Some(declared) = &call.ctx.toolset else {
            return Ok(());
        };
        let toolset =
            InlineToolset::parse(declared.to_vec()).map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
        let catalog = self.layer.catalog.catalog_for(&call.ctx.session);
        if catalog.tool(&call.name).is_none() {
            // Not a tool of the catalogue at all: the inner service answers "not found".
            return Ok(());
        }
        match selects(&catalog, &self.layer.presets, &toolset, &call.name) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ToolError::OutsideToolset {
                name: call.name.clone(),
                selectors: toolset.declared().to_vec(),
            }),
            Err(e) => Err(ToolError::invalid_arguments(e.to_string())),
        }
    }
}

impl<S> Service<ToolCall> for ToolsetService<S>
where
    S: Service<ToolCall, Response = ToolOutput, Error = ToolError>,
{
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = Either<S::Future, Ready<Result<ToolOutput, ToolError>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        match self.check(&call) {
            Ok(()) => Either::Left(self.inner.call(call)),
            Err(e) => Either::Right(ready(Err(e))),
        }
    }
}
