use std::sync::{Arc, Mutex};

use muster_catalog::{Catalog, CatalogSource};
use muster_core::{CallContext, JsonObject, ToolCall, ToolEntry, ToolError};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SpanData, SpanExporter},
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ContentBlock, InitializeRequest, InitializeRequestParams, JsonRpcRequest,
    ListToolsRequest, NumberOrString,
};
use tower::{ServiceBuilder, ServiceExt};
use tracing_subscriber::prelude::*;

use super::*;
use crate::metrics::{GatewayMetrics, MetricsLayer};

/// Keeps every exported span.
#[derive(Debug, Clone, Default)]
struct Captured(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Captured {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend(batch);
        Ok(())
    }
}

impl Captured {
    fn named(&self, name: &str) -> Vec<SpanData> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

fn provider() -> (SdkTracerProvider, Captured) {
    let captured = Captured::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(captured.clone())
        .build();
    (provider, captured)
}

/// A call of `x_demo_echo` (server `demo`) through [`MetricsLayer`], answered by `answer`.
async fn metered_demo_echo<F>(answer: impl Fn() -> F + Clone) -> Result<muster_core::ToolOutput, ToolError>
where
    F: Future<Output = Result<muster_core::ToolOutput, ToolError>>,
{
    let tool = rmcp::model::Tool::new("echo", "echoes", Arc::new(serde_json::Map::new()));
    let mut builder = Catalog::builder();
    builder.push_tool(ToolEntry::downstream("x_demo_echo", "demo", tool));
    let catalog = Arc::new(builder.build());
    let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
    let service = ServiceBuilder::new()
        .layer(MetricsLayer::new(Arc::new(GatewayMetrics::new()), source))
        .service_fn(move |_call: ToolCall| answer());
    let call = ToolCall::new("x_demo_echo".to_owned(), JsonObject::new(), CallContext::default());
    service.oneshot(call).await
}

#[tokio::test]
async fn a_tool_call_is_exported_as_a_span_with_its_tool_server_and_outcome() {
    let (provider, captured) = provider();
    let subscriber = tracing_subscriber::registry().with(layer(&provider, "muster-test"));
    let _guard = tracing::subscriber::set_default(subscriber);

    metered_demo_echo(|| async {
        Ok::<_, ToolError>(rmcp::model::CallToolResult::error(vec![ContentBlock::text("no")]).into())
    })
    .await
    .expect("answered");

    let spans = captured.named("tool_call");
    assert_eq!(spans.len(), 1, "one tool_call span exported");
    let span = &spans[0];
    assert_eq!(attribute(span, "tool").as_deref(), Some("x_demo_echo"));
    assert_eq!(attribute(span, "server").as_deref(), Some("demo"));
    assert_eq!(attribute(span, "session").as_deref(), Some("default"));
    assert_eq!(attribute(span, "outcome").as_deref(), Some("tool_error"));
}

#[test]
fn a_request_with_a_traceparent_continues_the_callers_trace() {
    let (provider, captured) = provider();
    let subscriber = tracing_subscriber::registry().with(layer(&provider, "muster-test"));
    tracing::subscriber::with_default(subscriber, || {
        let mut headers = HeaderMap::new();
        headers.insert(
            TRACEPARENT,
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        let span = tracing::info_span!("mcp_request");
        adopt_remote_parent(&span, Some(&headers));
        span.in_scope(|| {});
    });
    let spans = captured.named("mcp_request");
    assert_eq!(spans.len(), 1);
    assert_eq!(
        spans[0].span_context.trace_id().to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(spans[0].parent_span_id.to_string(), "b7ad6b7169203331");
}

fn request(request: ClientRequest) -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(1), request))
}

#[test]
fn each_message_sends_its_own_trace_context_and_the_handshake_the_connections() {
    let (provider, _captured) = provider();
    let subscriber = tracing_subscriber::registry().with(layer(&provider, "muster-test"));
    tracing::subscriber::with_default(subscriber, || {
        let connect = tracing::info_span!("upstream_connect");
        let client = connect.in_scope(TraceContextClient::new);
        let connect_trace = connect.context().span().span_context().trace_id().to_string();

        // The handshake carries the connection's context.
        let init = request(ClientRequest::InitializeRequest(InitializeRequest::new(
            InitializeRequestParams::default(),
        )));
        let headers = client.headers(&init, HashMap::new());
        let sent = headers
            .get(&TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(sent.contains(&connect_trace), "{sent} names trace {connect_trace}");

        // A call carries its own (its `_meta`), set per request.
        let call_span = tracing::info_span!("tool_call");
        let meta = request_meta(&call_span).expect("a valid span context");
        let mut call = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("echo")));
        call.get_meta_mut().extend(meta.clone());
        let headers = client.headers(&request(call), HashMap::new());
        assert_eq!(
            headers.get(&TRACEPARENT).and_then(|v| v.to_str().ok()),
            meta.get_traceparent(),
            "the call's own context, not the connection's"
        );

        // A message without a context of its own gets none.
        let list = request(ClientRequest::ListToolsRequest(ListToolsRequest::default()));
        assert!(!client.headers(&list, HashMap::new()).contains_key(&TRACEPARENT));
    });
}

/// What the downstream of the end-to-end test saw of each `tools/call`: the `traceparent` of
/// its `_meta`, and the one of the HTTP request that carried it.
#[derive(Debug, Clone, Default)]
struct SeenTrace {
    meta: Arc<Mutex<Vec<Option<String>>>>,
    headers: Arc<Mutex<Vec<Option<String>>>>,
}

#[derive(Debug, Clone)]
struct TraceRecorder(SeenTrace);

impl rmcp::ServerHandler for TraceRecorder {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(rmcp::model::ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let traceparent = context.meta.get_traceparent().map(str::to_owned);
        self.0.meta.lock().unwrap_or_else(|e| e.into_inner()).push(traceparent);
        Ok(rmcp::model::CallToolResult::success(vec![ContentBlock::text("ok")]).into())
    }
}

/// A call to a downstream server over streamable HTTP, made inside a span, carries that span's
/// trace: in the request's `_meta` (SEP-414) and as the `traceparent` header of its POST.
#[tokio::test(flavor = "current_thread")]
async fn a_downstream_call_carries_the_callers_trace_in_meta_and_headers() {
    use axum::{
        extract::Request,
        middleware::{Next, from_fn},
    };
    use rmcp::transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    };
    use tracing::Instrument as _;

    let (provider, _captured) = provider();
    let subscriber = tracing_subscriber::registry().with(layer(&provider, "muster-test"));
    let _guard = tracing::subscriber::set_default(subscriber);

    let seen = SeenTrace::default();
    let handler = TraceRecorder(seen.clone());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let headers = Arc::clone(&seen.headers);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(from_fn(move |request: Request, next: Next| {
                let headers = Arc::clone(&headers);
                async move {
                    let (parts, body) = request.into_parts();
                    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
                    if String::from_utf8_lossy(&bytes).contains("\"tools/call\"") {
                        let traceparent = parts
                            .headers
                            .get(&TRACEPARENT)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        headers.lock().unwrap_or_else(|e| e.into_inner()).push(traceparent);
                    }
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
            }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });

    let spec = muster_core::crd::MCPServerSpec {
        server_type: Some(muster_core::crd::ServerType::StreamableHttp),
        url: Some(url),
        timeout: 10,
        ..Default::default()
    };
    let server = muster_core::crd::MCPServer::new("traced", spec);
    let connection = crate::upstream::UpstreamConnection::connect(&server, None, crate::upstream::Egress::Open)
        .await
        .expect("connects");

    let span = tracing::info_span!("tool_call");
    let trace_id = span.context().span().span_context().trace_id().to_string();
    let result = connection
        .call_tool("anything", JsonObject::new(), &CallContext::default())
        .instrument(span)
        .await
        .expect("answered");
    assert!(!result.is_error());

    let meta = seen.meta.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let headers = seen.headers.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(meta.len(), 1, "{meta:?}");
    let sent = meta[0].clone().expect("the call's _meta carries a traceparent");
    assert!(sent.contains(&trace_id), "{sent} names the caller's trace {trace_id}");
    assert_eq!(headers, vec![Some(sent)], "the POST carries the same traceparent");
}

#[tokio::test]
async fn with_tool_calls_exports_each_calls_span_where_the_log_leaves_it_out() {
    use tracing::Instrument as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let (provider, captured) = provider();
    // What the log (filtered at info) formats: the spans it is handed.
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let subscriber = tracing_subscriber::registry()
        .with(SpanNames(Arc::clone(&logged)).with_filter(EnvFilter::new("info")))
        .with(layer(&provider, "muster-test").with_filter(with_tool_calls(EnvFilter::new("info"))));
    let _guard = tracing::subscriber::set_default(subscriber);

    let called = metered_demo_echo(|| async {
        tracing::debug!("not exported: an event at debug");
        Ok::<_, ToolError>(rmcp::model::CallToolResult::success(Vec::new()).into())
    });
    let request = tracing::info_span!(crate::metrics::REQUEST_SPAN);
    called.instrument(request).await.expect("answered");

    // The log saw the request's span only; OpenTelemetry got both, the call in the request.
    assert_eq!(
        *logged.lock().unwrap_or_else(|e| e.into_inner()),
        vec!["mcp_request".to_owned()]
    );
    let requests = captured.named("mcp_request");
    let calls = captured.named("tool_call");
    assert_eq!((requests.len(), calls.len()), (1, 1), "one span of each exported");
    assert_eq!(calls[0].parent_span_id, requests[0].span_context.span_id());
    assert_eq!(attribute(&calls[0], "server").as_deref(), Some("demo"));
    assert!(
        calls[0].events.is_empty(),
        "no debug event exported: {:?}",
        calls[0].events
    );
}

/// Keeps the name of each span it is handed.
struct SpanNames(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanNames {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let name = attrs.metadata().name().to_owned();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(name);
    }
}
