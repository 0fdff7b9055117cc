//! [`MetaService`]: the 13 meta-tools as one tower service.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::{FutureExt, future::BoxFuture};
use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};
use tower::{Service, ServiceExt};

use super::{
    DispatchedTool, MetaTool, content_summary, envelope,
    hooks::{EntryError, EntryReader, Unseen, UnseenTools},
};
use crate::{
    discovery::{AuthHints, Discovery, OnRequest, RequestView, error_answer, json_answer},
    prompts, resources,
};

/// The 13 meta-tools: discovery through the catalogue service, `call_tool` through a tool
/// service, `get_resource` and `get_prompt` through an [`EntryReader`]. See the
/// [module docs](super) for an example.
///
/// It is a [`Service<ToolCall>`] answering [`ToolOutput`]; a call of a name that is not a
/// meta-tool is [`ToolError::NotFound`]. [`MetaService::answer`] is the same answer as a plain
/// async method.
pub struct MetaService<A = (), R = ()> {
    discovery: Discovery<A, R>,
    tools: BoxToolService,
    entries: Arc<dyn EntryReader>,
    unseen: Arc<dyn UnseenTools>,
}

impl<A, R> Clone for MetaService<A, R> {
    fn clone(&self) -> Self {
        Self {
            discovery: self.discovery.clone(),
            tools: self.tools.clone(),
            entries: Arc::clone(&self.entries),
            unseen: Arc::clone(&self.unseen),
        }
    }
}

impl<A, R> std::fmt::Debug for MetaService<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaService")
            .field("discovery", &self.discovery)
            .finish_non_exhaustive()
    }
}

impl<A, R> MetaService<A, R> {
    /// The meta-tools over `discovery`'s catalogue, running `call_tool` through `tools`.
    pub fn new(discovery: Discovery<A, R>, tools: BoxToolService) -> Self {
        Self {
            discovery,
            tools,
            entries: Arc::new(()),
            unseen: Arc::new(()),
        }
    }

    /// Reads resources and prompts through `entries` (`get_resource`, `get_prompt`).
    #[must_use]
    pub fn with_entries(mut self, entries: Arc<dyn EntryReader>) -> Self {
        self.entries = entries;
        self
    }

    /// Answers a `call_tool` of a tool the request does not see through `unseen`.
    #[must_use]
    pub fn with_unseen(mut self, unseen: Arc<dyn UnseenTools>) -> Self {
        self.unseen = unseen;
        self
    }

    /// The catalogue service that answers the discovery meta-tools and scopes every request.
    pub fn discovery(&self) -> &Discovery<A, R> {
        &self.discovery
    }

    /// The tool service `call_tool` runs tools through.
    pub fn tools(&self) -> &BoxToolService {
        &self.tools
    }
}

impl<A: AuthHints, R: OnRequest> MetaService<A, R> {
    /// The answer of meta-tool `tool` with `args` in `ctx`. An invalid toolset declared by the
    /// request is the answer of every meta-tool.
    pub async fn answer(&self, tool: MetaTool, args: JsonObject, ctx: CallContext) -> CallToolResult {
        if let Some(discovery) = tool.discovery() {
            return self.discovery.answer(discovery, &args, &ctx).await;
        }
        let request = match self.discovery.request_view(&ctx).await {
            Ok(request) => request,
            Err(refusal) => return error_answer(refusal.to_string()),
        };
        match tool {
            // Boxed: rare, and call_tool's future should not carry them.
            MetaTool::GetResource => Box::pin(self.get_resource(&request, &args, &ctx)).await,
            MetaTool::GetPrompt => Box::pin(self.get_prompt(&request, &args, &ctx)).await,
            // The others are the catalogue service's, answered above.
            _ => self.call_tool(&request, args, ctx).await,
        }
    }

    async fn call_tool(&self, request: &RequestView, mut args: JsonObject, ctx: CallContext) -> CallToolResult {
        let name = match args.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            _ => return error_answer("name argument is required"),
        };
        let arguments = match args.remove("arguments") {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(a)) => a,
            Some(_) => return error_answer("arguments must be a JSON object"),
        };
        let Some(entry) = request.view.tool(&name) else {
            let refusal = match &request.declared {
                Some(toolset) if request.view.hides_tool(&name) => ToolError::OutsideToolset {
                    name: name.clone(),
                    selectors: toolset.declared().to_vec(),
                },
                _ => ToolError::not_found(&name),
            };
            let unseen = Unseen {
                name: &name,
                arguments: &arguments,
                request,
                ctx: &ctx,
                refusal,
            };
            return self.unseen.answer(unseen).await;
        };
        let dispatched = DispatchedTool::of(entry, &arguments);
        // The envelope reads the typed result: a downstream's is read as one where it arrives.
        let call = ToolCall::new(name, arguments, ctx.reading_typed_result());
        let called = self.tools.clone().oneshot(call).await;
        match called.and_then(ToolOutput::into_result) {
            Ok(result) => envelope(result, &dispatched),
            Err(e @ ToolError::OutsideToolset { .. }) => error_answer(e.to_string()),
            Err(e) => error_answer(format!("Tool execution failed: {e}")),
        }
    }

    async fn get_resource(&self, request: &RequestView, args: &JsonObject, ctx: &CallContext) -> CallToolResult {
        let entry = match resources::find_resource(&request.view, args, request.scope(self.discovery.presets())) {
            Ok(e) => Arc::clone(e),
            Err(e) => return error_answer(e.to_string()),
        };
        match self.entries.read_resource(&entry.server, &entry.server_uri, ctx).await {
            Ok(read) => {
                let text: Vec<String> = read
                    .contents
                    .iter()
                    .map(|c| match c {
                        ResourceContents::TextResourceContents { text, .. } => text.clone(),
                        ResourceContents::BlobResourceContents { blob, .. } => {
                            format!("[Binary data: {} bytes]", base64_decoded_len(blob))
                        }
                        _ => String::new(),
                    })
                    .collect();
                CallToolResult::success(vec![ContentBlock::text(text.join("\n"))])
            }
            Err(EntryError::NotConnected) => error_answer(format!("server {} is not connected", entry.server)),
            Err(e) => error_answer(format!("Failed to read resource {}: {e}", entry.uri())),
        }
    }

    async fn get_prompt(&self, request: &RequestView, args: &JsonObject, ctx: &CallContext) -> CallToolResult {
        let entry = match prompts::find_prompt(&request.view, args, request.scope(self.discovery.presets())) {
            Ok(e) => Arc::clone(e),
            Err(e) => return error_answer(e.to_string()),
        };
        let arguments = match args.get("arguments") {
            None | Some(Value::Null) => None,
            // Prompt arguments are strings: other values are passed as their JSON text.
            Some(Value::Object(map)) => Some(
                map.iter()
                    .map(|(k, v)| {
                        let s = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (k.clone(), Value::String(s))
                    })
                    .collect::<JsonObject>(),
            ),
            Some(_) => return error_answer("arguments must be a JSON object"),
        };
        match self
            .entries
            .get_prompt(&entry.server, &entry.server_prompt, arguments, ctx)
            .await
        {
            Ok(prompt) => {
                let messages: Vec<Value> = prompt
                    .messages
                    .iter()
                    .map(|m| json!({"role": m.role, "content": content_summary(&m.content)}))
                    .collect();
                json_answer(&messages)
            }
            Err(EntryError::NotConnected) => error_answer(format!("server {} is not connected", entry.server)),
            Err(e) => error_answer(format!("Failed to get prompt {}: {e}", entry.name())),
        }
    }
}

fn base64_decoded_len(blob: &str) -> usize {
    let trimmed = blob.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// Answers a call of a meta-tool with its result ([`MetaService::answer`]); a call of any other
/// name is [`ToolError::NotFound`].
impl<A: AuthHints, R: OnRequest> Service<ToolCall> for MetaService<A, R> {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let Some(tool) = MetaTool::from_name(&call.name) else {
            return futures::future::ready(Err(ToolError::not_found(call.name))).boxed();
        };
        let meta = self.clone();
        async move { Ok(meta.answer(tool, call.arguments, call.ctx).await.into()) }.boxed()
    }
}
