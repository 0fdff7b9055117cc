//! The message that goes out on a call's stream ([`Outgoing`]): a typed one, or the answer with
//! a tool's output a downstream server sent, spliced into the JSON-RPC response as it came, when
//! the client reads it the same way ([`ToolOutput::passes_to_legacy_clients`]). What the handler
//! answers is a `CallAnswer` (`meta::in_front`).

use muster_core::ToolOutput;
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde::{Serialize, Serializer, ser::SerializeStruct};

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
    use rmcp::model::{CallToolResult, ServerResult};
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
}
