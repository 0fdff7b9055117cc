//! The reading core tools: services and MCP servers.

use muster_core::{
    ToolError,
    crd::{MCPServerHealth, MCPServerState, REGISTERED_BY_ANNOTATION, REGISTERED_BY_EMAIL_ANNOTATION},
};
use serde_json::{Map, Value, json};

use crate::{
    registry::Command,
    registry::{Registry, ServerView},
};

/// What `core_service_start/stop/restart` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    Start,
    Stop,
    Restart,
}

/// The name of the aggregator's own service.
pub(crate) const AGGREGATOR_SERVICE: &str = "mcp-aggregator";

/// A service's state as `core_service_*` reports it.
fn service_state(state: MCPServerState) -> &'static str {
    match state {
        MCPServerState::Running => "running",
        MCPServerState::Starting => "starting",
        MCPServerState::Stopped => "stopped",
        MCPServerState::Connected => "connected",
        MCPServerState::AuthRequired => "auth_required",
        MCPServerState::AwaitingSession => "awaiting_session",
        MCPServerState::Connecting => "connecting",
        MCPServerState::Disconnected => "disconnected",
        MCPServerState::Failed => "failed",
        _ => "unknown",
    }
}

fn health(state: MCPServerState) -> MCPServerHealth {
    match state {
        MCPServerState::Running | MCPServerState::Connected => MCPServerHealth::Healthy,
        MCPServerState::Failed => MCPServerHealth::Unhealthy,
        _ => MCPServerHealth::Unknown,
    }
}

fn server_service(s: &ServerView) -> Value {
    let spec = &s.definition.spec;
    let mut metadata = Map::new();
    metadata.insert("type".into(), json!(spec.server_type.map(|t| t.as_str())));
    metadata.insert("autoStart".into(), json!(spec.auto_start));
    if let Some(command) = &spec.command {
        metadata.insert("command".into(), json!(command));
        metadata.insert("args".into(), json!(spec.args));
    }
    if let Some(url) = &spec.url {
        metadata.insert("url".into(), json!(url));
    }
    metadata.insert("tools".into(), json!(s.runtime.tool_count));
    let mut service = json!({
        "name": s.definition.metadata.name,
        "service_type": "MCPServer",
        "state": service_state(s.runtime.state),
        "status": s.runtime.state.as_str(),
        "health": health(s.runtime.state),
        "metadata": metadata,
    });
    if let Some(e) = &s.runtime.last_error {
        service["last_error"] = json!(e);
    }
    if let Some(t) = s.runtime.last_connected {
        service["last_connected"] = json!(t);
    }
    if let Some(t) = s.runtime.last_attempt {
        service["last_attempt"] = json!(t);
    }
    if let Some(t) = s.runtime.next_retry_after {
        service["next_retry_after"] = json!(t);
    }
    service["restart_count"] = json!(s.runtime.restart_count);
    service["conditions"] = json!(s.runtime.to_status(s.definition.spec.suspended).conditions);
    service["consecutive_failures"] = json!(s.runtime.consecutive_failures);
    service
}

fn aggregator_service(registry: &Registry) -> Value {
    let servers = registry.servers();
    let connected = servers.iter().filter(|s| s.runtime.state.is_ready()).count();
    let config = registry.config();
    let aggregator = &config.aggregator;
    json!({
        "name": AGGREGATOR_SERVICE,
        "service_type": "Aggregator",
        "state": "running",
        "health": "healthy",
        "metadata": {
            "port": aggregator.port,
            "host": aggregator.host,
            "tools": registry.catalog().tools().len(),
            "servers_connected": connected,
            "servers_total": servers.len(),
        },
    })
}

pub(super) fn service_list(registry: &Registry) -> Value {
    let mut services = vec![aggregator_service(registry)];
    services.extend(registry.servers().iter().map(server_service));
    json!({"total": services.len(), "services": services})
}

pub(super) fn service_status(registry: &Registry, name: &str) -> Result<Value, ToolError> {
    if name == AGGREGATOR_SERVICE {
        return Ok(aggregator_service(registry));
    }
    registry
        .server(name)
        .map(|s| server_service(&s))
        .ok_or_else(|| ToolError::invalid_arguments(format!("service {name} not found")))
}

pub(super) fn server_definition(s: &ServerView) -> Value {
    let mut value = serde_json::to_value(&s.definition.spec).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        map.insert("name".into(), json!(s.definition.metadata.name));
        if let Some(display) = s.definition.metadata.display_name() {
            map.insert("displayName".into(), json!(display));
        }
        let annotations = &s.definition.metadata.annotations;
        for (annotation, field) in [
            (REGISTERED_BY_ANNOTATION, "registeredBy"),
            (REGISTERED_BY_EMAIL_ANNOTATION, "registeredByEmail"),
        ] {
            if let Some(value) = annotations.get(annotation).filter(|v| !v.trim().is_empty()) {
                map.insert(field.into(), json!(value));
            }
        }
        map.insert("state".into(), json!(s.runtime.state.as_str()));
        if let Some(e) = &s.runtime.last_error {
            map.insert("lastError".into(), json!(e));
        }
        map.insert("status".into(), json!(s.runtime.to_status(s.definition.spec.suspended)));
    }
    value
}

pub(super) fn mcpserver_list(registry: &Registry) -> Value {
    let servers: Vec<Value> = registry.servers().iter().map(server_definition).collect();
    json!({"mcpServers": servers, "mode": "filesystem", "total": servers.len()})
}

pub(super) fn mcpserver_get(registry: &Registry, name: &str) -> Result<Value, ToolError> {
    registry
        .server(name)
        .map(|s| server_definition(&s))
        .ok_or_else(|| ToolError::invalid_arguments(format!("MCP server {name} not found")))
}

pub(super) async fn service_control(
    registry: &std::sync::Arc<Registry>,
    store: super::Writes<'_>,
    name: &str,
    control: Control,
    ctx: &muster_core::CallContext,
) -> Result<Value, ToolError> {
    let verb = match control {
        Control::Start => "started",
        Control::Stop => "stopped",
        Control::Restart => "restarted",
    };
    if name == AGGREGATOR_SERVICE {
        return Err(ToolError::invalid_arguments(format!(
            "the static service {name} cannot be {verb}"
        )));
    }
    let before = registry
        .server(name)
        .ok_or_else(|| ToolError::invalid_arguments(format!("service {name} not found")))?;
    if control == Control::Start
        && matches!(
            before.runtime.state,
            MCPServerState::Running | MCPServerState::Connected
        )
    {
        let mut status = server_service(&before);
        status["message"] = json!(format!("service {name} is already running"));
        return Ok(status);
    }
    if control == Control::Stop
        && matches!(
            before.runtime.state,
            MCPServerState::Stopped | MCPServerState::Disconnected
        )
    {
        let mut status = server_service(&before);
        status["message"] = json!(format!("service {name} is already stopped"));
        return Ok(status);
    }
    tracing::info!(service = %name, ?control, author = %crate::events::Author::of(ctx), "service control requested");
    match store.filter(|store| store.writes_lifecycle()) {
        Some(store) => {
            // The lifecycle is the definition's: written as the caller, then applied here (the
            // changed definition restarts or stops the server; other replicas see the write).
            let mut definition = before.definition.clone();
            let down = !matches!(
                before.runtime.state,
                MCPServerState::Running | MCPServerState::Connected
            );
            match control {
                Control::Stop => definition.spec.suspended = true,
                Control::Start => {
                    definition.spec.suspended = false;
                    if down {
                        definition.spec.restart_requested_at = Some(chrono::Utc::now());
                    }
                }
                Control::Restart => definition.spec.restart_requested_at = Some(chrono::Utc::now()),
            }
            let stored = store.put_mcpserver(definition, ctx).await?;
            registry.apply_server_as(stored.definition, Some(&crate::events::Author::of(ctx)));
        }
        None => {
            let command = match control {
                Control::Start => Command::Start,
                Control::Stop => Command::Stop,
                Control::Restart => Command::Restart,
            };
            if !registry.command(name, command) {
                return Err(ToolError::invalid_arguments(format!(
                    "service {name} is not supervised"
                )));
            }
        }
    }
    // Wait (bounded by the server's timeout) for the supervisor to act: stopped, or connected,
    // or failed on this attempt.
    let budget = std::time::Duration::from_secs(u64::from(before.definition.spec.timeout.max(1)) + 2);
    let deadline = tokio::time::Instant::now() + budget;
    let attempt_before = before.runtime.last_attempt;
    loop {
        let now = registry
            .server(name)
            .ok_or_else(|| ToolError::invalid_arguments(format!("service {name} not found")))?;
        let settled = match control {
            Control::Stop => matches!(
                now.runtime.state,
                MCPServerState::Stopped | MCPServerState::Disconnected
            ),
            Control::Start | Control::Restart => {
                now.runtime.last_attempt != attempt_before
                    && !matches!(now.runtime.state, MCPServerState::Starting | MCPServerState::Connecting)
            }
        };
        if settled || tokio::time::Instant::now() >= deadline {
            let mut status = server_service(&now);
            status["message"] = json!(format!("service {name} {verb}"));
            return Ok(status);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
