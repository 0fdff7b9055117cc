use std::sync::{Arc, Mutex};

use http::HeaderValue;
use muster_catalog::{Catalog, CatalogSource};
use muster_core::{CallContext, JsonObject, ToolCall, ToolEntry, ToolError};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SpanData, SpanExporter},
};
use rmcp::model::ContentBlock;
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
