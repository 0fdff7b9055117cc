//! The dispatcher's named services composed with no `Gateway`, against a real rmcp server over
//! loopback HTTP: the downstream tools alone, then a dispatcher of the downstream tools, a tool
//! of our own and the workflows, whose steps call the same stack.

mod common;

use std::sync::Arc;

use common::{fast_supervision, remote, scripted::ScriptedServer, text};
use muster::{
    core::{
        BoxToolService, CallContext, JsonObject, ToolCall, ToolEntry, ToolError, ToolKind, config::MusterConfig,
        crd::Workflow,
    },
    gateway::{
        dispatch::{Dispatcher, DownstreamTools},
        registry::{Registry, RegistryOptions},
        supervisor::Supervisor,
        workflows::GatewayWorkflows,
    },
    workflow::record::{ExecutionStore, MemoryExecutionStore},
};
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A downstream with `echo` (`{"text": <its text>}`), and a registry of it, connected.
async fn echo_registry(workflows: Vec<Workflow>) -> (ScriptedServer, Arc<Registry>) {
    let echo = ScriptedServer::builder()
        .tool("echo", true, |args| {
            Ok(json!({"text": args.get("text").cloned().unwrap_or_default()}))
        })
        .serve()
        .await;
    let registry = Registry::new(
        MusterConfig::default(),
        vec![remote("echo", &echo.url)],
        workflows,
        RegistryOptions::default(),
    )
    .expect("a registry");
    Supervisor::new(Arc::clone(&registry))
        .with_config(fast_supervision())
        .start()
        .await;
    (echo, registry)
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall::new(
        name,
        args.as_object().cloned().unwrap_or_default(),
        CallContext::default(),
    )
}

#[tokio::test]
async fn the_downstream_tools_alone_call_the_server_that_provides_a_tool() {
    let (echo, registry) = echo_registry(Vec::new()).await;
    let downstream = DownstreamTools::new(Arc::clone(&registry));

    let answer = downstream
        .clone()
        .oneshot(call("x_echo_echo", json!({"text": "hi"})))
        .await
        .expect("answered")
        .into_result()
        .expect("a result");
    assert_eq!(text(&answer), r#"{"text":"hi"}"#);
    assert_eq!(
        echo.calls_of("echo"),
        [json!({"text": "hi"})],
        "the server got its own tool name"
    );

    // A core tool is in the catalogue, but no server provides it.
    let core = downstream
        .oneshot(call("core_service_list", json!({})))
        .await
        .expect_err("not a downstream tool");
    assert_eq!(core.to_string(), "tool not found: core_service_list");
    registry.shutdown().await;
}

#[tokio::test]
async fn a_dispatcher_of_named_services_runs_downstream_own_and_workflow_tools() {
    let relay: Workflow = serde_json::from_value(json!({
        "metadata": {"name": "relay"},
        "spec": {
            "args": {"who": {"type": "string", "required": true}},
            "steps": [
                {"id": "greet", "tool": "own_greeting", "args": {"who": "{{ .input.who }}"}},
                {"id": "say", "tool": "x_echo_echo", "args": {"text": "{{ .results.greet.text }}"}}
            ],
            "output": {"said": "{{ .results.say.text }}"}
        }
    }))
    .expect("a workflow");
    let (echo, registry) = echo_registry(vec![relay]).await;
    let greeting = ToolEntry::builtin(
        ToolKind::Core,
        Tool::new("own_greeting", "Greets someone.", Arc::new(JsonObject::new())),
    );
    let greet = tower::service_fn(|call: ToolCall| async move {
        let who = call
            .arguments
            .get("who")
            .and_then(Value::as_str)
            .unwrap_or("nobody")
            .to_owned();
        let answer = json!({"text": format!("hello {who}")});
        Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(answer.to_string())]).into())
    });
    let records = Arc::new(MemoryExecutionStore::new());
    let workflows = GatewayWorkflows::new(Arc::clone(registry.workflow_table()), records.clone());
    let stack = workflows.bind(BoxToolService::new(
        Dispatcher::new(Arc::clone(&registry))
            .with_tool(greeting, greet)
            .with_workflows(workflows.clone()),
    ));

    assert!(
        registry.catalog().tool("workflow_relay").is_some(),
        "the workflow is listed once the tools it names are"
    );
    let run = stack
        .clone()
        .oneshot(call("workflow_relay", json!({"who": "ada"})))
        .await
        .expect("answered")
        .into_result()
        .expect("a result");
    assert_eq!(run.structured_content, Some(json!({"said": "hello ada"})));
    assert_eq!(
        echo.calls_of("echo"),
        [json!({"text": "hello ada"})],
        "the step reached the server"
    );
    assert_eq!(records.list(&Default::default()).expect("records").total, 1);

    let own = stack
        .oneshot(call("own_greeting", json!({"who": "bo"})))
        .await
        .expect("answered");
    assert_eq!(text(&own.into_result().expect("a result")), r#"{"text":"hello bo"}"#);
    registry.shutdown().await;
}
