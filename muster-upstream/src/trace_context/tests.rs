use std::sync::Mutex;

use muster_core::{CallContext, JsonObject};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ContentBlock, InitializeRequest, InitializeRequestParams, JsonRpcRequest,
    ListToolsRequest, NumberOrString,
};
use tracing_subscriber::prelude::*;

use super::*;

/// An OpenTelemetry layer over `provider` (which exports nothing: the spans' contexts are what
/// the tests read).
fn otel_layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("muster-upstream-test"))
}

fn request(request: ClientRequest) -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(1), request))
}

#[test]
fn each_message_sends_its_own_trace_context_and_the_handshake_the_connections() {
    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry().with(otel_layer(&provider));
    tracing::subscriber::with_default(subscriber, || {
        let connect = tracing::info_span!("upstream_connect");
        let client = connect.in_scope(|| TraceContextClient::with_client(reqwest::Client::new()));
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

    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry().with(otel_layer(&provider));
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
    let connection = crate::UpstreamConnection::connect(&server, None, crate::Egress::Open)
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
