//! The dispatcher: the innermost [`ToolService`](muster_core::ToolService) of the gateway, which
//! routes each call to whatever runs it (a downstream server, a core tool).
//!
//! Layers compose over it (`tower::ServiceBuilder`), and the meta-tools' `call_tool` calls
//! through the composed stack.
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{CallContext, JsonObject, ToolCall, config::MusterConfig};
//! use muster_gateway::{dispatch::Dispatcher, registry::{Registry, RegistryOptions}};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! let dispatcher = Dispatcher::new(Arc::clone(&registry));
//! let call = |name: &str| ToolCall::new(name, JsonObject::new(), CallContext::default());
//!
//! // A core tool runs in the gateway; x_<server>_<tool> would go to that server's connection.
//! let services = dispatcher.clone().oneshot(call("core_service_list")).await?;
//! assert!(!services.is_error());
//! let missing = dispatcher.oneshot(call("x_nope_tool")).await.unwrap_err();
//! assert_eq!(missing.to_string(), "tool not found: x_nope_tool");
//! # Ok(()) }
//! ```

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{ToolCall, ToolError, ToolOutput};
use tower::Service;

use crate::registry::Registry;

/// Routes tool calls by exposed name through the registry's current catalogue.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
}

impl Dispatcher {
    /// A dispatcher over `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }
}

impl Service<ToolCall> for Dispatcher {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let registry = Arc::clone(&self.registry);
        Box::pin(async move { registry.dispatch(call).await })
    }
}
