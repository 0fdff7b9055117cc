//! Definition loading from YAML: the resource documents and `config.yaml`.
//!
//! The input is one YAML document. In memory, it is parsed the way every muster reader does
//! (serde-saphyr to a JSON value, then typed) as an [`MCPServer`], a [`Workflow`] and a
//! [`WorkflowExecution`], and as a [`MusterConfig`]; each that types is validated
//! ([`MCPServer::validate`], [`CompiledWorkflow::compile`], which validates and compiles the
//! templates and jq programs, [`MusterConfig::validate_config`] and the toolset presets), and
//! [`deprecated_spellings`] and [`unknown_keys`] read the raw document. Typed YAML
//! deserialization (serde-saphyr straight into the type) runs too.
//!
//! Then the real loader: the document is written as `config.yaml`, `mcpservers/fuzz.yaml` and
//! `workflows/fuzz.yaml` of a config directory on tmpfs, and [`config_dir::load`] reads it.
//! Whatever it accepts is written back with the gateway's [`ConfigStore`] (as
//! `core_mcpserver_update`, `core_workflow_update` and `core_config_save` do) into a second
//! directory and loaded again: the definition must come back unchanged.

#![no_main]

use std::{
    path::{Path, PathBuf},
    sync::LazyLock,
};

use libfuzzer_sys::fuzz_target;
use muster_catalog::toolset::Presets;
use muster_core::{
    config::{MusterConfig, unknown_keys},
    crd::{MCPServer, Workflow, WorkflowExecution, deprecated_spellings},
};
use muster_gateway::definitions::config_dir::{self, ConfigStore, LoadedConfig, MCPSERVERS_DIR, WORKFLOWS_DIR};
use muster_workflow::engine::CompiledWorkflow;
use serde_json::Value;

/// A scratch directory on tmpfs when there is one (the loader reads files; the store writes
/// them atomically, with fsync).
static SCRATCH: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("a scratch directory on /dev/shm")
    } else {
        tempfile::tempdir().expect("a scratch directory")
    }
});

/// An empty directory `name` under the scratch directory.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = SCRATCH.path().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(MCPSERVERS_DIR)).expect("create mcpservers/");
    std::fs::create_dir_all(dir.join(WORKFLOWS_DIR)).expect("create workflows/");
    dir
}

fn in_memory(text: &str) {
    let _ = serde_saphyr::from_str::<MCPServer>(text).map(|s| s.validate());
    let _ = serde_saphyr::from_str::<Workflow>(text).map(|w| w.validate());
    let _ = serde_saphyr::from_str::<WorkflowExecution>(text);
    let _ = serde_saphyr::from_str::<MusterConfig>(text).map(|c| c.validate_config());

    let Ok(raw) = serde_saphyr::from_str::<Value>(text) else {
        return;
    };
    let _ = deprecated_spellings(&raw);
    let _ = unknown_keys(&raw);
    if let Ok(server) = serde_json::from_value::<MCPServer>(raw.clone()) {
        let _ = server.validate();
    }
    if let Ok(workflow) = serde_json::from_value::<Workflow>(raw.clone())
        && let Ok(compiled) = CompiledWorkflow::compile(workflow)
    {
        let _ = muster_workflow::referenced_tools(compiled.workflow());
    }
    let _ = serde_json::from_value::<WorkflowExecution>(raw.clone());
    if let Ok(config) = serde_json::from_value::<MusterConfig>(raw)
        && config.validate_config().is_ok()
    {
        let _ = Presets::from_config(&config.toolset_presets);
    }
}

fn load(dir: &Path) -> LoadedConfig {
    config_dir::load(dir).expect("a readable config directory loads")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    in_memory(text);

    let dir = fresh_dir("load");
    for file in [
        dir.join("config.yaml"),
        dir.join(MCPSERVERS_DIR).join("fuzz.yaml"),
        dir.join(WORKFLOWS_DIR).join("fuzz.yaml"),
    ] {
        std::fs::write(file, data).expect("write the document");
    }
    let loaded = load(&dir);
    assert!(loaded.servers.len() <= 1 && loaded.workflows.len() <= 1);

    // What the loader accepted, written back by the store, loads again unchanged.
    let again = fresh_dir("again");
    let store = ConfigStore::new(&again);
    let mut written = (false, false, false);
    if let Some(server) = loaded.servers.first() {
        written.0 = store.write_mcpserver(server).is_ok();
    }
    if let Some(workflow) = loaded.workflows.first() {
        written.1 = store.write_workflow(workflow).is_ok();
    }
    if loaded.config != MusterConfig::default() {
        written.2 = store.write_config(&loaded.config).is_ok();
    }
    if written == (false, false, false) {
        return;
    }
    let reloaded = load(&again);
    if written.0 {
        assert_eq!(
            reloaded.servers, loaded.servers,
            "the MCPServer changed on a round trip"
        );
    }
    if written.1 {
        assert_eq!(
            reloaded.workflows, loaded.workflows,
            "the Workflow changed on a round trip"
        );
    }
    if written.2 {
        assert_eq!(reloaded.config, loaded.config, "config.yaml changed on a round trip");
    }
});
