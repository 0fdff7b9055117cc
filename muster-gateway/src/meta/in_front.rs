//! The meta-tools handler as a layer in front of rmcp sees it: the gateway's HTTP side answers a
//! `tools/call` on an established session itself (`http::session_calls`), past rmcp's service
//! loop, and needs four things of the handler, defined here so that the handler depends on no
//! HTTP code and the HTTP side on this interface:
//!
//! - [`AnswersCalls`]: answers a call as rmcp's `handle_request` would, with one more way: a
//!   tool's output a downstream server sent ([`ToolOutput`]) goes out as it came
//!   ([`CallAnswer::Passed`]), when the client reads it the same way
//!   ([`ToolOutput::passes_to_legacy_clients`]). [`MetaTools`](super::MetaTools) answers so;
//!   any other handler answers through `handle_request` (the trait's default).
//! - [`CallStream`]: where a call answered in front puts what it reports before its answer
//!   (progress), in the request's extensions.
//! - [`AdmitsSessions`]: told when rmcp has set a session up, so that its calls can be answered
//!   in front from then on.
//!
//! ```
//! use muster_gateway::meta::in_front::CallStream;
//! use rmcp::model::{ServerJsonRpcMessage, ServerNotification, ProgressNotification, ProgressNotificationParam, ProgressToken, NumberOrString};
//!
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let stream = CallStream::new(tx);
//! let progress = ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(1)), 0.5);
//! stream.send(ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
//!     ProgressNotification::new(progress),
//! )));
//! assert!(rx.try_recv().is_ok());
//! ```

use std::future::Future;

use muster_core::ToolOutput;
use rmcp::{
    ErrorData as McpError, Peer, RoleServer,
    model::{ClientRequest, ServerJsonRpcMessage, ServerResult},
    service::RequestContext,
};
use tokio::sync::mpsc;

/// A handler of the calls a layer in front of rmcp answers (the gateway's `SessionCalls`).
pub trait AnswersCalls: rmcp::Service<RoleServer> {
    /// Answers `request`, a `tools/call`, as `handle_request` would; a tool's output may be
    /// passed on as it came. The default is `handle_request`'s answer.
    fn answer_call(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallAnswer, McpError>> + Send {
        async move {
            rmcp::Service::handle_request(self, request, ctx)
                .await
                .map(CallAnswer::Typed)
        }
    }
}

/// The answer to a call taken in front of rmcp.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "moved once a call, as the typed answer alone was before; boxing would allocate"
)]
pub enum CallAnswer {
    /// A typed result, as `handle_request` answers.
    Typed(ServerResult),
    /// A downstream's result, passed on as it came: the client reads it as rmcp would have
    /// written it ([`ToolOutput::passes_to_legacy_clients`]).
    Passed(ToolOutput),
}

impl CallAnswer {
    /// The answer as rmcp's server sends it to a client of a protocol version before
    /// 2026-07-28 (every call taken in front is one): without `resultType: "complete"`, with
    /// non-object structured content moved into the content, and no input-required result.
    pub(crate) fn for_legacy_client(self) -> Result<Self, McpError> {
        match self {
            Self::Typed(ServerResult::InputRequiredResult(_)) => Err(McpError::invalid_request(
                "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                None,
            )),
            Self::Typed(mut result) => {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
                Ok(Self::Typed(result))
            }
            Self::Passed(output) if output.passes_to_legacy_clients() => Ok(Self::Passed(output)),
            Self::Passed(output) => {
                let result = output.into_result().map_err(McpError::from)?;
                Self::Typed(ServerResult::CallToolResult(result)).for_legacy_client()
            }
        }
    }
}

/// The sending end of a call's own stream to its client, answered in front of rmcp: what the
/// call reports before its answer (progress) goes here ([`super::call_context`]).
#[derive(Debug, Clone)]
pub struct CallStream(mpsc::UnboundedSender<Queued>);

/// A message queued on a call's stream, boxed: tokio's unbounded channel allocates its first
/// block of 32 slots with the channel, which for unboxed messages is 12 KB a call (a large chunk
/// of the allocator's, not one it keeps at hand), where most calls send nothing before their
/// answer.
pub type Queued = Box<ServerJsonRpcMessage>;

impl CallStream {
    /// A stream whose messages go to `sender`.
    pub fn new(sender: mpsc::UnboundedSender<Queued>) -> Self {
        Self(sender)
    }

    /// Sends `message` on the request's stream (nothing when the client has gone).
    pub fn send(&self, message: ServerJsonRpcMessage) {
        let _ = self.0.send(Box::new(message));
    }
}

/// Told of each session rmcp has set up (its `notifications/initialized` request's parts, and
/// the session's peer), so that the session's calls can be answered in front of rmcp.
pub trait AdmitsSessions: Send + Sync {
    /// Admits the session of `parts`, whose client is `peer`.
    fn admit(&self, parts: &http::request::Parts, peer: Peer<RoleServer>);
}

#[cfg(test)]
mod tests {
    use muster_core::ToolOutput;
    use rmcp::model::{ContentBlock, ServerResult};
    use serde_json::value::RawValue;

    use super::*;

    fn passed(json: &str) -> ToolOutput {
        ToolOutput::from_json(RawValue::from_string(json.to_owned()).expect("JSON")).expect("a result")
    }

    #[test]
    fn a_result_a_legacy_client_reads_otherwise_goes_out_as_rmcp_rewrites_it() {
        let answer = CallAnswer::Passed(passed(r#"{"resultType":"complete","structuredContent":[1,2]}"#))
            .for_legacy_client()
            .expect("answers");
        let CallAnswer::Typed(ServerResult::CallToolResult(result)) = answer else {
            panic!("expected a typed result, got {answer:?}");
        };
        assert_eq!(result.result_type, None);
        assert_eq!(result.structured_content, None);
        assert_eq!(result.content, vec![ContentBlock::text("[1,2]")]);
        let clean = CallAnswer::Passed(passed(r#"{"content":[]}"#))
            .for_legacy_client()
            .expect("answers");
        assert!(matches!(clean, CallAnswer::Passed(_)), "{clean:?}");
    }
}
