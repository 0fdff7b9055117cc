//! The dispatcher: the innermost [`ToolService`] of the gateway, which routes each call by its
//! exposed name to the service that runs it.
//!
//! It is built from named services: the downstream servers' tools ([`DownstreamTools`]: their
//! connections, through the registry's server table), the `workflow_<name>` tools (a [`GatewayWorkflows`] added with
//! [`Dispatcher::with_workflows`]), and the tools that run in this
//! process: the gateway's core tools ([`CoreTools`](crate::core_tools::CoreTools), added with
//! [`Dispatcher::with_tools`]) and any tool of the embedder's own ([`Dispatcher::with_tool`]),
//! kept in a [`ToolRouter`], the registry-free router an embedder composes on its own. A tool
//! added there is offered to the registry's catalogue once, so it is listed by `list_tools`,
//! found by `filter_tools`, guarded by toolsets and run by `call_tool` like every other.
//!
//! Layers compose over it (`tower::ServiceBuilder`), and the meta-tools' `call_tool` calls
//! through the composed stack.
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{CallContext, JsonObject, ToolCall, ToolEntry, ToolError, ToolKind};
//! use muster_core::config::MusterConfig;
//! use muster_gateway::{core_tools::CoreTools, dispatch::Dispatcher, registry::{Registry, RegistryOptions}};
//! use rmcp::model::{CallToolResult, Tool};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! // A tool of our own: an entry that describes it and the service that runs it.
//! let entry = ToolEntry::builtin(ToolKind::Core, Tool::new("core_hello", "Says hello.", Arc::new(JsonObject::new())));
//! let hello = tower::service_fn(|_call: ToolCall| async { Ok::<_, ToolError>(CallToolResult::structured("hello".into()).into()) });
//! let dispatcher = Dispatcher::new(Arc::clone(&registry))
//!     .with_tools(CoreTools::entries(), CoreTools::new(Arc::clone(&registry)))
//!     .with_tool(entry, hello);
//! let call = |name: &str| ToolCall::new(name, JsonObject::new(), CallContext::default());
//!
//! // It is in the catalogue next to the gateway's core tools, and runs.
//! assert!(registry.catalog().tool("core_hello").is_some());
//! assert!(!dispatcher.clone().oneshot(call("core_hello")).await?.is_error());
//! // A core tool runs in the gateway; x_<server>_<tool> would go to that server's connection.
//! assert!(!dispatcher.clone().oneshot(call("core_service_list")).await?.is_error());
//! let missing = dispatcher.oneshot(call("x_nope_tool")).await.unwrap_err();
//! assert_eq!(missing.to_string(), "tool not found: x_nope_tool");
//! # Ok(()) }
//! ```

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{
    BoxToolService, ToolCall, ToolEntry, ToolError, ToolKind, ToolOutput, ToolService, router::ToolRouter,
};
use tower::{Service, ServiceExt};

mod downstream;
pub use downstream::DownstreamTools;

use crate::{auth::DownstreamAuth, registry::Registry};

#[cfg(doc)]
use crate::workflows::GatewayWorkflows;

/// Routes tool calls by exposed name, through the session's catalogue, to the service that runs
/// each: a downstream server's connection, a core tool, a workflow, or a tool of the embedder's.
#[derive(Clone)]
pub struct Dispatcher {
    /// The downstream servers' tools, over the registry whose catalogue routes every call.
    downstream: DownstreamTools,
    /// The tools that run in this process (the core tools, the embedder's own), by exposed name.
    in_process: ToolRouter,
    /// What runs the `workflow_<name>` tools, when workflows are served.
    workflows: Option<Arc<BoxToolService>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("in_process", &self.in_process)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A dispatcher over `registry`'s servers and workflows; the tools that run in this
    /// process (the core tools among them) are added with [`Dispatcher::with_tools`] and
    /// [`Dispatcher::with_tool`].
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            downstream: DownstreamTools::new(registry),
            in_process: ToolRouter::new(),
            workflows: None,
        }
    }

    /// Runs the `workflow_<name>` tools of the registry's workflow table with `workflows`
    /// (the gateway's is a [`GatewayWorkflows`] over
    /// [`Registry::workflow_table`]). Without it a workflow the catalogue lists is refused as
    /// not served here.
    #[must_use]
    pub fn with_workflows(mut self, workflows: impl ToolService + Sync) -> Self {
        self.workflows = Some(Arc::new(BoxToolService::new(workflows)));
        self
    }

    /// Takes part in signing people in to downstream servers: a call to a server the session
    /// holds a grant for is connected with it first (refreshed when it expired).
    #[must_use]
    pub fn with_auth(mut self, auth: DownstreamAuth) -> Self {
        self.downstream = self.downstream.with_auth(&auth);
        self
    }

    /// Adds a tool of the embedder's own: `entry` describes it in the catalogue (its exposed
    /// name is `entry.name()`, which it keeps whatever the prefix rules), `service` runs its
    /// calls with the caller's whole context. A tool of the same name as a core tool replaces it.
    #[must_use]
    pub fn with_tool(mut self, entry: ToolEntry, service: impl ToolService + Sync) -> Self {
        self.downstream.registry().offer_tools([entry.clone()]);
        self.in_process = self.in_process.with_tool(entry, service);
        self
    }

    /// Adds the tools `entries` describe, all run by `service`, as [`Dispatcher::with_tool`]
    /// adds one: the gateway's core tools are added so
    /// (`with_tools(CoreTools::entries(), core_tools)`).
    #[must_use]
    pub fn with_tools<'a>(
        mut self,
        entries: impl IntoIterator<Item = &'a ToolEntry> + Clone,
        service: impl ToolService + Sync,
    ) -> Self {
        self.downstream
            .registry()
            .offer_tools(entries.clone().into_iter().cloned());
        self.in_process = self.in_process.with_tools(entries, service);
        self
    }

    /// Runs `call`: a tool that runs in this process with its service, a downstream tool on its
    /// server (the session's own connection when it signed in to it), or a workflow here.
    async fn dispatch(
        downstream: DownstreamTools,
        in_process: ToolRouter,
        workflows: Option<Arc<BoxToolService>>,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let catalog = downstream.registry().catalog_for(&call.ctx.session);
        let entry = catalog
            .tool(&call.name)
            .ok_or_else(|| ToolError::not_found(&call.name))?;
        // The catalogue says where a tool runs, so a downstream call never looks among the
        // tools run in this process (no server: the core tools, the embedder's own).
        if entry.server.is_none() && entry.kind != ToolKind::Workflow {
            let service = in_process
                .service(&call.name)
                .cloned()
                .ok_or_else(|| ToolError::not_found(&call.name))?;
            return service.oneshot(call).await;
        }
        match entry.kind {
            ToolKind::Workflow => {
                let workflows = workflows.ok_or_else(|| {
                    ToolError::invalid_arguments(format!("{}: workflows are not served by this gateway", call.name))
                })?;
                BoxToolService::clone(&workflows).oneshot(call).await
            }
            _ => downstream.call_entry(entry, call).await,
        }
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
        Box::pin(Self::dispatch(
            self.downstream.clone(),
            self.in_process.clone(),
            self.workflows.clone(),
            call,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_core::{CallContext, JsonObject, config::MusterConfig};

    /// A downstream call's future is allocated per call and copied into each box on its way:
    /// the heavy, rare branches (workflows here; the core tools behind their own boxed service)
    /// are boxed where they are awaited.
    /// Before that, it was over 16 KB.
    #[test]
    fn a_downstream_calls_future_stays_small() {
        let registry =
            Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), Default::default()).expect("a registry");
        let dispatch = Dispatcher::dispatch(
            DownstreamTools::new(registry),
            ToolRouter::new(),
            None,
            ToolCall::new("x_a_b", JsonObject::new(), CallContext::default()),
        );
        let size = std::mem::size_of_val(&dispatch);
        assert!(size < 6 * 1024, "Dispatcher::dispatch: {size} bytes");
    }

    /// The workflows are one named service of the dispatcher, composed with no `Gateway`: a
    /// workflow runs once its steps' stack is bound, and is refused once that stack is gone or
    /// when the dispatcher serves no workflows.
    #[tokio::test]
    async fn workflows_run_through_the_service_the_dispatcher_is_given() {
        use crate::workflows::GatewayWorkflows;
        use muster_core::ToolEntry;
        use muster_workflow::record::{ExecutionStore, MemoryExecutionStore};
        use rmcp::model::{CallToolResult, ContentBlock, Tool};

        let greet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "greet"},
            "spec": {
                "steps": [{"id": "say", "tool": "core_hello", "args": {}}],
                "output": {"said": "{{ .results.say.text }}"}
            }
        }))
        .expect("a workflow");
        let registry =
            Registry::new(MusterConfig::default(), Vec::new(), vec![greet], Default::default()).expect("a registry");
        let hello = tower::service_fn(|_call: ToolCall| async {
            Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(r#"{"text":"hello"}"#)]).into())
        });
        let entry = ToolEntry::builtin(
            ToolKind::Core,
            Tool::new("core_hello", "Says hello.", Arc::new(JsonObject::new())),
        );
        let records = Arc::new(MemoryExecutionStore::new());
        let workflows = GatewayWorkflows::new(Arc::clone(registry.workflow_table()), records.clone());
        let call = || ToolCall::new("workflow_greet", JsonObject::new(), CallContext::default());

        let without = Dispatcher::new(Arc::clone(&registry)).with_tool(entry.clone(), hello);
        assert!(
            registry.catalog().tool("workflow_greet").is_some(),
            "listed once its step's tool is"
        );
        let refused = without.oneshot(call()).await.expect_err("no workflow service");
        assert!(refused.to_string().contains("workflows are not served"), "{refused}");

        let stack = workflows.bind(BoxToolService::new(
            Dispatcher::new(Arc::clone(&registry))
                .with_tool(entry, hello)
                .with_workflows(workflows.clone()),
        ));
        let result = stack
            .clone()
            .oneshot(call())
            .await
            .expect("runs")
            .into_result()
            .expect("a result");
        assert_eq!(result.structured_content, Some(serde_json::json!({"said": "hello"})));
        assert_eq!(
            records.list(&Default::default()).expect("records").total,
            1,
            "the run is recorded"
        );

        drop(stack);
        let after = workflows.oneshot(call()).await.expect_err("the stack is gone");
        assert!(after.to_string().contains("shutting down"), "{after}");
    }
}
