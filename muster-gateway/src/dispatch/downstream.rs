//! [`DownstreamTools`]: the downstream servers' tools as one [`ToolService`](muster_core::ToolService).

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{ToolCall, ToolEntry, ToolError, ToolOutput};
use tower::Service;

use crate::{
    auth::{DownstreamAuth, SignInService},
    registry::Registry,
};

/// The downstream servers' tools of a registry, each call run on its server's connection.
///
/// A call of an exposed name goes, through the caller's session catalogue, to the server that
/// provides the tool: the session's own connection when it signed in to that server (connected,
/// or refreshed, first when it takes part in sign-in: [`DownstreamTools::with_auth`]), else the
/// gateway's connection. The server is sent its own name for the tool, and a family's tool
/// takes its instance from its instance argument, which is removed. The
/// [`Dispatcher`](crate::dispatch::Dispatcher) routes the catalogue's downstream entries here; alone, it
/// serves only the downstream tools:
///
/// ```
/// use std::sync::Arc;
/// use muster_core::{CallContext, JsonObject, ToolCall, config::MusterConfig};
/// use muster_gateway::{dispatch::DownstreamTools, registry::{Registry, RegistryOptions}};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
/// let downstream = DownstreamTools::new(Arc::clone(&registry));
/// // Not in the catalogue (no server provides it), or not a downstream tool: not found.
/// let call = ToolCall::new("core_service_list", JsonObject::new(), CallContext::default());
/// assert_eq!(downstream.oneshot(call).await.unwrap_err().to_string(), "tool not found: core_service_list");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DownstreamTools {
    registry: Arc<Registry>,
    /// Sign-in by link, when these tools take part in it.
    sign_in: Option<Arc<SignInService>>,
}

impl std::fmt::Debug for DownstreamTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownstreamTools")
            .field("sign_in", &self.sign_in.is_some())
            .finish_non_exhaustive()
    }
}

impl DownstreamTools {
    /// The tools of `registry`'s servers.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            sign_in: None,
        }
    }

    /// Takes part in signing people in to downstream servers: a call to a server the session
    /// holds a grant for is connected with it first (refreshed when it expired).
    #[must_use]
    pub fn with_auth(mut self, auth: &DownstreamAuth) -> Self {
        self.sign_in = auth.sign_in().cloned();
        self
    }

    /// The registry whose servers these are.
    pub(super) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Runs `call` of the downstream tool `entry` (the caller looked it up in the session's
    /// catalogue).
    pub(super) async fn call_entry(&self, entry: &ToolEntry, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let registry = &self.registry;
        let (server, tool, arguments) = downstream_route(entry, call.arguments, &call.name)?;
        let prepared = match &self.sign_in {
            Some(sign_in) => sign_in.prepare_call(registry, &call.ctx, &server).await?,
            None => None,
        };
        let conn = prepared
            .or_else(|| registry.connection_for(&call.ctx.session, &server))
            .ok_or_else(|| ToolError::ServerUnavailable {
                server: server.clone(),
                reason: registry
                    .server(&server)
                    .map_or_else(|| "not defined".to_owned(), |s| s.runtime.state.to_string()),
            })?;
        conn.call_tool(&tool, arguments, &call.ctx).await
    }
}

impl Service<ToolCall> for DownstreamTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let tools = self.clone();
        Box::pin(async move {
            let catalog = tools.registry.catalog_for(&call.ctx.session);
            let entry = catalog
                .tool(&call.name)
                .filter(|entry| entry.server.is_some())
                .ok_or_else(|| ToolError::not_found(&call.name))?;
            tools.call_entry(entry, call).await
        })
    }
}

/// The server and server-side tool name a downstream entry routes to, and the arguments to send:
/// a family's tool takes its instance from the instance argument, which is removed.
fn downstream_route(
    entry: &ToolEntry,
    mut arguments: muster_core::JsonObject,
    name: &str,
) -> Result<(String, String, muster_core::JsonObject), ToolError> {
    let Some(route) = &entry.family else {
        return Ok((
            entry.server.clone().unwrap_or_default(),
            entry.server_tool.clone().unwrap_or_default(),
            arguments,
        ));
    };
    let members = || route.members.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
    let instance = match arguments.remove(&route.instance_arg) {
        Some(serde_json::Value::String(s)) => s,
        _ => {
            return Err(ToolError::invalid_arguments(format!(
                "tool {name} is provided by a family on servers {}; the \"{}\" parameter is required",
                members(),
                route.instance_arg
            )));
        }
    };
    let tool = route.members.get(&instance).ok_or_else(|| {
        ToolError::invalid_arguments(format!(
            "tool {name} is not available on server {instance:?}; available: {}",
            members()
        ))
    })?;
    Ok((instance.clone(), tool.clone(), arguments))
}
