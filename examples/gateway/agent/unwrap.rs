//! The `call_tool` envelope, unwrapped back into the wrapped tool's own result.
//!
//! The gateway answers `call_tool` with a JSON envelope `{isError, content, structuredContent,
//! _meta, tool}` as the first content item; image and audio items are size-only inside it and
//! follow it as native content items (see `muster::catalog::meta::envelope`). An IDE wants the
//! tool's result itself, so the agent rebuilds it: the envelope's `isError`, its content with the
//! native image and audio items put back in their places, its `structuredContent` and `_meta`,
//! plus the envelope's `tool` in `_meta` under `muster.giantswarm.io/tool`.

use muster::catalog::meta::TOOL_META_KEY;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The envelope as the gateway writes it.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "isError", default)]
    is_error: bool,
    content: Vec<Value>,
    #[serde(rename = "structuredContent", default)]
    structured_content: Option<Value>,
    #[serde(rename = "_meta", default)]
    meta: Option<Map<String, Value>>,
    tool: Map<String, Value>,
}

impl Envelope {
    /// The envelope of `result`: its first content item, when that is one. A `call_tool` the
    /// gateway refused before anything ran (an unknown tool, a toolset refusal) has none.
    fn of(result: &CallToolResult) -> Option<Self> {
        let text = result.content.first()?.as_text()?;
        serde_json::from_str(&text.text).ok()
    }
}

/// The wrapped tool's own result out of a `call_tool` result; anything that is not an envelope
/// is returned as it came.
pub(crate) fn unwrap(outer: CallToolResult) -> CallToolResult {
    let Some(envelope) = Envelope::of(&outer) else {
        return outer;
    };
    let mut natives = outer
        .content
        .into_iter()
        .skip(1)
        .filter(|c| matches!(c, ContentBlock::Image(_) | ContentBlock::Audio(_)));
    let content = envelope
        .content
        .into_iter()
        .filter_map(|item| match item.get("type").and_then(Value::as_str) {
            // Size-only inside the envelope: the payload is the next native item.
            Some("image" | "audio") => natives.next(),
            _ => Some(serde_json::from_value(item.clone()).unwrap_or_else(|_| ContentBlock::text(item.to_string()))),
        })
        .collect();
    let mut inner = if envelope.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    inner.structured_content = envelope.structured_content.or(outer.structured_content);
    let mut meta = envelope.meta.unwrap_or_default();
    meta.insert(TOOL_META_KEY.to_owned(), Value::Object(envelope.tool));
    inner.meta = Some(MetaObject(meta));
    inner
}

#[cfg(test)]
mod tests {
    use muster::catalog::meta::{DispatchedTool, envelope};
    use serde_json::json;

    use super::*;

    fn echo() -> DispatchedTool {
        DispatchedTool {
            name: "x_everything_echo".into(),
            server: Some("everything".into()),
            server_tool: Some("echo".into()),
        }
    }

    #[test]
    fn an_enveloped_result_comes_back_as_the_tools_own_with_the_tool_in_meta() {
        let mut inner = CallToolResult::success(vec![ContentBlock::text("Echo: hi")]);
        inner.structured_content = Some(json!({"echo": "hi"}));
        let mut meta = MetaObject::default();
        meta.0.insert("trace".into(), json!("abc"));
        inner.meta = Some(meta);

        let back = unwrap(envelope(inner.clone(), &echo()));

        assert_eq!(back.content, inner.content);
        assert_eq!(back.is_error, Some(false));
        assert_eq!(back.structured_content, Some(json!({"echo": "hi"})));
        let meta = back.meta.expect("meta").0;
        assert_eq!(meta["trace"], json!("abc"));
        assert_eq!(
            meta[TOOL_META_KEY],
            json!({"name": "x_everything_echo", "server": "everything", "serverTool": "echo"})
        );
    }

    #[test]
    fn images_and_audio_get_their_payloads_back_in_place() {
        let inner = CallToolResult::success(vec![
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::text("caption"),
            ContentBlock::audio("AAAA", "audio/wav"),
        ]);
        let back = unwrap(envelope(inner.clone(), &echo()));
        assert_eq!(back.content, inner.content);
    }

    #[test]
    fn an_error_stays_an_error() {
        let inner = CallToolResult::error(vec![ContentBlock::text("boom")]);
        let back = unwrap(envelope(inner, &echo()));
        assert_eq!(back.is_error, Some(true));
        assert_eq!(back.content[0].as_text().map(|t| t.text.as_str()), Some("boom"));
    }

    #[test]
    fn a_result_without_an_envelope_passes_through() {
        let refused = CallToolResult::error(vec![ContentBlock::text("tool \"nope\" not found")]);
        assert_eq!(unwrap(refused.clone()), refused);
    }
}
