//! Workflows through the gateway, with real downstream servers: the demo server over stdio and
//! scripted servers over loopback HTTP. Every step is a real MCP call made by the gateway.

mod common;

use common::{
    Harness, call_meta, demo_stdio, envelope, fast_supervision, remote, scripted::ScriptedServer, text, tool_names,
};
use muster::core::{config::MusterConfig, crd::Workflow};
use muster::gateway::Gateway;
use serde_json::{Value, json};

fn workflow(name: &str, spec: Value) -> Workflow {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a workflow")
}

async fn serve(servers: Vec<muster::core::crd::MCPServer>, workflows: Vec<Workflow>) -> Harness {
    let gateway = Gateway::with_supervision(MusterConfig::default(), servers, workflows, fast_supervision())
        .expect("valid configuration");
    Harness::serve(gateway).await
}

/// Runs `workflow_<name>` through `call_tool`: (the inner result's isError, its document).
async fn run(h: &Harness, name: &str, args: Value) -> (bool, Value) {
    let result = h
        .meta(
            "call_tool",
            json!({"name": format!("workflow_{name}"), "arguments": args}),
        )
        .await;
    let env = envelope(&result);
    assert!(env.is_object(), "call_tool answered {}", text(&result));
    let doc = env["structuredContent"].clone();
    assert!(doc.is_object(), "no document in {env}");
    (env["isError"] == true, doc)
}

#[tokio::test]
async fn a_workflow_runs_every_kind_of_step_through_a_real_server_and_keeps_types() {
    let wf = workflow(
        "tour",
        json!({
            "description": "Greets, adds, loops, fans out and pages through the demo server.",
            "args": {
                "who": {"type": "string", "required": true, "description": "Whom to greet"},
                "names": {"type": "array", "default": ["ann", "bob", "cy"]},
                "count": {"type": "integer", "default": 2},
                "version": {"type": "string", "default": "1.20"}
            },
            "steps": [
                {"id": "hello", "tool": "x_demo_echo", "args": {"message": "hello {{ .input.who }}"}},
                {"id": "sum", "tool": "x_demo_add", "args": {"a": "{{ .input.count }}", "b": 40}},
                {"id": "never", "tool": "x_demo_echo", "args": {"message": "skipped"},
                 "condition": {"template": "{{ gt .results.sum.sum 100.0 }}"}},
                {"id": "each", "forEach": {"items": "{{ .input.names }}", "parallelism": 3, "steps": [
                    {"id": "shout", "tool": "x_demo_echo", "args": {"message": "{{ .vars.item | upper }}-{{ .vars.item_index }}"}}
                ]}},
                {"id": "fan", "parallel": [
                    {"id": "p1", "tool": "x_demo_add", "args": {"a": 1, "b": 2}},
                    {"id": "p2", "tool": "x_demo_echo", "args": {"message": "{{ .results.hello }}!"}}
                ]},
                {"id": "pages", "tool": "x_demo_list_items", "args": {"total": 5, "page_size": 2}, "paginate": {}},
                {"id": "names", "tool": "x_demo_list_items", "args": {"total": 3, "page_size": 3},
                 "jq": "[.items[] | .name + $input.version]"}
            ],
            "output": {
                "greeting": "{{ .results.hello }}",
                "sum": "{{ .results.sum.sum }}",
                "last_shout": "{{ .results.shout }}",
                "first_shout": "{{ .results.shout_0 }}",
                "loop": "{{ len .results.each }}",
                "fan": "{{ .results.p1.sum }} {{ .results.p2 }}",
                "items": "{{ .results.pages.items }}",
                "pagination": "{{ .results.pages.pagination }}",
                "names": "{{ .results.names }}",
                "version": "{{ .input.version }}",
                "padded": "{{ printf \"%02d\" 8 }}",
                "count": "{{ len .results.pages.items }}",
                "nested": {"who": "{{ .input.who }}", "list": ["{{ .input.count }}", "n={{ .input.count }}"]}
            }
        }),
    );
    let h = serve(vec![demo_stdio("demo")], vec![wf]).await;

    let described = h.meta_json("describe_tool", json!({"name": "workflow_tour"})).await;
    let tool = &described;
    assert_eq!(tool["inputSchema"]["required"], json!(["who"]), "{described}");
    assert_eq!(tool["inputSchema"]["properties"]["count"]["default"], 2);
    assert_eq!(
        tool["annotations"]["readOnlyHint"], true,
        "every step tool is read-only"
    );

    // A caller whose toolset admits only this workflow runs it whole, but cannot call its
    // steps' tools directly.
    let scoped = h.client_with_headers(&[("x-muster-toolset", "workflow:tour")]).await;
    let direct = call_meta(
        &scoped,
        "call_tool",
        json!({"name": "x_demo_echo", "arguments": {"message": "x"}}),
    )
    .await;
    assert!(text(&direct).contains("outside the toolset"), "{}", text(&direct));
    let scoped_run = call_meta(
        &scoped,
        "call_tool",
        json!({"name": "workflow_tour", "arguments": {"who": "eve"}}),
    )
    .await;
    assert_eq!(
        envelope(&scoped_run)["structuredContent"]["greeting"],
        "hello eve",
        "{}",
        text(&scoped_run)
    );
    let _ = scoped.cancel().await;

    let (failed, doc) = run(&h, "tour", json!({"who": "bob"})).await;
    assert!(!failed, "{doc}");
    let items: Vec<Value> = (0..5)
        .map(|i| json!({"name": format!("item-{i}"), "index": i}))
        .collect();
    assert_eq!(
        doc,
        json!({
            "greeting": "hello bob",
            "sum": 42.0,
            "last_shout": "CY-2",
            "first_shout": "ANN-0",
            "loop": 3,
            "fan": "3 hello bob!",
            "items": items,
            "pagination": {"pages": 3, "truncated": false},
            "names": ["item-01.20", "item-11.20", "item-21.20"],
            "version": "1.20",
            "padded": "08",
            "count": 5,
            "nested": {"who": "bob", "list": [2, "n=2"]}
        })
    );
    h.stop().await;
}

#[tokio::test]
async fn the_default_response_lists_steps_and_debug_shows_every_result() {
    let wf = workflow(
        "plain",
        json!({"steps": [
            {"id": "a", "tool": "x_demo_add", "args": {"a": 1, "b": 1}, "output": true},
            {"id": "b", "tool": "x_demo_add", "args": {"a": "{{ .results.a.sum }}", "b": 1}}
        ]}),
    );
    let h = serve(vec![demo_stdio("demo")], vec![wf]).await;
    let (failed, doc) = run(&h, "plain", json!({})).await;
    assert!(!failed);
    assert_eq!(doc["workflow"], "plain");
    assert_eq!(doc["status"], "completed");
    assert!(doc["execution_id"].as_str().is_some_and(|id| id.len() == 36));
    assert_eq!(
        doc["steps"][0],
        json!({"id": "a", "tool": "x_demo_add", "status": "completed", "result": {"sum": 2.0}})
    );
    assert_eq!(
        doc["steps"][1],
        json!({"id": "b", "tool": "x_demo_add", "status": "completed"})
    );
    assert_eq!(doc["sum"], 3.0, "the last step's object result is merged in");

    let (_, debug) = run(&h, "plain", json!({"_debug": true})).await;
    assert_eq!(debug["steps"][1]["result"], json!({"sum": 3.0}));
    assert_eq!(debug["input"], json!({}));

    // The run is recorded and can be read back.
    let id = doc["execution_id"].as_str().unwrap_or_default();
    let got = h
        .meta(
            "call_tool",
            json!({"name": "core_workflow_execution_get", "arguments": {"execution_id": id}}),
        )
        .await;
    let record: Value =
        serde_json::from_str(envelope(&got)["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["steps"][1]["input"], json!({"a": 2.0, "b": 1}));
    h.stop().await;
}

/// The documented database-migration workflow, with a scripted postgres server.
fn migration() -> Workflow {
    let yaml = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: database-migration
  namespace: default
spec:
  description: "Perform database migration with rollback capability"
  args:
    database_name: {type: string, required: true, description: "Target database name"}
    migration_version: {type: string, required: true, description: "Target migration version"}
    dry_run: {type: boolean, default: false, description: "Perform dry run without applying changes"}
  steps:
    - id: check_database
      tool: x_postgres_status
      args: {database: "{{.input.database_name}}"}
      store: true
      description: "Verify database connectivity"
    - id: backup_database
      tool: x_postgres_backup
      args:
        database: "{{.input.database_name}}"
        backup_name: "pre-migration-{{.input.migration_version}}"
      condition:
        fromStep: "check_database"
        expect: {success: true, jsonPath: {status: "connected"}}
      store: true
      description: "Create backup before migration"
    - id: run_migration
      tool: x_postgres_migrate
      args:
        database: "{{.input.database_name}}"
        version: "{{.input.migration_version}}"
        dry_run: "{{.input.dry_run}}"
      condition: {fromStep: "backup_database", expect: {success: true}}
      store: true
      description: "Execute database migration"
    - id: verify_migration
      tool: x_postgres_verify
      args:
        database: "{{.input.database_name}}"
        expected_version: "{{.input.migration_version}}"
      condition: {fromStep: "run_migration", expect: {success: true}}
      description: "Verify migration completed successfully"
  onFailure:
    - id: rollback_migration
      tool: x_postgres_restore
      args:
        database: "{{.input.database_name}}"
        backup_name: "{{.results.backup_database.backup_name}}"
      description: "Restore the pre-migration backup if the workflow fails"
"#;
    serde_saphyr::from_str(yaml).expect("the documented example parses")
}

async fn postgres() -> ScriptedServer {
    ScriptedServer::builder()
        .tool("status", true, |a| {
            Ok(json!({"database": a["database"], "status": if a["database"] == "down" { "unreachable" } else { "connected" }}))
        })
        .tool("backup", false, |a| Ok(json!({"backup_name": a["backup_name"], "size": 1024})))
        .tool("migrate", false, |a| match a["version"].as_str() {
            Some("bad") => Err("migration 'bad' failed: syntax error at line 3".to_owned()),
            _ => Ok(json!({"applied": a["version"], "dry_run": a["dry_run"]})),
        })
        .tool("verify", true, |a| Ok(json!({"version": a["expected_version"], "ok": true})))
        .tool("restore", false, |a| Ok(json!({"restored": a["backup_name"]})))
        .serve()
        .await
}

#[tokio::test]
async fn the_documented_migration_workflow_rolls_back_on_failure() {
    let pg = postgres().await;
    let h = serve(vec![remote("postgres", &pg.url)], vec![migration()]).await;

    let (failed, doc) = run(
        &h,
        "database-migration",
        json!({"database_name": "shop", "migration_version": "v42"}),
    )
    .await;
    assert!(!failed, "{doc}");
    assert_eq!(pg.call_order(), ["status", "backup", "migrate", "verify"]);
    assert_eq!(
        pg.calls_of("migrate"),
        [json!({"database": "shop", "version": "v42", "dry_run": false})]
    );
    assert_eq!(doc["version"], "v42", "the verify result is merged into the response");
    assert_eq!(
        doc["steps"][1]["result"],
        json!({"backup_name": "pre-migration-v42", "size": 1024})
    );

    let (failed, doc) = run(
        &h,
        "database-migration",
        json!({"database_name": "shop", "migration_version": "bad"}),
    )
    .await;
    assert!(failed, "{doc}");
    assert_eq!(doc["status"], "failed");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("syntax error at line 3")),
        "{doc}"
    );
    assert_eq!(
        pg.calls_of("restore"),
        [json!({"database": "shop", "backup_name": "pre-migration-bad"})]
    );
    let statuses: Vec<(String, String)> = doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or("").to_owned(),
                s["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("check_database".to_owned(), "completed".to_owned()),
            ("backup_database".to_owned(), "completed".to_owned()),
            ("run_migration".to_owned(), "failed".to_owned()),
            ("rollback_migration".to_owned(), "completed".to_owned())
        ]
    );

    // An unreachable database: the backup is skipped, so is everything after it, and nothing
    // fails (no rollback).
    let (failed, doc) = run(
        &h,
        "database-migration",
        json!({"database_name": "down", "migration_version": "v1"}),
    )
    .await;
    assert!(!failed, "{doc}");
    let skipped = doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == "skipped")
        .count();
    assert_eq!(skipped, 3, "{doc}");
    assert_eq!(pg.calls_of("restore").len(), 1, "no second rollback");
    h.stop().await;
}

#[tokio::test]
async fn availability_and_read_only_follow_the_tools_a_workflow_names() {
    let pg = postgres().await;
    let workflows = vec![
        workflow("reads", json!({"steps": [{"id": "s", "tool": "x_postgres_status"}]})),
        workflow(
            "writes",
            json!({"steps": [{"id": "s", "tool": "x_postgres_status"}],
            "onFailure": [{"id": "undo", "tool": "x_postgres_restore"}]}),
        ),
        workflow(
            "nested_reads",
            json!({"steps": [{"id": "n", "tool": "workflow_reads"}]}),
        ),
        workflow(
            "lacks",
            json!({"steps": [{"id": "s", "tool": "x_postgres_status"},
            {"id": "t", "tool": "x_nowhere_tool"}]}),
        ),
        workflow(
            "lacks_nested",
            json!({"steps": [{"id": "n", "tool": "workflow_lacks"}]}),
        ),
        workflow("loops", json!({"steps": [{"id": "again", "tool": "workflow_loops"}]})),
    ];
    let h = serve(vec![remote("postgres", &pg.url)], workflows).await;

    let page = h
        .meta_json("filter_tools", json!({"pattern": "workflow_*", "limit": 50}))
        .await;
    assert_eq!(
        tool_names(&page),
        [
            "workflow_loops",
            "workflow_nested_reads",
            "workflow_reads",
            "workflow_writes"
        ]
    );
    let hints: Vec<(String, Value)> = page["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["annotations"]["readOnlyHint"].clone(),
            )
        })
        .collect();
    assert_eq!(
        hints,
        [
            ("workflow_loops".to_owned(), Value::Null),
            ("workflow_nested_reads".to_owned(), json!(true)),
            ("workflow_reads".to_owned(), json!(true)),
            ("workflow_writes".to_owned(), Value::Null)
        ]
    );

    let refused = h
        .meta("call_tool", json!({"name": "workflow_lacks_nested", "arguments": {}}))
        .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("workflow lacks_nested is not available (missing required tools: workflow_lacks)"),
        "{}",
        text(&refused)
    );

    // A workflow that calls itself is stopped by the nesting bound, not left recursing.
    let (failed, doc) = run(&h, "loops", json!({})).await;
    assert!(failed);
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("nested more than 8 levels")),
        "{doc}"
    );
    h.stop().await;
}

#[tokio::test]
async fn step_events_are_written_to_the_event_log() {
    let wf = workflow(
        "evented",
        json!({"steps": [
            {"id": "first_step", "tool": "x_demo_echo", "args": {"message": "1"}},
            {"id": "second_step", "tool": "x_demo_fail", "args": {"reason": "boom-intentional-failure"}, "allowFailure": true},
            {"id": "third_step", "tool": "x_demo_echo", "args": {"message": "3"}, "condition": {"template": "false"}}
        ]}),
    );
    let h = serve(vec![demo_stdio("demo")], vec![wf]).await;
    let (failed, _) = run(&h, "evented", json!({})).await;
    assert!(!failed);
    let events = h
        .meta_json(
            "call_tool",
            json!({"name": "core_events", "arguments": {"resourceType": "Workflow", "resourceName": "evented", "limit": 50}}),
        )
        .await;
    let inner: Value =
        serde_json::from_str(events["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    let mut lines: Vec<String> = inner
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{} {}",
                e["reason"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    lines.reverse();
    let expected = [
        "WorkflowExecutionStarted Workflow evented execution",
        "WorkflowStepStarted Workflow evented step first_step started (tool: x_demo_echo)",
        "WorkflowStepCompleted Workflow evented step first_step completed successfully",
        "WorkflowStepStarted Workflow evented step second_step started (tool: x_demo_fail)",
        "WorkflowStepFailed Workflow evented step second_step failed: boom-intentional-failure",
        "WorkflowStepConditionEvaluated Workflow evented step third_step condition (template) evaluated to false",
        "WorkflowStepSkipped Workflow evented step third_step skipped",
        "WorkflowExecutionCompleted Workflow evented execution",
    ];
    let run_lines: Vec<&String> = lines.iter().filter(|l| !l.starts_with("WorkflowCreated")).collect();
    assert_eq!(run_lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in run_lines.iter().zip(expected) {
        assert!(line.starts_with(want), "{line:?} does not start with {want:?}");
    }
    h.stop().await;
}

#[tokio::test]
async fn the_example_config_directory_loads_and_its_workflow_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config");
    let loaded = muster::gateway::definitions::config_dir::load(&dir).expect("the example config directory reads");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let names: Vec<&str> = loaded.workflows.iter().map(|w| w.metadata.name.as_str()).collect();
    assert_eq!(names, ["demo-tour"]);
    // The example's demo server is `command: "@self"`, the gateway binary, which this test is not.
    let h = serve(vec![demo_stdio("demo")], loaded.workflows).await;
    let (failed, doc) = run(&h, "demo-tour", json!({"who": "you"})).await;
    assert!(!failed, "{doc}");
    assert_eq!(
        doc,
        json!({
            "greeting": "hello you",
            "sum": 42.0,
            "items": ["item-0", "item-1", "item-2", "item-3", "item-4"],
            "count": 5
        })
    );
    h.stop().await;
}

#[tokio::test]
async fn an_oversized_result_is_truncated_in_the_record_but_not_in_the_answer() {
    use muster::gateway::GatewayOptions;
    use muster::workflow::record::{ExecutionStore, FsExecutionStore, TRUNCATION_MARKER};

    let dir = tempfile::tempdir().expect("temp dir");
    let store = std::sync::Arc::new(FsExecutionStore::open(dir.path()).expect("store opens"));
    let wf = workflow(
        "big",
        json!({"steps": [{"id": "blob", "tool": "x_demo_echo", "args": {"message": "{{ repeat 400000 \"x\" }}"}, "output": true}]}),
    );
    let options = GatewayOptions::default()
        .with_supervision(fast_supervision())
        .with_executions(store.clone());
    let gateway = Gateway::with_options(MusterConfig::default(), vec![demo_stdio("demo")], vec![wf], options)
        .expect("valid configuration");
    let h = Harness::serve(gateway).await;
    let (failed, doc) = run(&h, "big", json!({})).await;
    assert!(!failed);
    assert_eq!(
        doc["steps"][0]["result"].as_str().map(str::len),
        Some(400_000),
        "the live answer is whole"
    );

    let id = doc["execution_id"].as_str().expect("an execution id");
    let record = store.get(id).expect("reads").expect("recorded");
    assert!(record.spec.truncated);
    assert_eq!(record.spec.result, Some(json!(TRUNCATION_MARKER)));
    let on_disk = std::fs::metadata(store.path_of(id)).expect("a record file").len();
    assert!(on_disk < 256 * 1024, "record file is {on_disk} bytes");
    h.stop().await;
}

/// The reference's core_workflow_create example request, verbatim.
fn deploy_with_monitoring() -> Value {
    json!({
        "name": "deploy-with-monitoring",
        "description": "Deploy application and setup monitoring with health checks",
        "args": {
            "app_name": {"type": "string", "required": true, "description": "Application name to deploy"},
            "environment": {"type": "string", "default": "development", "description": "Target environment"},
            "health_check": {"type": "boolean", "default": true, "description": "Enable health checking"}
        },
        "steps": [
            {
                "id": "deploy",
                "tool": "x_kubernetes_apply",
                "description": "Deploy the application",
                "args": {"manifest": "{{ .input.manifest }}"}
            },
            {
                "id": "health_check",
                "tool": "core_service_status",
                "description": "Verify service is healthy",
                "condition": {
                    "tool": "echo",
                    "args": {"value": "{{ .input.health_check }}"},
                    "expect": {"jsonPath": {"value": true}}
                },
                "args": {"name": "{{ .results.create_service.service_name }}"},
                "store": true
            }
        ]
    })
}

#[tokio::test]
async fn the_documented_create_request_defines_a_workflow_that_waits_for_its_tools() {
    let h = serve(vec![demo_stdio("demo")], Vec::new()).await;
    let (failed, created) = h.core("core_workflow_create", deploy_with_monitoring()).await;
    assert!(!failed, "{created}");
    assert_eq!(created["available"], false);
    assert_eq!(created["missing_tools"], json!(["echo", "x_kubernetes_apply"]));
    assert!(
        created["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|x| x.as_str().is_some_and(|s| s.contains("store")))),
        "the deprecated store flag is warned about: {created}"
    );

    let (_, got) = h
        .core("core_workflow_get", json!({"name": "deploy-with-monitoring"}))
        .await;
    assert_eq!(got["steps"][1]["condition"]["expect"]["jsonPath"]["value"], true);
    let refused = h
        .meta(
            "call_tool",
            json!({"name": "workflow_deploy-with-monitoring", "arguments": {"app_name": "shop"}}),
        )
        .await;
    assert!(
        text(&refused).contains("not available (missing required tools: echo, x_kubernetes_apply)"),
        "{}",
        text(&refused)
    );

    // The documented update request: only the steps and description change.
    let (failed, updated) = h
        .core(
            "core_workflow_update",
            json!({
                "name": "deploy-with-monitoring",
                "description": "Updated: Enhanced deployment with advanced monitoring and rollback",
                "steps": [{"id": "deploy", "tool": "x_demo_echo", "description": "Deploy the application",
                           "args": {"message": "{{ .input.app_name }} to {{ .input.environment }}"}}]
            }),
        )
        .await;
    assert!(!failed, "{updated}");
    assert_eq!(updated["available"], true);
    assert_eq!(updated["args"]["environment"]["default"], "development", "args kept");
    let (failed, doc) = run(&h, "deploy-with-monitoring", json!({"app_name": "shop"})).await;
    assert!(!failed, "{doc}");
    assert_eq!(doc["steps"][0]["status"], "completed");

    let (failed, invalid) = h
        .core(
            "core_workflow_validate",
            json!({"name": "broken", "steps": [{"id": "a", "tool": "t", "jq": ".["}, {"id": "a"}]}),
        )
        .await;
    assert!(failed);
    let errors = invalid.to_string();
    for needle in [
        "duplicate step ID 'a' found",
        "one of tool, forEach, or parallel is required",
        "jq: syntax error",
    ] {
        assert!(errors.contains(needle), "{needle:?} missing from {errors}");
    }

    let (failed, _) = h
        .core("core_workflow_delete", json!({"name": "deploy-with-monitoring"}))
        .await;
    assert!(!failed);
    let (_, list) = h.core("core_workflow_list", json!({})).await;
    assert_eq!(list["workflows"], json!([]));
    h.stop().await;
}

/// The gateway's workflow engine calls the gateway's whole stack, which holds the registry,
/// which holds the engine: the engine holds that stack weakly, so the registry goes with the
/// last handle of the stack, with no cycle broken by hand; and a run started through that last
/// handle, which lets go of it at once, still runs every step (a nested workflow's included).
#[tokio::test]
async fn a_run_through_the_last_handle_of_the_stack_finishes_and_then_the_registry_is_dropped() {
    use muster::core::{CallContext, ToolCall};
    use tower::ServiceExt;

    let greet = workflow(
        "greet",
        json!({
            "steps": [
                {"id": "hello", "tool": "x_demo_echo", "args": {"message": "hello"}},
                {"id": "again", "tool": "workflow_echo_once"}
            ],
            "output": {"first": "{{ .results.hello }}", "nested": "{{ .results.again.said }}"}
        }),
    );
    let once = workflow(
        "echo_once",
        json!({
            "steps": [{"id": "say", "tool": "x_demo_echo", "args": {"message": "once"}}],
            "output": {"said": "{{ .results.say }}"}
        }),
    );
    let gateway = Gateway::with_supervision(
        MusterConfig::default(),
        vec![demo_stdio("demo")],
        vec![greet, once],
        fast_supervision(),
    )
    .expect("valid configuration");
    gateway.start().await;
    let registry = std::sync::Arc::downgrade(gateway.registry());
    let tools = gateway.tools();
    drop(gateway);
    assert!(registry.upgrade().is_some(), "the stack still held holds the registry");

    let call = ToolCall::new("workflow_greet", serde_json::Map::new(), CallContext::default());
    let result = tools.oneshot(call).await.expect("ran").into_result().expect("typed");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"first": "hello", "nested": "once"}))
    );

    assert!(
        registry.upgrade().is_none(),
        "nothing keeps the registry once the stack is gone"
    );
}
