//! `call <tool>`: runs any tool through the gateway's `call_tool` and prints the tool's own
//! result.
//!
//! Arguments come from `--json '{...}'` (an object) and then `--arg key=value` (repeatable; a
//! value that parses as JSON is that JSON, `--arg n=3` a number, `--arg on=true` a boolean,
//! anything else the string, and `--arg key=` the empty string), later ones winning.
//!
//! `-o table` prints the text the tool answered (other content summarised; its structured
//! content as JSON when it answered no text), `-o wide` adds the structured content and which
//! server ran it, and `-o json|yaml` the whole result (`content`, `structuredContent`,
//! `isError`, `_meta`). A tool error exits 1 with its text on stderr; a tool of a server the
//! person has not signed in to exits 2 naming `gateway auth login --server <name>`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};

use super::{
    client::{Client, text_of},
    error::{CliError, ERROR, OK},
    output::{Format, Out},
};

/// The arguments `--json` and `--arg` give, merged.
pub(crate) fn arguments(json: Option<&str>, args: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut merged = match json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(CliError::Usage(format!(
                    "--json must be a JSON object of arguments, like '{{\"message\": \"hi\"}}'; got {other}"
                )));
            }
            Err(e) => return Err(CliError::Usage(format!("--json is not valid JSON: {e}"))),
        },
    };
    for arg in args {
        let (key, value) = arg.split_once('=').ok_or_else(|| {
            CliError::Usage(format!(
                "--arg {arg:?} has no value: write it as key=value (e.g. --arg message=hello)"
            ))
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(CliError::Usage(format!(
                "--arg {arg:?} has no key: write it as key=value"
            )));
        }
        merged.insert(key.to_owned(), value_of(value));
    }
    Ok(merged)
}

/// An `--arg` value: JSON when it parses as JSON, else the string.
pub(crate) fn value_of(text: &str) -> Value {
    if text.is_empty() {
        return Value::String(String::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `call <tool>`.
pub(crate) async fn call(
    client: &Client,
    out: &Out,
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<u8, CliError> {
    let what = format!("calling {tool}");
    let result = client
        .call_tool(tool, Value::Object(arguments), &what)
        .await
        .map_err(|e| match e {
            CliError::Failed { what, message } if message.contains("not found") => CliError::Failed {
                what,
                message: format!("{message} (run `gateway list tools` to see the tools you can call)"),
            },
            other => other,
        })?;
    let failed = result.is_error == Some(true);
    match out.format {
        Format::Json | Format::Yaml => out.data(&serde_json::to_value(&result).unwrap_or(Value::Null)),
        Format::Table | Format::Wide if failed => {}
        Format::Table | Format::Wide => print_result(out, &result),
    }
    if failed {
        let message = text_of(&result);
        let message = if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            message
        };
        super::note(&format!("Error: {tool} failed: {message}"));
        return Ok(ERROR);
    }
    Ok(OK)
}

fn print_result(out: &Out, result: &CallToolResult) {
    let lines: Vec<String> = result.content.iter().map(describe).collect();
    let has_text = result.content.iter().any(|c| c.as_text().is_some());
    for line in &lines {
        out.line(line);
    }
    let structured = result.structured_content.as_ref();
    if let Some(structured) = structured
        && (!has_text || out.format == Format::Wide)
    {
        out.line(&serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    if out.format == Format::Wide
        && let Some(tool) = result
            .meta
            .as_ref()
            .and_then(|m| m.0.get(muster::catalog::meta::TOOL_META_KEY))
    {
        let server = tool.get("server").and_then(Value::as_str).unwrap_or("muster");
        let name = tool
            .get("serverTool")
            .or_else(|| tool.get("name"))
            .and_then(Value::as_str);
        out.line(&format!("(ran {} on {server})", name.unwrap_or("?")));
    }
}

/// One content item as a line: text as it is, anything else summarised.
fn describe(content: &ContentBlock) -> String {
    match content {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image {}, {} bytes base64]", image.mime_type, image.data.len()),
        ContentBlock::Audio(audio) => format!("[audio {}, {} bytes base64]", audio.mime_type, audio.data.len()),
        ContentBlock::Resource(resource) => format!(
            "[resource {}]",
            serde_json::to_value(&resource.resource)
                .ok()
                .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default()
        ),
        ContentBlock::ResourceLink(link) => format!("[link {}]", link.uri),
        _ => serde_json::to_string(content).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arg_values_are_json_when_they_parse_and_strings_otherwise() {
        assert_eq!(value_of("3"), json!(3));
        assert_eq!(value_of("2.5"), json!(2.5));
        assert_eq!(value_of("true"), json!(true));
        assert_eq!(value_of("null"), json!(null));
        assert_eq!(value_of("[1,2]"), json!([1, 2]));
        assert_eq!(value_of(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(value_of(r#""quoted""#), json!("quoted"));
        assert_eq!(value_of("hello world"), json!("hello world"));
        assert_eq!(value_of(""), json!(""));
    }

    #[test]
    fn args_override_json_and_split_at_the_first_equals_sign() {
        let merged = arguments(
            Some(r#"{"a": 1, "b": "x"}"#),
            &["b=2".to_owned(), "expr=x=y".to_owned()],
        )
        .expect("valid");
        assert_eq!(Value::Object(merged), json!({"a": 1, "b": 2, "expr": "x=y"}));
    }

    #[test]
    fn malformed_arguments_are_refused_with_the_form_to_use() {
        let e = arguments(None, &["novalue".to_owned()]).expect_err("refused");
        assert!(e.to_string().contains("key=value"), "{e}");
        assert!(arguments(None, &["=v".to_owned()]).is_err());
        assert!(
            arguments(Some("[1]"), &[])
                .expect_err("not an object")
                .to_string()
                .contains("JSON object")
        );
        assert!(arguments(Some("{"), &[]).is_err());
    }

    #[test]
    fn content_items_are_described_on_one_line() {
        assert_eq!(describe(&ContentBlock::text("hi")), "hi");
        assert_eq!(
            describe(&ContentBlock::image("aGVsbG8=", "image/png")),
            "[image image/png, 8 bytes base64]"
        );
    }
}
