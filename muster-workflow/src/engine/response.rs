//! What a run returns: tool results as JSON, step entries, the default response document.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// The JSON value of a tool result, as later steps see it: the structured content when the
/// tool gave one, else its text (joined when there are several items) parsed as JSON when it
/// is JSON and kept as a string when not; a result with no text is its content list.
pub fn result_value(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    match texts(result).as_slice() {
        [] => serde_json::to_value(&result.content).unwrap_or(Value::Null),
        [one] => parse_text(one),
        many => parse_text(&many.join("\n")),
    }
}

fn parse_text(text: &str) -> Value {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '[', '"']) || trimmed.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        if let Ok(v) = serde_json::from_str(text) {
            return v;
        }
    } else if matches!(text.trim(), "true" | "false" | "null")
        && let Ok(v) = serde_json::from_str(text)
    {
        return v;
    }
    Value::String(text.to_owned())
}

/// The text items of a tool result.
fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

/// The text of an error result, for the step's error message.
pub(crate) fn error_text(result: &CallToolResult) -> String {
    let texts = texts(result);
    if texts.is_empty() {
        "the tool returned an error without a message".to_owned()
    } else {
        texts.join("\n")
    }
}

/// The result stored for a failed step, as muster stores it.
pub(crate) fn failure_value(error: &str) -> Value {
    json!({"error": error, "success": false, "isError": true})
}

/// Whether `value` is what [`failure_value`] stores.
pub(crate) fn is_failure_value(value: &Value) -> bool {
    value.get("isError") == Some(&Value::Bool(true))
        && value.get("success") == Some(&Value::Bool(false))
        && value.get("error").is_some()
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepStatus {
    InProgress,
    Completed,
    Failed,
    Skipped,
}

impl StepStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "inprogress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }
}

/// One entry of the response's `steps`.
#[derive(Debug, Clone)]
pub(crate) struct StepMeta {
    pub(crate) id: String,
    pub(crate) tool: Option<String>,
    pub(crate) status: StepStatus,
    /// The condition's source label and verdict, when the step has a condition.
    pub(crate) condition: Option<(String, bool)>,
    pub(crate) allow_failure: bool,
    /// Whether the step's result belongs in the response (`output`/`store`).
    pub(crate) output: bool,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<String>,
}

impl StepMeta {
    pub(crate) fn to_json(&self, all_results: bool) -> Value {
        let mut entry = Map::new();
        entry.insert("id".into(), Value::String(self.id.clone()));
        if let Some(tool) = &self.tool {
            entry.insert("tool".into(), Value::String(tool.clone()));
        }
        entry.insert("status".into(), Value::String(self.status.as_str().into()));
        if let Some((source, passed)) = &self.condition {
            entry.insert("condition_evaluation".into(), Value::Bool(*passed));
            entry.insert("condition_result".into(), Value::Bool(*passed));
            entry.insert("condition_tool".into(), Value::String(source.clone()));
        }
        if self.allow_failure {
            entry.insert("allow_failure".into(), Value::Bool(true));
        }
        if (self.output || all_results)
            && let Some(result) = &self.result
        {
            entry.insert("result".into(), result.clone());
        }
        if let Some(error) = &self.error {
            entry.insert("error".into(), Value::String(error.clone()));
        }
        Value::Object(entry)
    }
}

/// The parts of the default response.
pub(crate) struct DefaultResponse<'a> {
    pub(crate) execution_id: &'a str,
    pub(crate) workflow: &'a str,
    pub(crate) status: &'a str,
    pub(crate) input: &'a Value,
    pub(crate) steps: &'a [StepMeta],
    pub(crate) all_results: bool,
    /// The last step's object result, merged into the top level.
    pub(crate) merge: Option<&'a Map<String, Value>>,
    pub(crate) error: Option<&'a str>,
    /// The `input.<arg>` references of the workflow's templates.
    pub(crate) template_vars: &'a [String],
}

impl DefaultResponse<'_> {
    pub(crate) fn to_json(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("execution_id".into(), Value::String(self.execution_id.into()));
        doc.insert("workflow".into(), Value::String(self.workflow.into()));
        doc.insert("status".into(), Value::String(self.status.into()));
        doc.insert("input".into(), self.input.clone());
        doc.insert(
            "steps".into(),
            Value::Array(self.steps.iter().map(|s| s.to_json(self.all_results)).collect()),
        );
        doc.insert(
            "template_vars".into(),
            Value::Array(self.template_vars.iter().cloned().map(Value::String).collect()),
        );
        if let Some(error) = self.error {
            doc.insert("error".into(), Value::String(error.into()));
        }
        if let Some(merge) = self.merge {
            for (k, v) in merge {
                doc.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Value::Object(doc)
    }
}

/// Go's `%v` form of a JSON value, for the loose equality of condition expectations.
pub(crate) fn loose_form(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn text_results_are_parsed_as_json_when_they_are_json() {
        let r = CallToolResult::success(vec![ContentBlock::text(r#"{"a": [1, 2]}"#)]);
        assert_eq!(result_value(&r), json!({"a": [1, 2]}));
        let r = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(result_value(&r), json!("hello"));
        let r = CallToolResult::success(vec![ContentBlock::text("42")]);
        assert_eq!(result_value(&r), json!(42));
        let mut r = CallToolResult::success(vec![ContentBlock::text("ignored")]);
        r.structured_content = Some(json!({"s": 1}));
        assert_eq!(result_value(&r), json!({"s": 1}));
    }

    #[test]
    fn loose_equality_compares_printed_forms() {
        assert_eq!(loose_form(&json!(1.0)), loose_form(&json!(1)));
        assert_eq!(loose_form(&json!("true")), loose_form(&json!(true)));
        assert_ne!(loose_form(&json!("1.20")), loose_form(&json!(1.2)));
    }
}
