//! [`Discovery`]: the catalogue service, and [`RequestView`], the catalogue one request sees.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::{BoxFuture, FutureExt, ready};
use muster_core::{CallContext, JsonObject, NameRules, SessionId, ToolCall, ToolError, ToolOutput};
use rmcp::model::CallToolResult;
use serde::Serialize;
use tower::Service;

use super::{AuthHints, DiscoveryTool, OnRequest, error_answer, json_answer, toolset_hints::toolset_requiring_auth};
use crate::{
    CatalogError, CatalogSource, View,
    pattern::NamePattern,
    prompts, resources,
    tools::{self, Scope, ToolPage},
    toolset::{DeclaredToolset, InlineToolset, Presets, ToolsetError, resolve},
};

/// The catalogue service: answers the discovery meta-tools ([`DiscoveryTool`]) over a
/// [`CatalogSource`] and [`Presets`], each request scoped by its declared toolset (see the
/// [module documentation](super) for it at work).
///
/// `A` says which servers a sign-in would unlock ([`AuthHints`]), `R` what to do before a
/// request's catalogue is read ([`OnRequest`]); both do nothing unless set. Cloning is cheap.
pub struct Discovery<A = (), R = ()> {
    source: Arc<dyn CatalogSource>,
    presets: Arc<Presets>,
    names: Arc<NameRules>,
    auth_hints: Arc<A>,
    on_request: Arc<R>,
}

impl<A, R> Clone for Discovery<A, R> {
    fn clone(&self) -> Self {
        Self {
            source: Arc::clone(&self.source),
            presets: Arc::clone(&self.presets),
            names: Arc::clone(&self.names),
            auth_hints: Arc::clone(&self.auth_hints),
            on_request: Arc::clone(&self.on_request),
        }
    }
}

impl<A, R> std::fmt::Debug for Discovery<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("presets", &self.presets.names())
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Discovery {
    /// Discovery over `source`'s catalogues, toolsets resolved with `presets`, exposed names by
    /// the default rules ([`Self::with_names`]), and no hooks.
    pub fn new(source: Arc<dyn CatalogSource>, presets: Arc<Presets>) -> Self {
        Self {
            source,
            presets,
            names: Arc::new(NameRules::default()),
            auth_hints: Arc::new(()),
            on_request: Arc::new(()),
        }
    }
}

impl<A, R> Discovery<A, R> {
    /// The same service with the gateway's exposed-name rules (`toolset_requiring_auth` reads
    /// from them how the tools of a server not listed yet will be named).
    #[must_use]
    pub fn with_names(mut self, names: NameRules) -> Self {
        self.names = Arc::new(names);
        self
    }

    /// The same service reporting the servers a sign-in would unlock from `hints`.
    pub fn with_auth_hints<H: AuthHints>(self, hints: H) -> Discovery<H, R> {
        Discovery {
            source: self.source,
            presets: self.presets,
            names: self.names,
            auth_hints: Arc::new(hints),
            on_request: self.on_request,
        }
    }

    /// The same service running `hook` when a request arrives, before its catalogue is read.
    pub fn with_on_request<H: OnRequest>(self, hook: H) -> Discovery<A, H> {
        Discovery {
            source: self.source,
            presets: self.presets,
            names: self.names,
            auth_hints: self.auth_hints,
            on_request: Arc::new(hook),
        }
    }

    /// The presets toolsets resolve with.
    pub fn presets(&self) -> &Arc<Presets> {
        &self.presets
    }
}

impl<A: AuthHints, R: OnRequest> Discovery<A, R> {
    /// The answer of discovery meta-tool `tool` with `args` in `ctx`: the JSON page as the text
    /// of the result, or an error result naming what is wrong (an invalid toolset first).
    pub async fn answer(&self, tool: DiscoveryTool, args: &JsonObject, ctx: &CallContext) -> CallToolResult {
        match self.request_view(ctx).await {
            Ok(request) => self.answer_in(tool, args, &ctx.session, &request),
            Err(refusal) => error_answer(refusal.to_string()),
        }
    }

    /// The catalogue the request of `ctx` sees, after the [`OnRequest`] hook ran: its session's
    /// ([`CatalogSource::catalog_for`]), narrowed by its declared toolset (a [`DeclaredToolset`]
    /// in `ctx.extensions`, else `ctx.toolset`). The refusal when that toolset is invalid: the
    /// answer of every meta-tool of the request.
    pub async fn request_view(&self, ctx: &CallContext) -> Result<RequestView, ToolsetError> {
        self.on_request.on_request(ctx).await;
        let catalog = self.source.catalog_for(&ctx.session);
        let declared = match ctx.extensions.get::<DeclaredToolset>() {
            Some(DeclaredToolset(declared)) => Some(declared.clone()?),
            None => ctx
                .toolset
                .as_ref()
                .map(|selectors| InlineToolset::parse(selectors.to_vec()))
                .transpose()?,
        };
        let Some(toolset) = declared else {
            return Ok(RequestView {
                view: catalog.view(),
                declared: None,
                unmatched: Vec::new(),
            });
        };
        let resolved = resolve(&catalog, &self.presets, &toolset)?;
        Ok(RequestView {
            view: catalog.view().restricted(&resolved.selection),
            declared: Some(toolset),
            unmatched: resolved.unmatched,
        })
    }

    fn answer_in(
        &self,
        tool: DiscoveryTool,
        args: &JsonObject,
        session: &SessionId,
        request: &RequestView,
    ) -> CallToolResult {
        let view = &request.view;
        let scope = request.scope(&self.presets);
        match tool {
            DiscoveryTool::ListTools => answer(tools::list_tools(view, args, scope).map(|mut page| {
                self.add_auth_hints(&mut page, session, None, request.declared.as_ref());
                page
            })),
            DiscoveryTool::FilterTools => answer(tools::filter_tools(view, args, scope).map(|mut page| {
                let pattern = (page.filters.pattern.as_deref())
                    .and_then(|p| NamePattern::new(p, page.filters.case_sensitive).ok());
                self.add_auth_hints(&mut page, session, pattern.as_ref(), request.declared.as_ref());
                page
            })),
            DiscoveryTool::DescribeTool => answer(tools::describe_tool(view, args, scope)),
            DiscoveryTool::ListCoreTools => answer(tools::list_core_tools(view, args)),
            DiscoveryTool::ListResources => json_answer(&resources::list_resources(view)),
            DiscoveryTool::FilterResources => answer(resources::filter_resources(view, args)),
            DiscoveryTool::DescribeResource => answer(resources::describe_resource(view, args, scope)),
            DiscoveryTool::ListPrompts => json_answer(&prompts::list_prompts(view)),
            DiscoveryTool::FilterPrompts => answer(prompts::filter_prompts(view, args)),
            DiscoveryTool::DescribePrompt => answer(prompts::describe_prompt(view, args, scope)),
        }
    }

    /// Sets `page`'s `servers_requiring_auth` (those `pattern` could match) and, for a request
    /// that declared a toolset, its `toolset_requiring_auth` (among all of them).
    fn add_auth_hints(
        &self,
        page: &mut ToolPage,
        session: &SessionId,
        pattern: Option<&NamePattern>,
        declared: Option<&InlineToolset>,
    ) {
        page.servers_requiring_auth = self.auth_hints.servers_requiring_auth(session, pattern);
        let Some(toolset) = declared else {
            return;
        };
        let every;
        let requiring = if pattern.is_none() {
            &page.servers_requiring_auth
        } else {
            every = self.auth_hints.servers_requiring_auth(session, None);
            &every
        };
        page.toolset_requiring_auth = toolset_requiring_auth(requiring, toolset, &self.presets, &self.names);
    }
}

fn answer<T: Serialize>(result: Result<T, CatalogError>) -> CallToolResult {
    match result {
        Ok(value) => json_answer(&value),
        Err(e) => error_answer(e.to_string()),
    }
}

/// Answers a call of a discovery meta-tool with its result ([`Discovery::answer`]); a call of
/// any other name is `ToolError::NotFound`.
impl<A: AuthHints, R: OnRequest> Service<ToolCall> for Discovery<A, R> {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let Some(tool) = DiscoveryTool::from_name(&call.name) else {
            return ready(Err(ToolError::not_found(call.name))).boxed();
        };
        let discovery = self.clone();
        async move { Ok(discovery.answer(tool, &call.arguments, &call.ctx).await.into()) }.boxed()
    }
}

/// The catalogue one request sees ([`Discovery::request_view`]): its session's, narrowed by its
/// declared toolset.
#[derive(Debug, Clone)]
pub struct RequestView {
    /// The session's catalogue, narrowed by the toolset.
    pub view: View,
    /// The request's toolset, when it declared one.
    pub declared: Option<InlineToolset>,
    /// The declared selectors that selected nothing.
    pub unmatched: Vec<String>,
}

impl RequestView {
    /// What bounds the request's discovery, with `presets`.
    pub fn scope<'a>(&'a self, presets: &'a Presets) -> Scope<'a> {
        Scope {
            presets,
            declared: self.declared.as_ref(),
            declared_unmatched: &self.unmatched,
        }
    }
}
