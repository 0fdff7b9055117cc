//! The answer to a `tools/call` over streamable HTTP, read once as the `CallToolResult` it must be.
//!
//! rmcp's streamable-HTTP client reads each event of a POST's SSE stream as a
//! `ServerJsonRpcMessage`, an untagged parse that tries the answer against every kind of result
//! in turn (`CallToolResult` is the sixteenth), building and throwing away an error for each
//! miss: 45.5k of the gateway's 332k instructions a call through an HTTP downstream, in a
//! callgrind profile. The stdio transport avoids that parse in its own reader; over HTTP rmcp
//! does the reading, but the HTTP client it posts through is ours to wrap.
//!
//! [`FastCallAnswers`] wraps the [`StreamableHttpClient`] rmcp posts through. When the message
//! posted is a `tools/call` and the response is an SSE stream, it reads the stream's first
//! message event itself. If that event is the call's answer and reads as a `CallToolResult`, the
//! response is handed to rmcp as the already parsed JSON answer it would be from a server that
//! answers with `application/json`, and the rest of the stream (its end) is read in the
//! background so the connection goes back to the pool. Anything else (a progress report first,
//! an error answer, an answer that does not read, a broken stream) is handed to rmcp as the SSE
//! stream it was, the events already read first, so rmcp's outcome is unchanged.
//!
//! The wrapper also records the session of each message rmcp posts, for the HTTP call lane
//! (`FastCallAnswers::recording`).
//!
//! ```ignore
//! let client = FastCallAnswers::new(reqwest::Client::new());
//! let transport = StreamableHttpClientTransport::with_client(client, config);
//! ```

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
};

use futures::{StreamExt, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::{
        CallToolResult, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0,
        RequestId, ServerJsonRpcMessage, ServerResult,
    },
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    },
};
use serde::Deserialize;
use sse_stream::Sse;

use super::http_lane::{SessionRecord, finish_in_background};

type Events = BoxStream<'static, Result<Sse, SseError>>;

/// A [`StreamableHttpClient`] that reads a `tools/call`'s answer itself; see the
/// [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct FastCallAnswers<C> {
    inner: C,
    record: Option<Weak<SessionRecord>>,
}

impl<C> FastCallAnswers<C> {
    /// Wraps `inner`, which does the HTTP.
    pub(crate) fn new(inner: C) -> Self {
        Self { inner, record: None }
    }

    /// Records in `record` the session of each message but the handshake's that rmcp posts
    /// successfully: the URL, session id, bearer and headers the HTTP call lane posts with. Only
    /// while the record lives: once the lane it is for is gone (or was never made, for a protocol
    /// revision that does not take it), posts are not recorded.
    pub(crate) fn recording(mut self, record: &Arc<SessionRecord>) -> Self {
        self.record = Some(Arc::downgrade(record));
        self
    }
}

/// Whether a post of `message` is in the session (everything but the `initialize` request).
fn in_session(message: &ClientJsonRpcMessage) -> bool {
    !matches!(message, JsonRpcMessage::Request(request) if matches!(request.request, ClientRequest::InitializeRequest(_)))
}

/// The id of `message` when it is a `tools/call` request.
fn call_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request) if matches!(request.request, ClientRequest::CallToolRequest(_)) => {
            Some(request.id.clone())
        }
        _ => None,
    }
}

/// `data` read as the answer to call `id`, when it is one and its result reads as a call's.
fn call_answer(data: &str, id: &RequestId) -> Option<ServerJsonRpcMessage> {
    #[derive(Deserialize)]
    struct Answer {
        id: RequestId,
        result: CallToolResult,
    }
    let answer: Answer = serde_json::from_str(data).ok()?;
    (answer.id == *id).then(|| {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: answer.id,
            result: ServerResult::CallToolResult(answer.result),
        })
    })
}

/// Whether rmcp reads `event` as a JSON-RPC message (blank or `message` events with data).
fn is_message(event: &Sse) -> bool {
    matches!(event.event.as_deref(), None | Some("") | Some("message"))
        && event.data.as_deref().is_some_and(|d| !d.is_empty())
}

/// The response to call `id` whose body is `events`: its answer, parsed, when it comes first;
/// otherwise the events as they were.
async fn answer_first(id: &RequestId, mut events: Events, session: Option<String>) -> StreamableHttpPostResponse {
    let mut read = Vec::new();
    while let Some(event) = events.next().await {
        let first_message = matches!(&event, Ok(e) if is_message(e));
        if first_message
            && let Ok(Sse { data: Some(data), .. }) = &event
            && let Some(answer) = call_answer(data, id)
        {
            drain(events);
            return StreamableHttpPostResponse::Json(answer, session);
        }
        let done = first_message || event.is_err();
        read.push(event);
        if done {
            break;
        }
    }
    StreamableHttpPostResponse::Sse(futures::stream::iter(read).chain(events).boxed(), session)
}

/// Reads `events` to their end, so the connection can be used again ([`finish_in_background`]).
fn drain(mut events: Events) {
    finish_in_background(async move { while events.next().await.is_some() {} });
}

/// `response`, with a `tools/call`'s answer read here when it can be ([`answer_first`]).
async fn fast<E>(
    id: Option<RequestId>,
    response: Result<StreamableHttpPostResponse, StreamableHttpError<E>>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<E>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    match (id, response) {
        (Some(id), Ok(StreamableHttpPostResponse::Sse(events, session))) => {
            Ok(answer_first(&id, events, session).await)
        }
        (_, response) => response,
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for FastCallAnswers<C> {
    type Error = C::Error;

    // rmcp's HTTP clients define the two shorter forms as the long one with default limits: all
    // three go through it.
    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
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
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
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
        let id = call_id(&message);
        let noted = self
            .record
            .as_ref()
            .filter(|_| in_session(&message))
            .and_then(Weak::upgrade)
            .map(|record| {
                (
                    record,
                    uri.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                )
            });
        let response = self
            .inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await;
        if let (Some((record, uri, session_id, auth, headers)), Ok(_)) = (noted, &response) {
            record.note(&uri, session_id.as_deref(), auth.as_deref(), &headers);
        }
        fast(id, response).await
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
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
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
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
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
mod tests {
    use serde_json::json;

    use super::*;

    fn message(data: serde_json::Value) -> Result<Sse, SseError> {
        Ok(Sse {
            event: None,
            data: Some(data.to_string()),
            id: Some("7".into()),
            retry: None,
        })
    }

    /// The priming event rmcp's servers open a stream with: an id and a retry, no data.
    fn priming() -> Result<Sse, SseError> {
        Ok(Sse {
            event: None,
            data: Some(String::new()),
            id: Some("0".into()),
            retry: Some(3000),
        })
    }

    fn answer(id: i64) -> serde_json::Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "hi"}], "isError": false}})
    }

    fn progress() -> serde_json::Value {
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}})
    }

    async fn respond(events: Vec<Result<Sse, SseError>>) -> StreamableHttpPostResponse {
        let stream = futures::stream::iter(events).boxed();
        answer_first(&RequestId::Number(3), stream, Some("s".into())).await
    }

    /// The data of the events a response hands to rmcp as a stream.
    async fn handed_on(response: StreamableHttpPostResponse) -> Vec<String> {
        let StreamableHttpPostResponse::Sse(events, _) = response else {
            panic!("not a stream: {response:?}");
        };
        events
            .map(|e| e.map_or_else(|e| format!("error: {e}"), |e| e.data.unwrap_or_default()))
            .collect()
            .await
    }

    #[tokio::test]
    async fn an_answer_that_comes_first_is_read_here_as_rmcp_reads_it() {
        let response = respond(vec![priming(), message(answer(3))]).await;
        let StreamableHttpPostResponse::Json(parsed, session) = response else {
            panic!("not read here: {response:?}");
        };
        assert_eq!(session.as_deref(), Some("s"));
        let rmcps: ServerJsonRpcMessage = serde_json::from_value(answer(3)).expect("rmcp reads it");
        assert_eq!(
            serde_json::to_value(&parsed).expect("json"),
            serde_json::to_value(&rmcps).expect("json")
        );
        assert!(matches!(
            parsed,
            JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(_),
                ..
            })
        ));
    }

    #[tokio::test]
    async fn anything_else_first_goes_to_rmcp_as_the_stream_it_was() {
        // Progress first: rmcp must see it, and the answer after it, in order.
        let events = handed_on(respond(vec![priming(), message(progress()), message(answer(3))]).await).await;
        assert_eq!(events, ["", &progress().to_string(), &answer(3).to_string()]);
        // The answer to another request, an error answer, a result that is not a call's.
        for first in [
            answer(4),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "bad"}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"content": "not a list"}}),
        ] {
            let events = handed_on(respond(vec![message(first.clone())]).await).await;
            assert_eq!(events, [first.to_string()]);
        }
        // A broken stream: the error reaches rmcp.
        let events = handed_on(respond(vec![priming(), Err(SseError::InvalidLine)]).await).await;
        assert_eq!(events.len(), 2);
        assert!(events[1].starts_with("error:"), "{events:?}");
        // A stream that ends with no message at all.
        assert_eq!(handed_on(respond(vec![priming()]).await).await, [""]);
    }
}
