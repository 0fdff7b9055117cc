//! The configuration tools: `core_config_get`, `_get_aggregator`, `_update_aggregator`, `_save`
//! and `_reload`. Updates change the running configuration (a new port or host takes effect at
//! the next start); `_save` persists it to `config.yaml` atomically; `_reload` reads the config
//! directory again, discarding unsaved changes, and applies its servers and workflows.
//!
//! Behind the front door, `_update_aggregator` does not change the keys that say who may reach
//! the gateway and what callers may make it do (`oauth`, `serverApi`, `allowedHosts`,
//! `allowedOrigins`): a caller could otherwise lift the refusals `serverApi` makes, in memory
//! and, through `_save`, in `config.yaml`. Only the operator changes them, in the file. Each
//! write names its author in the log; answers name files relative to the config directory.

use muster_core::CallContext;

use muster_core::{JsonObject, ToolError, config::AggregatorConfig};
use serde_json::{Map, Value, json};

use crate::{definitions::config_dir, events::Author, registry::Registry};

/// The configuration as the tools answer it: the Valkey password redacted.
fn shown(registry: &Registry) -> muster_core::config::MusterConfig {
    let mut config = registry.config();
    config.aggregator.oauth = config.aggregator.oauth.redacted();
    config
}

pub(super) fn get(registry: &Registry) -> Result<Value, ToolError> {
    serde_json::to_value(shown(registry)).map_err(ToolError::internal)
}

pub(super) fn get_aggregator(registry: &Registry) -> Result<Value, ToolError> {
    serde_json::to_value(shown(registry).aggregator).map_err(ToolError::internal)
}

/// Accepts `port` and Go's `Port` spellings alike.
fn camel_keys(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            let mut chars = k.chars();
            let key = match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => String::new(),
            };
            (key, v.clone())
        })
        .collect()
}

/// The `aggregator` keys that differ between `old` and `new` and that only the operator
/// changes, in `config.yaml`, on a gateway behind the front door.
fn operator_keys_changed(old: &AggregatorConfig, new: &AggregatorConfig) -> Vec<&'static str> {
    [
        ("aggregator.oauth", old.oauth != new.oauth),
        ("aggregator.serverApi", old.server_api != new.server_api),
        ("aggregator.allowedHosts", old.allowed_hosts != new.allowed_hosts),
        ("aggregator.allowedOrigins", old.allowed_origins != new.allowed_origins),
    ]
    .into_iter()
    .filter_map(|(key, changed)| changed.then_some(key))
    .collect()
}

pub(super) fn update_aggregator(registry: &Registry, args: &JsonObject, ctx: &CallContext) -> Result<Value, ToolError> {
    let Some(Value::Object(changes)) = args.get("aggregator") else {
        return Err(ToolError::invalid_arguments(
            "aggregator argument is required (an object)",
        ));
    };
    let mut config = registry.config();
    let mut current = match serde_json::to_value(&config.aggregator) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    current.extend(camel_keys(changes));
    let mut aggregator: AggregatorConfig = serde_path_to_error::deserialize(&Value::Object(current)).map_err(|e| {
        let path = e.path().to_string();
        ToolError::invalid_arguments(format!("invalid aggregator configuration: {path}: {}", e.into_inner()))
    })?;
    // A password answered `[redacted]` and sent back as it was stays the real one.
    aggregator.oauth = aggregator.oauth.restoring_redacted(&config.aggregator.oauth);
    let refused = operator_keys_changed(&config.aggregator, &aggregator);
    if config.aggregator.front_door() && !refused.is_empty() {
        return Err(ToolError::invalid_arguments(format!(
            "{} cannot be changed through the API of a gateway behind the front door (aggregator.oauth.server): \
             the operator changes it in config.yaml",
            refused.join(", ")
        )));
    }
    config.aggregator = aggregator;
    config.validate_config().map_err(|e| {
        ToolError::invalid_arguments(format!("invalid aggregator configuration: {}", e.to_lines().join("; ")))
    })?;
    registry.set_config(config.clone());
    tracing::info!(author = %Author::of(ctx), "aggregator configuration updated in memory");
    let mut answered = config.aggregator;
    answered.oauth = answered.oauth.redacted();
    Ok(json!({
        "aggregator": answered,
        "message": "aggregator configuration updated in memory; core_config_save persists it, and a new port or host takes effect at the next start",
    }))
}

pub(super) async fn save(
    registry: &Registry,
    config_dir: Option<&config_dir::ConfigStore>,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let Some(store) = config_dir else {
        return Err(ToolError::invalid_arguments(
            "this gateway has no config directory to save to",
        ));
    };
    let config = registry.config();
    let path = store.off_runtime(move |store| store.write_config(&config)).await?;
    tracing::info!(file = %path.display(), author = %Author::of(ctx), "configuration saved");
    Ok(json!({"saved": true, "file": store.relative(&path), "message": "configuration saved"}))
}

pub(super) async fn reload(
    registry: &std::sync::Arc<Registry>,
    config_dir: Option<&config_dir::ConfigStore>,
    ctx: &CallContext,
) -> Result<Value, ToolError> {
    let Some(store) = config_dir else {
        return Err(ToolError::invalid_arguments(
            "this gateway has no config directory to reload from",
        ));
    };
    let dir = store.dir().to_path_buf();
    let loaded = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || config_dir::load(&dir)
    })
    .await
    .map_err(ToolError::internal)?
    .map_err(|e| ToolError::internal(e.to_string()))?;
    for problem in &loaded.problems {
        tracing::warn!("{problem}");
    }
    tracing::info!(author = %Author::of(ctx), "configuration reloaded from the config directory");
    let problems: Vec<String> = loaded.problems.iter().map(|p| p.relative_to(&dir)).collect();
    let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.relative_to(&dir)).collect();
    registry.set_config(loaded.config.clone());
    let summary = registry.apply_snapshot(store.snapshot(&loaded));
    Ok(json!({
        "reloaded": true,
        "servers": summary,
        "problems": problems,
        "warnings": warnings,
        "message": "configuration reloaded from the config directory",
    }))
}
