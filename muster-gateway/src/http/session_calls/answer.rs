//! What answers a call taken in front of rmcp ([`AnswersCalls`]), what it answers
//! ([`CallAnswer`]), and the message that goes out ([`Outgoing`]).
//!
//! A handler answers as rmcp's `handle_request` would, with one more way: a tool's output that
//! a downstream server sent ([`ToolOutput`]) goes out as it came, spliced into the JSON-RPC
//! response, when the client reads it the same way ([`ToolOutput::passes_to_legacy_clients`]).
//! [`MetaTools`](crate::meta::MetaTools) answers so; any other handler answers through
//! `handle_request` (the trait's default).

use std::future::Future;

use muster_core::ToolOutput;
use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{ClientRequest, RequestId, ServerJsonRpcMessage, ServerResult},
    service::RequestContext,
};
use serde::{Serialize, Serializer, ser::SerializeStruct};

/// A handler of the calls [`SessionCalls`](super::SessionCalls) answers in front of rmcp.
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

/// A message on a call's stream: a typed one (progress, a typed answer, an error), or the answer
/// with a result passed on as it came.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "moved once a message, as the typed message alone was before; boxing would allocate"
)]
pub(super) enum Outgoing {
    Message(ServerJsonRpcMessage),
    Passed(RequestId, ToolOutput),
}

impl Serialize for Outgoing {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Message(message) => message.serialize(serializer),
            Self::Passed(id, output) => {
                let mut response = serializer.serialize_struct("JsonRpcResponse", 3)?;
                response.serialize_field("jsonrpc", "2.0")?;
                response.serialize_field("id", id)?;
                response.serialize_field("result", output)?;
                response.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::value::RawValue;

    use super::*;

    fn passed(json: &str) -> ToolOutput {
        ToolOutput::from_json(RawValue::from_string(json.to_owned()).expect("JSON")).expect("a result")
    }

    #[test]
    fn a_passed_answer_is_the_response_rmcp_writes_with_the_result_as_it_came() {
        let json = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
        let ours = serde_json::to_string(&Outgoing::Passed(RequestId::Number(7), passed(json))).expect("writes");
        assert_eq!(ours, format!(r#"{{"jsonrpc":"2.0","id":7,"result":{json}}}"#));
        let typed: CallToolResult = serde_json::from_str(json).expect("reads");
        let rmcp = ServerJsonRpcMessage::response(ServerResult::CallToolResult(typed), RequestId::Number(7));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&ours).expect("JSON"),
            serde_json::to_value(&rmcp).expect("writes")
        );
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
