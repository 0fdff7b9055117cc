//! The generated CRDs as the API server would take them: structural schemas, CEL rules that
//! compile and stay inside the API server's cost budget, and rules that refuse what the
//! reference says `kubectl apply` refuses while admitting every definition muster accepts.
//!
//! The rules run client-side through kube-rs' CEL evaluator (`kube::core::cel`, the Kubernetes
//! CEL libraries); no API server is needed.

use std::path::PathBuf;

use kube::core::cel::{CompiledSchema, Validator, compile_schema};
use muster_core::crd::{MCPServerSpec, WorkflowSpec};
use serde_json::{Value, json};

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("an openAPIV3Schema");
    serde_json::to_value(schema).expect("serializable")
}

fn mcpserver_schema() -> Value {
    schema_of(&muster_kube::crd::mcpserver())
}

fn workflow_schema() -> Value {
    schema_of(&muster_kube::crd::workflow())
}

/// The messages of the rules `object` breaks under `schema` (none: it is admitted).
fn refusals(schema: &Value, object: &Value) -> Vec<String> {
    match Validator::new().validate(schema, object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

fn mcpserver(spec: Value) -> Value {
    json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
           "metadata": {"name": "s", "namespace": "default"}, "spec": spec})
}

fn workflow(spec: Value) -> Value {
    json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "Workflow",
           "metadata": {"name": "w", "namespace": "default"}, "spec": spec})
}

/// Every node of a compiled schema.
fn nodes(schema: &CompiledSchema) -> Vec<&CompiledSchema> {
    let mut all = vec![schema];
    let mut i = 0;
    while i < all.len() {
        let node = all[i];
        all.extend(node.properties.values());
        all.extend(node.items.as_deref());
        all.extend(node.additional_properties.as_deref());
        i += 1;
    }
    all
}

#[test]
fn every_rule_compiles() {
    for crd in muster_kube::crd::all() {
        let compiled = compile_schema(&schema_of(&crd));
        let errors: Vec<String> = nodes(&compiled)
            .iter()
            .flat_map(|n| n.compilation_errors())
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", crd.spec.names.kind);
    }
}

/// The structural-schema rules the API server checks: every node has a type (or keeps unknown
/// fields), there is no `$ref` or `definitions`, no `anyOf`/`oneOf`, and no `additionalProperties`
/// beside `properties`.
fn check_structural(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        problems.push(format!("{path}: not an object"));
        return;
    };
    for key in ["$ref", "definitions", "components", "anyOf", "oneOf", "allOf", "title"] {
        if object.contains_key(key) {
            problems.push(format!("{path}: has {key}"));
        }
    }
    if !object.contains_key("type") && object.get("x-kubernetes-preserve-unknown-fields") != Some(&json!(true)) {
        problems.push(format!("{path}: no type"));
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        problems.push(format!("{path}: properties and additionalProperties"));
    }
    if let Some(format) = object.get("format").and_then(Value::as_str) {
        let known = [
            "int32",
            "int64",
            "float",
            "double",
            "byte",
            "date",
            "date-time",
            "password",
        ];
        if !known.contains(&format) {
            problems.push(format!("{path}: format {format} Kubernetes does not know"));
        }
    }
    if let Some(default) = object.get("default") {
        check_default(default, object, path, problems);
    }
    for (name, child) in object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        check_structural(child, &format!("{path}.{name}"), problems);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get(key).filter(|c| c.is_object()) {
            check_structural(child, &format!("{path}[]"), problems);
        }
    }
}

/// The API server refuses a CRD whose default does not validate against its own schema.
fn check_default(default: &Value, schema: &serde_json::Map<String, Value>, path: &str, problems: &mut Vec<String>) {
    let fits = match schema.get("type").and_then(Value::as_str) {
        Some("string") => default.as_str().is_some_and(|s| {
            let pattern = schema.get("pattern").and_then(Value::as_str);
            pattern.is_none_or(|p| regex::Regex::new(p).is_ok_and(|r| r.is_match(s)))
                && schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .is_none_or(|m| s.chars().count() as u64 <= m)
                && schema
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_none_or(|e| e.contains(default))
        }),
        Some("integer") => default.as_i64().is_some_and(|n| {
            schema
                .get("minimum")
                .and_then(Value::as_f64)
                .is_none_or(|m| n as f64 >= m)
                && schema
                    .get("maximum")
                    .and_then(Value::as_f64)
                    .is_none_or(|m| n as f64 <= m)
        }),
        Some("array") => default.as_array().is_some_and(|a| {
            schema
                .get("minItems")
                .and_then(Value::as_u64)
                .is_none_or(|m| a.len() as u64 >= m)
        }),
        Some("boolean") => default.is_boolean(),
        Some("object") => default.is_object(),
        _ => true,
    };
    if !fits {
        problems.push(format!(
            "{path}: default {default} does not validate against the schema"
        ));
    }
}

#[test]
fn the_schemas_are_structural() {
    for crd in muster_kube::crd::all() {
        let mut problems = Vec::new();
        check_structural(&schema_of(&crd), &crd.spec.names.kind, &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

/// Kubernetes' limits on the estimated cost of a CRD's CEL rules
/// (`apiextensions-apiserver`: `StaticEstimatedCostLimit`, `StaticEstimatedCRDCostLimit`).
const RULE_COST_LIMIT: u64 = 10_000_000;
const CRD_COST_LIMIT: u64 = 100_000_000;
/// A generous cost of one of muster's rules evaluated once: the largest is a list of three
/// `has()` filtered and counted (about 15 by Kubernetes' cost model).
const COST_OF_ONE_EVALUATION: u64 = 50;

/// `(rule, how many times it can run)` for every rule under `schema`: the product of the bounds
/// of the lists and maps around it, `None` when one of them is unbounded.
fn rule_cardinalities(schema: &Value, times: Option<u64>, found: &mut Vec<(String, Option<u64>)>) {
    for rule in schema["x-kubernetes-validations"].as_array().into_iter().flatten() {
        found.push((rule["rule"].as_str().unwrap_or_default().to_owned(), times));
    }
    for child in schema["properties"].as_object().into_iter().flatten().map(|(_, c)| c) {
        rule_cardinalities(child, times, found);
    }
    for (key, bound) in [("items", "maxItems"), ("additionalProperties", "maxProperties")] {
        if schema[key].is_object() {
            let bound = schema[bound].as_u64();
            rule_cardinalities(&schema[key], times.zip(bound).map(|(t, b)| t * b), found);
        }
    }
}

#[test]
fn every_rule_runs_a_bounded_number_of_times_inside_the_cost_budget() {
    for crd in muster_kube::crd::all() {
        let mut found = Vec::new();
        rule_cardinalities(&schema_of(&crd), Some(1), &mut found);
        let mut total = 0;
        for (rule, times) in &found {
            let times = times.unwrap_or_else(|| panic!("{rule} sits in an unbounded list or map"));
            let cost = times * COST_OF_ONE_EVALUATION;
            assert!(
                cost <= RULE_COST_LIMIT,
                "{rule}: {times} places × {COST_OF_ONE_EVALUATION}"
            );
            total += cost;
        }
        assert!(total <= CRD_COST_LIMIT, "{}: {total}", crd.spec.names.kind);
    }
}

#[test]
fn the_cost_check_can_fail() {
    let unbounded = json!({"properties": {"steps": {"type": "array", "items": {
        "type": "object", "x-kubernetes-validations": [{"rule": "has(self.tool)"}]}}}});
    let mut found = Vec::new();
    rule_cardinalities(&unbounded, Some(1), &mut found);
    assert_eq!(found, [("has(self.tool)".to_owned(), None)]);
}

#[test]
fn mcpserver_rules_refuse_what_kubectl_apply_refuses() {
    let schema = mcpserver_schema();
    let remote = |extra: Value| {
        let mut spec = json!({"type": "streamable-http", "url": "https://api.example.com/mcp"});
        spec.as_object_mut()
            .expect("object")
            .extend(extra.as_object().cloned().unwrap_or_default());
        mcpserver(spec)
    };
    let cases = [
        (
            mcpserver(json!({"type": "stdio"})),
            "command is required when type is stdio",
        ),
        (
            mcpserver(json!({"type": "sse"})),
            "url is required when type is streamable-http or sse",
        ),
        (remote(json!({"env": {"TOKEN": "x"}})), "env is only for stdio servers"),
        (
            remote(json!({"headers": {"Authorization": "Bearer x"}})),
            "headers may not carry a credential",
        ),
        (
            remote(json!({"headers": {"x-api-key": "k"}})),
            "headers may not carry a credential",
        ),
        (
            remote(json!({"url": "https://ada:secret@api.example.com/mcp"})),
            "url may not carry a user name or password",
        ),
        (
            remote(json!({"timeout": 60, "progress": {"maxDuration": 30}})),
            "progress.maxDuration must be at least timeout",
        ),
        (
            remote(json!({"auth": {"type": "oauth", "forwardIdentity": true}})),
            "forwardIdentity requires type oauth and authorizationServer",
        ),
        (
            remote(json!({"auth": {"type": "oauth", "forwardToken": true,
                                   "authorizationServer": {"issuer": "https://github.com/login/oauth"}}})),
            "forwardToken and authorizationServer are mutually exclusive",
        ),
    ];
    for (object, expected) in cases {
        let refused = refusals(&schema, &object);
        assert!(
            refused.iter().any(|m| m.contains(expected)),
            "{} should be refused with {expected:?}; refused with {refused:?}",
            object["spec"]
        );
    }
}

#[test]
fn mcpserver_rules_admit_the_references_examples() {
    let schema = mcpserver_schema();
    let examples = [
        json!({"type": "stdio", "autoStart": true, "command": "npx", "args": ["@modelcontextprotocol/server-git"],
               "env": {"GIT_ROOT": "/workspace"}}),
        json!({"type": "streamable-http", "url": "https://api.example.com/mcp", "timeout": 30,
               "headers": {"X-API-Version": "v1", "Authorization": ""},
               "headersFrom": [{"name": "Authorization",
                                "valueFrom": {"type": "Secret", "name": "api-tools-token", "key": "authorization"}}]}),
        json!({"type": "streamable-http", "url": "https://mcp.example.com/mcp", "progress": {"maxDuration": 600},
               "auth": {"type": "oauth", "tokenExchange": {"enabled": true,
                        "dexTokenEndpoint": "https://dex.remote.example.com/token", "connectorId": "local-dex",
                        "clientCredentialsSecretRef": {"name": "creds", "namespace": "muster"}}}}),
        json!({"type": "streamable-http", "url": "https://two-hats.example.com/mcp",
               "auth": {"type": "oauth", "forwardIdentity": true, "requiredAudiences": ["dex-k8s-authenticator"],
                        "authorizationServer": {"issuer": "https://github.com/login/oauth", "scopes": "repo"}}}),
        json!({"type": "sse", "url": "https://mcp.example.com/sse", "auth": {"type": "oauth", "forwardToken": true}}),
    ];
    for spec in examples {
        assert_eq!(
            refusals(&schema, &mcpserver(spec.clone())),
            Vec::<String>::new(),
            "{spec}"
        );
    }
}

#[test]
fn workflow_rules_refuse_what_kubectl_apply_refuses() {
    let schema = workflow_schema();
    let tool = |id: &str| json!({"id": id, "tool": "t"});
    let cases = [
        (
            json!({"steps": [{"id": "a"}]}),
            "exactly one of tool, forEach or parallel must be set",
        ),
        (
            json!({"steps": [{"id": "a", "tool": "t", "parallel": [tool("b")]}]}),
            "exactly one of tool, forEach or parallel must be set",
        ),
        (
            json!({"steps": [{"id": "a", "tool": "t", "condition": {"template": "{{ true }}", "fromStep": "x"}}]}),
            "exactly one of template, tool or fromStep must be set",
        ),
        (
            json!({"steps": [{"id": "a", "tool": "t", "condition": {"tool": "check"}}]}),
            "a tool or fromStep condition must declare expect or expectNot",
        ),
        (
            json!({"steps": [{"id": "a", "forEach": {"items": "{{ .input.x }}",
                   "steps": [{"id": "b", "tool": "t", "forEach": {"items": "x", "steps": [tool("c")]}}]}}]}),
            "exactly one of tool or forEach must be set",
        ),
        // A loop in a nested loop's body, or in a parallel group: only tool calls go there.
        (
            json!({"steps": [{"id": "a", "forEach": {"items": "x", "steps": [{"id": "b", "forEach": {
                   "items": "y", "steps": [{"id": "c", "forEach": {"items": "z", "steps": [tool("d")]}}]}}]}}]}),
            "tool must be set",
        ),
        (
            json!({"steps": [{"id": "a", "parallel": [{"id": "b", "forEach": {"items": "x", "steps": [tool("c")]}}]}]}),
            "tool must be set",
        ),
        (
            json!({"steps": [tool("a")], "onFailure": [{"id": "undo", "condition": {"template": "{{ true }}"}}]}),
            "tool must be set",
        ),
    ];
    for (spec, expected) in cases {
        let refused = refusals(&schema, &workflow(spec.clone()));
        assert!(
            refused.iter().any(|m| m.contains(expected)),
            "{spec} should be refused with {expected:?}; refused with {refused:?}"
        );
    }
}

/// The team's shared folder (`MUSTER_SHARED`, else `../shared` beside the repository).
fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MUSTER_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but the shared folder {} is missing",
        dir.display()
    );
    eprintln!("skipped: no shared folder at {} (muster's scenarios)", dir.display());
    None
}

/// The specs of every `core_<kind>_create` call muster's scenarios expect to succeed.
fn accepted_specs(tool: &str) -> Option<Vec<(String, Value)>> {
    let dir = shared_dir()?.join("scenarios/muster-scenarios");
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the scenarios") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        let scenario: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for step in scenario["steps"].as_array().into_iter().flatten() {
            if step["tool"] == tool && step["expected"]["success"] == true {
                let name = format!(
                    "{}: {}",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    step["id"]
                );
                specs.push((name, step["args"].clone()));
            }
        }
    }
    Some(specs)
}

#[test]
fn workflow_rules_admit_every_workflow_muster_accepts() {
    let schema = workflow_schema();
    let Some(specs) = accepted_specs("core_workflow_create") else {
        return;
    };
    assert!(specs.len() >= 20, "the scenarios create workflows: {}", specs.len());
    for (name, mut args) in specs {
        for not_spec in ["name", "labels"] {
            args.as_object_mut().map(|a| a.remove(not_spec));
        }
        // As the gateway writes it: read as the type (older spellings such as `from_step`
        // included), written in the CRD's spelling.
        let spec: WorkflowSpec = serde_json::from_value(args.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let spec = serde_json::to_value(spec).expect("serializable");
        assert_eq!(
            refusals(&schema, &workflow(spec.clone())),
            Vec::<String>::new(),
            "{name}: {spec}"
        );
    }
}

#[test]
fn mcpserver_rules_admit_every_server_muster_accepts() {
    let schema = mcpserver_schema();
    let Some(specs) = accepted_specs("core_mcpserver_create") else {
        return;
    };
    assert!(!specs.is_empty(), "the scenarios create servers");
    for (name, mut args) in specs {
        let Some(spec) = args.as_object_mut() else { continue };
        spec.remove("name");
        spec.remove("displayName");
        // The tool also takes `command` as an array: the executable, then arguments.
        if let Some(Value::Array(command)) = spec.get("command").cloned() {
            let mut args: Vec<Value> = command.iter().skip(1).cloned().collect();
            args.extend(spec.get("args").and_then(Value::as_array).cloned().unwrap_or_default());
            spec.insert("command".into(), command.first().cloned().unwrap_or(Value::Null));
            spec.insert("args".into(), Value::Array(args));
        }
        let spec: MCPServerSpec =
            serde_json::from_value(Value::Object(spec.clone())).unwrap_or_else(|e| panic!("{name}: {e}"));
        let spec = serde_json::to_value(spec).expect("serializable");
        assert_eq!(
            refusals(&schema, &mcpserver(spec.clone())),
            Vec::<String>::new(),
            "{name}: {spec}"
        );
    }
}
