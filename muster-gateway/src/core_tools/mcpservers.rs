//! The MCP server definition tools: `core_mcpserver_create`, `_update`, `_delete`, `_validate`
//! and `_detect`. Writes go to the core tools' [`DefinitionStore`](crate::definitions::DefinitionStore)
//! first, when it has one (in filesystem mode, `mcpservers/<name>.yaml`, atomically), on
//! behalf of the caller, then to the registry (the server starts, restarts or stops). What a caller may define or probe is
//! checked first ([`admission`](super::admission)); each write names its author in its event
//! and log line, and a server created by an authenticated caller carries the
//! `ui.giantswarm.io/registered-by` annotations. Answers name files relative to the config
//! directory.

use std::{collections::BTreeMap, time::Duration};

use muster_core::{
    CallContext, JsonObject, ToolError,
    crd::{
        DISPLAY_NAME_ANNOTATION, MCPServer, MCPServerSpec, MCPServerState, REGISTERED_BY_ANNOTATION,
        REGISTERED_BY_EMAIL_ANNOTATION,
    },
};
use serde_json::{Map, Value, json};

use super::{Writes, admission::Admission, detect, dropped_fields, report_dropped_fields, services::server_definition};
use crate::{
    definitions::Stored,
    events::{Author, KIND_MCP_SERVER},
    registry::{Applied, Registry},
};

/// The arguments that are not spec fields.
const NON_SPEC: [&str; 2] = ["name", "displayName"];

fn name_of(args: &JsonObject) -> Result<&str, ToolError> {
    match args.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => Ok(n),
        _ => Err(ToolError::invalid_arguments("name argument is required")),
    }
}

/// The spec fields of `args`, with `command` given as an array split into command and args.
fn spec_fields(args: &JsonObject) -> Map<String, Value> {
    let mut fields: Map<String, Value> = args
        .iter()
        .filter(|(k, _)| !NON_SPEC.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(Value::Array(parts)) = fields.get("command").cloned() {
        let mut parts = parts.into_iter();
        fields.insert("command".into(), parts.next().unwrap_or(Value::Null));
        let mut rest: Vec<Value> = parts.collect();
        if let Some(Value::Array(more)) = fields.get("args") {
            rest.extend(more.iter().cloned());
        }
        if !rest.is_empty() {
            fields.insert("args".into(), Value::Array(rest));
        }
    }
    fields
}

/// Parses the spec fields: a mistyped field is an error naming its path; an unknown one, or
/// one that does not apply to the server's type, is dropped, logged and returned as a warning
/// naming its path.
fn parse_spec(name: &str, fields: Map<String, Value>) -> Result<(MCPServerSpec, Vec<String>), ToolError> {
    let (mut spec, mut dropped) = muster_core::crd::parse_spec::<MCPServerSpec>(&Value::Object(fields))
        .map_err(|e| ToolError::invalid_arguments(format!("invalid MCP server definition: {e}")))?;
    dropped.extend(spec.drop_inapplicable(""));
    Ok((spec, dropped_fields(KIND_MCP_SERVER, name, &dropped)))
}

fn with_display_name(mut server: MCPServer, display: Option<&Value>) -> MCPServer {
    match display.and_then(Value::as_str).map(str::trim) {
        Some("") => {
            server.metadata.annotations.remove(DISPLAY_NAME_ANNOTATION);
        }
        Some(d) => {
            server
                .metadata
                .annotations
                .insert(DISPLAY_NAME_ANNOTATION.to_owned(), d.to_owned());
        }
        None => {}
    }
    server
}

fn validated(server: MCPServer) -> Result<MCPServer, ToolError> {
    server.validate().map_err(|e| {
        ToolError::invalid_arguments(format!("invalid MCP server definition: {}", e.to_lines().join("; ")))
    })?;
    Ok(server)
}

/// `server`, unless the registry's [`ServerPolicy`](crate::registry::ServerPolicy) refuses to
/// run it where the gateway runs (a stdio server in Kubernetes mode).
fn allowed_here(registry: &Registry, server: MCPServer) -> Result<MCPServer, ToolError> {
    match registry.refusal(&server) {
        Some(reason) => Err(ToolError::invalid_arguments(reason)),
        None => Ok(server),
    }
}

/// Writes `server` to the definition store, when there is one, on behalf of the caller of `ctx`:
/// the definition to apply, as the store holds it, and its file.
async fn persist(store: Writes<'_>, server: MCPServer, ctx: &CallContext) -> Result<Stored<MCPServer>, ToolError> {
    match store {
        Some(store) => Ok(store.put_mcpserver(server, ctx).await?),
        None => Ok(Stored::new(server)),
    }
}

/// `server` stamped with the `registered-by` annotations of the authenticated caller of `ctx`,
/// as Kubernetes mode does; a caller the front door did not authenticate stamps none.
fn registered_by(mut server: MCPServer, ctx: &CallContext) -> MCPServer {
    if let Some(principal) = &ctx.principal {
        let annotations = &mut server.metadata.annotations;
        annotations.insert(REGISTERED_BY_ANNOTATION.to_owned(), principal.subject.clone());
        match &principal.email {
            Some(email) => annotations.insert(REGISTERED_BY_EMAIL_ANNOTATION.to_owned(), email.clone()),
            None => annotations.remove(REGISTERED_BY_EMAIL_ANNOTATION),
        };
    }
    server
}

pub(super) async fn create(
    registry: &std::sync::Arc<Registry>,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    if registry.server(name).is_some() {
        return Err(ToolError::invalid_arguments(format!(
            "MCP server {name} already exists"
        )));
    }
    let (spec, dropped) = parse_spec(name, spec_fields(args))?;
    let server = validated(with_display_name(MCPServer::new(name, spec), args.get("displayName")))?;
    let server = allowed_here(registry, server)?;
    Admission::of(registry).check_server(name, &server.spec, None).await?;
    let stored = persist(store, registered_by(server, ctx), ctx).await?;
    registry.apply_server_as(stored.definition, Some(&Author::of(ctx)));
    report_dropped_fields(registry, KIND_MCP_SERVER, name, &dropped);
    created_or_updated(registry, name, "created", stored.file, dropped)
}

pub(super) async fn update(
    registry: &std::sync::Arc<Registry>,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    let current = registry
        .server(name)
        .ok_or_else(|| ToolError::invalid_arguments(format!("MCP server {name} not found")))?;
    let mut fields = match serde_json::to_value(&current.definition.spec) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let changes = spec_fields(args);
    // A new command replaces the old args unless args are given too.
    if changes.contains_key("command") && !changes.contains_key("args") {
        fields.remove("args");
    }
    // The reference: suspended "false (or omitted) resumes it", unlike the other fields.
    if !changes.contains_key("suspended") {
        fields.remove("suspended");
    }
    fields.extend(changes);
    let (spec, dropped) = parse_spec(name, fields)?;
    let mut server = current.definition.clone();
    server.spec = spec;
    let server = allowed_here(registry, validated(with_display_name(server, args.get("displayName")))?)?;
    Admission::of(registry)
        .check_server(name, &server.spec, Some(&current.definition.spec))
        .await?;
    let stored = persist(store, server, ctx).await?;
    let applied = registry.apply_server_as(stored.definition, Some(&Author::of(ctx)));
    let verb = if applied == Applied::Unchanged {
        "unchanged"
    } else {
        "updated"
    };
    report_dropped_fields(registry, KIND_MCP_SERVER, name, &dropped);
    created_or_updated(registry, name, verb, stored.file, dropped)
}

fn created_or_updated(
    registry: &Registry,
    name: &str,
    verb: &str,
    file: Option<String>,
    warnings: Vec<String>,
) -> Result<Value, ToolError> {
    let server = registry
        .server(name)
        .ok_or_else(|| ToolError::internal(format!("MCP server {name} vanished")))?;
    let mut value = server_definition(&server);
    value["message"] = json!(format!("MCP server {name} {verb}"));
    value["warnings"] = json!(warnings);
    if let Some(file) = file {
        value["file"] = json!(file);
    }
    Ok(value)
}

pub(super) async fn delete(
    registry: &Registry,
    store: Writes<'_>,
    args: &JsonObject,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    let server = registry
        .server(name)
        .ok_or_else(|| ToolError::invalid_arguments(format!("MCP server {name} not found")))?;
    // A server that serves (a running process, a live connection) must be stopped first; one
    // that only retries is deleted right away.
    if matches!(
        server.runtime.state,
        MCPServerState::Running | MCPServerState::Connected
    ) {
        return Err(ToolError::invalid_arguments(format!(
            "MCP server {name} is {}; stop it with core_service_stop before deleting it",
            server.runtime.state
        )));
    }
    if let Some(store) = store {
        store.delete_mcpserver(name, ctx).await?;
    }
    registry.remove_server_as(name, Some(&Author::of(ctx)));
    Ok(json!({"name": name, "deleted": true, "message": format!("MCP server {name} deleted")}))
}

pub(super) async fn validate(registry: &Registry, args: &JsonObject) -> Result<Value, ToolError> {
    let name = name_of(args)?;
    let mut warnings = Vec::new();
    let outcome = parse_spec(name, spec_fields(args))
        .map(|(spec, dropped)| {
            warnings = dropped;
            with_display_name(MCPServer::new(name, spec), args.get("displayName"))
        })
        .and_then(validated)
        .and_then(|server| allowed_here(registry, server));
    let outcome = match outcome {
        Ok(server) => Admission::of(registry)
            .check_server(name, &server.spec, None)
            .await
            .map(|()| server),
        Err(e) => Err(e),
    };
    Ok(match outcome {
        Ok(_) => json!({
            "name": name, "valid": true, "errors": [], "warnings": warnings,
            "message": format!("MCP server {name} is valid"),
        }),
        Err(e) => json!({
            "name": name, "valid": false, "errors": [e.to_string()], "warnings": warnings,
            "message": e.to_string(),
        }),
    })
}

pub(super) async fn detect(registry: &Registry, args: &JsonObject) -> Result<Value, ToolError> {
    let url = match args.get("url") {
        Some(Value::String(u)) if !u.is_empty() => u.clone(),
        _ => return Err(ToolError::invalid_arguments("url argument is required")),
    };
    let headers: BTreeMap<String, String> = match args.get("headers") {
        Some(Value::Object(map)) => map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect(),
        _ => BTreeMap::new(),
    };
    let timeout = args
        .get("timeout")
        .and_then(Value::as_f64)
        .filter(|t| *t > 0.0)
        .map_or(detect::DEFAULT_TIMEOUT, Duration::from_secs_f64);
    let admission = Admission::of(registry);
    admission.check_url(&url).await.map_err(ToolError::invalid_arguments)?;
    let result = detect::detect_resolving(&url, &headers, timeout, admission.probe_egress()).await;
    serde_json::to_value(result).map_err(ToolError::internal)
}

#[cfg(test)]
mod tests;
