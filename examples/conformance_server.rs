//! The downstream fixture of the MCP conformance run (`scripts/conformance`): an rmcp server with
//! every tool, resource, template, prompt and completion that the server scenarios of the official
//! suite (`@modelcontextprotocol/conformance`) call by name, over stdio (the default) or
//! streamable HTTP on 127.0.0.1.
//!
//! ```text
//! conformance_server                 # stdio (how the gateway runs it)
//! conformance_server --port 0        # streamable HTTP; prints `listening on http://ADDR/mcp`
//! ```
//!
//! Run the suite against it directly to check the fixture itself (every scenario passes), then
//! behind the gateway (`aggregator.exposure: native`, `prefixMode: never`) to check the gateway:
//!
//! ```text
//! conformance server --url http://127.0.0.1:PORT/mcp --suite all
//! ```
//!
//! The names and answers follow the scenarios' own requirements (`conformance list --server`
//! and each scenario's description): tools `test_simple_text`, `test_image_content`,
//! `test_audio_content`, `test_embedded_resource`, `test_multiple_content_types`,
//! `test_tool_with_logging`, `test_tool_with_progress`, `test_error_handling`, `test_sampling`,
//! `test_elicitation`, `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums`,
//! `test_reconnection` and `json_schema_2020_12_tool`; resources `test://static-text`,
//! `test://static-binary` and `test://watched-resource`; template `test://template/{id}/data`;
//! prompts `test_simple_prompt`, `test_prompt_with_arguments`,
//! `test_prompt_with_embedded_resource` and `test_prompt_with_image`; completion of prompt and
//! template arguments; `logging/setLevel`; `resources/subscribe` and `unsubscribe`.
//!
//! The schemas the suite checks key by key (the JSON Schema 2020-12 tool, the elicitation forms)
//! are written out as the suite states them; everything else is typed.

// Logging, sampling and `resources/subscribe` are deprecated by the newest MCP revision, but
// the conformance scenarios (2025-06-18 and 2025-11-25) exercise them.
#![allow(deprecated)]

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use clap::Parser;
use futures::future::BoxFuture;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    handler::server::{
        router::tool::{ToolRoute, ToolRouter},
        tool::ToolCallContext,
        wrapper::Parameters,
    },
    model::{
        CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
        CreateMessageRequestParams, ElicitRequestParams, ElicitationSchema, GetPromptRequestParams, GetPromptResponse,
        GetPromptResult, Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
        ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate, Role,
        SamplingMessage, ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams, Tool,
        UnsubscribeRequestParams,
    },
    schemars::{self, JsonSchema},
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde::Deserialize;
use serde_json::{Value, json};

/// A 1x1 red PNG.
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// A WAV file (8 kHz, 16-bit mono) with a header and no samples.
const WAV_EMPTY: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

const STATIC_TEXT_URI: &str = "test://static-text";
const STATIC_BINARY_URI: &str = "test://static-binary";
const WATCHED_URI: &str = "test://watched-resource";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
const SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

/// The pause between the notifications of the logging and progress tools, as the suite asks.
const STEP: Duration = Duration::from_millis(50);

#[derive(Debug, Parser)]
#[command(
    name = "conformance_server",
    about = "The MCP conformance suite's downstream fixture"
)]
struct Cli {
    /// Serve streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio.
    #[arg(long)]
    port: Option<u16>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the client's LLM.
    prompt: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

/// What one session changed: its log level and its subscriptions.
#[derive(Debug)]
struct SessionState {
    log_level: Mutex<LoggingLevel>,
    subscriptions: Mutex<BTreeSet<String>>,
}

/// The fixture server; one per session (stdio has one).
#[derive(Debug, Clone)]
struct Conformance {
    tools: Arc<ToolRouter<Conformance>>,
    state: Arc<SessionState>,
}

#[tool_router]
impl Conformance {
    #[tool(description = "Returns one text item.")]
    fn test_simple_text(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("This is a simple text response for testing.")])
    }

    #[tool(description = "Returns one image item (a 1x1 PNG).")]
    fn test_image_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::image(PNG_1X1, "image/png")])
    }

    #[tool(description = "Returns one audio item (an empty WAV).")]
    fn test_audio_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::audio(WAV_EMPTY, "audio/wav")])
    }

    #[tool(description = "Returns one embedded text resource.")]
    fn test_embedded_resource(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text("This is an embedded resource content.", "test://embedded-resource")
                .with_mime_type("text/plain"),
        )])
    }

    #[tool(description = "Returns a text, an image and an embedded resource item.")]
    fn test_multiple_content_types(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG_1X1, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(r#"{"test":"data","value":123}"#, "test://mixed-content-resource")
                    .with_mime_type("application/json"),
            ),
        ])
    }

    #[tool(description = "Sends three info log notifications, 50 ms apart, while it runs.")]
    async fn test_tool_with_logging(&self, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let steps = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        for (i, message) in steps.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(STEP).await;
            }
            self.log(&ctx, LoggingLevel::Info, message).await;
        }
        CallToolResult::success(vec![ContentBlock::text("Logging test completed")])
    }

    #[tool(description = "Reports progress 0/100, 50/100 and 100/100, 50 ms apart, to the call's progress token.")]
    async fn test_tool_with_progress(&self, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let token = ctx.meta.get_progress_token();
        for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(STEP).await;
            }
            if let Some(token) = &token {
                let _ = ctx
                    .peer
                    .notify_progress(ProgressNotificationParam::new(token.clone(), progress).with_total(100.0))
                    .await;
            }
        }
        CallToolResult::success(vec![ContentBlock::text("Progress test completed")])
    }

    #[tool(description = "Always fails with a tool error (isError: true).")]
    fn test_error_handling(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])
    }

    #[tool(description = "Asks the client's LLM (sampling/createMessage) to answer the prompt.")]
    async fn test_sampling(
        &self,
        Parameters(args): Parameters<SamplingArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let request = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(args.prompt)], 100);
        match ctx.peer.create_message(request).await {
            Ok(answer) => {
                let text = answer
                    .message
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map_or_else(|| "(no text)".to_owned(), |t| t.text.clone());
                CallToolResult::success(vec![ContentBlock::text(format!("LLM response: {text}"))])
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("Sampling failed: {e}"))]),
        }
    }

    #[tool(description = "Asks the user (elicitation/create) for a username and an email address.")]
    async fn test_elicitation(
        &self,
        Parameters(args): Parameters<ElicitationArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        });
        elicit(&ctx, args.message, schema, "User response").await
    }

    #[tool(description = "Asks the user for a form whose every field has a default (SEP-1034).")]
    async fn test_elicitation_sep1034_defaults(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            }
        });
        let message = "Test client default value handling - please accept with defaults";
        elicit(&ctx, message.to_owned(), schema, "Elicitation completed").await
    }

    #[tool(description = "Asks the user for a form with the five enum forms of SEP-1330.")]
    async fn test_elicitation_sep1330_enums(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]
                    }
                }
            }
        });
        let message = "Test enum schema improvements - please choose";
        elicit(&ctx, message.to_owned(), schema, "Elicitation completed").await
    }

    #[tool(
        description = "Answers after a short pause (the SSE polling scenario calls it; closing the stream \
                          mid-call is up to the transport in front)."
    )]
    async fn test_reconnection(&self) -> CallToolResult {
        tokio::time::sleep(Duration::from_millis(100)).await;
        CallToolResult::success(vec![ContentBlock::text("Reconnection test completed successfully")])
    }
}

impl Conformance {
    fn new() -> Self {
        let mut router = Self::tool_router();
        router.add_route(ToolRoute::new_dyn(schema_tool(), schema_tool_call));
        Self {
            tools: Arc::new(router),
            state: Arc::new(SessionState {
                log_level: Mutex::new(LoggingLevel::Info),
                subscriptions: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// Sends a log notification when `level` is at least the session's level.
    async fn log(&self, ctx: &RequestContext<RoleServer>, level: LoggingLevel, message: &str) {
        let threshold = *self.state.log_level.lock().unwrap_or_else(|e| e.into_inner());
        if severity(level) < severity(threshold) {
            return;
        }
        let _ = ctx
            .peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(level, Value::from(message)).with_logger("conformance_server"),
            )
            .await;
    }
}

/// The syslog order of the MCP log levels.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Asks the client for the form `schema` (written as the suite states it) and answers what the
/// user did, prefixed by `label`.
async fn elicit(
    ctx: &RequestContext<RoleServer>,
    message: String,
    schema: Value,
    label: &str,
) -> Result<CallToolResult, McpError> {
    let requested_schema: ElicitationSchema = serde_json::from_value(schema)
        .map_err(|e| McpError::internal_error(format!("the fixture's elicitation schema is invalid: {e}"), None))?;
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    };
    Ok(match ctx.peer.create_elicitation(request).await {
        Ok(answer) => {
            // The wire name (accept, decline, cancel).
            let action = serde_json::to_value(&answer.action).unwrap_or(Value::Null);
            let action = action.as_str().unwrap_or("unknown");
            let content = answer.content.unwrap_or(Value::Null);
            CallToolResult::success(vec![ContentBlock::text(format!(
                "{label}: action={action}, content={content}"
            ))])
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("Elicitation failed: {e}"))]),
    })
}

/// The tool of the JSON Schema 2020-12 scenario (SEP-1613): its input schema must reach the
/// client with `$schema`, `$defs` and `additionalProperties` intact, so it is written out.
fn schema_tool() -> Tool {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"}
                }
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"}
        },
        "additionalProperties": false
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(SCHEMA_TOOL, "Tool with JSON Schema 2020-12 features", Arc::new(schema))
}

/// Greets the `name` argument.
fn schema_tool_call(ctx: ToolCallContext<'_, Conformance>) -> BoxFuture<'_, Result<CallToolResponse, McpError>> {
    let name = ctx
        .arguments
        .as_ref()
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("world")
        .to_owned();
    Box::pin(async move { Ok(CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}!"))]).into()) })
}

fn text_arg<'a>(arguments: Option<&'a JsonObject>, name: &str) -> Option<&'a str> {
    arguments.and_then(|a| a.get(name)).and_then(Value::as_str)
}

fn required_arg<'a>(arguments: Option<&'a JsonObject>, name: &str) -> Result<&'a str, McpError> {
    text_arg(arguments, name).ok_or_else(|| McpError::invalid_params(format!("argument {name} is required"), None))
}

/// The `{id}` of a URI of the template `test://template/{id}/data`.
fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The values of `candidates` that start with `typed`.
fn complete_from(candidates: &[&str], typed: &str) -> Vec<String> {
    candidates
        .iter()
        .filter(|c| c.starts_with(typed))
        .map(|c| (*c).to_owned())
        .collect()
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_logging()
                .enable_completions()
                .build(),
        )
        .with_server_info(Implementation::new(
            "muster-conformance-fixture",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.state.log_level.lock().unwrap_or_else(|e| e.into_inner()) = request.level;
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(STATIC_TEXT_URI, "static-text")
                .with_description("A static text resource.")
                .with_mime_type("text/plain"),
            Resource::new(STATIC_BINARY_URI, "static-binary")
                .with_description("A static binary resource (a 1x1 PNG).")
                .with_mime_type("image/png"),
            Resource::new(WATCHED_URI, "watched-resource")
                .with_description("A resource to subscribe to.")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .with_description("JSON data for the given id.")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        let contents = match uri {
            STATIC_TEXT_URI => ResourceContents::text("This is the content of the static text resource.", uri)
                .with_mime_type("text/plain"),
            STATIC_BINARY_URI => ResourceContents::blob(PNG_1X1, uri).with_mime_type("image/png"),
            WATCHED_URI => {
                ResourceContents::text("The watched resource has not changed.", uri).with_mime_type("text/plain")
            }
            _ => match template_id(uri) {
                Some(id) => {
                    let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                    ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
                }
                None => {
                    return Err(McpError::resource_not_found(
                        format!("resource {uri:?} not found"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.state
            .subscriptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.state
            .subscriptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let argument = |name: &str, description: &str| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(true)
        };
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new("test_simple_prompt", Some("A prompt without arguments."), None),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt that repeats its two arguments."),
                Some(vec![
                    argument("arg1", "First test argument"),
                    argument("arg2", "Second test argument"),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that embeds the resource it is given."),
                Some(vec![argument("resourceUri", "URI of the resource to embed")]),
            ),
            Prompt::new("test_prompt_with_image", Some("A prompt with an image."), None),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.as_ref();
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![PromptMessage::new_text(
                Role::User,
                "This is a simple prompt for testing.",
            )],
            "test_prompt_with_arguments" => {
                let (arg1, arg2) = (required_arg(args, "arg1")?, required_arg(args, "arg2")?);
                vec![PromptMessage::new_text(
                    Role::User,
                    format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
                )]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = required_arg(args, "resourceUri")?;
                vec![
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::resource(
                            ResourceContents::text("Embedded resource content for testing.", uri)
                                .with_mime_type("text/plain"),
                        ),
                    ),
                    PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
                ]
            }
            "test_prompt_with_image" => vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG_1X1, "image/png")),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ],
            other => {
                return Err(McpError::invalid_params(format!("prompt {other:?} not found"), None));
            }
        };
        Ok(GetPromptResult::new(messages).into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let typed = request.argument.value.as_str();
        let values = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(_), "arg1" | "arg2") => {
                complete_from(&["paris", "park", "party", "test", "testValue1", "testValue2"], typed)
            }
            (Reference::Resource(_), "id") => complete_from(&["1", "2", "3", "123"], typed),
            _ => Vec::new(),
        };
        let completion = CompletionInfo::new(values).map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(completion))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    match cli.port {
        None => {
            Conformance::new()
                .serve(rmcp::transport::stdio())
                .await?
                .waiting()
                .await?;
        }
        Some(port) => {
            let service = StreamableHttpService::new(
                || Ok(Conformance::new()),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            let local = listener.local_addr()?;
            // The one line a script reads to find the server.
            #[allow(clippy::print_stdout)]
            {
                println!("listening on http://{local}/mcp");
            }
            axum::serve(listener, app).await?;
        }
    }
    Ok(())
}
