//! A scripted downstream MCP server for the tests: tools whose answers a test writes as
//! closures, served by rmcp over streamable HTTP on a loopback port, in process. It records every
//! call it receives, so a test can see what the gateway sent.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
    },
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::{Map, Value};

/// What a scripted tool answers: `Ok(value)` is a success whose text is the value as JSON,
/// `Err(text)` an error result with that text.
pub type Script = Arc<dyn Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync>;

/// The credentials headers a call arrived with (`authorization`, `x-muster-id-token`,
/// `x-api-key`).
pub type CallHeaders = BTreeMap<String, String>;

#[derive(Clone, Default)]
struct Scripted {
    tools: Arc<BTreeMap<String, (Tool, Script)>>,
    calls: Arc<Mutex<Vec<(String, Value, CallHeaders)>>>,
}

/// A running scripted server.
pub struct ScriptedServer {
    pub url: String,
    calls: Arc<Mutex<Vec<(String, Value, CallHeaders)>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Builds a scripted server tool by tool.
#[derive(Default)]
pub struct ScriptedBuilder {
    tools: BTreeMap<String, (Tool, Script)>,
}

impl ScriptedBuilder {
    /// Adds tool `name` answering with `script`; `read_only` sets its readOnlyHint.
    pub fn tool(
        mut self,
        name: &str,
        read_only: bool,
        script: impl Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        let schema: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap_or_default();
        let tool = Tool::new(name.to_owned(), format!("scripted tool {name}"), Arc::new(schema))
            .with_annotations(ToolAnnotations::new().read_only(read_only));
        self.tools.insert(name.to_owned(), (tool, Arc::new(script)));
        self
    }

    /// Describes tool `name` (added before) as `description` (else "scripted tool <name>").
    pub fn described(mut self, name: &str, description: &str) -> Self {
        if let Some((tool, _)) = self.tools.get_mut(name) {
            tool.description = Some(description.to_owned().into());
        }
        self
    }

    /// Gives tool `name` (added before) an object input schema with `properties`.
    pub fn with_parameters(mut self, name: &str, properties: Value) -> Self {
        if let Some((tool, _)) = self.tools.get_mut(name) {
            let schema = serde_json::json!({"type": "object", "properties": properties});
            tool.input_schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        }
        self
    }

    /// Serves the tools on a loopback port.
    pub async fn serve(self) -> ScriptedServer {
        self.serve_inner(None, None).await
    }

    /// Serves the tools on a loopback port, answering 403 to a request without `header` set to
    /// `value` (a key a gateway reads from a Secret).
    pub async fn serve_requiring(self, header: &'static str, value: &str) -> ScriptedServer {
        self.serve_inner(None, Some((header, value.to_owned()))).await
    }

    /// Serves the tools as an OAuth protected resource of `issuer`: `/mcp` wants a bearer JWT
    /// of that issuer for this server's URL, and RFC 9728 metadata names the issuer.
    pub async fn serve_protected(self, issuer: &str) -> ScriptedServer {
        self.serve_inner(Some((issuer.to_owned(), None)), None).await
    }

    /// As [`Self::serve_protected`], accepting tokens for `audience` instead of this server's
    /// URL (a token forwarded from the gateway's front door is for the gateway).
    pub async fn serve_protected_for(self, issuer: &str, audience: &str) -> ScriptedServer {
        self.serve_inner(Some((issuer.to_owned(), Some(audience.to_owned()))), None)
            .await
    }

    async fn serve_inner(
        self,
        issuer: Option<(String, Option<String>)>,
        required: Option<(&'static str, String)>,
    ) -> ScriptedServer {
        let handler = Scripted {
            tools: Arc::new(self.tools),
            calls: Arc::default(),
        };
        let calls = Arc::clone(&handler.calls);
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let mut app = axum::Router::new().nest_service("/mcp", service);
        if let Some((issuer, audience)) = issuer {
            use muster::auth::{
                jwt::{JwtValidator, TrustedIssuer},
                resource::{BearerAuthLayer, ProtectedResource},
            };
            let resource = ProtectedResource::new(url.clone(), vec![issuer.clone()]);
            let validator = JwtValidator::new(vec![
                TrustedIssuer::new(issuer).with_audience(audience.unwrap_or_else(|| url.clone())),
            ]);
            app = app
                .layer(BearerAuthLayer::new(validator, &resource))
                .merge(resource.metadata_route());
        }
        if let Some((header, value)) = required {
            app = app.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let allowed = request
                        .headers()
                        .get(header)
                        .is_some_and(|v| v.as_bytes() == value.as_bytes());
                    async move {
                        if allowed {
                            next.run(request).await
                        } else {
                            axum::response::IntoResponse::into_response((
                                http::StatusCode::FORBIDDEN,
                                format!("{header} is missing or wrong"),
                            ))
                        }
                    }
                },
            ));
        }
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ScriptedServer { url, calls, task }
    }
}

impl ScriptedServer {
    pub fn builder() -> ScriptedBuilder {
        ScriptedBuilder::default()
    }

    /// The arguments of every call of `tool`, in order.
    pub fn calls_of(&self, tool: &str) -> Vec<Value> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(n, _, _)| n == tool)
            .map(|(_, a, _)| a.clone())
            .collect()
    }

    /// The credential headers of every call of `tool`, in order.
    pub fn headers_of(&self, tool: &str) -> Vec<CallHeaders> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(n, _, _)| n == tool)
            .map(|(_, _, h)| h.clone())
            .collect()
    }

    /// Every call, in order, by tool name.
    pub fn call_order(&self) -> Vec<String> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.tools.values().map(|(t, _)| t.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let headers: CallHeaders = ctx
            .extensions
            .get::<http::request::Parts>()
            .map(|parts| {
                ["authorization", "x-muster-id-token", "x-api-key"]
                    .into_iter()
                    .filter_map(|name| {
                        let value = parts.headers.get(name)?.to_str().ok()?;
                        Some((name.to_owned(), value.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.calls
            .lock()
            .expect("lock")
            .push((request.name.to_string(), Value::Object(args.clone()), headers));
        let (_, script) = self
            .tools
            .get(request.name.as_ref())
            .ok_or_else(|| McpError::invalid_params(format!("no tool {}", request.name), None))?;
        let result = match script(&args) {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    }
}
