//! A registry's `ServerPolicy` (Kubernetes mode's: no stdio server) with a real gateway: a
//! refused server reads Failed with the reason and is never started, and the core tools refuse
//! to create, update or validate one with the same reason.

use std::sync::Arc;

use muster::{
    core::{
        CallContext, JsonObject, ToolCall,
        config::MusterConfig,
        crd::{MCPServer, MCPServerSpec, MCPServerState, ServerType},
    },
    gateway::{
        Gateway,
        registry::{RegistryOptions, ServerPolicy},
    },
};
use serde_json::json;
use tower::ServiceExt;

const REASON: &str = "stdio servers do not run here: register the server over streamable-http or sse";

#[derive(Debug)]
struct RemoteOnly;

impl ServerPolicy for RemoteOnly {
    fn refusal(&self, server: &MCPServer) -> Option<String> {
        (server.spec.server_type == Some(ServerType::Stdio)).then(|| REASON.to_owned())
    }
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    let args: JsonObject = args.as_object().cloned().unwrap_or_default();
    ToolCall::new(name, args, CallContext::default())
}

#[tokio::test]
async fn a_refused_server_reads_failed_and_the_core_tools_refuse_to_write_one() {
    // A command that would leave a trace if it ran.
    let marker = tempfile::tempdir().expect("a temporary directory");
    let ran = marker.path().join("ran");
    let stdio = MCPServer::new(
        "local",
        MCPServerSpec {
            server_type: Some(ServerType::Stdio),
            command: Some("sh".into()),
            args: vec!["-c".into(), format!("touch {}", ran.display())],
            auto_start: true,
            ..MCPServerSpec::default()
        },
    );
    let options = RegistryOptions::default().with_server_policy(Arc::new(RemoteOnly));
    let gateway = Gateway::with_options(MusterConfig::default(), vec![stdio], Vec::new(), options).expect("a gateway");
    gateway.start().await;

    let server = gateway.registry().server("local").expect("still defined");
    assert_eq!(server.runtime.state, MCPServerState::Failed);
    assert_eq!(server.runtime.last_error.as_deref(), Some(REASON));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!ran.exists(), "the refused command was started");

    for tool in ["core_mcpserver_create", "core_mcpserver_validate"] {
        let args = json!({"name": "other", "type": "stdio", "command": "true"});
        let answer = gateway.tools().oneshot(call(tool, args)).await;
        let text = match answer {
            Ok(answer) => serde_json::to_string(&answer).unwrap_or_default(),
            Err(error) => error.to_string(),
        };
        assert!(text.contains(REASON), "{tool}: {text}");
    }
    assert!(gateway.registry().server("other").is_none(), "nothing was written");

    let args = json!({"name": "remote", "type": "streamable-http", "url": "http://127.0.0.1:9/mcp"});
    let created = gateway.tools().oneshot(call("core_mcpserver_create", args)).await;
    assert!(created.is_ok_and(|a| !a.is_error()), "a remote server is created");
    gateway.shutdown().await;
}
