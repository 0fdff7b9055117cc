//! The client commands' connection to a running gateway: one MCP session per command, opened
//! with the connection code the agent bridge uses ([`crate::connect`]).
//!
//! Commands call the gateway's meta-tools: [`Client::meta_json`] for a discovery meta-tool
//! (`list_tools`, `list_resources`, ...) whose answer is JSON text, [`Client::core`] for a core
//! tool through `call_tool` (the envelope unwrapped, the tool's JSON answer parsed) and
//! [`Client::call_tool`] for any tool through `call_tool` (the wrapped tool's own result, as
//! the agent bridge unwraps it). A call whose answer is the gateway's `auth_required` sign-in
//! answer is [`CliError::ServerAuthRequired`]. Every request is bounded by `--timeout` (then
//! cancelled at the gateway) and shows a spinner when it takes longer than a second.
//!
//! The client declares no elicitation: the gateway then answers a call that needs a sign-in
//! with its `auth_required` result (a link), which the command reports, rather than asking.

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
        CustomNotification, Implementation, JsonObject, ProgressNotificationParam, ServerResult,
    },
    service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError},
};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc, watch};

use super::{ClientOpts, error::CliError, spinner};
use crate::{
    agent::unwrap,
    connect::{self, reason, unreachable_message},
};

/// The CLI's client name towards the gateway.
const CLIENT_NAME: &str = "muster-cli";

/// The notification a gateway may send for each new event while a client follows them.
pub(crate) const EVENT_NOTIFICATION: &str = "notifications/muster/event";

/// What the gateway sends outside responses that a command may want: the latest progress of
/// the request in flight, and events.
#[derive(Debug, Clone)]
struct CliHandler {
    progress: Arc<watch::Sender<Option<String>>>,
    events: mpsc::UnboundedSender<Value>,
}

impl ClientHandler for CliHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _ctx: NotificationContext<RoleClient>) {
        let text = spinner::describe_progress(params.progress, params.total, params.message.as_deref());
        self.progress.send_replace(Some(text));
    }

    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        if notification.method == EVENT_NOTIFICATION
            && let Some(event) = notification.params
        {
            let _ = self.events.send(event);
        }
    }
}

/// One connection to the gateway, for one command.
#[derive(Debug)]
pub(crate) struct Client {
    service: RunningService<RoleClient, CliHandler>,
    endpoint: String,
    timeout: Duration,
    progress: watch::Receiver<Option<String>>,
    progress_tx: Arc<watch::Sender<Option<String>>>,
    events: Mutex<mpsc::UnboundedReceiver<Value>>,
}

impl Client {
    /// Connects to the gateway `opts` name.
    pub(crate) async fn connect(opts: &ClientOpts) -> Result<Self, CliError> {
        let endpoint = super::context::resolve_endpoint(opts.endpoint.as_deref(), opts.context.as_deref())?;
        connect::check_endpoint(&endpoint).map_err(CliError::Usage)?;
        let (progress_tx, progress) = watch::channel(None);
        let progress_tx = Arc::new(progress_tx);
        let (events_tx, events) = mpsc::unbounded_channel();
        let handler = CliHandler {
            progress: Arc::clone(&progress_tx),
            events: events_tx,
        };
        let token = opts.token.as_deref().filter(|t| !t.trim().is_empty());
        let what = format!("connecting to {endpoint}");
        let service = spinner::waiting(&what, None, connect::connect(&endpoint, token, handler, ()))
            .await
            .map_err(|e| CliError::from_connect(e, token.is_some()))?;
        Ok(Self {
            service,
            endpoint,
            timeout: opts.timeout,
            progress,
            progress_tx,
            events: Mutex::new(events),
        })
    }

    /// Ends the session at the gateway.
    pub(crate) async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.service.cancel()).await;
    }

    /// The next `notifications/muster/event` the gateway sent, if any arrived.
    pub(crate) async fn next_event(&self) -> Option<Value> {
        self.events.lock().await.recv().await
    }

    /// Calls meta-tool `name` with `args` (a JSON object), waiting up to `--timeout`; `what`
    /// names it in the spinner and in errors.
    pub(crate) async fn meta(&self, name: &str, args: Value, what: &str) -> Result<CallToolResult, CliError> {
        let arguments: JsonObject = match args {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        self.progress_tx.send_replace(None);
        let peer = self.service.peer();
        let answer = async {
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(self.timeout))
                .await?;
            handle.await_response().await
        };
        match spinner::waiting(what, Some(self.progress.clone()), answer).await {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(CliError::Failed {
                what: what.to_owned(),
                message: "the gateway answered something other than a tool result".to_owned(),
            }),
            Err(e) => Err(self.service_error(e, what)),
        }
    }

    fn service_error(&self, error: ServiceError, what: &str) -> CliError {
        if error.auth_challenge().is_some() {
            // The session was accepted, then the token was not (it expired meanwhile).
            return CliError::GatewayAuthFailed {
                endpoint: self.endpoint.clone(),
            };
        }
        match error {
            ServiceError::McpError(e) => CliError::Failed {
                what: what.to_owned(),
                message: e.message.into_owned(),
            },
            ServiceError::Timeout { timeout } => CliError::Timeout {
                what: what.to_owned(),
                after: timeout,
            },
            ServiceError::TransportClosed => CliError::Unreachable(unreachable_message(
                &self.endpoint,
                "the connection to the gateway closed",
            )),
            ServiceError::TransportSend(e) => CliError::Unreachable(unreachable_message(&self.endpoint, &reason(&e))),
            other => CliError::Failed {
                what: what.to_owned(),
                message: other.to_string(),
            },
        }
    }

    /// Calls discovery meta-tool `name` and parses its JSON answer; an error result is an error.
    pub(crate) async fn meta_json(&self, name: &str, args: Value, what: &str) -> Result<Value, CliError> {
        let result = self.meta(name, args, what).await?;
        if result.is_error == Some(true) {
            return Err(CliError::Failed {
                what: what.to_owned(),
                message: text_of(&result),
            });
        }
        Ok(json_of(&result))
    }

    /// Calls core tool `name` through `call_tool` and parses its JSON answer.
    pub(crate) async fn core(&self, name: &str, args: Value, what: &str) -> Result<Value, CliError> {
        let result = self.call_tool(name, args, what).await?;
        if result.is_error == Some(true) {
            return Err(CliError::Failed {
                what: what.to_owned(),
                message: text_of(&result),
            });
        }
        Ok(json_of(&result))
    }

    /// Calls tool `name` with `args` through `call_tool`: the wrapped tool's own result, which
    /// may be a tool error. A call the gateway refused before the tool ran (an unknown tool) is
    /// an error; one that needs a sign-in is [`CliError::ServerAuthRequired`].
    pub(crate) async fn call_tool(&self, name: &str, args: Value, what: &str) -> Result<CallToolResult, CliError> {
        let outer = self
            .meta("call_tool", serde_json::json!({"name": name, "arguments": args}), what)
            .await?;
        if is_envelope(&outer) {
            return Ok(unwrap::unwrap(outer));
        }
        // Not an envelope: the gateway answered in place of the tool.
        if let Some(error) = auth_required(&outer) {
            return Err(error);
        }
        if outer.is_error == Some(true) {
            return Err(CliError::Failed {
                what: what.to_owned(),
                message: text_of(&outer),
            });
        }
        Ok(unwrap::unwrap(outer))
    }
}

/// The gateway's sign-in answer (an error result, `structuredContent.status: auth_required`)
/// as an error.
fn auth_required(result: &CallToolResult) -> Option<CliError> {
    if result.is_error != Some(true) {
        return None;
    }
    let answer = result.structured_content.as_ref()?;
    if answer.get("status").and_then(Value::as_str) != Some("auth_required") {
        return None;
    }
    let field = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(CliError::ServerAuthRequired {
        server: field("server").unwrap_or_default(),
        tool: field("tool").unwrap_or_default(),
        url: field("authUrl").filter(|u| !u.is_empty()),
    })
}

/// Whether `result` is a `call_tool` envelope (the tool ran) rather than the gateway's refusal.
fn is_envelope(result: &CallToolResult) -> bool {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .and_then(|t| serde_json::from_str::<Value>(&t.text).ok())
        .is_some_and(|v| v.get("tool").is_some_and(Value::is_object) && v.get("content").is_some())
}

/// The prefix the gateway puts before the reason a call failed.
const FAILED_PREFIX: &str = "Tool execution failed: ";

/// The text items of `result`, one per line (without the gateway's "Tool execution failed: ").
pub(crate) fn text_of(result: &CallToolResult) -> String {
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    match text.strip_prefix(FAILED_PREFIX) {
        Some(reason) => reason.to_owned(),
        None => text,
    }
}

/// The JSON answer of a tool: its structured content, else its text parsed as JSON (else the
/// text as a string).
pub(crate) fn json_of(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    let text = text_of(result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

#[cfg(test)]
mod tests {
    use muster::catalog::meta::{DispatchedTool, envelope};
    use rmcp::model::ContentBlock;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_sign_in_answer_becomes_an_error_naming_the_server() {
        let mut answer = CallToolResult::error(vec![ContentBlock::text("x_p_t needs you to sign in to p")]);
        answer.structured_content = Some(json!({
            "status": "auth_required", "server": "p", "tool": "x_p_t",
            "authUrl": "http://gw/oauth/proxy/start?state=s", "auth_tool": "core_auth_login"
        }));
        match auth_required(&answer) {
            Some(CliError::ServerAuthRequired { server, tool, url }) => {
                assert_eq!((server.as_str(), tool.as_str()), ("p", "x_p_t"));
                assert_eq!(url.as_deref(), Some("http://gw/oauth/proxy/start?state=s"));
            }
            other => panic!("{other:?}"),
        }
        let plain = CallToolResult::success(vec![ContentBlock::text("{}")]);
        assert!(auth_required(&plain).is_none());
        // core_auth_login's own answer says auth_required too, but it is no refusal.
        let mut login = CallToolResult::success(vec![ContentBlock::text("{}")]);
        login.structured_content = Some(json!({"status": "auth_required", "authUrl": "http://gw/x"}));
        assert!(auth_required(&login).is_none());
        let refused = CallToolResult::error(vec![ContentBlock::text("Tool execution failed: tool not found: x")]);
        assert_eq!(text_of(&refused), "tool not found: x");
    }

    #[test]
    fn an_envelope_is_told_from_a_refusal() {
        let tool = DispatchedTool {
            name: "x_demo_fail".into(),
            server: Some("demo".into()),
            server_tool: Some("fail".into()),
        };
        let failed = envelope(CallToolResult::error(vec![ContentBlock::text("boom")]), &tool);
        assert!(is_envelope(&failed));
        let refused = CallToolResult::error(vec![ContentBlock::text("Tool execution failed: tool not found: nope")]);
        assert!(!is_envelope(&refused));
    }

    #[test]
    fn a_json_answer_is_read_from_structured_content_or_text() {
        let mut r = CallToolResult::success(vec![ContentBlock::text(r#"{"a":1}"#)]);
        assert_eq!(json_of(&r), json!({"a": 1}));
        r.structured_content = Some(json!({"b": 2}));
        assert_eq!(json_of(&r), json!({"b": 2}));
        let text = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(json_of(&text), json!("hello"));
    }
}
