//! The JSON-RPC request path of the meta-tools: `POST /mcp` through the gateway's axum router.
//!
//! Inputs run against one [`Gateway`] (replaced every 2,000 inputs; building one takes tens of
//! milliseconds), reset before each input to its fixed configuration, so no input depends on what
//! an earlier one created, updated or deleted. The fixture: two MCPServers that are defined but
//! never started (the gateway is not started, so nothing is spawned or connected), three
//! workflows (one over core tools only, so it runs end to end) and a configured toolset preset.
//! The harness initializes an MCP session (`initialize`, then `notifications/initialized`) unless
//! the input asks for the stateless 2026-07-28 protocol, then POSTs one message built from the
//! input, with `Content-Type: application/json`, `Accept: application/json, text/event-stream`
//! and `Host: 127.0.0.1`, and finally ends the session with `DELETE /mcp`.
//!
//! Input layout:
//!
//! - byte 0, flags: bit 0 the stateless protocol (`_meta` protocol keys, no session); bit 1 an
//!   `X-muster-Toolset` header follows (its value up to the first `\n`); bit 2 exposure `both`
//!   (meta-tools and native tools) instead of `meta`; bit 3 the client declares URL and form
//!   elicitation; bits 4-5 the mode:
//!   - 0: the body is sent as is (any JSON-RPC message, or none; a stateless one gets the
//!     `Mcp-Method` and `Mcp-Name` headers its method and name call for);
//!   - 1: `tools/call` of the meta-tool chosen by byte 1, with the body as its `arguments`;
//!   - 2: `tools/call` of `call_tool`, running the core or workflow tool chosen by byte 1 with the
//!     body as that tool's `arguments`;
//!   - 3: `tools/call` of any tool chosen by byte 1 by name, directly (the native path);
//! - byte 1: the tool (modes 1-3);
//! - then the header line, when bit 1 is set, then the body. In modes 1-3 a body that is not
//!   JSON is passed as a JSON string.
//!
//! A crash is a panic anywhere, no HTTP answer, a 5xx, an answer that does not complete within
//! 5 seconds, or an event-stream answer whose events are not JSON-RPC messages.

#![no_main]

use std::{
    sync::{LazyLock, Mutex},
    time::Duration,
};

use axum::{Router, body::Body};
use base64::{Engine, prelude::BASE64_STANDARD};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use muster_core::{
    config::{Exposure, MusterConfig},
    crd::{MCPServer, Workflow},
};
use muster_gateway::Gateway;
use serde_json::{Value, json};
use tower::ServiceExt;

const META_TOOLS: [&str; 13] = [
    "list_tools",
    "describe_tool",
    "filter_tools",
    "list_core_tools",
    "call_tool",
    "list_resources",
    "filter_resources",
    "describe_resource",
    "get_resource",
    "list_prompts",
    "filter_prompts",
    "describe_prompt",
    "get_prompt",
];

/// Every core tool and the workflow tools of the fixture: what `call_tool` runs in mode 2.
const INNER_TOOLS: [&str; 33] = [
    "core_service_list",
    "core_service_status",
    "core_service_start",
    "core_service_stop",
    "core_service_restart",
    "core_mcpserver_list",
    "core_mcpserver_get",
    "core_mcpserver_create",
    "core_mcpserver_update",
    "core_mcpserver_delete",
    "core_mcpserver_validate",
    "core_mcpserver_detect",
    "core_config_get",
    "core_config_get_aggregator",
    "core_config_update_aggregator",
    "core_config_save",
    "core_config_reload",
    "core_events",
    "core_workflow_list",
    "core_workflow_get",
    "core_workflow_available",
    "core_workflow_create",
    "core_workflow_update",
    "core_workflow_delete",
    "core_workflow_validate",
    "core_workflow_execution_list",
    "core_workflow_execution_get",
    "core_auth_login",
    "core_auth_logout",
    "core_auth_status",
    "workflow_inspect",
    "workflow_demo-tour",
    "workflow_fan-out",
];

const CONFIG: &str = r#"
aggregator:
  musterPrefix: x
toolsetPresets:
  observability:
    description: Read-only views of the services
    include:
      - pattern: "core_service_*"
      - readOnly: true
      - label: team=platform
    exclude:
      - tool: core_service_restart
  delivery:
    include:
      - preset: observability
      - workflow: inspect
      - server: demo
"#;

const SERVERS: [&str; 2] = [
    include_str!("../../examples/config/mcpservers/demo.yaml"),
    r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: remote
  labels: {team: platform}
spec:
  type: streamable-http
  url: https://mcp.invalid/mcp
  autoStart: false
  timeout: 5
"#,
];

const WORKFLOWS: [&str; 3] = [
    include_str!("../../examples/config/workflows/demo-tour.yaml"),
    r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: inspect
  labels: {team: platform}
spec:
  description: "List the services and the definition of one"
  args:
    name: {type: string, default: demo}
    verbose: {type: boolean, default: false}
  steps:
    - id: services
      tool: core_service_list
      jq: "[.services[].name]"
    - id: one
      tool: core_mcpserver_get
      args: {name: "{{ .input.name }}"}
      allowFailure: true
      condition:
        template: "{{ ne .input.name \"\" }}"
    - id: events
      tool: core_events
      args: {limit: 3}
      condition:
        template: "{{ .input.verbose }}"
  output:
    services: "{{ .results.services }}"
    count: "{{ len .results.services }}"
    one: "{{ .results.one }}"
"#,
    r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: fan-out
spec:
  description: "Check each named service in turn and in parallel"
  args:
    names: {type: array, default: [demo, remote]}
  steps:
    - id: each
      forEach:
        items: "{{ .input.names }}"
        as: svc
        steps:
          - id: status
            tool: core_service_status
            args: {name: "{{ .vars.svc }}"}
            allowFailure: true
    - id: both
      parallel:
        - id: list
          tool: core_workflow_list
        - id: available
          tool: core_workflow_available
          args: {name: inspect}
  output:
    each: "{{ .results.each }}"
"#,
];

/// How many inputs one gateway serves before it is replaced (its event log and execution records
/// grow with every input; definitions and configuration are reset before each).
const INPUTS_PER_GATEWAY: u32 = 2_000;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    config: MusterConfig,
    servers: Vec<MCPServer>,
    workflows: Vec<Workflow>,
}

impl Fixture {
    /// A gateway over the fixture, not started: nothing is spawned or connected.
    fn gateway(&self) -> (Gateway, Router) {
        let _entered = self.runtime.enter();
        let gateway = Gateway::new(self.config.clone(), self.servers.clone(), self.workflows.clone())
            .expect("the fixture is a valid configuration");
        let router = gateway.router();
        (gateway, router)
    }

    /// Undoes what an input changed: the configuration, and the servers and workflows that were
    /// created, updated or deleted.
    fn reset(&self, gateway: &Gateway, exposure: Exposure) {
        let registry = gateway.registry();
        let mut config = self.config.clone();
        config.aggregator.exposure = exposure;
        registry.set_config(config);
        for server in registry.servers() {
            let name = &server.definition.metadata.name;
            if !self.servers.iter().any(|s| &s.metadata.name == name) {
                registry.remove_server(name);
            }
        }
        for server in &self.servers {
            if registry
                .server(&server.metadata.name)
                .is_none_or(|s| &s.definition != server)
            {
                registry.apply_server(server.clone());
            }
        }
        for workflow in registry.workflows() {
            let name = &workflow.metadata.name;
            if !self.workflows.iter().any(|w| &w.metadata.name == name) {
                registry.remove_workflow(name);
            }
        }
        for workflow in &self.workflows {
            if registry.workflow(&workflow.metadata.name).as_ref() != Some(workflow) {
                registry
                    .apply_workflow(workflow.clone())
                    .expect("the fixture's workflows compile");
            }
        }
    }
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture {
    runtime: tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime"),
    config: serde_saphyr::from_str(CONFIG).expect("the fixture's config.yaml"),
    servers: SERVERS
        .iter()
        .map(|s| serde_saphyr::from_str(s).expect("the fixture's MCPServers"))
        .collect(),
    workflows: WORKFLOWS
        .iter()
        .map(|w| serde_saphyr::from_str(w).expect("the fixture's Workflows"))
        .collect(),
});

/// The gateway in use, its router, and how many inputs it served.
static GATEWAY: Mutex<Option<(Gateway, Router, u32)>> = Mutex::new(None);

/// What one input asks for.
struct Input<'a> {
    stateless: bool,
    toolset: Option<&'a [u8]>,
    exposure: Exposure,
    elicitation: bool,
    body: Vec<u8>,
}

impl<'a> Input<'a> {
    fn parse(data: &'a [u8]) -> Option<Self> {
        let (&flags, rest) = data.split_first()?;
        let (&tool, mut rest) = rest.split_first()?;
        let stateless = flags & 1 != 0;
        let mut toolset = None;
        if flags & 2 != 0 {
            let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
            toolset = Some(&rest[..end]);
            rest = rest.get(end + 1..).unwrap_or_default();
        }
        let exposure = if flags & 4 != 0 { Exposure::Both } else { Exposure::Meta };
        let elicitation = flags & 8 != 0;
        let body = match (flags >> 4) & 3 {
            0 => rest.to_vec(),
            mode => {
                let arguments = serde_json::from_slice::<Value>(rest)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()));
                let (name, arguments) = match mode {
                    1 => (META_TOOLS[usize::from(tool) % META_TOOLS.len()], arguments),
                    2 => (
                        "call_tool",
                        json!({"name": INNER_TOOLS[usize::from(tool) % INNER_TOOLS.len()], "arguments": arguments}),
                    ),
                    _ => {
                        let all = META_TOOLS.len() + INNER_TOOLS.len();
                        let i = usize::from(tool) % all;
                        let name = META_TOOLS
                            .get(i)
                            .copied()
                            .unwrap_or_else(|| INNER_TOOLS[i - META_TOOLS.len()]);
                        (name, arguments)
                    }
                };
                let mut params = json!({"name": name, "arguments": arguments});
                if stateless {
                    params["_meta"] = stateless_meta(elicitation);
                }
                serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))
                    .expect("JSON")
            }
        };
        Some(Self {
            stateless,
            toolset,
            exposure,
            elicitation,
            body,
        })
    }
}

fn capabilities(elicitation: bool) -> Value {
    if elicitation {
        json!({"elicitation": {"url": {}, "form": {}}})
    } else {
        json!({})
    }
}

/// The per-request protocol keys of a 2026-07-28 request.
fn stateless_meta(elicitation: bool) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities(elicitation),
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
    })
}

/// With `MUSTER_FUZZ_DEBUG` set, every request and answer is printed (to see what an input does:
/// `MUSTER_FUZZ_DEBUG=1 fuzz/target/x86_64-unknown-linux-gnu/release/jsonrpc_meta <file>`).
static DEBUG: LazyLock<bool> = LazyLock::new(|| std::env::var_os("MUSTER_FUZZ_DEBUG").is_some());

/// A POST of `body` to `/mcp` as a client sends it.
fn post(body: Vec<u8>, session: Option<&HeaderValue>, version: &str, toolset: Option<&[u8]>) -> Request<Body> {
    if *DEBUG {
        eprintln!("-> {}", String::from_utf8_lossy(&body));
    }
    let mut request = Request::post("/mcp")
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(value) = toolset.and_then(|t| HeaderValue::from_bytes(t).ok()) {
        request = request.header("x-muster-toolset", value);
    }
    if version >= STANDARD_HEADERS_VERSION {
        for (name, value) in standard_headers(&body) {
            request = request.header(name, value);
        }
    }
    request.body(Body::from(body)).expect("a valid request")
}

/// The first protocol version whose requests carry the SEP-2243 routing headers.
const STANDARD_HEADERS_VERSION: &str = "2026-07-28";

/// The SEP-2243 headers a 2026-07-28 client sends with `body`: `Mcp-Method`, and `Mcp-Name` for
/// the methods that name a tool, prompt, resource or task (Base64 in the `=?base64?...?=`
/// form when the value is not plain visible ASCII). None for a body that is not a JSON object.
fn standard_headers(body: &[u8]) -> Vec<(&'static str, String)> {
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut headers = vec![("mcp-method", header_value(method))];
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return headers,
    };
    if let Some(name) = message.get("params").and_then(|p| p.get(key)).and_then(Value::as_str) {
        headers.push(("mcp-name", header_value(name)));
    }
    headers
}

fn header_value(value: &str) -> String {
    let plain = !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
        && value.chars().all(|c| (' '..='~').contains(&c))
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", BASE64_STANDARD.encode(value))
    }
}

/// Sends `request`; the answer's status, headers and whole body, checked.
async fn send(router: &Router, request: Request<Body>) -> (Response<()>, Vec<u8>) {
    let response = router.clone().oneshot(request).await.expect("the router is infallible");
    let (parts, body) = response.into_parts();
    assert!(
        !parts.status.is_server_error(),
        "a server error: {} ({:?})",
        parts.status,
        parts.headers
    );
    let body = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .unwrap_or_else(|_| panic!("the {} answer did not complete within 5 s", parts.status))
        .expect("the answer's body reads")
        .to_bytes()
        .to_vec();
    if *DEBUG {
        eprintln!("<- {} {}", parts.status, String::from_utf8_lossy(&body));
    }
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_sse {
        for line in String::from_utf8_lossy(&body).lines() {
            if let Some(data) = line.strip_prefix("data:").map(str::trim)
                && !data.is_empty()
            {
                let message: Value =
                    serde_json::from_str(data).unwrap_or_else(|e| panic!("an event that is not JSON ({e}): {data}"));
                assert_eq!(message["jsonrpc"], "2.0", "not a JSON-RPC message: {data}");
            }
        }
    }
    (Response::from_parts(parts, ()), body)
}

/// Opens a session on `router`: its `Mcp-Session-Id`.
async fn initialize(router: &Router, elicitation: bool) -> HeaderValue {
    const VERSION: &str = "2025-11-25";
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": capabilities(elicitation),
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    });
    let (response, body) = send(router, post(init.to_string().into_bytes(), None, VERSION, None)).await;
    assert_eq!(response.status(), StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let session = response
        .headers()
        .get("mcp-session-id")
        .cloned()
        .expect("initialize opens a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (response, _) = send(
        router,
        post(initialized.to_string().into_bytes(), Some(&session), VERSION, None),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    session
}

/// Ends the session: `DELETE /mcp`.
async fn close(router: &Router, session: HeaderValue, version: &str) {
    let request = Request::delete("/mcp")
        .header(header::HOST, "127.0.0.1")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", version)
        .body(Body::empty())
        .expect("a valid request");
    send(router, request).await;
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else { return };
    let fixture = &*FIXTURE;
    let mut slot = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    if slot.as_ref().is_none_or(|(_, _, served)| *served >= INPUTS_PER_GATEWAY) {
        if let Some((old, _, _)) = slot.take() {
            fixture.runtime.block_on(old.shutdown());
        }
        let (gateway, router) = fixture.gateway();
        *slot = Some((gateway, router, 0));
    }
    let (gateway, router, served) = slot.as_mut().expect("a gateway");
    *served += 1;
    fixture.runtime.block_on(async {
        // Inside the runtime: a definition change notifies the sessions from a task.
        fixture.reset(gateway, input.exposure);
        let (session, version) = if input.stateless {
            (None, "2026-07-28")
        } else {
            (Some(initialize(router, input.elicitation).await), "2025-11-25")
        };
        send(router, post(input.body, session.as_ref(), version, input.toolset)).await;
        if let Some(session) = session {
            close(router, session, version).await;
        }
    });
});
