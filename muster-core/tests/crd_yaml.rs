//! Integration tests: the documented YAML examples of every kind parse, validate, and
//! survive YAML → type → JSON → type unchanged.

use std::fmt::Debug;

use muster_core::crd::{
    AuthType, ExecutionStatus, GrantScope, MCPServer, MCPServerState, ServerType, Workflow, WorkflowExecution,
    deprecated_spellings,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `doc`, checks that its JSON form parses back to the same value and that the
/// JSON form keeps every field of the document with its value, and returns it.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + Debug>(doc: &str) -> T {
    let parsed: T = serde_saphyr::from_str(doc).expect("the example parses");
    let json = serde_json::to_string(&parsed).expect("serializes to JSON");
    let back: T = serde_json::from_str(&json).expect("its JSON parses");
    assert_eq!(back, parsed, "JSON round trip changed the value");
    let raw: Value = serde_saphyr::from_str(doc).expect("the example parses as a value");
    let written: Value = serde_json::from_str(&json).expect("JSON is JSON");
    assert_contains(&written, &raw, "");
    parsed
}

/// Asserts that every field of `expected` is in `actual` with the same value (`actual`
/// may add defaults).
#[track_caller]
fn assert_contains(actual: &Value, expected: &Value, path: &str) {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, value) in expected {
                let field = format!("{path}.{key}");
                let found = actual.get(key).unwrap_or_else(|| panic!("{field} was dropped"));
                assert_contains(found, value, &field);
            }
        }
        (Value::Array(actual), Value::Array(expected)) => {
            assert_eq!(actual.len(), expected.len(), "{path} changed length");
            for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
                assert_contains(a, e, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(actual, expected, "{path} changed"),
    }
}

#[track_caller]
fn assert_valid_server(server: &MCPServer) {
    if let Err(errors) = server.validate() {
        panic!("{} is invalid:\n{errors}", server.metadata.name);
    }
}

#[track_caller]
fn assert_valid_workflow(workflow: &Workflow) {
    if let Err(errors) = workflow.validate() {
        panic!("{} is invalid:\n{errors}", workflow.metadata.name);
    }
}

const GIT_TOOLS: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: git-tools
  namespace: default
  annotations:
    ui.giantswarm.io/display-name: "Git Tools"
spec:
  type: stdio
  description: "Git tools MCP server for repository operations"
  autoStart: true
  command: "npx"
  args: ["@modelcontextprotocol/server-git"]
  env:
    GIT_ROOT: "/workspace"
    LOG_LEVEL: "info"
"#;

const PYTHON_TOOLS: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: python-tools
  namespace: default
spec:
  type: stdio
  toolPrefix: "py"
  description: "Python-based MCP server with custom tools"
  autoStart: true
  command: "python"
  args: ["-m", "mcp_server.custom"]
  env:
    PYTHONPATH: "/usr/local/lib/python3.9/site-packages"
    DEBUG: "true"
"#;

const API_TOOLS: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: api-tools
  namespace: default
spec:
  type: streamable-http
  description: "Remote API tools server"
  url: "https://api.example.com/mcp"
  timeout: 30
  headers:
    X-API-Version: "v1"
  headersFrom:
    - name: Authorization
      valueFrom:
        type: Secret
        name: api-tools-token   # holds "Bearer <token>" under the key "authorization"
        key: authorization
"#;

const SSE_TOOLS: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: sse-tools
  namespace: default
spec:
  type: sse
  toolPrefix: "remote"
  description: "Server-Sent Events MCP server"
  url: "https://mcp.example.com/sse"
  timeout: 60
  headers:
    Accept: "text/event-stream"
  headersFrom:
    - name: Authorization
      valueFrom:
        type: Secret
        name: sse-tools-token
        key: authorization
"#;

const MCP_KUBERNETES: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: mcp-kubernetes
  namespace: default
spec:
  type: streamable-http
  toolPrefix: "k8s"
  description: "Kubernetes MCP server with SSO authentication"
  url: "https://mcp-kubernetes.example.com/mcp"
  timeout: 30
  auth:
    type: oauth
    forwardToken: true           # Forward muster's ID token for SSO
"#;

const TWO_HATS: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: two-hats
  namespace: default
spec:
  type: streamable-http
  url: "https://two-hats.example.com/mcp"
  auth:
    type: oauth
    authorizationServer:          # the grant in Authorization
      issuer: "https://github.com/login/oauth"
      scopes: "repo"
    forwardIdentity: true         # the session's ID token in X-Muster-Id-Token
    requiredAudiences:
      - "dex-k8s-authenticator"
"#;

const REMOTE_CLUSTER: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: remote-cluster-k8s
  namespace: default
spec:
  type: streamable-http
  toolPrefix: "remote_k8s"
  description: "Kubernetes tools on remote cluster via token exchange"
  url: "https://mcp-kubernetes.remote-cluster.example.com/mcp"
  timeout: 30
  auth:
    type: oauth
    tokenExchange:
      enabled: true
      dexTokenEndpoint: "https://dex.remote-cluster.example.com/token"
      connectorId: "local-cluster-dex"
      scopes: "openid profile email groups"
"#;

const REMOTE_CLUSTER_AUTHENTICATED: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: remote-cluster-k8s-authenticated
  namespace: default
spec:
  type: streamable-http
  toolPrefix: "remote_k8s"
  description: "Kubernetes tools on remote cluster with authenticated token exchange"
  url: "https://mcp-kubernetes.remote-cluster.example.com/mcp"
  timeout: 30
  auth:
    type: oauth
    tokenExchange:
      enabled: true
      dexTokenEndpoint: "https://dex.remote-cluster.example.com/token"
      connectorId: "local-cluster-dex"
      scopes: "openid profile email groups"
      # Reference to secret containing OAuth client credentials
      clientCredentialsSecretRef:
        name: remote-cluster-token-exchange-credentials
        namespace: muster  # Optional, defaults to MCPServer namespace
        clientIdKey: client-id      # Optional, defaults to "client-id"
        clientSecretKey: client-secret  # Optional, defaults to "client-secret"
"#;

const PRIVATE_CLUSTER: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: private-cluster-k8s
  namespace: default
spec:
  type: streamable-http
  toolPrefix: "private_k8s"
  description: "Kubernetes tools on a private cluster accessed via a proxy"
  url: "https://mcp-kubernetes.private-cluster.proxy.example.com/mcp"
  timeout: 60
  auth:
    type: oauth
    tokenExchange:
      enabled: true
      # Access URL goes through proxy
      dexTokenEndpoint: "https://dex.private-cluster.proxy.example.com/token"
      # Expected issuer is the actual Dex issuer (not the proxy URL)
      expectedIssuer: "https://dex.private-cluster.internal.example.com"
      connectorId: "management-cluster-dex"
"#;

#[test]
fn every_documented_mcpserver_example_round_trips_and_validates() {
    for doc in [
        GIT_TOOLS,
        PYTHON_TOOLS,
        API_TOOLS,
        SSE_TOOLS,
        MCP_KUBERNETES,
        TWO_HATS,
        REMOTE_CLUSTER,
        REMOTE_CLUSTER_AUTHENTICATED,
        PRIVATE_CLUSTER,
    ] {
        let server: MCPServer = round_trip(doc);
        assert_valid_server(&server);
    }
}

#[test]
fn mcpserver_examples_read_as_documented() {
    let git: MCPServer = round_trip(GIT_TOOLS);
    assert_eq!(git.spec.server_type, Some(ServerType::Stdio));
    assert_eq!(git.metadata.display_name(), Some("Git Tools"));
    assert!(git.spec.auto_start);
    assert_eq!(git.spec.timeout, 30);

    let sse: MCPServer = round_trip(SSE_TOOLS);
    assert_eq!(sse.spec.timeout, 60);
    assert_eq!(sse.spec.headers_from[0].value_from.key, "authorization");

    let two_hats: MCPServer = round_trip(TWO_HATS);
    let auth = two_hats.spec.auth.expect("auth");
    assert_eq!(auth.auth_type, Some(AuthType::Oauth));
    assert!(auth.forward_identity);
    let pinned = auth.authorization_server.expect("authorizationServer");
    assert_eq!(pinned.grant_scope, GrantScope::Session);
    assert_eq!(pinned.scopes.as_deref(), Some("repo"));

    let private: MCPServer = round_trip(PRIVATE_CLUSTER);
    let exchange = private.spec.auth.and_then(|a| a.token_exchange).expect("tokenExchange");
    assert_eq!(exchange.scopes, "openid profile email groups");
    assert_eq!(
        exchange.expected_issuer.as_deref(),
        Some("https://dex.private-cluster.internal.example.com")
    );
}

#[test]
fn exported_mcpserver_with_cluster_metadata_and_status_round_trips() {
    let doc = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: remote-mcp-kubernetes
  namespace: muster
  uid: 0b7c2c1e-9f0e-4a51-a3c4-2f1d2b7a9e10
  resourceVersion: "123456"
  generation: 3
  creationTimestamp: "2026-09-01T08:00:00Z"
  managedFields:
    - manager: kubectl
      operation: Apply
  labels:
    team: platform
spec:
  type: streamable-http
  url: https://mcp-kubernetes.example.com/mcp
  auth:
    type: oauth
    forwardToken: true
status:
  state: Awaiting Session
  health: healthy
  lastConnected: "2026-09-21T12:41:03Z"
  consecutiveFailures: 0
  conditions:
    - type: Ready
      status: "True"
      reason: AwaitingSession
      message: "Served per session."
      lastTransitionTime: "2026-09-21T12:41:03Z"
      observedGeneration: 3
"#;
    let server: MCPServer = serde_saphyr::from_str(doc).expect("parses");
    assert_valid_server(&server);
    assert_eq!(server.metadata.labels["team"], "platform");
    let status = server.status.clone().expect("status");
    assert_eq!(status.state, Some(MCPServerState::AwaitingSession));
    assert_eq!(status.conditions[0].observed_generation, Some(3));
    let json = serde_json::to_value(&server).expect("serializes");
    assert!(json["metadata"].get("uid").is_none());
    assert_eq!(json["status"]["state"], "Awaiting Session");
    let back: MCPServer = serde_json::from_value(json).expect("parses");
    assert_eq!(back, server);
}

#[test]
fn unknown_field_in_an_mcpserver_spec_is_dropped_and_named_and_the_rules_still_hold() {
    let doc = "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: a\nspec:\n  type: sse\n  uri: https://a.example/sse\n";
    let raw: Value = serde_saphyr::from_str(doc).expect("parses");
    let (server, warnings) = MCPServer::from_document(&raw).expect("an unknown spec field is dropped");
    let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings, [r#"unknown field "spec.uri" (dropped)"#]);
    // The misspelt url is not read as the url: the server still lacks one.
    let errors = server.validate().expect_err("url is required").to_lines();
    assert_eq!(errors, ["spec.url: url is required for a sse server"]);
}

const DATABASE_MIGRATION: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: database-migration
  namespace: default
spec:
  description: "Perform database migration with rollback capability"
  args:
    database_name:
      type: string
      required: true
      description: "Target database name"
    migration_version:
      type: string
      required: true
      description: "Target migration version"
    dry_run:
      type: boolean
      default: false
      description: "Perform dry run without applying changes"
  steps:
    - id: check_database
      tool: postgres_status
      args:
        database: "{{.input.database_name}}"
      store: true
      description: "Verify database connectivity"

    - id: backup_database
      tool: postgres_backup
      args:
        database: "{{.input.database_name}}"
        backup_name: "pre-migration-{{.input.migration_version}}"
      condition:
        fromStep: "check_database"
        expect:
          success: true
          jsonPath:
            status: "connected"
      store: true
      description: "Create backup before migration"

    - id: run_migration
      tool: postgres_migrate
      args:
        database: "{{.input.database_name}}"
        version: "{{.input.migration_version}}"
        dry_run: "{{.input.dry_run}}"
      condition:
        fromStep: "backup_database"
        expect:
          success: true
      store: true
      description: "Execute database migration"

    - id: verify_migration
      tool: postgres_verify
      args:
        database: "{{.input.database_name}}"
        expected_version: "{{.input.migration_version}}"
      condition:
        fromStep: "run_migration"
        expect:
          success: true
      description: "Verify migration completed successfully"
  onFailure:
    - id: rollback_migration
      tool: postgres_restore
      args:
        database: "{{.input.database_name}}"
        backup_name: "{{.results.backup_database.backup_name}}"
      description: "Restore the pre-migration backup if the workflow fails"
"#;

/// The resource definition's three step kinds, made concrete.
const CLUSTER_REPORT: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: cluster-report
spec:
  description: "Report on every cluster"
  args:
    clusters: {type: array, required: true}
    env: {type: string, default: staging}
  steps:
    - id: pods
      tool: x_kubernetes_list
      args: {kind: Pod}
      condition:
        template: '{{ eq .input.env "production" }}'
      paginate:
        itemsField: items
        tokenField: metadata.continue
        tokenArg: continue
        maxPages: 20
      jq: '[.items[] | {name: .metadata.name}]'
      output: true
      allowFailure: true
    - id: per_cluster
      forEach:
        items: "{{ .input.clusters }}"
        as: cluster
        parallelism: 4
        steps:
          - id: namespaces
            tool: x_kubernetes_list
            args:
              cluster: "{{ .vars.cluster.name }}"
          - id: per_namespace
            forEach:
              items: "{{ .results.namespaces.items }}"
              as: ns
              parallelism: 8
              steps:
                - id: events
                  tool: x_kubernetes_list
                  args: {namespace: "{{ .vars.ns }}"}
      jq: '[.[] | .results]'
    - id: checks
      parallel:
        - id: health
          tool: x_health
        - id: version
          tool: x_version
          condition:
            tool: x_reachable
            args: {timeout: 5}
            expectNot:
              success: false
  onFailure:
    - id: notify
      tool: x_notify
  output:
    cluster: "{{ .input.env }}"
    notRunning: "{{ .results.pods.items }}"
    counts: {events: "{{ len .results.events }}", nested: [1, 2.5, true, null]}
"#;

/// The error-handling best practice, as a whole document.
const RISKY: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: risky
spec:
  steps:
    - id: risky_operation
      tool: external_api_call
      allowFailure: true    # Continue on failure

    - id: cleanup
      tool: cleanup_resources
      condition:
        fromStep: "risky_operation"
        expectNot:
          success: true     # Only run if previous step failed
"#;

#[test]
fn every_documented_workflow_example_round_trips_and_validates() {
    for doc in [DATABASE_MIGRATION, CLUSTER_REPORT, RISKY] {
        let workflow: Workflow = round_trip(doc);
        assert_valid_workflow(&workflow);
    }
}

#[test]
fn database_migration_reads_as_documented() {
    let workflow: Workflow = round_trip(DATABASE_MIGRATION);
    assert_eq!(workflow.spec.steps.len(), 4);
    assert_eq!(workflow.spec.args["dry_run"].default, Some(Value::Bool(false)));
    assert!(workflow.spec.steps[0].returns_output());
    assert!(!workflow.spec.steps[3].returns_output());
    let condition = workflow.spec.steps[1].condition.as_ref().expect("condition");
    assert_eq!(condition.from_step.as_deref(), Some("check_database"));
    assert_eq!(
        condition.expect.as_ref().expect("expect").json_path["status"],
        "connected"
    );
    assert_eq!(workflow.spec.on_failure[0].id, "rollback_migration");
    // `store` is the deprecated spelling of `output`: the loader warns about each use.
    let doc: Value = serde_saphyr::from_str(DATABASE_MIGRATION).expect("parses");
    let paths: Vec<String> = deprecated_spellings(&doc).into_iter().map(|d| d.path).collect();
    assert_eq!(
        paths,
        ["spec.steps[0].store", "spec.steps[1].store", "spec.steps[2].store"]
    );
}

#[test]
fn cluster_report_keeps_loops_groups_and_output_template() {
    let workflow: Workflow = round_trip(CLUSTER_REPORT);
    let outer = workflow.spec.steps[1].for_each.as_ref().expect("forEach");
    assert_eq!(outer.var, "cluster");
    assert_eq!(outer.parallelism, Some(4));
    let nested = outer.steps[1].for_each.as_ref().expect("nested forEach");
    assert_eq!(nested.var, "ns");
    assert_eq!(nested.steps[0].id, "events");
    let paginate = workflow.spec.steps[0].paginate.as_ref().expect("paginate");
    assert_eq!(paginate.token_field, "metadata.continue");
    assert_eq!(paginate.max_pages, 20);
    let output = workflow.spec.output.as_ref().expect("output");
    assert_eq!(output["counts"]["nested"], serde_json::json!([1, 2.5, true, null]));
}

#[test]
fn snake_case_workflow_parses_and_its_spellings_are_reported() {
    let doc = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata: {name: legacy}
spec:
  steps:
    - id: risky_operation
      tool: external_api_call
      allow_failure: true
    - id: cleanup
      tool: cleanup_resources
      condition:
        from_step: risky_operation
        expect_not:
          success: true
          json_path: {status: ok}
"#;
    let workflow: Workflow = serde_saphyr::from_str(doc).expect("parses");
    assert_valid_workflow(&workflow);
    assert!(workflow.spec.steps[0].allow_failure);
    let raw: Value = serde_saphyr::from_str(doc).expect("parses");
    let found: Vec<(String, &str)> = deprecated_spellings(&raw)
        .into_iter()
        .map(|d| (d.path, d.replacement))
        .collect();
    assert_eq!(
        found,
        [
            ("spec.steps[0].allow_failure".to_owned(), "allowFailure"),
            ("spec.steps[1].condition.from_step".to_owned(), "fromStep"),
            ("spec.steps[1].condition.expect_not".to_owned(), "expectNot"),
            ("spec.steps[1].condition.expect_not.json_path".to_owned(), "jsonPath"),
        ]
    );
}

#[test]
fn a_workflow_written_with_a_legacy_input_schema_loads_and_is_reported() {
    // As muster's scenario runner writes it: the older `input_schema` copied into `spec`.
    let doc = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata: {name: deploy-test-app, namespace: default}
spec:
  input_schema:
    type: object
    args:
      app_name: {type: string}
    required: [app_name]
  steps:
    - id: list_existing_pods
      tool: x_kubernetes-mock_k8s_pod_list
      args: {namespace: "{{ .input.namespace }}"}
"#;
    let workflow: Workflow = serde_saphyr::from_str(doc).expect("the legacy key is tolerated");
    assert_valid_workflow(&workflow);
    assert!(workflow.spec.args.is_empty());
    let raw: Value = serde_saphyr::from_str(doc).expect("parses");
    let found: Vec<String> = deprecated_spellings(&raw).iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        ["spec.input_schema is deprecated: use spec.args instead of input_schema"]
    );
    let written = serde_json::to_value(&workflow).expect("serializes");
    assert!(written["spec"].get("input_schema").is_none(), "{written}");
}

#[test]
fn unknown_field_in_a_workflow_step_is_dropped_with_its_path() {
    let doc = "metadata: {name: a}\nspec:\n  steps:\n    - id: a\n      tool: t\n      outputs: true\n";
    let raw: Value = serde_saphyr::from_str(doc).expect("parses");
    let (workflow, warnings) = Workflow::from_document(&raw).expect("an unknown step field is dropped");
    assert_eq!(workflow.spec.steps[0].tool.as_deref(), Some("t"));
    let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings, [r#"unknown field "spec.steps[0].outputs" (dropped)"#]);
}

const EXECUTION: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: WorkflowExecution
metadata:
  name: 0b7c2c1e-9f0e-4a51-a3c4-2f1d2b7a9e10
  namespace: muster
  labels:
    muster.giantswarm.io/workflow: database-migration
    muster.giantswarm.io/status: completed
spec:
  workflowName: database-migration
  status: completed
  startedAt: "2026-09-21T12:00:00Z"
  completedAt: "2026-09-21T12:00:04.5Z"
  durationMs: 4500
  input:
    database_name: orders
    migration_version: "42"
    dry_run: false
  result:
    status: migrated
    version: 42
  truncated: false
  steps:
    - stepId: check_database
      tool: postgres_status
      status: completed
      startedAt: "2026-09-21T12:00:00Z"
      completedAt: "2026-09-21T12:00:01Z"
      durationMs: 1000
      input: {database: orders}
      result: {status: connected}
      storedAs: check_database
    - stepId: run_migration
      tool: postgres_migrate
      status: failed
      startedAt: "2026-09-21T12:00:01Z"
      completedAt: "2026-09-21T12:00:04.5Z"
      durationMs: 3500
      input: {database: orders, version: "42"}
      error: "lock timeout"
"#;

#[test]
fn workflow_execution_record_round_trips() {
    let parsed: WorkflowExecution = serde_saphyr::from_str(EXECUTION).expect("parses");
    let json = serde_json::to_value(&parsed).expect("serializes");
    let back: WorkflowExecution = serde_json::from_value(json.clone()).expect("parses");
    assert_eq!(back, parsed);
    assert_eq!(parsed.spec.status, ExecutionStatus::Completed);
    assert_eq!(parsed.spec.steps[1].status, ExecutionStatus::Failed);
    assert_eq!(parsed.spec.duration_ms, 4500);
    assert_eq!(json["spec"]["completedAt"], "2026-09-21T12:00:04.500Z");
    assert_eq!(json["spec"]["steps"][0]["storedAs"], "check_database");
    assert!(json["spec"].get("truncated").is_none());
    assert_eq!(json["metadata"]["labels"]["muster.giantswarm.io/status"], "completed");
}

#[test]
fn every_kind_has_a_json_schema_with_the_document_shape() {
    for schema in [
        serde_json::to_value(schemars::schema_for!(MCPServer)),
        serde_json::to_value(schemars::schema_for!(Workflow)),
        serde_json::to_value(schemars::schema_for!(WorkflowExecution)),
    ] {
        let schema = schema.expect("schema serializes");
        for key in ["apiVersion", "kind", "metadata", "spec"] {
            assert!(schema["properties"].get(key).is_some(), "{key} missing from {schema}");
        }
    }
}
