//! [`ToolRouter`]: a [`ToolService`] built from named tool services.
//!
//! Each tool is added once, with the [`ToolEntry`] that describes it and the service that runs
//! it. A call goes to the service of its name; a name no tool has goes to the fallback
//! ([`ToolRouter::with_fallback`]: a gateway routes it to a downstream server), else it is
//! [`ToolError::NotFound`]. The entries are what a catalogue lists
//! ([`ToolRouter::entries`]), so a tool added here is listed, searched and called alike.
//!
//! ```
//! use std::sync::Arc;
//!
//! use muster_core::{
//!     CallContext, JsonObject, ToolCall, ToolEntry, ToolError, ToolKind, router::ToolRouter,
//! };
//! use rmcp::model::{CallToolResult, ContentBlock, Tool};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), ToolError> {
//! let said = |text: &'static str| {
//!     tower::service_fn(move |_: ToolCall| async move {
//!         Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(text)]).into())
//!     })
//! };
//! let entry = |name: &str| ToolEntry::builtin(ToolKind::Core, Tool::new(name.to_owned(), "Greets.", Arc::new(JsonObject::new())));
//! let router = ToolRouter::new()
//!     .with_tool(entry("core_hello"), said("hello"))
//!     .with_tool(entry("core_bye"), said("bye"));
//!
//! let call = |name: &str| ToolCall::new(name, JsonObject::new(), CallContext::default());
//! let answered = router.clone().oneshot(call("core_bye")).await?.into_result()?;
//! assert_eq!(answered.content[0].as_text().map(|t| t.text.as_str()), Some("bye"));
//! assert!(matches!(router.clone().oneshot(call("core_nope")).await, Err(ToolError::NotFound { .. })));
//! assert_eq!(router.entries().map(ToolEntry::name).collect::<Vec<_>>(), ["core_bye", "core_hello"]);
//! # Ok(()) }
//! ```

use std::{
    collections::BTreeMap,
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use tower::{Service, ServiceExt};

use crate::{BoxToolService, ToolCall, ToolEntry, ToolError, ToolOutput, ToolService};

/// Routes each call by its tool's name to the service added for it, else to the fallback. See
/// the [module docs](self).
#[derive(Clone, Default)]
pub struct ToolRouter {
    tools: Arc<BTreeMap<String, (ToolEntry, BoxToolService)>>,
    fallback: Option<BoxToolService>,
}

impl std::fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRouter")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl ToolRouter {
    /// A router with no tools: every call is [`ToolError::NotFound`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the tool `entry` describes (by its exposed name, `entry.name()`), run by `service`
    /// with the caller's whole context; it replaces a tool of the same name.
    #[must_use]
    pub fn with_tool(mut self, entry: ToolEntry, service: impl ToolService + Sync) -> Self {
        let name = entry.name().to_owned();
        Arc::make_mut(&mut self.tools).insert(name, (entry, BoxToolService::new(service)));
        self
    }

    /// Adds every tool `entries` describe, all run by the one `service` (which tells them apart
    /// by the call's name), as [`ToolRouter::with_tool`] adds one.
    #[must_use]
    pub fn with_tools<'a>(
        mut self,
        entries: impl IntoIterator<Item = &'a ToolEntry>,
        service: impl ToolService + Sync,
    ) -> Self {
        let service = BoxToolService::new(service);
        let tools = Arc::make_mut(&mut self.tools);
        for entry in entries {
            tools.insert(entry.name().to_owned(), (entry.clone(), service.clone()));
        }
        self
    }

    /// Sends a call of a name no tool has to `fallback`.
    #[must_use]
    pub fn with_fallback(mut self, fallback: impl ToolService + Sync) -> Self {
        self.fallback = Some(BoxToolService::new(fallback));
        self
    }

    /// The entries of the tools added, by name.
    pub fn entries(&self) -> impl Iterator<Item = &ToolEntry> {
        self.tools.values().map(|(entry, _)| entry)
    }

    /// The service of the tool called `name`, when one was added.
    pub fn service(&self, name: &str) -> Option<&BoxToolService> {
        self.tools.get(name).map(|(_, service)| service)
    }
}

impl Service<ToolCall> for ToolRouter {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        match self.service(&call.name).or(self.fallback.as_ref()) {
            Some(service) => Box::pin(service.clone().oneshot(call)),
            None => Box::pin(std::future::ready(Err(ToolError::not_found(call.name)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{CallToolResult, ContentBlock, Tool};

    use super::*;
    use crate::{CallContext, JsonObject, ToolKind};

    fn entry(name: &str) -> ToolEntry {
        ToolEntry::builtin(
            ToolKind::Core,
            Tool::new(name.to_owned(), "A tool.", Arc::new(JsonObject::new())),
        )
    }

    /// A service answering `<label>:<tool name>`.
    fn labelled(label: &'static str) -> impl ToolService + Sync {
        tower::service_fn(move |call: ToolCall| async move {
            let text = format!("{label}:{}", call.name);
            Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(text)]).into())
        })
    }

    async fn answer(router: &ToolRouter, name: &str) -> Result<String, ToolError> {
        let call = ToolCall::new(name, JsonObject::new(), CallContext::default());
        let result = router.clone().oneshot(call).await?.into_result()?;
        Ok(result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default())
    }

    #[tokio::test]
    async fn calls_go_to_their_tools_service_else_to_the_fallback() {
        let router = ToolRouter::new()
            .with_tool(entry("core_a"), labelled("a"))
            .with_tool(entry("core_b"), labelled("b"));
        assert_eq!(answer(&router, "core_a").await.ok().as_deref(), Some("a:core_a"));
        assert_eq!(answer(&router, "core_b").await.ok().as_deref(), Some("b:core_b"));
        assert!(matches!(
            answer(&router, "x_far_tool").await,
            Err(ToolError::NotFound { .. })
        ));

        let router = router.with_fallback(labelled("downstream"));
        assert_eq!(
            answer(&router, "x_far_tool").await.ok().as_deref(),
            Some("downstream:x_far_tool")
        );
        assert_eq!(answer(&router, "core_a").await.ok().as_deref(), Some("a:core_a"));
    }

    #[tokio::test]
    async fn one_service_serves_every_tool_added_with_it() {
        let router = ToolRouter::new()
            .with_tools(&[entry("core_a"), entry("core_b")], labelled("both"))
            .with_tool(entry("core_c"), labelled("c"));
        assert_eq!(answer(&router, "core_a").await.ok().as_deref(), Some("both:core_a"));
        assert_eq!(answer(&router, "core_b").await.ok().as_deref(), Some("both:core_b"));
        assert_eq!(answer(&router, "core_c").await.ok().as_deref(), Some("c:core_c"));
        assert_eq!(router.entries().count(), 3);
    }

    #[tokio::test]
    async fn a_tool_added_again_replaces_the_one_before() {
        let router = ToolRouter::new()
            .with_tool(entry("core_a"), labelled("old"))
            .with_tool(entry("core_a"), labelled("new"));
        assert_eq!(answer(&router, "core_a").await.ok().as_deref(), Some("new:core_a"));
        assert_eq!(router.entries().count(), 1);
    }
}
