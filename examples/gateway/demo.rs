//! The demo MCP server: a few tools, a resource and a prompt, enough to see the gateway work.

use std::net::SocketAddr;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    handler::server::wrapper::{Json, Parameters},
    model::{
        CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
        ListPromptsResult, ListResourcesResult, PaginatedRequestParams, ProgressNotificationParam, Prompt,
        PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, Role, ServerCapabilities, ServerConfig,
    },
    schemars::{self, JsonSchema},
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde::{Deserialize, Serialize};

/// The text of the demo's one resource.
const GREETING: &str = "Hello from the muster demo server.";

#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddArgs {
    /// The first addend.
    a: f64,
    /// The second addend.
    b: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Sum {
    /// a + b.
    sum: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SleepArgs {
    /// How long to sleep, in seconds.
    seconds: f64,
    /// A file to write `cancelled` to if the call is cancelled (lets tests see a cancellation).
    cancel_marker: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct FailArgs {
    /// The error message to report.
    reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ListItemsArgs {
    /// How many items the whole list holds (default 5).
    total: Option<u32>,
    /// How many items one page holds (default 2).
    page_size: Option<u32>,
    /// The token of the page to read, from the previous page's `continue` (none: the first).
    #[serde(rename = "continue")]
    token: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Item {
    /// `item-<index>`.
    name: String,
    /// The item's position in the whole list.
    index: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
struct ItemPage {
    /// This page's items.
    items: Vec<Item>,
    /// The token of the next page; empty on the last page.
    #[serde(rename = "continue")]
    token: String,
}

/// The demo server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Demo;

#[tool_router]
impl Demo {
    #[tool(
        description = "Echo a message back.\nReturns the message unchanged.",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.message
    }

    #[tool(
        description = "Add two numbers and return their sum as structured content.",
        annotations(read_only_hint = true, title = "Add numbers")
    )]
    fn add(&self, Parameters(args): Parameters<AddArgs>) -> Json<Sum> {
        Json(Sum { sum: args.a + args.b })
    }

    #[tool(
        description = "Sleep for the given number of seconds, reporting progress every 100 ms.",
        annotations(read_only_hint = true)
    )]
    async fn sleep(&self, Parameters(args): Parameters<SleepArgs>, ctx: RequestContext<RoleServer>) -> String {
        let total = args.seconds.max(0.0);
        let token = ctx.meta.get_progress_token();
        let started = std::time::Instant::now();
        while started.elapsed().as_secs_f64() < total {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                () = ctx.ct.cancelled() => {
                    if let Some(marker) = &args.cancel_marker {
                        let _ = std::fs::write(marker, "cancelled");
                    }
                    return "cancelled".to_owned();
                }
            }
            if let Some(token) = &token {
                let done = started.elapsed().as_secs_f64().min(total);
                let _ = ctx
                    .peer
                    .notify_progress(ProgressNotificationParam::new(token.clone(), done).with_total(total))
                    .await;
            }
        }
        format!("slept {total}s")
    }

    #[tool(
        description = "The process id of this demo server.",
        annotations(read_only_hint = true)
    )]
    fn pid(&self) -> String {
        std::process::id().to_string()
    }

    #[tool(
        description = "List items page by page, Kubernetes style: pass the previous page's `continue` token to read the next.",
        annotations(read_only_hint = true)
    )]
    fn list_items(&self, Parameters(args): Parameters<ListItemsArgs>) -> Result<Json<ItemPage>, McpError> {
        let total = args.total.unwrap_or(5);
        let size = args.page_size.unwrap_or(2).max(1);
        let start = match args.token.as_deref().filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => token
                .strip_prefix("from-")
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| McpError::invalid_params(format!("invalid continue token {token:?}"), None))?,
        };
        let end = start.saturating_add(size).min(total);
        let items = (start..end)
            .map(|index| Item {
                name: format!("item-{index}"),
                index,
            })
            .collect();
        let token = if end < total {
            format!("from-{end}")
        } else {
            String::new()
        };
        Ok(Json(ItemPage { items, token }))
    }

    #[tool(description = "Always fail, reporting the given reason as a tool error.")]
    fn fail(&self, Parameters(args): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(
            args.reason.unwrap_or_else(|| "failed on purpose".to_owned()),
        )])
    }
}

#[tool_handler]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("muster-demo", env!("CARGO_PKG_VERSION")))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let greeting = Resource::new("demo://greeting", "greeting")
            .with_description("A friendly greeting.")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![greeting]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri == "demo://greeting" {
            Ok(ReadResourceResult::new(vec![ResourceContents::text(GREETING, request.uri)]).into())
        } else {
            Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ))
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let greet = Prompt::new(
            "greet",
            Some("Ask for a greeting of someone."),
            Some(vec![
                PromptArgument::new("name")
                    .with_description("Who to greet")
                    .with_required(true),
            ]),
        );
        Ok(ListPromptsResult::with_all_items(vec![greet]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != "greet" {
            return Err(McpError::invalid_params(format!("no prompt {}", request.name), None));
        }
        let name = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("name"))
            .and_then(|v| v.as_str())
            .ok_or_else(|| McpError::invalid_params("argument name is required", None))?;
        let message = PromptMessage::new_text(Role::User, format!("Please greet {name} warmly."));
        Ok(GetPromptResult::new(vec![message]).into())
    }
}

/// Runs the demo server over stdio, or over streamable HTTP on `http`.
pub(crate) async fn run(http: Option<SocketAddr>) -> Result<(), Box<dyn std::error::Error>> {
    match http {
        None => {
            Demo.serve(rmcp::transport::stdio()).await?.waiting().await?;
        }
        Some(addr) => {
            let service = StreamableHttpService::new(
                || Ok(Demo),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let local = listener.local_addr()?;
            // The one line a test reads to find the server.
            #[allow(clippy::print_stdout)]
            {
                println!("listening on http://{local}/mcp");
            }
            axum::serve(listener, app).await?;
        }
    }
    Ok(())
}
