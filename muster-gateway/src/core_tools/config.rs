//! The configuration tools: `core_config_get`, `_get_aggregator`, `_update_aggregator`, `_save`
//! and `_reload`. Updates change the running configuration (a new port or host takes effect at
//! the next start); `_save` persists it to `config.yaml` atomically; `_reload` reads the config
//! directory again, discarding unsaved changes, and applies its servers and workflows.

use muster_core::{JsonObject, ToolError, config::AggregatorConfig};
use serde_json::{Map, Value, json};

use crate::{config_dir, registry::Registry, sync};

pub(super) fn get(registry: &Registry) -> Result<Value, ToolError> {
    serde_json::to_value(registry.config()).map_err(ToolError::internal)
}

pub(super) fn get_aggregator(registry: &Registry) -> Result<Value, ToolError> {
    serde_json::to_value(registry.config().aggregator).map_err(ToolError::internal)
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

pub(super) fn update_aggregator(registry: &Registry, args: &JsonObject) -> Result<Value, ToolError> {
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
    let aggregator: AggregatorConfig = serde_path_to_error::deserialize(&Value::Object(current)).map_err(|e| {
        let path = e.path().to_string();
        ToolError::invalid_arguments(format!("invalid aggregator configuration: {path}: {}", e.into_inner()))
    })?;
    config.aggregator = aggregator;
    config.validate_config().map_err(|e| {
        ToolError::invalid_arguments(format!("invalid aggregator configuration: {}", e.to_lines().join("; ")))
    })?;
    registry.set_config(config.clone());
    Ok(json!({
        "aggregator": config.aggregator,
        "message": "aggregator configuration updated in memory; core_config_save persists it, and a new port or host takes effect at the next start",
    }))
}

pub(super) async fn save(registry: &Registry) -> Result<Value, ToolError> {
    let Some(store) = registry.store().cloned() else {
        return Err(ToolError::invalid_arguments(
            "this gateway has no config directory to save to",
        ));
    };
    let config = registry.config();
    let path = tokio::task::spawn_blocking(move || store.write_config(&config))
        .await
        .map_err(ToolError::internal)?
        .map_err(|e| ToolError::internal(e.to_string()))?;
    Ok(json!({"saved": true, "file": path.display().to_string(), "message": "configuration saved"}))
}

pub(super) async fn reload(registry: &std::sync::Arc<Registry>) -> Result<Value, ToolError> {
    let Some(dir) = registry.store().map(|s| s.dir().to_path_buf()) else {
        return Err(ToolError::invalid_arguments(
            "this gateway has no config directory to reload from",
        ));
    };
    let loaded = tokio::task::spawn_blocking(move || config_dir::load(&dir))
        .await
        .map_err(ToolError::internal)?
        .map_err(|e| ToolError::internal(e.to_string()))?;
    let problems: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    registry.set_config(loaded.config.clone());
    let summary = sync::apply(registry, &loaded);
    Ok(json!({
        "reloaded": true,
        "servers": summary,
        "problems": problems,
        "warnings": warnings,
        "message": "configuration reloaded from the config directory",
    }))
}
