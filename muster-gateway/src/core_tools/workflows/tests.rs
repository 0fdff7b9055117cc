use std::{path::Path, sync::Arc};

use muster_core::{CallContext, ToolCall, ToolError, ToolOutput, config::MusterConfig};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::{
    core_tools::CoreTools,
    definitions::config_dir::{self, ConfigStore},
    dispatch::Dispatcher,
    registry::{Registry, RegistryOptions},
};

/// A registry and the dispatcher over it with the core tools, as the gateway composes them.
/// It derefs to the registry, which the tests look at.
struct Fixture {
    registry: Arc<Registry>,
    dispatcher: Dispatcher,
}

impl std::ops::Deref for Fixture {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        &self.registry
    }
}

impl Fixture {
    fn new(registry: Arc<Registry>, core: CoreTools) -> Self {
        let dispatcher = Dispatcher::new(Arc::clone(&registry)).with_tools(CoreTools::entries(), core);
        Self { registry, dispatcher }
    }
}

fn empty_registry() -> Arc<Registry> {
    Registry::new(
        MusterConfig::default(),
        Vec::new(),
        Vec::new(),
        RegistryOptions::default(),
    )
    .expect("a registry")
}

fn registry() -> Fixture {
    let registry = empty_registry();
    Fixture::new(Arc::clone(&registry), CoreTools::new(registry))
}

/// An empty registry whose core tools write definitions to `store`.
fn with_store(store: Arc<dyn crate::definitions::DefinitionStore>) -> Fixture {
    let registry = empty_registry();
    Fixture::new(
        Arc::clone(&registry),
        CoreTools::new(registry).with_definition_store(store),
    )
}

/// A registry of config directory `dir` as the gateway opens it: its workflows loaded, their
/// files recorded, writes going to the directory.
fn fs_registry(dir: &Path) -> Fixture {
    let loaded = config_dir::load(dir).expect("loads");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let store = ConfigStore::new(dir);
    store.snapshot(&loaded);
    let registry = Registry::new(
        MusterConfig::default(),
        Vec::new(),
        loaded.workflows,
        RegistryOptions::default(),
    )
    .expect("a registry");
    Fixture::new(Arc::clone(&registry), CoreTools::new(registry).with_config_dir(store))
}

async fn call(registry: &Fixture, tool: &str, args: Value) -> Result<CallToolResult, ToolError> {
    let Value::Object(arguments) = args else {
        panic!("arguments must be an object");
    };
    use tower::ServiceExt;
    registry
        .dispatcher
        .clone()
        .oneshot(ToolCall::new(tool, arguments, CallContext::default()))
        .await
        .and_then(ToolOutput::into_result)
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default()
}

/// The JSON answer of a call that must succeed.
async fn answer(registry: &Fixture, tool: &str, args: Value) -> Value {
    let result = call(registry, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{tool}: {}", text(&result));
    serde_json::from_str(&text(&result)).expect("a JSON answer")
}

/// The message of a call that must be refused.
async fn refusal(registry: &Fixture, tool: &str, args: Value) -> String {
    match call(registry, tool, args).await {
        Ok(result) => panic!("{tool} succeeded: {}", text(&result)),
        Err(e) => e.to_string(),
    }
}

fn reasons(registry: &Registry) -> Vec<String> {
    registry
        .events()
        .query(&crate::events::EventQuery::new())
        .into_iter()
        .map(|e| e.reason)
        .collect()
}

fn step(id: &str, tool: &str) -> Value {
    json!({"id": id, "tool": tool})
}

const WORKFLOW_FILE: &str = "apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: wf
  namespace: default
spec:
  description: from a file
  steps:
    - id: s1
      tool: core_service_list
";

#[tokio::test]
async fn a_workflow_goes_through_create_list_get_update_available_and_delete() {
    let registry = registry();
    let created = answer(
        &registry,
        "core_workflow_create",
        json!({
            "name": "hello",
            "description": "Lists services",
            "labels": {"team": "ops"},
            "steps": [step("list", "core_service_list")],
        }),
    )
    .await;
    assert_eq!(created["name"], "hello");
    assert_eq!(created["steps"][0]["id"], "list");
    assert_eq!(created["labels"]["team"], "ops");
    assert_eq!(created["available"], true);
    assert_eq!(created["missing_tools"], json!([]));
    assert_eq!(created["warnings"], json!([]));
    assert!(
        registry.catalog().tool("workflow_hello").is_some(),
        "callable right away"
    );

    let list = answer(&registry, "core_workflow_list", json!({})).await;
    assert_eq!(
        list,
        json!({"total": 1, "workflows": [
            {"name": "hello", "description": "Lists services", "available": true, "missing_tools": [], "steps": 1}
        ]})
    );

    let got = answer(&registry, "core_workflow_get", json!({"name": "hello"})).await;
    assert_eq!(got["description"], "Lists services");
    assert_eq!(got["steps"], json!([{"id": "list", "tool": "core_service_list"}]));
    assert_eq!(got["available"], true);

    // Only the given fields change: the description and labels stay.
    let updated = answer(
        &registry,
        "core_workflow_update",
        json!({"name": "hello", "steps": [step("list", "core_service_list"), step("more", "x_absent_tool")]}),
    )
    .await;
    assert_eq!(updated["steps"][1]["id"], "more");
    assert_eq!(updated["description"], "Lists services");
    assert_eq!(updated["labels"]["team"], "ops");
    assert_eq!(updated["available"], false);
    assert_eq!(updated["missing_tools"], json!(["x_absent_tool"]));

    let available = answer(&registry, "core_workflow_available", json!({"name": "hello"})).await;
    assert_eq!(
        available,
        json!({"name": "hello", "available": false, "missing_tools": ["x_absent_tool"]})
    );

    let deleted = answer(&registry, "core_workflow_delete", json!({"name": "hello"})).await;
    assert_eq!(deleted["deleted"], true);
    assert_eq!(deleted["name"], "hello");
    assert_eq!(
        refusal(&registry, "core_workflow_get", json!({"name": "hello"})).await,
        "workflow hello not found"
    );
    assert!(registry.catalog().tool("workflow_hello").is_none());
    assert_eq!(answer(&registry, "core_workflow_list", json!({})).await["total"], 0);

    let reasons = reasons(&registry);
    for reason in ["WorkflowCreated", "WorkflowUpdated", "WorkflowDeleted"] {
        assert!(reasons.iter().any(|r| r == reason), "{reason} missing from {reasons:?}");
    }
}

#[tokio::test]
async fn the_list_is_sorted_by_name_and_counts_core_tools_as_available() {
    let registry = registry();
    for name in ["test-workflow", "advanced-workflow"] {
        answer(
            &registry,
            "core_workflow_create",
            json!({"name": name, "args": {}, "steps": [step("s", "core_workflow_list")]}),
        )
        .await;
    }
    let list = answer(&registry, "core_workflow_list", json!({})).await;
    let names: Vec<&str> = list["workflows"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|w| w["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["advanced-workflow", "test-workflow"]);
    assert!(
        list["workflows"]
            .as_array()
            .expect("a list")
            .iter()
            .all(|w| w["available"] == true)
    );
}

#[tokio::test]
async fn unknown_fields_are_dropped_and_reported_in_the_answer_the_event_and_the_definition_keeps_none() {
    let registry = registry();
    let created = answer(
        &registry,
        "core_workflow_create",
        json!({"name": "w", "inputs": {}, "steps": [{"id": "a", "tool": "t", "bogus": 1}]}),
    )
    .await;
    assert_eq!(
        created["warnings"],
        json!([
            r#"unknown field "inputs" (dropped)"#,
            r#"unknown field "steps[0].bogus" (dropped)"#
        ])
    );
    assert_eq!(created["steps"], json!([{"id": "a", "tool": "t"}]));
    assert!(created.get("inputs").is_none(), "{created}");
    let events = registry.events().query(&crate::events::EventQuery::new());
    let dropped = events
        .iter()
        .find(|e| e.reason == "WorkflowFieldsDropped")
        .expect("a WorkflowFieldsDropped event");
    assert_eq!(dropped.event_type, crate::events::EventType::Warning);
    assert_eq!(
        dropped.data.warnings,
        created["warnings"]
            .as_array()
            .map(|w| w
                .iter()
                .map(|x| x.as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>())
            .unwrap_or_default()
    );
    assert!(
        dropped.message.contains(r#"unknown field "steps[0].bogus""#),
        "{}",
        dropped.message
    );

    let validated = answer(
        &registry,
        "core_workflow_validate",
        json!({"name": "v", "steps": [{"id": "a", "tool": "t", "retries": 2}]}),
    )
    .await;
    assert_eq!(validated["valid"], true);
    assert_eq!(
        validated["warnings"],
        json!([r#"unknown field "steps[0].retries" (dropped)"#])
    );

    let updated = answer(
        &registry,
        "core_workflow_update",
        json!({"name": "w", "descripton": "typo"}),
    )
    .await;
    assert_eq!(updated["warnings"], json!([r#"unknown field "descripton" (dropped)"#]));
    assert!(updated.get("description").is_none(), "{updated}");
}

#[tokio::test]
async fn create_refuses_with_muster_s_messages() {
    let registry = registry();
    // The name is checked before the steps.
    assert_eq!(
        refusal(&registry, "core_workflow_create", json!({"args": {}})).await,
        "name argument is required"
    );
    assert_eq!(
        refusal(&registry, "core_workflow_create", json!({"name": "w", "args": {}})).await,
        "steps argument is required"
    );
    assert_eq!(
        refusal(&registry, "core_workflow_create", json!({"name": "w", "steps": []})).await,
        "validation failed: spec.steps: workflow must have at least one step"
    );
    let duplicate = refusal(
        &registry,
        "core_workflow_create",
        json!({"name": "w", "steps": [step("a", "t1"), step("a", "t2"), {"id": "b"}]}),
    )
    .await;
    assert!(duplicate.starts_with("validation failed: "), "{duplicate}");
    assert!(duplicate.contains("duplicate step ID 'a' found"), "{duplicate}");
    assert!(
        duplicate.contains("; ") && duplicate.contains("one of tool, forEach, or parallel is required"),
        "every problem, joined: {duplicate}"
    );
    // A known field with a wrong value is refused, naming its path.
    let mistyped = refusal(
        &registry,
        "core_workflow_create",
        json!({"name": "w", "steps": [{"id": "a", "tool": 7}]}),
    )
    .await;
    assert!(
        mistyped.starts_with("invalid workflow definition: steps[0].tool: invalid type"),
        "{mistyped}"
    );
    assert!(registry.workflows().is_empty(), "nothing was created");
    assert!(reasons(&registry).iter().any(|r| r == "WorkflowValidationFailed"));

    answer(
        &registry,
        "core_workflow_create",
        json!({"name": "w", "steps": [step("a", "t")]}),
    )
    .await;
    assert_eq!(
        refusal(
            &registry,
            "core_workflow_create",
            json!({"name": "w", "steps": [step("a", "t")]})
        )
        .await,
        "workflow w already exists"
    );
}

#[tokio::test]
async fn an_unknown_step_tool_does_not_fail_creation() {
    let registry = registry();
    let created = answer(
        &registry,
        "core_workflow_create",
        json!({"name": "ghost", "steps": [step("a", "this_tool_is_not_real")]}),
    )
    .await;
    assert_eq!(created["available"], false);
    assert_eq!(created["missing_tools"], json!(["this_tool_is_not_real"]));
    let available = answer(&registry, "core_workflow_available", json!({"name": "ghost"})).await;
    assert_eq!(available["available"], false);
}

#[tokio::test]
async fn deprecated_spellings_are_accepted_with_a_warning() {
    let registry = registry();
    let created = answer(
        &registry,
        "core_workflow_create",
        json!({"name": "old", "steps": [
            {"id": "a", "tool": "core_service_list", "allow_failure": true, "store": true},
            {"id": "b", "tool": "core_service_list", "condition": {
                "from_step": "a", "expect_not": {"json_path": {"x": 1}}
            }},
        ]}),
    )
    .await;
    assert_eq!(created["steps"][0]["allowFailure"], true);
    assert_eq!(created["steps"][1]["condition"]["fromStep"], "a");
    assert_eq!(created["steps"][1]["condition"]["expectNot"]["jsonPath"]["x"], 1);
    let warnings = created["warnings"].to_string();
    for spelling in [
        "allow_failure",
        "from_step",
        "expect_not",
        "json_path",
        "store is deprecated",
    ] {
        assert!(warnings.contains(spelling), "{spelling} not in {warnings}");
    }
}

#[tokio::test]
async fn get_update_delete_and_available_of_a_missing_workflow_say_not_found() {
    let registry = registry();
    for tool in [
        "core_workflow_get",
        "core_workflow_update",
        "core_workflow_delete",
        "core_workflow_available",
    ] {
        assert_eq!(
            refusal(&registry, tool, json!({"name": "nope", "steps": [step("a", "t")]})).await,
            "workflow nope not found",
            "{tool}"
        );
    }
}

#[tokio::test]
async fn update_validates_like_create_and_keeps_the_old_definition_when_refused() {
    let registry = registry();
    answer(
        &registry,
        "core_workflow_create",
        json!({"name": "w", "steps": [step("a", "t")]}),
    )
    .await;
    let refused = refusal(
        &registry,
        "core_workflow_update",
        json!({"name": "w", "steps": [step("a", "t"), step("a", "t")]}),
    )
    .await;
    assert!(
        refused.contains("validation failed: ") && refused.contains("duplicate step ID 'a' found"),
        "{refused}"
    );
    assert_eq!(registry.workflow("w").expect("kept").spec.steps.len(), 1);
    let unchanged = answer(&registry, "core_workflow_update", json!({"name": "w"})).await;
    assert_eq!(unchanged["message"], "workflow w unchanged");
}

#[tokio::test]
async fn validate_reports_every_problem_as_an_error_result() {
    let registry = registry();
    let result = call(
        &registry,
        "core_workflow_validate",
        json!({"name": "bad", "steps": [step("a", "t"), step("a", "t"), {"id": "c"}]}),
    )
    .await
    .expect("an answer");
    assert_eq!(result.is_error, Some(true));
    let body = text(&result);
    assert!(body.contains("duplicate step ID 'a' found"), "{body}");
    assert!(body.contains("one of tool, forEach, or parallel is required"), "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["valid"], false);
    assert_eq!(answer["errors"].as_array().map(Vec::len), Some(2));
    assert!(registry.workflow("bad").is_none(), "validate creates nothing");
    assert!(reasons(&registry).iter().any(|r| r == "WorkflowValidationFailed"));

    let empty = call(
        &registry,
        "core_workflow_validate",
        json!({"name": "e", "args": {}, "steps": []}),
    )
    .await
    .expect("an answer");
    assert_eq!(empty.is_error, Some(true));
    assert!(text(&empty).contains("workflow must have at least one step"));
    let no_steps = call(&registry, "core_workflow_validate", json!({"name": "e"}))
        .await
        .expect("an answer");
    assert!(text(&no_steps).contains("steps argument is required"));
    assert_eq!(
        refusal(&registry, "core_workflow_validate", json!({"steps": []})).await,
        "name argument is required"
    );
}

#[tokio::test]
async fn validate_of_a_valid_definition_reports_missing_tools_without_failing() {
    let registry = registry();
    let answer = answer(
        &registry,
        "core_workflow_validate",
        json!({"name": "ok", "steps": [
            {"id": "loop", "forEach": {
                "items": "{{ .input.items }}", "as": "it", "steps": [step("each", "x_echo_echo")]
            }},
            step("list", "core_service_list"),
        ]}),
    )
    .await;
    assert_eq!(answer["valid"], true);
    assert_eq!(answer["errors"], json!([]));
    assert_eq!(answer["referenced_tools"], json!(["core_service_list", "x_echo_echo"]));
    assert_eq!(answer["missing_tools"], json!(["x_echo_echo"]));
    assert!(registry.workflow("ok").is_none(), "validate creates nothing");
    assert!(reasons(&registry).iter().any(|r| r == "WorkflowValidationSucceeded"));
}

#[tokio::test]
async fn create_writes_workflows_name_yaml_in_filesystem_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = fs_registry(dir.path());
    let created = answer(
        &registry,
        "core_workflow_create",
        json!({"name": "special-chars-workflow_123", "steps": [step("a", "core_service_list")]}),
    )
    .await;
    // Named relative to the config directory: the host's layout stays out of answers.
    assert_eq!(created["file"], "workflows/special-chars-workflow_123.yaml");
    assert!(dir.path().join("workflows/special-chars-workflow_123.yaml").is_file());
    let loaded = config_dir::load(dir.path()).expect("loads");
    assert_eq!(loaded.workflows.len(), 1);
    assert_eq!(
        loaded.workflows[0],
        registry.workflow("special-chars-workflow_123").expect("applied")
    );

    // A name that cannot be a file name is refused before anything is written.
    let refused = refusal(
        &registry,
        "core_workflow_create",
        json!({"name": "../escape", "steps": [step("a", "t")]}),
    )
    .await;
    assert!(refused.contains("metadata.name"), "{refused}");
    assert!(!dir.path().join("escape.yaml").exists());
}

#[tokio::test]
async fn update_writes_back_to_the_file_that_defined_the_workflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("workflows")).expect("mkdir");
    let file = dir.path().join("workflows/custom-file.yaml");
    std::fs::write(&file, WORKFLOW_FILE).expect("written");
    let registry = fs_registry(dir.path());
    let updated = answer(
        &registry,
        "core_workflow_update",
        json!({"name": "wf", "args": {}, "steps": [step("s1_updated", "core_service_list")]}),
    )
    .await;
    assert_eq!(updated["file"], "workflows/custom-file.yaml");
    assert!(
        !updated.to_string().contains(&dir.path().display().to_string()),
        "{updated}"
    );
    assert!(!dir.path().join("workflows/wf.yaml").exists());
    let loaded = config_dir::load(dir.path()).expect("loads");
    assert_eq!(loaded.workflows[0].spec.steps[0].id, "s1_updated");
    assert_eq!(loaded.workflows[0].spec.description.as_deref(), Some("from a file"));
    let got = answer(&registry, "core_workflow_get", json!({"name": "wf"})).await;
    assert_eq!(got["steps"][0]["id"], "s1_updated");
}

#[tokio::test]
async fn delete_removes_the_file_that_defined_the_workflow_whatever_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("workflows")).expect("mkdir");
    let file = dir.path().join("workflows/custom-file.yaml");
    std::fs::write(&file, WORKFLOW_FILE).expect("written");
    let registry = fs_registry(dir.path());
    answer(&registry, "core_workflow_delete", json!({"name": "wf"})).await;
    assert!(!file.exists());
    assert!(registry.workflow("wf").is_none());
    assert!(config_dir::load(dir.path()).expect("loads").workflows.is_empty());
}

#[tokio::test]
async fn a_file_named_after_a_workflow_that_defines_another_is_never_overwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("workflows")).expect("mkdir");
    // bar.yaml defines wf: creating bar must not write over it.
    let file = dir.path().join("workflows/bar.yaml");
    std::fs::write(&file, WORKFLOW_FILE).expect("written");
    let registry = fs_registry(dir.path());
    let refused = refusal(
        &registry,
        "core_workflow_create",
        json!({"name": "bar", "steps": [step("a", "core_service_list")]}),
    )
    .await;
    assert!(refused.contains("defines workflow wf"), "{refused}");
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), WORKFLOW_FILE);
    assert!(registry.workflow("bar").is_none());
}

#[tokio::test]
async fn execution_tools_answer_through_the_record_module() {
    let registry = registry();
    let page = answer(&registry, "core_workflow_execution_list", json!({})).await;
    assert_eq!(page["executions"], json!([]));
    assert_eq!(page["total"], 0);
    let missing = refusal(
        &registry,
        "core_workflow_execution_get",
        json!({"execution_id": "not-a-valid-uuid-format"}),
    )
    .await;
    assert!(
        missing.contains("not found") && missing.contains("execution"),
        "{missing}"
    );
    let no_id = refusal(&registry, "core_workflow_execution_get", json!({})).await;
    assert!(no_id.contains("execution_id"), "{no_id}");
}

#[test]
fn the_tool_definitions_carry_the_reference_annotations_and_schemas() {
    let tool = |name: &str| {
        super::super::CoreTools::entries()
            .iter()
            .find(|e| e.name() == name)
            .unwrap_or_else(|| panic!("{name} is defined"))
            .tool
            .to_tool()
    };
    let hints = |name: &str| {
        let a = tool(name).annotations.expect("annotations");
        (
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        )
    };
    for name in [
        "core_workflow_list",
        "core_workflow_get",
        "core_workflow_validate",
        "core_workflow_available",
        "core_workflow_execution_list",
        "core_workflow_execution_get",
    ] {
        assert_eq!(
            hints(name),
            (Some(true), Some(false), Some(true), Some(false)),
            "{name}"
        );
    }
    assert_eq!(
        hints("core_workflow_create"),
        (Some(false), Some(false), Some(false), Some(false))
    );
    assert_eq!(
        hints("core_workflow_update"),
        (Some(false), Some(true), Some(true), Some(false))
    );
    assert_eq!(
        hints("core_workflow_delete"),
        (Some(false), Some(true), Some(false), Some(false))
    );

    let create = Value::Object((*tool("core_workflow_create").input_schema).clone());
    assert_eq!(create["required"], json!(["name", "steps"]));
    for property in ["name", "steps", "description", "args", "onFailure", "output", "labels"] {
        let described = create["properties"][property]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!described.is_empty(), "{property} is described: {create}");
    }
    // Step items are objects whose fields are described.
    let text = create.to_string();
    for field in [
        "allowFailure",
        "forEach",
        "parallel",
        "condition",
        "fromStep",
        "expectNot",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
    let update = Value::Object((*tool("core_workflow_update").input_schema).clone());
    assert_eq!(update["required"], json!(["name"]));
    let list = Value::Object((*tool("core_workflow_execution_list").input_schema).clone());
    assert!(list["properties"]["workflow_name"]["description"].is_string(), "{list}");
    let get = Value::Object((*tool("core_workflow_execution_get").input_schema).clone());
    assert_eq!(get["required"], json!(["execution_id"]));
}

#[tokio::test]
async fn workflow_writes_go_through_the_store_as_the_caller_and_a_refusal_changes_nothing() {
    use crate::definitions::store::testing::{Answer, RecordingStore, STORED_ANNOTATION};

    let caller = || CallContext::default().with_principal(muster_core::Principal::new("ada"));
    let store = Arc::new(RecordingStore::new(Answer::Writes));
    let registry = with_store(store.clone());
    let dispatcher = registry.dispatcher.clone();
    let run = |tool: &str, args: Value| {
        use tower::ServiceExt;
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        dispatcher.clone().oneshot(ToolCall::new(tool, args, caller()))
    };
    let created = run(
        "core_workflow_create",
        json!({"name": "hello", "steps": [step("a", "core_service_list")]}),
    )
    .await
    .expect("created");
    assert!(!created.is_error());
    let held = registry.workflow("hello").expect("applied");
    assert_eq!(
        held.metadata.annotations[STORED_ANNOTATION], "yes",
        "the store's copy is applied"
    );
    run("core_workflow_delete", json!({"name": "hello"}))
        .await
        .expect("deleted");
    assert!(registry.workflow("hello").is_none());
    assert_eq!(
        store.writes(),
        ["put Workflow hello by ada", "delete Workflow hello by ada"]
    );

    let store = Arc::new(RecordingStore::new(Answer::Refuses("ada may not write Workflow hello")));
    let registry = with_store(store);
    let refused = refusal(
        &registry,
        "core_workflow_create",
        json!({"name": "hello", "steps": [step("a", "t")]}),
    )
    .await;
    assert_eq!(refused, "ada may not write Workflow hello");
    assert!(registry.workflow("hello").is_none());
}
