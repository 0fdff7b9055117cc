//! The workflow tools composed with no gateway: a table, the service over in-process tool
//! services, the catalogue entries, and the late-bound handle.

use std::sync::{Arc, Mutex};

use muster_core::{
    BoxToolService, CallContext, JsonObject, NameRules, SessionId, ToolCall, ToolEntry, ToolError, crd::Workflow,
};
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::engine::WorkflowEngine;

fn workflow(yaml: &str) -> Workflow {
    serde_saphyr::from_str(yaml).expect("a Workflow")
}

fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("an object")
}

/// The calls a [`recording`] service saw: (name, arguments, session) each.
type Calls = Arc<Mutex<Vec<(String, Value, String)>>>;

/// A tool service that records each call and answers `{"echo": <arguments>}`.
fn recording() -> (BoxToolService, Calls) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    let tools = BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        let seen = Arc::clone(&seen);
        async move {
            let arguments = Value::Object(call.arguments);
            seen.lock()
                .expect("lock")
                .push((call.name, arguments.clone(), call.ctx.session.as_str().to_owned()));
            let text = json!({ "echo": arguments }).to_string();
            Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(text)]).into())
        }
    }));
    (tools, calls)
}

/// A catalogue entry of downstream tool `name`, read-only or not.
fn tool(name: &str, read_only: bool) -> ToolEntry {
    let mut tool = Tool::new(name.to_owned(), "a tool", Arc::new(JsonObject::new()));
    if read_only {
        tool = tool.with_annotations(ToolAnnotations::new().read_only(true));
    }
    ToolEntry::downstream(name, "srv", tool)
}

const GREET: &str = r#"
metadata: {name: greet, labels: {team: platform}}
spec:
  description: Greets someone
  args:
    who: {type: string, required: true, description: Whom to greet}
    times: {type: integer, default: 1}
    tags: {type: array}
    loud: {type: boolean, required: true, default: false}
  steps:
    - id: say
      tool: x_srv_say
      args: {text: "hello {{ .input.who }}", n: "{{ .input.times }}"}
  output:
    said: "{{ .results.say.echo.text }}"
"#;

fn served(yaml: &str, tools: BoxToolService) -> WorkflowTools {
    let table = Arc::new(WorkflowTable::new());
    table.apply(workflow(yaml)).expect("valid");
    WorkflowTools::new(table, WorkflowEngine::new(tools))
}

#[tokio::test]
async fn a_run_calls_the_inner_service_in_the_callers_context_and_answers_the_output() {
    let (tools, calls) = recording();
    let workflows = served(GREET, tools);
    let ctx = CallContext::for_session(SessionId::new("s-7"));
    let call = ToolCall::new("workflow_greet", args(json!({"who": "ada", "times": 3})), ctx);
    let result = workflows
        .oneshot(call)
        .await
        .expect("ran")
        .into_result()
        .expect("typed");

    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, Some(json!({"said": "hello ada"})));
    let calls = calls.lock().expect("lock");
    assert_eq!(
        *calls,
        [(
            "x_srv_say".to_owned(),
            json!({"text": "hello ada", "n": 3}),
            "s-7".to_owned()
        )]
    );
}

#[tokio::test]
async fn unknown_workflows_and_other_names_are_not_found() {
    let (tools, calls) = recording();
    let workflows = served(GREET, tools);
    for name in ["workflow_nope", "x_srv_say", "workflow_"] {
        let call = ToolCall::new(name, JsonObject::new(), CallContext::default());
        let refused = workflows.clone().oneshot(call).await.expect_err("refused");
        assert!(
            matches!(&refused, ToolError::NotFound { name: n } if n == name),
            "{refused:?}"
        );
        assert_eq!(refused.to_string(), format!("tool not found: {name}"));
    }
    assert!(calls.lock().expect("lock").is_empty(), "nothing ran");
}

#[tokio::test]
async fn arguments_that_do_not_fit_spec_args_are_refused_before_any_step() {
    let (tools, calls) = recording();
    let workflows = served(GREET, tools);
    let call = ToolCall::new("workflow_greet", args(json!({"times": 2})), CallContext::default());
    let refused = workflows.oneshot(call).await.expect_err("refused");
    assert!(matches!(refused, ToolError::InvalidArguments { .. }), "{refused:?}");
    assert!(refused.to_string().contains("who"), "{refused}");
    assert!(calls.lock().expect("lock").is_empty(), "no step ran");
}

#[tokio::test]
async fn a_failing_step_is_an_error_result_not_a_refusal() {
    let failing = BoxToolService::new(tower::service_fn(|_call: ToolCall| async {
        Ok::<_, ToolError>(CallToolResult::error(vec![ContentBlock::text("boom")]).into())
    }));
    let workflows = served(GREET, failing);
    let call = ToolCall::new("workflow_greet", args(json!({"who": "ada"})), CallContext::default());
    let result = workflows
        .oneshot(call)
        .await
        .expect("ran")
        .into_result()
        .expect("typed");
    assert_eq!(result.is_error, Some(true));
    let document = result.structured_content.expect("a document");
    assert_eq!(document["status"], "failed", "{document}");
}

#[test]
fn apply_reports_added_updated_and_unchanged_and_remove_answers_the_workflow() {
    let table = WorkflowTable::new();
    assert_eq!(table.apply(workflow(GREET)), Ok(Applied::Added));
    assert_eq!(table.apply(workflow(GREET)), Ok(Applied::Unchanged));
    let changed = GREET.replace("Greets someone", "Greets anyone");
    assert_eq!(table.apply(workflow(&changed)), Ok(Applied::Updated));
    let kept = table.get("greet").expect("defined");
    assert_eq!(kept.workflow().spec.description.as_deref(), Some("Greets anyone"));
    assert_eq!(table.len(), 1);

    assert_eq!(
        table.remove("greet").map(|w| w.name().to_owned()),
        Some("greet".to_owned())
    );
    assert!(table.remove("greet").is_none());
    assert!(table.is_empty());
}

#[test]
fn an_invalid_definition_is_refused_with_its_errors_and_nothing_changes() {
    let table = WorkflowTable::new();
    table.apply(workflow(GREET)).expect("valid");
    // The same name, with a step that names no tool and a template that does not parse.
    let invalid = workflow(
        r#"
metadata: {name: greet}
spec:
  steps:
    - id: a
    - id: b
      tool: x_srv_say
      args: {text: "{{ .input.who "}
"#,
    );
    let errors = table.apply(invalid).expect_err("refused");
    let lines = errors.to_lines();
    assert!(lines.len() >= 2, "every rule broken is named: {lines:?}");
    assert!(lines.iter().any(|l| l.contains("steps[0]")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("steps[1]")), "{lines:?}");
    let kept = table.get("greet").expect("still defined");
    assert_eq!(kept.workflow().spec.steps.len(), 1, "the valid definition is kept");

    let new_invalid = workflow("metadata: {name: other}\nspec: {steps: []}\n");
    assert!(table.apply(new_invalid).is_err());
    assert!(table.get("other").is_none());
    assert_eq!(table.list().len(), 1);
}

#[test]
fn the_entry_has_the_schema_of_spec_args_the_labels_and_the_derived_read_only_hint() {
    let (tools, _) = recording();
    let workflows = served(GREET, tools);
    let catalogue = [tool("x_srv_say", true)];
    let find = |name: &str| catalogue.iter().find(|t| t.name() == name);
    let contributed = workflows.table().entries(&NameRules::default(), find);

    assert_eq!(contributed.entries.len(), 1);
    let entry = &contributed.entries[0];
    assert_eq!(entry.name(), "workflow_greet");
    assert_eq!(entry.kind, muster_core::ToolKind::Workflow);
    assert_eq!(entry.description(), "Greets someone");
    assert!(entry.is_read_only(), "its only tool is read-only");
    assert_eq!(entry.labels.get("team").map(String::as_str), Some("platform"));
    let schema = Value::Object(entry.tool.input_schema().to_object());
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "who": {"type": "string", "description": "Whom to greet"},
                "times": {"type": "integer", "default": 1},
                "tags": {"type": "array", "items": {}},
                "loud": {"type": "boolean", "default": false}
            },
            "required": ["who"]
        })
    );
    let greet = &contributed.availability["greet"];
    assert!(greet.available && greet.read_only && greet.missing.is_empty());

    // The same tool without readOnlyHint: the workflow is no longer read-only.
    let catalogue = [tool("x_srv_say", false)];
    let contributed = workflows
        .table()
        .entries(&NameRules::default(), |n| catalogue.iter().find(|t| t.name() == n));
    assert!(!contributed.entries[0].is_read_only());
    assert!(contributed.entries[0].tool.annotations().is_none());
}

#[test]
fn a_workflow_missing_a_tool_has_no_entry_and_names_what_it_lacks() {
    let table = Arc::new(WorkflowTable::new());
    let nested = r#"
metadata: {name: outer}
spec:
  steps:
    - {id: first, tool: workflow_greet}
    - {id: second, tool: x_srv_read}
"#;
    table.apply(workflow(GREET)).expect("valid");
    table.apply(workflow(nested)).expect("valid");
    let (tools, _) = recording();
    let workflows = WorkflowTools::new(Arc::clone(&table), WorkflowEngine::new(tools));

    // x_srv_say is missing: greet is unavailable, and outer with it.
    let catalogue = [tool("x_srv_read", true)];
    let contributed = workflows
        .table()
        .entries(&NameRules::default(), |n| catalogue.iter().find(|t| t.name() == n));
    assert!(contributed.entries.is_empty());
    assert_eq!(contributed.availability["greet"].missing, ["x_srv_say"]);
    assert_eq!(contributed.availability["outer"].missing, ["workflow_greet"]);
    assert_eq!(
        table.assess(|n| catalogue.iter().find(|t| t.name() == n)),
        contributed.availability
    );

    // Both present and read-only: both available, the nested one read-only through greet.
    let catalogue = [tool("x_srv_read", true), tool("x_srv_say", true)];
    let contributed = workflows
        .table()
        .entries(&NameRules::default(), |n| catalogue.iter().find(|t| t.name() == n));
    let names: Vec<&str> = contributed.entries.iter().map(ToolEntry::name).collect();
    assert_eq!(names, ["workflow_greet", "workflow_outer"]);
    assert!(contributed.entries.iter().all(ToolEntry::is_read_only));
}

#[test]
fn a_cycle_of_workflows_is_available_but_not_read_only() {
    let table = WorkflowTable::new();
    for (name, other) in [("ping", "pong"), ("pong", "ping")] {
        let yaml = format!("metadata: {{name: {name}}}\nspec:\n  steps:\n    - {{id: a, tool: workflow_{other}}}\n");
        table.apply(workflow(&yaml)).expect("valid");
    }
    let availability = table.assess(|_| None);
    for name in ["ping", "pong"] {
        assert!(availability[name].available, "{name}");
        assert!(!availability[name].read_only, "{name}");
    }
}

/// A stack of the workflow service and `inner` (workflow_* to the one, the rest to the other),
/// as a gateway composes it.
fn stack(workflows: WorkflowTools, inner: BoxToolService) -> BoxToolService {
    BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        let (workflows, inner) = (workflows.clone(), inner.clone());
        async move {
            if NameRules::workflow_of(&call.name).is_some() {
                workflows.oneshot(call).await
            } else {
                inner.oneshot(call).await
            }
        }
    }))
}

#[tokio::test]
async fn steps_call_through_the_late_bound_stack_which_the_handle_does_not_keep_alive() {
    let (inner, calls) = recording();
    let table = Arc::new(WorkflowTable::new());
    table.apply(workflow(GREET)).expect("valid");
    table
        .apply(workflow(
            "metadata: {name: outer}\nspec:\n  steps:\n    - {id: nested, tool: workflow_greet, args: {who: bob}}\n",
        ))
        .expect("valid");
    let steps = LateBoundTools::new();
    let workflows = WorkflowTools::new(table, WorkflowEngine::new(BoxToolService::new(steps.clone())));

    // Before the stack is bound, a step is refused (the run fails, naming why).
    let call = |name: &str| ToolCall::new(name, args(json!({"who": "ada"})), CallContext::default());
    let early = workflows.clone().oneshot(call("workflow_greet")).await.expect("ran");
    let early = early.into_result().expect("typed");
    assert_eq!(early.is_error, Some(true));
    assert!(
        json!(early.structured_content)
            .to_string()
            .contains("no tool stack to call yet"),
        "{early:?}"
    );
    assert!(!steps.is_bound() && !steps.is_live());
    let unbound = steps.reachable().expect_err("nothing bound");
    assert_eq!(
        unbound.to_string(),
        "server muster is not available: workflow steps have no tool stack to call yet"
    );

    // A witness of the stack's life: a value only the stack holds.
    let witness = Arc::new(());
    let alive = Arc::downgrade(&witness);
    let held = BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        let _held = Arc::clone(&witness);
        inner.clone().oneshot(call)
    }));
    let served = steps.bind(stack(workflows, held));
    assert!(steps.is_live());

    // A workflow whose step runs another workflow, all through the stack.
    let result = served.clone().oneshot(call("workflow_outer")).await.expect("ran");
    assert_eq!(result.into_result().expect("typed").is_error, Some(false));
    {
        let calls = calls.lock().expect("lock");
        assert_eq!(calls.len(), 1, "the unbound run reached no tool: {calls:?}");
        assert_eq!(
            (calls[0].0.as_str(), &calls[0].1["text"]),
            ("x_srv_say", &json!("hello bob"))
        );
    }

    // A call through the last clone keeps the stack alive until it ends (oneshot drops the
    // service once it has called it): the steps of its run still reach the stack.
    let last = served.oneshot(call("workflow_outer")).await.expect("ran");
    assert_eq!(last.into_result().expect("typed").is_error, Some(false));
    assert_eq!(
        calls.lock().expect("lock").len(),
        2,
        "the last run's step reached the tool"
    );

    // With the last clone and its call gone, the stack is dropped, and the workflow service
    // inside it and the engine with its handle: nothing refers back to keep them alive.
    assert!(alive.upgrade().is_none(), "the stack was dropped");
    assert!(steps.is_bound() && !steps.is_live());
    assert_eq!(
        steps.reachable().map_err(|e| e.to_string()),
        Err("server muster is not available: the gateway is shutting down".to_owned())
    );
    let mut handle = steps.clone();
    let refused = tower::Service::call(&mut handle, call("x_srv_say"))
        .await
        .expect_err("refused");
    assert!(matches!(&refused, ToolError::ServerUnavailable { server, .. } if server == "muster"));
    assert_eq!(
        refused.to_string(),
        "server muster is not available: the gateway is shutting down"
    );
}
