//! Does a call's last progress report, or log line, reach the client? Clients that record what
//! they get, and the checks both the gateway's and the agent bridge's tests run.

// Logging is deprecated by the newest MCP revision (SEP-2577); the relay still carries it.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::{
    ClientHandler, Peer, RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, LoggingMessageNotificationParam,
        ProgressNotificationParam, ServerResult,
    },
    service::{NotificationContext, PeerRequestOptions},
};
use serde_json::json;
use tokio::sync::mpsc;

/// A client that records each progress report it receives as (progress, total).
#[derive(Clone)]
pub struct ProgressRecorder(pub mpsc::UnboundedSender<(f64, Option<f64>)>);

impl ClientHandler for ProgressRecorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send((params.progress, params.total));
    }
}

/// Calls `call_tool` with the demo's `sleep` (`tool`, 0.1 s) `rounds` times through `client`,
/// asking for progress; after each result its final report (progress = total, which the demo
/// sends right before the result) must reach `seen` within 2 s. This client handles
/// notifications in tasks of their own too, hence the wait; a report that was dropped on the
/// way never arrives.
pub async fn each_calls_last_report_arrives(
    client: &Peer<RoleClient>,
    seen: &mut mpsc::UnboundedReceiver<(f64, Option<f64>)>,
    tool: &str,
    rounds: usize,
) {
    for round in 0..rounds {
        let args = json!({"name": tool, "arguments": {"seconds": 0.1}});
        let request =
            CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default());
        let handle = client
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(request)),
                PeerRequestOptions::no_options(),
            )
            .await
            .expect("sent");
        let ServerResult::CallToolResult(result) = handle.await_response().await.expect("answered") else {
            panic!("not a call result")
        };
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let last = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match seen.recv().await {
                    Some((progress, Some(total))) if progress >= total => return,
                    Some(_) => {}
                    None => panic!("the client ended"),
                }
            }
        })
        .await;
        assert!(
            last.is_ok(),
            "round {round}: the call's final progress report (progress = total) never arrived"
        );
    }
}

/// A client that records the text of each log line it receives.
#[derive(Clone)]
pub struct LogRecorder(pub mpsc::UnboundedSender<String>);

impl ClientHandler for LogRecorder {
    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send(params.data.as_str().unwrap_or_default().to_owned());
    }
}

/// The conformance fixture (`examples/conformance_server.rs`) as a stdio MCPServer, named `name`.
pub fn conformance_fixture(name: &str) -> muster::core::crd::MCPServer {
    let mut server = super::demo_stdio(name);
    let fixture = super::gateway_binary().with_file_name("conformance_server");
    server.spec.command = Some(fixture.display().to_string());
    server.spec.args = Vec::new();
    server
}

/// Calls `call_tool` with the fixture's `test_tool_with_logging` (exposed as `tool`) `rounds`
/// times through `client`; after each result its last log line ("Tool execution completed",
/// sent right before the result) must reach `seen` within 2 s.
pub async fn each_calls_last_log_line_arrives(
    client: &Peer<RoleClient>,
    seen: &mut mpsc::UnboundedReceiver<String>,
    tool: &str,
    rounds: usize,
) {
    for round in 0..rounds {
        let args = json!({"name": tool});
        let result = client
            .call_tool(
                CallToolRequestParams::new("call_tool").with_arguments(args.as_object().cloned().unwrap_or_default()),
            )
            .await
            .expect("answered");
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let last = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match seen.recv().await {
                    Some(line) if line == "Tool execution completed" => return,
                    Some(_) => {}
                    None => panic!("the client ended"),
                }
            }
        })
        .await;
        assert!(last.is_ok(), "round {round}: the call's last log line never arrived");
    }
}
