//! The `call_tool` envelope: how the result of a tool run through `call_tool` reaches the client.
//!
//! The first content item is a JSON envelope of the wrapped tool's result, `{isError, content,
//! structuredContent, _meta, tool}`; image and audio items are size-only in it and follow it as
//! native content items with their payload. `tool` names what ran (`name`, and for a
//! downstream tool `server` and `serverTool`), and the same object is the result's `_meta` under
//! `muster.giantswarm.io/tool`. The outer `isError` and `structuredContent` mirror the inner ones.

use muster_core::ToolEntry;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde::Serialize;
use serde_json::{Value, json};

/// The `_meta` key under which a `call_tool` result names the tool that ran.
pub const TOOL_META_KEY: &str = "muster.giantswarm.io/tool";

/// What ran for a `call_tool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchedTool {
    /// The tool asked for (its exposed name).
    pub name: String,
    /// The MCPServer that served it (downstream tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The server's own name for it (downstream tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_tool: Option<String>,
}

impl DispatchedTool {
    /// What runs for `entry` called with `arguments` (a family tool runs on the member its
    /// instance argument names).
    pub fn of(entry: &ToolEntry, arguments: &muster_core::JsonObject) -> Self {
        if let Some(route) = &entry.family {
            let instance = arguments.get(&route.instance_arg).and_then(Value::as_str);
            let server_tool = instance.and_then(|i| route.members.get(i)).cloned();
            return Self {
                name: entry.name().to_owned(),
                server: server_tool.as_ref().and(instance.map(str::to_owned)),
                server_tool,
            };
        }
        Self {
            name: entry.name().to_owned(),
            server: entry.server.clone(),
            server_tool: entry.server_tool.clone(),
        }
    }
}

/// A content item as the envelope (and a prompt message) shows it: image and audio size-only,
/// everything else as is.
pub fn content_summary(item: &ContentBlock) -> Value {
    match item {
        ContentBlock::Image(image) => {
            json!({"type": "image", "mimeType": image.mime_type, "dataSize": image.data.len()})
        }
        ContentBlock::Audio(audio) => {
            json!({"type": "audio", "mimeType": audio.mime_type, "dataSize": audio.data.len()})
        }
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// A content item in the envelope's JSON: [`content_summary`]'s JSON of it, a plain text block
/// (no annotations, no `_meta`: the usual one) written as that JSON is (`{"text":…,"type":"text"}`,
/// its keys in sorted order) without building it.
#[derive(Serialize)]
#[serde(untagged)]
enum ItemJson<'a> {
    Text {
        text: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Summary(Value),
}

impl<'a> ItemJson<'a> {
    fn of(item: &'a ContentBlock) -> Self {
        match item {
            ContentBlock::Text(text) if text.annotations.is_none() && text.meta.is_none() => Self::Text {
                text: &text.text,
                kind: "text",
            },
            other => Self::Summary(content_summary(other)),
        }
    }
}

/// The envelope's JSON, written from the result as it is (no copy of its structured content or
/// `_meta`). The fields are in sorted order, the order of a JSON object of them.
#[derive(Serialize)]
struct EnvelopeJson<'a> {
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a muster_core::JsonObject>,
    content: Vec<ItemJson<'a>>,
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a Value>,
    tool: &'a DispatchedTool,
}

/// Wraps `inner`, the result of `tool`, in the `call_tool` envelope.
pub fn envelope(inner: CallToolResult, tool: &DispatchedTool) -> CallToolResult {
    let is_error = inner.is_error.unwrap_or(false);
    let text = serde_json::to_string(&EnvelopeJson {
        meta: inner.meta.as_ref().map(|m| &m.0),
        content: inner.content.iter().map(ItemJson::of).collect(),
        is_error,
        structured_content: inner.structured_content.as_ref(),
        tool,
    })
    .unwrap_or_else(|e| json!({"isError": true, "error": format!("the result could not be written: {e}")}).to_string());
    let mut content = vec![ContentBlock::text(text)];
    content.extend(
        inner
            .content
            .into_iter()
            .filter(|c| matches!(c, ContentBlock::Image(_) | ContentBlock::Audio(_))),
    );
    let mut outer = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    outer.structured_content = inner.structured_content;
    let mut meta = MetaObject::default();
    meta.0.insert(
        TOOL_META_KEY.to_owned(),
        serde_json::to_value(tool).unwrap_or(Value::Null),
    );
    outer.meta = Some(meta);
    outer
}

#[cfg(test)]
mod tests {
    use rmcp::model::{Annotations, TextContent};

    use super::*;

    fn tool() -> DispatchedTool {
        DispatchedTool {
            name: "x_k8s_list_pods".into(),
            server: Some("k8s".into()),
            server_tool: Some("list_pods".into()),
        }
    }

    fn envelope_json(result: &CallToolResult) -> Value {
        let text = result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default();
        serde_json::from_str(&text).expect("envelope is JSON")
    }

    #[test]
    fn the_envelope_carries_the_result_and_names_the_tool() {
        let mut inner = CallToolResult::success(vec![ContentBlock::text("pods: 3")]);
        inner.structured_content = Some(json!({"count": 3}));
        let outer = envelope(inner, &tool());
        let env = envelope_json(&outer);
        assert_eq!(env["isError"], false);
        assert_eq!(env["content"][0], json!({"type": "text", "text": "pods: 3"}));
        assert_eq!(env["structuredContent"], json!({"count": 3}));
        assert_eq!(
            env["tool"],
            json!({"name": "x_k8s_list_pods", "server": "k8s", "serverTool": "list_pods"})
        );
        assert_eq!(outer.structured_content, Some(json!({"count": 3})));
        assert_eq!(outer.is_error, Some(false));
        assert_eq!(
            outer.meta.as_ref().map(|m| m.0[TOOL_META_KEY].clone()),
            Some(env["tool"].clone())
        );
    }

    #[test]
    fn images_and_audio_are_size_only_inside_and_follow_natively() {
        let inner = CallToolResult::success(vec![
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::text("caption"),
            ContentBlock::audio("AAAA", "audio/wav"),
        ]);
        let outer = envelope(inner, &tool());
        let env = envelope_json(&outer);
        assert_eq!(
            env["content"][0],
            json!({"type": "image", "mimeType": "image/png", "dataSize": 8})
        );
        assert_eq!(
            env["content"][2],
            json!({"type": "audio", "mimeType": "audio/wav", "dataSize": 4})
        );
        assert_eq!(outer.content.len(), 3);
        assert!(outer.content[1].as_image().is_some_and(|i| i.data == "aGVsbG8="));
        assert!(outer.content[2].as_audio().is_some());
    }

    #[test]
    fn an_error_result_stays_an_error_and_core_tools_carry_only_their_name() {
        let inner = CallToolResult::error(vec![ContentBlock::text("boom")]);
        let core = DispatchedTool {
            name: "core_service_list".into(),
            server: None,
            server_tool: None,
        };
        let outer = envelope(inner, &core);
        assert_eq!(outer.is_error, Some(true));
        let env = envelope_json(&outer);
        assert_eq!(env["isError"], true);
        assert_eq!(env["tool"], json!({"name": "core_service_list"}));
    }

    #[test]
    fn the_envelope_text_is_the_json_object_of_its_fields() {
        let mut inner = CallToolResult::success(vec![ContentBlock::text("pods: 3")]);
        inner.structured_content = Some(json!({"count": 3, "names": ["a", "b"]}));
        let mut meta = MetaObject::default();
        meta.0.insert("progressToken".into(), json!(7));
        inner.meta = Some(meta);
        let outer = envelope(inner, &tool());
        let text = outer.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default();
        // The same document as a JSON object: written with its keys sorted, which clients that
        // compare the text (not the parsed JSON) have seen so far.
        let object = json!({
            "isError": false,
            "content": [{"type": "text", "text": "pods: 3"}],
            "structuredContent": {"count": 3, "names": ["a", "b"]},
            "_meta": {"progressToken": 7},
            "tool": {"name": "x_k8s_list_pods", "server": "k8s", "serverTool": "list_pods"},
        });
        assert_eq!(text, object.to_string());
    }

    #[test]
    fn a_plain_text_item_is_written_as_its_summary_is() {
        let mut annotated = TextContent::new("with \"quotes\" and \u{e9}");
        annotated.annotations = Some(Annotations::for_resource(0.5, chrono::Utc::now()));
        let mut with_meta = TextContent::new("meta");
        with_meta.meta = Some(MetaObject::default());
        let items = [
            ContentBlock::text("plain"),
            ContentBlock::text("with \"quotes\", \\ and \n"),
            ContentBlock::Text(annotated),
            ContentBlock::Text(with_meta),
            ContentBlock::image("aGVsbG8=", "image/png"),
        ];
        for item in &items {
            assert_eq!(
                serde_json::to_string(&ItemJson::of(item)).expect("written"),
                content_summary(item).to_string(),
                "{item:?}"
            );
        }
        assert!(matches!(ItemJson::of(&items[0]), ItemJson::Text { .. }));
        assert!(matches!(ItemJson::of(&items[2]), ItemJson::Summary(_)));
    }
}
