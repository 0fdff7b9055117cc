//! `gateway agent --mcp-server`: the gateway's meta-tools for an IDE, over stdio.
//!
//! An IDE starts MCP servers as child processes and talks to them over stdio; the gateway serves
//! streamable HTTP. The agent sits between the two: an MCP server on stdio whose tools are the
//! gateway's meta-tools, each call forwarded to the gateway at `--endpoint` (an MCP client over
//! streamable HTTP).
//!
//! - `tools/list` answers the gateway's list, with `call_tool` taking one more argument,
//!   `timeout` (seconds): how long the agent waits for that one call instead of its `--timeout`
//!   (5 minutes by default). The agent consumes it; the gateway never sees it. A call that runs
//!   out of time is cancelled at the gateway and answered with a tool error naming the timeout.
//! - A `call_tool` result is unwrapped from the gateway's envelope back into the wrapped tool's
//!   own result, with the envelope's `tool` in `_meta` under `muster.giantswarm.io/tool`
//!   ([`unwrap`]), as muster's Go agent does.
//! - Progress, cancellation, `tools/list_changed`, logging, sampling and elicitation are relayed
//!   ([`relay`]).
//! - The gateway need not be up: the agent connects at start and again whenever it has no live
//!   connection. While the gateway is down each call answers a tool error that names the endpoint
//!   and how to start the gateway (and `tools/list` the 13 meta-tools muster defines); the next
//!   call after the gateway is back goes through. A read-only meta-tool whose connection broke is
//!   sent once more on a new one; `call_tool` only when it never left the agent.

pub(crate) mod duration;
mod relay;
pub(crate) mod unwrap;
mod upstream;

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use muster::catalog::meta::definitions;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

pub(crate) use self::duration::parse as parse_duration;
use self::{relay::Relay, upstream::Upstream};

/// The meta-tool whose calls the agent unwraps and bounds by their `timeout` argument.
const CALL_TOOL: &str = "call_tool";

/// The argument of `call_tool` the agent consumes.
const TIMEOUT_ARG: &str = "timeout";

/// What the agent tells an IDE when the gateway did not say.
const INSTRUCTIONS: &str = "muster aggregates many MCP servers behind a few meta-tools. Find tools with \
list_tools, filter_tools and describe_tool, then run one with call_tool {name, arguments} (optionally \
timeout: seconds to wait for that call).";

/// Runs the agent as an MCP server on stdio until the IDE closes it.
pub(crate) async fn run_mcp_server(endpoint: String, timeout: Duration) -> Result<(), Box<dyn std::error::Error>> {
    crate::connect::check_endpoint(&endpoint)?;
    let bridge = Bridge::new(endpoint, timeout);
    // Connect before the IDE's handshake so its instructions can carry the gateway's; a gateway
    // that is down is only a warning, the agent connects again when it is needed.
    match bridge.inner.upstream.connect().await {
        Ok(instructions) => {
            if let Some(instructions) = instructions {
                let _ = bridge.inner.instructions.set(instructions);
            }
            tracing::info!(endpoint = %bridge.inner.upstream.endpoint(), "connected to the gateway");
        }
        Err(e) => tracing::warn!("{e}"),
    }
    let service = bridge.clone().serve(rmcp::transport::stdio()).await?;
    bridge.inner.relay.set_ide(service.peer().clone());
    let quit = service.waiting().await;
    bridge.inner.upstream.close().await;
    quit?;
    Ok(())
}

#[derive(Debug)]
struct Inner {
    upstream: Upstream,
    timeout: Duration,
    relay: Relay,
    instructions: OnceLock<String>,
}

/// The stdio MCP server that forwards to the gateway.
#[derive(Debug, Clone)]
struct Bridge {
    inner: Arc<Inner>,
}

impl Bridge {
    fn new(endpoint: String, timeout: Duration) -> Self {
        let relay = Relay::default();
        Self {
            inner: Arc::new(Inner {
                upstream: Upstream::new(endpoint, relay.clone()),
                timeout,
                relay,
                instructions: OnceLock::new(),
            }),
        }
    }

    /// Answers the IDE's `tools/call` of meta-tool `request.name`.
    async fn call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.into_owned();
        let mut arguments = request.arguments.unwrap_or_default();
        let is_call_tool = name == CALL_TOOL;
        let per_call = if is_call_tool {
            match take_timeout(&mut arguments) {
                Ok(timeout) => timeout,
                Err(message) => return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into()),
            }
        } else {
            None
        };
        let timeout = per_call.unwrap_or(self.inner.timeout);
        let upstream = &self.inner.upstream;
        match upstream.call(&name, arguments, timeout, per_call.is_some(), &ctx).await {
            Ok(result) if is_call_tool => Ok(unwrap::unwrap(result).into()),
            Ok(result) => Ok(result.into()),
            Err(e) => e.into_response(),
        }
    }
}

/// Takes `call_tool`'s `timeout` argument (seconds, a number or a numeric string) out of its
/// arguments.
fn take_timeout(arguments: &mut JsonObject) -> Result<Option<Duration>, String> {
    let Some(value) = arguments.remove(TIMEOUT_ARG) else {
        return Ok(None);
    };
    let seconds = match &value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    seconds
        .and_then(duration::seconds_to_duration)
        .map(Some)
        .ok_or_else(|| format!("call_tool: `{TIMEOUT_ARG}` must be a positive number of seconds, got {value}"))
}

/// The tool as the agent lists it: `call_tool` documents the `timeout` argument the agent takes.
fn with_timeout_argument(mut tool: Tool, default: Duration) -> Tool {
    if tool.name != CALL_TOOL {
        return tool;
    }
    let mut schema = (*tool.input_schema).clone();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.entry(TIMEOUT_ARG).or_insert_with(|| {
            json!({
                "type": "number",
                "exclusiveMinimum": 0,
                "description": format!(
                    "Seconds the agent waits for this call before it cancels it (default {}). The agent \
                     consumes it; the tool never sees it.",
                    duration::format(default)
                ),
            })
        });
    }
    tool.input_schema = Arc::new(schema);
    tool
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let instructions = self
            .inner
            .instructions
            .get()
            .cloned()
            .unwrap_or_else(|| INSTRUCTIONS.to_owned());
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("muster-agent", env!("CARGO_PKG_VERSION")))
        .with_instructions(instructions)
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.inner.relay.set_ide(ctx.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.inner.relay.set_ide(ctx.peer);
        let tools = match self.inner.upstream.list_tools(self.inner.timeout).await {
            Ok(tools) => tools,
            Err(e) => {
                // Down for now: list what muster defines, and let each call say what is wrong.
                tracing::warn!("{e}");
                definitions().to_vec()
            }
        };
        Ok(ListToolsResult::with_all_items(
            tools
                .into_iter()
                .map(|tool| with_timeout_argument(tool, self.inner.timeout))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.inner.relay.set_ide(ctx.peer.clone());
        self.call(request, ctx).await
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let _ = requested;
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.inner.relay.subscribe_tools_changed();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn the_timeout_argument_is_taken_out_of_the_call() {
        let mut a = args(json!({"name": "x_time_get_current_time", "arguments": {}, "timeout": 2.5}));
        assert_eq!(take_timeout(&mut a), Ok(Some(Duration::from_millis(2500))));
        assert!(!a.contains_key(TIMEOUT_ARG));
        assert_eq!(a.len(), 2);

        let mut a = args(json!({"name": "t", "timeout": "30"}));
        assert_eq!(take_timeout(&mut a), Ok(Some(Duration::from_secs(30))));
        let mut a = args(json!({"name": "t"}));
        assert_eq!(take_timeout(&mut a), Ok(None));
    }

    #[test]
    fn a_timeout_that_is_not_a_positive_number_is_refused() {
        for bad in [json!(0), json!(-1), json!("soon"), json!([1])] {
            let mut a = args(json!({"name": "t", "timeout": bad}));
            let err = take_timeout(&mut a).expect_err("refused");
            assert!(err.contains("positive number of seconds"), "{err}");
        }
    }

    #[test]
    fn call_tool_lists_the_timeout_argument_and_other_tools_are_unchanged() {
        let listed: Vec<Tool> = definitions()
            .iter()
            .cloned()
            .map(|t| with_timeout_argument(t, Duration::from_secs(300)))
            .collect();
        for (tool, original) in listed.iter().zip(definitions()) {
            if tool.name == CALL_TOOL {
                let timeout = &tool.input_schema["properties"][TIMEOUT_ARG];
                assert_eq!(timeout["type"], "number");
                assert!(timeout["description"].as_str().is_some_and(|d| d.contains("5m")));
            } else {
                assert_eq!(tool, original);
            }
        }
    }
}
