//! OpenTelemetry traces (cargo feature `otel`): the `mcp_request`, `tool_call` and
//! `upstream_connect` spans exported over OTLP, and W3C trace context (`traceparent`,
//! `tracestate`) carried in and out.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Exports to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318) over HTTP.
//! let provider = muster_gateway::metrics::otel::otlp_provider("muster")?;
//! tracing_subscriber::registry()
//!     .with(muster_gateway::metrics::otel::layer(&provider, "muster"))
//!     .with(tracing_subscriber::fmt::layer())
//!     .init();
//! // ... serve ...
//! provider.shutdown()?; // flushes the spans still buffered
//! # Ok(()) }
//! ```
//!
//! - **In**: an MCP request whose HTTP request carries `traceparent` continues the caller's
//!   trace ([`adopt_remote_parent`]).
//! - **Out**, to a downstream server over streamable HTTP: the connections of
//!   [`muster_upstream`] send each request's trace context as `traceparent` / `tracestate`
//!   headers ([`muster_upstream::trace_context`], re-exported here).

use http::{HeaderMap, HeaderName};
pub use muster_upstream::trace_context::{TRACEPARENT, TRACESTATE, TraceContextClient, request_meta};
use opentelemetry::{
    propagation::{Extractor, TextMapPropagator},
    trace::TracerProvider as _,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
pub use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Why the OTLP exporter could not be built.
pub type OtlpError = opentelemetry_otlp::ExporterBuildError;

/// A tracer provider exporting spans in batches over OTLP/HTTP (protobuf) to
/// `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (default
/// `http://localhost:4318`), as service `service_name`. Shut it down before exiting to flush.
pub fn otlp_provider(service_name: &str) -> Result<SdkTracerProvider, OtlpError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build()?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        )
        .build())
}

/// The filter of the OpenTelemetry layer beside a log that has its own: what `filter` enables,
/// and every [`tool_call`](crate::metrics::TOOL_CALL_SPAN) span, which is at `debug` inside a
/// request's span (see [`MetricsLayer`](crate::metrics::MetricsLayer)), so that each call is
/// exported whatever the log's level.
///
/// ```
/// use tracing_subscriber::{EnvFilter, Layer, prelude::*};
///
/// let provider = muster_gateway::metrics::otel::SdkTracerProvider::builder().build();
/// let subscriber = tracing_subscriber::registry()
///     .with(tracing_subscriber::fmt::layer().with_filter(EnvFilter::new("info")))
///     .with(
///         muster_gateway::metrics::otel::layer(&provider, "muster")
///             .with_filter(muster_gateway::metrics::otel::with_tool_calls(EnvFilter::new("info"))),
///     );
/// # drop(subscriber);
/// ```
pub fn with_tool_calls<S, F>(filter: F) -> impl tracing_subscriber::layer::Filter<S>
where
    S: tracing::Subscriber,
    F: tracing_subscriber::layer::Filter<S>,
{
    use tracing_subscriber::filter::{FilterExt, LevelFilter, filter_fn};
    let tool_calls = filter_fn(|meta| {
        meta.is_span() && meta.name() == crate::metrics::TOOL_CALL_SPAN && meta.target().starts_with("muster_gateway")
    })
    .with_max_level_hint(LevelFilter::DEBUG);
    filter.or(tool_calls)
}

/// The `tracing` layer that turns spans into OpenTelemetry spans of `provider`'s tracer
/// `scope`.
pub fn layer<S>(
    provider: &SdkTracerProvider,
    scope: &'static str,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer(scope))
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Makes `span` a child of the trace named by `headers`' `traceparent`, when there is one
/// (and an OpenTelemetry layer is installed; otherwise nothing happens).
pub fn adopt_remote_parent(span: &Span, headers: Option<&HeaderMap>) {
    let Some(headers) = headers.filter(|h| h.contains_key(TRACEPARENT)) else {
        return;
    };
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests;
