use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::value::RawValue;

use super::*;

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("JSON")
}

/// Results a server may send, each with a field or a block in a shape of its own.
const RESULTS: &[&str] = &[
    r#"{"content":[{"type":"text","text":"hi"}]}"#,
    r#"{"content":[]}"#,
    r#"{"isError":true}"#,
    r#"{"isError":null,"content":[]}"#,
    r#"{"structuredContent":null}"#,
    r#"{"structuredContent":{"a":1},"content":[{"type":"text","text":"{\"a\":1}"}]}"#,
    r#"{"structuredContent":[1,2]}"#,
    r#"{"content":[{"type":"text","text":"caf\u00e9 \"q\""}],"isError":false,"_meta":{"k":"v"}}"#,
    r#"{"content":[{"type":"text","text":"a","annotations":{"audience":["user","assistant"],"priority":0.5,"lastModified":"2025-01-01T00:00:00Z"}}]}"#,
    r#"{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"audio","data":"aGk=","mimeType":"audio/wav"}]}"#,
    r#"{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"x"}},{"type":"resource","resource":{"uri":"file:///b","blob":"eA==","mimeType":"application/octet-stream"}}]}"#,
    r#"{"content":[{"type":"resource_link","uri":"file:///a","name":"a","title":"A","description":"d","mimeType":"text/plain","size":3,"icons":[{"src":"https://x/i.png"}]}]}"#,
    r#"{"resultType":"complete","content":[]}"#,
    r#"{"content":[{"text":"tag last","type":"text"}],"extra":{"ignored":[1,2]}}"#,
    r#"{"content":[{"type":"text","text":"a","_meta":{"x":1}}],"_meta":null}"#,
    r#"{"content":[{"type":"text","text":"\ud83d\ude00 \u00e9\n\t\/"}]}"#,
    r#"{"content":[{"type":"text","text":"\\ud800 \\\ud83d\ude00\\"}]}"#,
    // Not results.
    r#"{}"#,
    r#"{"extra":1}"#,
    r#"[]"#,
    r#""text""#,
    r#"{"content":{}}"#,
    r#"{"content":[{"type":"text"}]}"#,
    r#"{"content":[{"type":"text","text":null}]}"#,
    r#"{"content":[{"type":"text","text":7}]}"#,
    r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
    r#"{"content":[{"type":"text","text":"a\udc00b"}]}"#,
    r#"{"content":[{"type":"text","text":"\ud83d\u0041"}]}"#,
    r#"{"content":[{"type":"text","text":"\ud83d\n"}]}"#,
    r#"{"content":[{"type":"text","text":"\ud83d"}]}"#,
    r#"{"content":[{"type":"text","text":"\ud83d\ude00\udc00"}]}"#,
    r#"{"content":[{"type":"resource_link","uri":"file:///a","name":"\udfff"}]}"#,
    r#"{"content":[{"text":"no type"}]}"#,
    r#"{"content":[{"type":"video","data":"x"}]}"#,
    r#"{"content":[{"type":"image","data":"aGk="}]}"#,
    r#"{"content":[{"type":"audio","mimeType":"audio/wav"}]}"#,
    r#"{"content":[{"type":"resource","resource":{"uri":"file:///a"}}]}"#,
    r#"{"content":[{"type":"resource","resource":{"text":"x"}}]}"#,
    r#"{"content":[{"type":"resource"}]}"#,
    r#"{"content":[{"type":"resource_link","uri":"file:///a"}]}"#,
    r#"{"content":[{"type":"resource_link","name":"a","uri":"file:///a","size":-1}]}"#,
    r#"{"content":[{"type":"text","text":"a","annotations":{"audience":["robot"]}}]}"#,
    r#"{"content":[{"type":"text","text":"a","annotations":{"priority":"high"}}]}"#,
    r#"{"content":[{"type":"text","text":"a","_meta":[]}]}"#,
    r#"{"content":[],"isError":"yes"}"#,
    r#"{"content":[],"_meta":"m"}"#,
    r#"{"resultType":"task","content":[]}"#,
    r#"{"content":[],"content":[]}"#,
    r#"{"content":[{"type":"text","text":"a"}],"isError":true,"isError":false}"#,
];

#[test]
fn the_shape_check_accepts_what_rmcp_reads_and_refuses_what_it_refuses() {
    for json in RESULTS {
        let rmcp = serde_json::from_str::<CallToolResult>(json);
        let ours = ToolOutput::from_json(raw(json));
        assert_eq!(
            ours.is_ok(),
            rmcp.is_ok(),
            "{json}: rmcp {:?}, the shape check {:?}",
            rmcp.as_ref().err(),
            ours.as_ref().err()
        );
        if let (Ok(ours), Ok(rmcp)) = (ours, rmcp) {
            assert_eq!(ours.is_error(), rmcp.is_error == Some(true), "{json}");
            assert_eq!(ours.into_result().expect("reads"), rmcp, "{json}");
        }
    }
}

#[test]
fn a_result_passed_on_is_written_byte_for_byte() {
    // Spacing, key order and escapes as the server wrote them, which rmcp would rewrite.
    let json = r#"{ "isError" : false, "content" : [ {"text":"caf\u00e9","type":"text"} ] }"#;
    let output = ToolOutput::from_json(raw(json)).expect("a result");
    assert_eq!(serde_json::to_string(&output).expect("writes"), json);
    assert_eq!(output.json().map(RawValue::get), Some(json));
    assert!(output.as_typed().is_none());
    // Inside a message, too.
    let inside = serde_json::to_string(&(1, &output)).expect("writes");
    assert_eq!(inside, format!("[1,{json}]"));
}

#[test]
fn a_typed_result_is_written_as_rmcp_writes_it() {
    let result = CallToolResult::error(vec![ContentBlock::text("boom")]);
    let output = ToolOutput::from(result.clone());
    assert!(output.is_error());
    assert!(output.json().is_none());
    assert_eq!(output.as_typed(), Some(&result));
    assert_eq!(
        serde_json::to_value(&output).expect("writes"),
        serde_json::to_value(&result).expect("writes")
    );
    assert!(
        !output.passes_to_legacy_clients(),
        "typed results go through rmcp's rewriting"
    );
}

#[test]
fn only_results_a_legacy_client_reads_unchanged_pass_to_one() {
    let passes = |json: &str| {
        ToolOutput::from_json(raw(json))
            .expect("a result")
            .passes_to_legacy_clients()
    };
    assert!(passes(r#"{"content":[]}"#));
    assert!(passes(r#"{"structuredContent":{"a":1}}"#));
    assert!(!passes(r#"{"resultType":"complete","content":[]}"#));
    assert!(!passes(r#"{"structuredContent":[1]}"#));
    assert!(!passes(r#"{"structuredContent":null}"#));
}

#[test]
fn an_error_names_what_is_wrong() {
    let error = |json: &str| ToolOutput::from_json(raw(json)).expect_err("not a result").to_string();
    assert!(error(r#"{"content":[{"type":"image","data":"x"}]}"#).contains("missing field `mimeType`"));
    assert!(
        error(r#"{"content":[{"type":"text","text":7}]}"#).contains("invalid type: integer `7`, expected a string")
    );
    assert!(error(r#"{"isError":"yes"}"#).contains("invalid type: string \"yes\", expected a boolean"));
    assert!(error("{}").contains("at least one known CallToolResult field"));
}

#[test]
fn a_result_whose_details_do_not_read_fails_when_the_typed_one_is_asked_for() {
    // An icon's fields other than `src` are left to rmcp's reading.
    let json = r#"{"content":[{"type":"resource_link","uri":"u","name":"n","icons":[{"src":"s","sizes":7}]}]}"#;
    let output = ToolOutput::from_json(raw(json)).expect("the shape is a result's");
    let error = output.into_result().expect_err("rmcp does not read it");
    assert!(matches!(error, ToolError::UnreadableResult { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("the tool's result does not read as a CallToolResult")
    );
}
