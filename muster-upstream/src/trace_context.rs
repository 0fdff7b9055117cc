//! W3C trace context (`traceparent`, `tracestate`) carried to downstream servers (cargo
//! feature `otel`): a request whose `_meta` carries `traceparent` (SEP-414, see
//! [`request_meta`]) goes out over streamable HTTP ([`TraceContextClient`]) with the same
//! `traceparent` / `tracestate` HTTP headers; the `initialize` request and the `initialized`
//! notification carry the context of the span the connection was made in (the gateway's
//! `upstream_connect`). The headers are set per HTTP request, not fixed on the connection.
//!
//! ```no_run
//! # async fn demo(server: &muster_core::crd::MCPServer) -> Result<(), Box<dyn std::error::Error>> {
//! use muster_upstream::{Egress, UpstreamConnection, trace_context::request_meta};
//!
//! // Connections made inside a span send its context with their handshake.
//! let conn = UpstreamConnection::connect(server, None, Egress::Open).await?;
//! assert!(request_meta(&tracing::Span::current()).is_none(), "no OpenTelemetry layer installed");
//! # Ok(()) }
//! ```

use std::{collections::HashMap, sync::Arc};

use http::{HeaderName, HeaderValue};
use opentelemetry::{Context, propagation::TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::{
    model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta, RequestMetaObject, RequestParamsMeta},
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    },
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C trace context header.
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// The W3C trace state header.
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The W3C trace context of `cx` as `(traceparent, tracestate)`; `None` when it has no valid
/// span.
fn encode(cx: &Context) -> Option<(String, Option<String>)> {
    let mut fields: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut fields);
    let traceparent = fields.remove("traceparent")?;
    Some((traceparent, fields.remove("tracestate").filter(|s| !s.is_empty())))
}

/// The trace context of `span` as a request's `_meta` (SEP-414 `traceparent`, `tracestate`),
/// for `PeerRequestOptions::meta` of a request to a downstream server: [`TraceContextClient`]
/// then sends it as HTTP headers too. `None` without a valid OpenTelemetry span.
pub fn request_meta(span: &Span) -> Option<RequestMetaObject> {
    let (traceparent, tracestate) = encode(&span.context())?;
    let mut meta = RequestMetaObject::default();
    meta.set_traceparent(traceparent);
    if let Some(state) = tracestate {
        meta.set_tracestate(state);
    }
    Some(meta)
}

/// The trace context a message to a downstream server carries: its own `_meta` (the
/// extension-level one rmcp merges, or a call's params), else, for the connection's handshake,
/// `setup`.
fn context_of(message: &ClientJsonRpcMessage, setup: Option<&Arc<TraceHeaders>>) -> Option<TraceHeaders> {
    match message {
        ClientJsonRpcMessage::Request(request) => {
            let request = &request.request;
            let own = request.get_meta().get_traceparent().map(|parent| TraceHeaders {
                traceparent: parent.to_owned(),
                tracestate: request.get_meta().get_tracestate().map(str::to_owned),
            });
            let params = match request {
                ClientRequest::CallToolRequest(call) => call_context(&call.params),
                _ => None,
            };
            own.or(params).or_else(|| match request {
                ClientRequest::InitializeRequest(_) => setup.map(|s| (**s).clone()),
                _ => None,
            })
        }
        ClientJsonRpcMessage::Notification(notification) => match &notification.notification {
            ClientNotification::InitializedNotification(_) => setup.map(|s| (**s).clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The trace context in the `_meta` of a call's `params` (a lane call's, sent past rmcp) as
/// the HTTP headers [`TraceContextClient`] would send with it.
pub(crate) fn call_headers(params: &rmcp::model::CallToolRequestParams) -> HashMap<HeaderName, HeaderValue> {
    let mut headers = HashMap::new();
    if let Some(context) = call_context(params) {
        context.apply(&mut headers);
    }
    headers
}

/// The trace context in the `_meta` of a call's `params`.
fn call_context(params: &rmcp::model::CallToolRequestParams) -> Option<TraceHeaders> {
    let meta = params.meta()?;
    meta.get_traceparent().map(|parent| TraceHeaders {
        traceparent: parent.to_owned(),
        tracestate: meta.get_tracestate().map(str::to_owned),
    })
}

/// `traceparent` and `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TraceHeaders {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceHeaders {
    fn apply(self, headers: &mut HashMap<HeaderName, HeaderValue>) {
        if let Ok(value) = HeaderValue::try_from(self.traceparent) {
            headers.insert(TRACEPARENT, value);
        }
        if let Some(value) = self.tracestate.and_then(|s| HeaderValue::try_from(s).ok()) {
            headers.insert(TRACESTATE, value);
        }
    }
}

/// A streamable-HTTP client (reqwest underneath) that sends each message's W3C trace context
/// as HTTP headers (see the [module](self)).
#[derive(Debug, Clone)]
pub struct TraceContextClient {
    inner: reqwest::Client,
    setup: Option<Arc<TraceHeaders>>,
}

impl TraceContextClient {
    /// A client over `inner` whose handshake carries the context of the current span.
    pub fn with_client(inner: reqwest::Client) -> Self {
        let setup = encode(&Span::current().context()).map(|(traceparent, tracestate)| {
            Arc::new(TraceHeaders {
                traceparent,
                tracestate,
            })
        });
        Self { inner, setup }
    }

    fn headers(
        &self,
        message: &ClientJsonRpcMessage,
        mut headers: HashMap<HeaderName, HeaderValue>,
    ) -> HashMap<HeaderName, HeaderValue> {
        if let Some(context) = context_of(message, self.setup.as_ref()) {
            context.apply(&mut headers);
        }
        headers
    }
}

impl StreamableHttpClient for TraceContextClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.headers(&message, custom_headers);
        self.inner
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.headers(&message, custom_headers);
        self.inner
            .post_message_with_max_sse_event_size(uri, message, session_id, auth_header, headers, max_sse_event_size)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.headers(&message, custom_headers);
        self.inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, headers, limits)
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<Self::Error>>
    {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<Self::Error>>
    {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests;
