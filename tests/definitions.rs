//! How the gateway reads definitions, through a real rmcp client over loopback HTTP and the
//! demo server over stdio: unknown fields are accepted, dropped and reported (answer, event,
//! log), fields of the other server type likewise, wrong values and refused fields are
//! refused; `output` decides over the deprecated `store`; `core_workflow_get` answers the whole
//! definition and its YAML; the create/update/validate tools advertise the CRD schemas.

mod common;

use std::path::Path;

use common::{Harness, demo_stdio, envelope, fast_supervision};
use muster::core::{
    config::MusterConfig,
    crd::{MCPServerSpec, Workflow, WorkflowSpec},
};
use muster::gateway::Gateway;
use serde_json::{Value, json};

async fn serve() -> Harness {
    let gateway = Gateway::with_supervision(
        MusterConfig::default(),
        vec![demo_stdio("demo")],
        Vec::new(),
        fast_supervision(),
    )
    .expect("valid configuration");
    Harness::serve(gateway).await
}

/// The events `core_events` answers for resource `kind`/`name`, newest first.
async fn events(h: &Harness, kind: &str, name: &str) -> Vec<Value> {
    let (failed, answer) = h
        .core("core_events", json!({"resourceType": kind, "resourceName": name}))
        .await;
    assert!(!failed, "{answer}");
    answer.as_array().cloned().unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn unknown_workflow_fields_are_dropped_and_reported_in_the_answer_the_event_and_never_kept() {
    let h = serve().await;
    let (failed, created) = h
        .core(
            "core_workflow_create",
            json!({
                "name": "greet",
                "inputs": {"who": "string"},
                "steps": [{"id": "hello", "tool": "x_demo_echo", "args": {"message": "hi"}, "retries": 3,
                           "condition": {"template": "{{ true }}", "when": "always"}}]
            }),
        )
        .await;
    assert!(!failed, "{created}");
    assert_eq!(
        strings(&created["warnings"]),
        [
            r#"unknown field "inputs" (dropped)"#,
            r#"unknown field "steps[0].condition.when" (dropped)"#,
            r#"unknown field "steps[0].retries" (dropped)"#,
        ]
    );
    assert_eq!(created["available"], true);

    let dropped: Vec<Value> = events(&h, "Workflow", "greet")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "WorkflowFieldsDropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0]["type"], "Warning");
    assert_eq!(dropped[0]["data"]["warnings"], created["warnings"]);
    assert!(
        dropped[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(r#"unknown field "steps[0].retries""#)),
        "{dropped:?}"
    );

    let (_, got) = h.core("core_workflow_get", json!({"name": "greet"})).await;
    assert!(got.get("inputs").is_none(), "{got}");
    assert!(got["steps"][0].get("retries").is_none(), "{got}");
    assert!(!got["yaml"].as_str().unwrap_or_default().contains("retries"), "{got}");

    // A field the schema knows, with a wrong value, is still refused and named.
    let (failed, refused) = h
        .core(
            "core_workflow_create",
            json!({"name": "bad", "steps": [{"id": "a", "tool": "x_demo_echo", "allowFailure": "yes"}]}),
        )
        .await;
    assert!(failed);
    assert!(
        refused
            .as_str()
            .is_some_and(|m| m.contains("invalid workflow definition: steps[0].allowFailure: invalid type")),
        "{refused}"
    );

    // Validate and update report the same way.
    let (failed, validated) = h
        .core(
            "core_workflow_validate",
            json!({"name": "v", "steps": [{"id": "a", "tool": "x_demo_echo", "required": true}]}),
        )
        .await;
    assert!(!failed, "{validated}");
    assert_eq!(
        strings(&validated["warnings"]),
        [r#"unknown field "steps[0].required" (dropped)"#]
    );
    let (failed, updated) = h
        .core("core_workflow_update", json!({"name": "greet", "descripton": "typo"}))
        .await;
    assert!(!failed, "{updated}");
    assert_eq!(
        strings(&updated["warnings"]),
        [r#"unknown field "descripton" (dropped)"#]
    );
    h.stop().await;
}

#[tokio::test]
async fn mcpserver_fields_unknown_or_of_the_other_type_are_dropped_with_warnings_and_env_on_remote_is_refused() {
    let h = serve().await;
    let (failed, created) = h
        .core(
            "core_mcpserver_create",
            json!({"name": "far", "type": "streamable-http", "url": "http://127.0.0.1:9/mcp",
               "command": ["npx", "server"], "colour": "blue"}),
        )
        .await;
    assert!(!failed, "{created}");
    assert_eq!(
        strings(&created["warnings"]),
        [
            r#"unknown field "colour" (dropped)"#,
            r#"field "command" does not apply to a streamable-http server (dropped)"#,
            r#"field "args" does not apply to a streamable-http server (dropped)"#,
        ]
    );
    let (_, got) = h.core("core_mcpserver_get", json!({"name": "far"})).await;
    assert!(
        got.get("command").is_none() && got.get("args").is_none() && got.get("colour").is_none(),
        "{got}"
    );
    let dropped: Vec<Value> = events(&h, "MCPServer", "far")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "MCPServerFieldsDropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0]["type"], "Warning");
    assert_eq!(dropped[0]["data"]["warnings"], created["warnings"]);

    // An update reports what it drops the same way.
    let (failed, updated) = h
        .core(
            "core_mcpserver_update",
            json!({"name": "far", "autoStart": true, "descripton": "typo"}),
        )
        .await;
    assert!(!failed, "{updated}");
    assert_eq!(
        strings(&updated["warnings"]),
        [
            r#"unknown field "descripton" (dropped)"#,
            r#"field "autoStart" does not apply to a streamable-http server (dropped)"#,
        ]
    );

    // validate: the same warnings; env on a remote server and a wrong value stay refused.
    let (_, valid) = h
        .core(
            "core_mcpserver_validate",
            json!({"name": "local", "type": "stdio", "command": "npx", "url": "http://127.0.0.1:9/mcp"}),
        )
        .await;
    assert_eq!(valid["valid"], true, "{valid}");
    assert_eq!(
        strings(&valid["warnings"]),
        [r#"field "url" does not apply to a stdio server (dropped)"#]
    );
    let (_, env) = h
        .core(
            "core_mcpserver_validate",
            json!({"name": "far2", "type": "sse", "url": "http://127.0.0.1:9/sse", "env": {"A": "b"}}),
        )
        .await;
    assert_eq!(env["valid"], false, "{env}");
    assert!(
        env["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.env: env is refused on a remote server")),
        "{env}"
    );
    let (_, mistyped) = h
        .core(
            "core_mcpserver_validate",
            json!({"name": "far3", "type": "sse", "url": "http://127.0.0.1:9/sse", "timeout": "soon"}),
        )
        .await;
    assert_eq!(mistyped["valid"], false, "{mistyped}");
    assert!(
        mistyped["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid MCP server definition: timeout: invalid type")),
        "{mistyped}"
    );
    h.stop().await;
}

#[tokio::test]
async fn output_decides_over_store_and_every_result_stays_referenceable() {
    let h = serve().await;
    let (failed, created) = h
        .core(
            "core_workflow_create",
            json!({
                "name": "flags",
                "steps": [
                    {"id": "hidden", "tool": "x_demo_echo", "args": {"message": "one"}, "output": false, "store": true},
                    {"id": "shown", "tool": "x_demo_echo", "args": {"message": "{{ .results.hidden }} two"},
                     "output": true, "store": false},
                    {"id": "legacy", "tool": "x_demo_echo", "args": {"message": "three"}, "store": true},
                    {"id": "last", "tool": "x_demo_echo", "args": {"message": "{{ .results.shown }} four"}}
                ]
            }),
        )
        .await;
    assert!(!failed, "{created}");
    let warnings = strings(&created["warnings"]).join("\n");
    assert!(
        warnings.contains(
            "spec.steps[0] (hidden): output (false) and the deprecated store (true) disagree; output decides"
        ),
        "{warnings}"
    );

    let result = h
        .meta("call_tool", json!({"name": "workflow_flags", "arguments": {}}))
        .await;
    let env = envelope(&result);
    assert_ne!(env["isError"], true, "{env}");
    let doc = &env["structuredContent"];
    let step = |id: &str| {
        doc["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["id"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("step {id} in {doc}"))
    };
    assert!(step("hidden").get("result").is_none(), "output: false wins: {doc}");
    assert_eq!(
        step("shown")["result"],
        "one two",
        "output: true wins, and hidden is referenceable: {doc}"
    );
    assert_eq!(step("legacy")["result"], "three", "store alone still returns: {doc}");
    assert_eq!(doc["steps"][3]["status"], "completed", "{doc}");
    h.stop().await;
}

#[tokio::test]
async fn core_workflow_get_answers_the_whole_definition_and_its_yaml() {
    let h = serve().await;
    let definition = json!({
        "name": "full",
        "description": "Everything a definition can say",
        "labels": {"team": "ops"},
        "args": {
            "who": {"type": "string", "required": true, "description": "Whom to greet"},
            "count": {"type": "integer", "default": 2}
        },
        "steps": [
            {"id": "hello", "tool": "x_demo_echo", "args": {"message": "hi {{ .input.who }}"},
             "description": "Greets", "allowFailure": true, "output": true},
            {"id": "gated", "tool": "x_demo_add", "args": {"a": "{{ .input.count }}", "b": 1},
             "condition": {"fromStep": "hello", "expect": {"success": true}, "expectNot": {"jsonPath": {"x": 1}}}},
            {"id": "each", "forEach": {"items": "[1]", "as": "n", "parallelism": 2,
             "steps": [{"id": "inner", "tool": "x_demo_echo", "args": {"message": "{{ .vars.n }}"}}]}},
            {"id": "pages", "tool": "x_demo_list_items", "paginate": {"maxPages": 3}, "jq": ".items"}
        ],
        "onFailure": [{"id": "undo", "tool": "x_demo_echo", "args": {"message": "undo"}}],
        "output": {"greeting": "{{ .results.hello }}"}
    });
    let (failed, created) = h.core("core_workflow_create", definition.clone()).await;
    assert!(!failed, "{created}");

    let result = h
        .meta(
            "call_tool",
            json!({"name": "core_workflow_get", "arguments": {"name": "full"}}),
        )
        .await;
    let env = envelope(&result);
    let got = env["structuredContent"].clone();
    assert!(got.is_object(), "structured data: {env}");
    for key in ["description", "labels", "args", "onFailure", "output"] {
        assert_eq!(got[key], definition[key], "{key}: {got}");
    }
    assert_eq!(got["steps"][0]["allowFailure"], true);
    assert_eq!(got["steps"][0]["output"], true);
    assert_eq!(got["steps"][0]["description"], "Greets");
    assert_eq!(got["steps"][1]["condition"], definition["steps"][1]["condition"]);
    assert_eq!(got["steps"][2]["forEach"]["as"], "n");
    assert_eq!(got["steps"][2]["forEach"]["parallelism"], 2);
    assert_eq!(
        got["steps"][2]["forEach"]["steps"][0]["args"]["message"],
        "{{ .vars.n }}"
    );
    assert_eq!(got["steps"][3]["paginate"]["maxPages"], 3);
    assert_eq!(got["steps"][3]["paginate"]["itemsField"], "items", "defaults are shown");
    assert_eq!(got["steps"][3]["jq"], ".items");
    assert_eq!(got["available"], true);

    // The YAML is the Workflow document, and reads back to the same definition.
    let yaml = got["yaml"].as_str().expect("yaml text");
    let raw: Value = serde_saphyr::from_str(yaml).expect("YAML");
    let (document, warnings) = Workflow::from_document(&raw).expect("a Workflow document");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(document.kind, "Workflow");
    assert_eq!(document.metadata.name, "full");
    assert_eq!(document.metadata.labels["team"], "ops");
    let spec: WorkflowSpec = serde_json::from_value(json!({
        "description": got["description"], "args": got["args"], "steps": got["steps"],
        "onFailure": got["onFailure"], "output": got["output"]
    }))
    .expect("the structured spec");
    assert_eq!(document.spec, spec);
    h.stop().await;
}

/// The property names of object schema `schema`.
fn properties(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn describe_tool_of_the_create_and_update_tools_advertises_the_crd_schemas_whole() {
    let h = serve().await;
    let described = h
        .meta_json("describe_tool", json!({"name": "core_mcpserver_create"}))
        .await;
    let schema = &described["inputSchema"];
    assert_eq!(schema["required"], json!(["name", "type"]), "{schema}");
    // Every spec field of the CRD type is advertised, plus the arguments that are not spec fields.
    let crd = serde_json::to_value(schemars::schema_for!(MCPServerSpec)).expect("schema");
    let advertised = properties(schema);
    for field in properties(&crd)
        .iter()
        .chain(&["name".to_owned(), "displayName".to_owned()])
    {
        assert!(advertised.contains(field), "{field} missing from {advertised:?}");
    }
    // Nested objects are inlined down to the leaves.
    let auth = &schema["properties"]["auth"];
    let auth_fields = properties(auth);
    for field in [
        "type",
        "forwardToken",
        "forwardIdentity",
        "providerApps",
        "requiredAudiences",
        "tokenExchange",
        "authorizationServer",
    ] {
        assert!(auth_fields.contains(&field.to_owned()), "auth.{field} missing: {auth}");
    }
    let pinned = properties(&auth["properties"]["authorizationServer"]);
    for field in [
        "issuer",
        "authorizationEndpoint",
        "tokenEndpoint",
        "expectedIssuer",
        "revocationEndpoint",
        "clientCredentialsSecretRef",
        "grantScope",
        "scopes",
    ] {
        assert!(
            pinned.contains(&field.to_owned()),
            "authorizationServer.{field} missing: {pinned:?}"
        );
    }
    let exchange = properties(&auth["properties"]["tokenExchange"]);
    for field in ["enabled", "dexTokenEndpoint", "expectedIssuer", "connectorId", "scopes"] {
        assert!(
            exchange.contains(&field.to_owned()),
            "tokenExchange.{field} missing: {exchange:?}"
        );
    }
    assert!(
        properties(&schema["properties"]["headersFrom"]["items"]).contains(&"valueFrom".to_owned()),
        "{schema}"
    );
    assert!(
        schema["properties"]["command"].to_string().contains("array"),
        "command is a string or an array: {}",
        schema["properties"]["command"]
    );
    // The types' constraints are advertised; the CRD's own keywords (CEL rules) are not.
    assert_eq!(schema["properties"]["timeout"]["maximum"], json!(300), "{schema}");
    assert!(schema["properties"]["toolPrefix"]["pattern"].is_string(), "{schema}");
    assert!(!schema.to_string().contains("x-kubernetes"), "{schema}");
    let update = h
        .meta_json("describe_tool", json!({"name": "core_mcpserver_update"}))
        .await;
    assert_eq!(update["inputSchema"]["required"], json!(["name"]));
    assert_eq!(properties(&update["inputSchema"]), advertised);

    let described = h
        .meta_json("describe_tool", json!({"name": "core_workflow_create"}))
        .await;
    let schema = &described["inputSchema"];
    assert_eq!(schema["required"], json!(["name", "steps"]), "{schema}");
    let crd = serde_json::to_value(schemars::schema_for!(WorkflowSpec)).expect("schema");
    let advertised = properties(schema);
    for field in properties(&crd).iter().chain(&["name".to_owned(), "labels".to_owned()]) {
        assert!(advertised.contains(field), "{field} missing from {advertised:?}");
    }
    assert!(
        !advertised.contains(&"input_schema".to_owned()),
        "the legacy key is not advertised"
    );
    let step = &schema["properties"]["steps"]["items"];
    for field in [
        "id",
        "tool",
        "args",
        "condition",
        "forEach",
        "parallel",
        "paginate",
        "jq",
        "output",
        "store",
        "allowFailure",
        "description",
    ] {
        assert!(
            properties(step).contains(&field.to_owned()),
            "step.{field} missing: {step}"
        );
    }
    let condition = properties(&step["properties"]["condition"]);
    for field in ["template", "tool", "args", "fromStep", "expect", "expectNot"] {
        assert!(
            condition.contains(&field.to_owned()),
            "condition.{field} missing: {condition:?}"
        );
    }
    let update = h
        .meta_json("describe_tool", json!({"name": "core_workflow_update"}))
        .await;
    assert_eq!(update["inputSchema"]["required"], json!(["name"]));
    h.stop().await;
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

const WORKFLOW_FILE: &str = "apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: filed
spec:
  args:
    who: {type: string, required: true, requred: true}
  steps:
    - id: hello
      tool: x_demo_echo
      args: {message: 'hi {{ .input.who }}'}
      required: true
";

#[tokio::test]
async fn a_config_directory_file_with_unknown_fields_loads_without_them_and_each_is_a_warning_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "workflows/filed.yaml", WORKFLOW_FILE);
    let (gateway, problems) = Gateway::from_config_dir(dir.path(), fast_supervision()).expect("loads");
    assert!(problems.is_empty(), "{problems:?}");
    let h = Harness::serve(gateway).await;

    let (_, listed) = h.core("core_workflow_list", json!({})).await;
    assert_eq!(listed["total"], 1, "the file is not left out: {listed}");
    let dropped: Vec<Value> = events(&h, "Workflow", "filed")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "WorkflowFieldsDropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(
        strings(&dropped[0]["data"]["warnings"]),
        [
            r#"unknown field "spec.args.who.requred" (dropped)"#,
            r#"unknown field "spec.steps[0].required" (dropped)"#,
        ]
    );

    // A reload that finds the file unchanged reports its warnings in the answer, with no new event.
    let (failed, reloaded) = h.core("core_config_reload", json!({})).await;
    assert!(!failed, "{reloaded}");
    let warnings = strings(&reloaded["warnings"]);
    assert_eq!(warnings.len(), 2, "{reloaded}");
    assert!(
        warnings[0].ends_with(r#"filed.yaml: unknown field "spec.args.who.requred" (dropped)"#),
        "{warnings:?}"
    );
    let again = events(&h, "Workflow", "filed")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "WorkflowFieldsDropped")
        .count();
    assert_eq!(again, 1);

    // A changed file is reported again, with what it drops now.
    write(
        dir.path(),
        "workflows/filed.yaml",
        &WORKFLOW_FILE.replace("      required: true\n", "      retries: 2\n"),
    );
    let (failed, reloaded) = h.core("core_config_reload", json!({})).await;
    assert!(!failed, "{reloaded}");
    let dropped: Vec<Value> = events(&h, "Workflow", "filed")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "WorkflowFieldsDropped")
        .collect();
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert_eq!(
        strings(&dropped[0]["data"]["warnings"]),
        [
            r#"unknown field "spec.args.who.requred" (dropped)"#,
            r#"unknown field "spec.steps[0].retries" (dropped)"#,
        ],
        "newest first"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_update_that_omits_suspended_resumes_the_server_as_the_reference_says() {
    let h = serve().await;
    let binary = common::gateway_binary().display().to_string();
    let (failed, created) = h
        .core(
            "core_mcpserver_create",
            json!({"name": "nap", "type": "stdio", "command": [binary, "demo-server"], "autoStart": true}),
        )
        .await;
    assert!(!failed, "{created}");
    let state = |h: &Harness| {
        h.gateway
            .registry()
            .server("nap")
            .map(|s| s.runtime.state.as_str().to_owned())
            .unwrap_or_default()
    };
    assert!(
        common::eventually(10, || async { state(&h) == "Running" }).await,
        "{}",
        state(&h)
    );

    let (failed, suspended) = h
        .core("core_mcpserver_update", json!({"name": "nap", "suspended": true}))
        .await;
    assert!(!failed, "{suspended}");
    assert_eq!(suspended["suspended"], true);
    assert!(
        common::eventually(10, || async { state(&h) == "Stopped" }).await,
        "{}",
        state(&h)
    );

    // Another field changes; suspended is omitted, so the server resumes.
    let (failed, resumed) = h
        .core(
            "core_mcpserver_update",
            json!({"name": "nap", "description": "awake again"}),
        )
        .await;
    assert!(!failed, "{resumed}");
    assert!(resumed.get("suspended").is_none(), "{resumed}");
    assert!(
        common::eventually(10, || async { state(&h) == "Running" }).await,
        "{}",
        state(&h)
    );
    h.stop().await;
}
