//! The write side of the config directory: [`ConfigStore`] writes and deletes MCPServer and
//! Workflow definitions and `config.yaml`, in the layout [`config_dir::load`](crate::config_dir::load)
//! reads.
//!
//! Every write is atomic: the document is serialized first (a failure there touches no file),
//! written to a temporary file in the same folder, flushed to disk, renamed over the target,
//! and the folder is flushed to disk, so a crash leaves either the old file or the new one,
//! never a torn one. Folders are created as needed. `status` is never written: it is observed
//! state, not a definition.
//!
//! A name becomes a file name, so it is checked first ([`check_name`]): it must be one
//! printable path segment, so no name can reach outside the directory.
//!
//! The methods do blocking file I/O (and `fsync`); from async code call them inside
//! `tokio::task::spawn_blocking`.
//!
//! ```
//! use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};
//! use muster_gateway::store::ConfigStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = ConfigStore::new(dir.path());
//!
//! let spec = MCPServerSpec {
//!     server_type: Some(ServerType::StreamableHttp),
//!     url: Some("https://api.example.com/mcp".into()),
//!     ..MCPServerSpec::default()
//! };
//! let path = store.write_mcpserver(&MCPServer::new("api-tools", spec))?;
//! assert!(path.ends_with("mcpservers/api-tools.yaml"));
//!
//! let loaded = muster_gateway::config_dir::load(dir.path())?;
//! assert_eq!(loaded.servers[0].metadata.name, "api-tools");
//!
//! assert!(store.delete_mcpserver("api-tools")?);
//! assert!(store.write_mcpserver(&MCPServer::new("../escape", MCPServerSpec::default())).is_err());
//! # Ok(()) }
//! ```

use std::{
    io,
    path::{Path, PathBuf},
};

use muster_core::{
    config::MusterConfig,
    crd::{MCPServer, Workflow},
};
use serde::{Deserialize, Serialize};

use crate::config_dir::relative_path;

/// The folder of the MCPServer definitions.
pub const MCPSERVERS_DIR: &str = "mcpservers";
/// The folder of the Workflow definitions.
pub const WORKFLOWS_DIR: &str = "workflows";
/// The file of the gateway configuration.
pub const CONFIG_FILE: &str = "config.yaml";

/// The most characters of a name (the Kubernetes limit of `metadata.name`).
pub const MAX_NAME_LEN: usize = 253;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The name cannot be a file name.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The document could not be serialized; no file was touched.
    #[error("cannot serialize {what}: {message}")]
    Serialize {
        /// What was being written, e.g. `MCPServer "git"`.
        what: String,
        /// The serializer's message.
        message: String,
    },
    /// The file a new definition would be written to defines something else.
    #[error("{} already defines another {kind}; rename that file before writing {kind} {name:?}", path.display())]
    Occupied {
        /// The file.
        path: PathBuf,
        /// What kind of definition, e.g. `Workflow`.
        kind: &'static str,
        /// The definition that was to be written.
        name: String,
    },
    /// A file operation failed; the target file, if any, is unchanged.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `cannot write`.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// Checks that `name` can be a definition's file name: not empty, at most
/// [`MAX_NAME_LEN`] characters, no `/` or `\`, no control character (NUL included), not
/// starting with `.` (so not `.` or `..`, and never one of the store's temporary files) and
/// no `:` (a drive on Windows).
///
/// This is Go muster's `ValidateResourceName` plus the leading dot and the length: it accepts
/// names such as `special-chars-workflow_123` that filesystem mode allows and Kubernetes would
/// refuse.
pub fn check_name(name: &str) -> Result<(), StoreError> {
    let invalid = |reason| {
        Err(StoreError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("must not be empty");
    }
    if name.chars().count() > MAX_NAME_LEN {
        return invalid("must be at most 253 characters");
    }
    if name.starts_with('.') {
        return invalid("must not start with '.'");
    }
    if name.contains(['/', '\\']) {
        return invalid("must not contain path separators");
    }
    if name.contains(':') {
        return invalid("must not contain ':'");
    }
    if name.chars().any(char::is_control) {
        return invalid("must not contain control characters");
    }
    Ok(())
}

impl StoreError {
    /// The error as an answer may show it: files named relative to the config directory `dir`
    /// ([`relative_path`]), so the host's layout stays in the gateway's own log.
    pub fn relative_to(&self, dir: &Path) -> String {
        match self {
            Self::Occupied { path, kind, name } => format!(
                "{} already defines another {kind}; rename that file before writing {kind} {name:?}",
                relative_path(dir, path)
            ),
            Self::Io { action, path, source } => {
                // An io::Error names no path of its own; its text is the OS's reason.
                format!("{action} {}: {source}", relative_path(dir, path))
            }
            other => other.to_string(),
        }
    }
}

/// Writes and deletes the definitions of a config directory.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    dir: PathBuf,
}

impl ConfigStore {
    /// The store of the config directory `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The config directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `path` as answers show it: relative to the config directory ([`relative_path`]).
    pub fn relative(&self, path: &Path) -> String {
        relative_path(&self.dir, path)
    }

    /// Writes `server` (without its status) and returns the file: the file that already
    /// defines the server's name if there is one (`<name>.yml`, or any file whose
    /// `metadata.name` it is), else `mcpservers/<name>.yaml`.
    pub fn write_mcpserver(&self, server: &MCPServer) -> Result<PathBuf, StoreError> {
        let name = &server.metadata.name;
        check_name(name)?;
        let mut document = server.clone();
        document.status = None;
        let folder = self.dir.join(MCPSERVERS_DIR);
        let target = self.target(&folder, name, "MCPServer")?;
        write_document(&target, &document, &format!("MCPServer {name:?}"))?;
        Ok(target)
    }

    /// Deletes the MCPServer `name`: every file in `mcpservers/` that defines it. `false` when
    /// none did.
    pub fn delete_mcpserver(&self, name: &str) -> Result<bool, StoreError> {
        self.delete(MCPSERVERS_DIR, name)
    }

    /// Writes `workflow` (without its status), like [`ConfigStore::write_mcpserver`], to
    /// `workflows/`.
    pub fn write_workflow(&self, workflow: &Workflow) -> Result<PathBuf, StoreError> {
        let name = &workflow.metadata.name;
        check_name(name)?;
        let mut document = workflow.clone();
        document.status = None;
        let folder = self.dir.join(WORKFLOWS_DIR);
        let target = self.target(&folder, name, "Workflow")?;
        write_document(&target, &document, &format!("Workflow {name:?}"))?;
        Ok(target)
    }

    /// Deletes the Workflow `name`: every file in `workflows/` that defines it. `false` when
    /// none did.
    pub fn delete_workflow(&self, name: &str) -> Result<bool, StoreError> {
        self.delete(WORKFLOWS_DIR, name)
    }

    /// Writes `config` to `config.yaml`.
    pub fn write_config(&self, config: &MusterConfig) -> Result<PathBuf, StoreError> {
        let target = self.dir.join(CONFIG_FILE);
        write_document(&target, config, "the configuration")?;
        Ok(target)
    }

    /// Where a definition named `name` goes: the first file of `folder` that defines it,
    /// else `<name>.yaml`, unless that file exists and defines something else (then the write
    /// is refused rather than replacing another definition).
    fn target(&self, folder: &Path, name: &str, kind: &'static str) -> Result<PathBuf, StoreError> {
        if let Some(file) = defining_files(folder, name)?.into_iter().next() {
            return Ok(file);
        }
        let fresh = folder.join(format!("{name}.yaml"));
        if fresh.exists() {
            return Err(StoreError::Occupied {
                path: fresh,
                kind,
                name: name.to_owned(),
            });
        }
        Ok(fresh)
    }

    fn delete(&self, folder: &str, name: &str) -> Result<bool, StoreError> {
        check_name(name)?;
        let folder = self.dir.join(folder);
        let files = defining_files(&folder, name)?;
        for file in &files {
            std::fs::remove_file(file).map_err(|source| StoreError::Io {
                action: "cannot delete",
                path: file.clone(),
                source,
            })?;
        }
        if !files.is_empty() {
            sync_dir(&folder)?;
        }
        Ok(!files.is_empty())
    }
}

/// The YAML files of `folder` that define `name`: `<name>.yaml` and `<name>.yml` first, then
/// any other whose `metadata.name` is `name` (the loader goes by that, not by file name).
fn defining_files(folder: &Path, name: &str) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StoreError::Io {
                action: "cannot list",
                path: folder.to_owned(),
                source,
            });
        }
    };
    let mut yaml: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    yaml.sort();
    let by_file_name = [folder.join(format!("{name}.yaml")), folder.join(format!("{name}.yml"))];
    // A file named after `name` counts unless it names something else (a file that does not
    // parse, or names nothing, is this definition's broken file).
    let mut found: Vec<PathBuf> = by_file_name
        .iter()
        .filter(|p| {
            yaml.contains(p)
                && defined_name(p)
                    .filter(|defined| !defined.is_empty())
                    .is_none_or(|defined| defined == name)
        })
        .cloned()
        .collect();
    found.extend(
        yaml.into_iter()
            .filter(|p| !by_file_name.contains(p) && defined_name(p).as_deref() == Some(name)),
    );
    Ok(found)
}

/// The `metadata.name` a YAML file defines, when it parses.
fn defined_name(file: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    let text = crate::config_dir::read_small_file(file).ok()?;
    serde_saphyr::from_str::<Named>(&text).ok().map(|n| n.metadata.name)
}

/// Serializes `document` as YAML and replaces `target` with it atomically.
fn write_document<T: Serialize>(target: &Path, document: &T, what: &str) -> Result<(), StoreError> {
    let yaml = serde_saphyr::to_string(document).map_err(|e| StoreError::Serialize {
        what: what.to_owned(),
        message: e.to_string(),
    })?;
    write_atomic(target, yaml.as_bytes())
}

fn write_atomic(target: &Path, contents: &[u8]) -> Result<(), StoreError> {
    muster_core::fs::write_atomic(target, contents).map_err(StoreError::from)
}

fn sync_dir(folder: &Path) -> Result<(), StoreError> {
    muster_core::fs::sync_dir(folder).map_err(StoreError::from)
}

impl From<muster_core::fs::WriteError> for StoreError {
    fn from(e: muster_core::fs::WriteError) -> Self {
        StoreError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use muster_core::{
        config::AggregatorConfig,
        crd::{MCPServerSpec, MCPServerStatus, ServerType, WorkflowSpec, WorkflowStatus, WorkflowStep},
    };

    use super::*;
    use crate::config_dir::load;

    fn stdio(name: &str) -> MCPServer {
        let spec = MCPServerSpec {
            server_type: Some(ServerType::Stdio),
            command: Some("npx".into()),
            args: vec!["-y".into(), "@modelcontextprotocol/server-git".into()],
            // Values YAML would read as other types unless quoted.
            env: BTreeMap::from([
                ("FLAG".into(), "true".into()),
                ("COUNT".into(), "0123".into()),
                ("EMPTY".into(), String::new()),
                ("NULLISH".into(), "null".into()),
                ("MULTI".into(), "line one\nline two: yes".into()),
            ]),
            description: Some("Git: the tools # not a comment".into()),
            ..MCPServerSpec::default()
        };
        MCPServer::new(name, spec)
    }

    fn workflow(name: &str) -> Workflow {
        let step: WorkflowStep = serde_json::from_value(serde_json::json!({
            "id": "list",
            "tool": "core_service_list",
            "args": {"filter": "{{ .input.filter }}", "n": 3}
        }))
        .expect("a step");
        let spec = WorkflowSpec {
            description: Some("Lists services".into()),
            steps: vec![step],
            ..WorkflowSpec::default()
        };
        Workflow::new(name, spec)
    }

    fn temp_files(folder: &Path) -> Vec<String> {
        std::fs::read_dir(folder)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains(".tmp-"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn written_definitions_load_back_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let server = stdio("git");
        let flow = workflow("special-chars-workflow_123");
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_port(9123));
        store.write_mcpserver(&server).expect("written");
        store.write_workflow(&flow).expect("written");
        store.write_config(&config).expect("written");

        let loaded = load(dir.path()).expect("loads");
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.servers, vec![server]);
        assert_eq!(loaded.workflows, vec![flow]);
        assert_eq!(loaded.config, config);
        assert!(temp_files(&dir.path().join(MCPSERVERS_DIR)).is_empty());
        assert!(temp_files(dir.path()).is_empty());
    }

    #[test]
    fn a_file_named_after_one_definition_but_defining_another_is_never_replaced_or_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let folder = dir.path().join(WORKFLOWS_DIR);
        std::fs::create_dir_all(&folder).expect("folder");
        let other = folder.join("bar.yaml");
        write_document(&other, &workflow("wf"), "Workflow").expect("written");
        let before = std::fs::read_to_string(&other).expect("readable");

        let refused = store.write_workflow(&workflow("bar")).expect_err("refused");
        assert!(matches!(refused, StoreError::Occupied { .. }), "{refused}");
        assert!(!store.delete_workflow("bar").expect("deletes"), "nothing defines bar");
        assert_eq!(std::fs::read_to_string(&other).expect("readable"), before);
        // The definition it does hold is found by its name.
        assert_eq!(store.write_workflow(&workflow("wf")).expect("written"), other);
    }

    #[test]
    fn status_is_never_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let mut server = stdio("git");
        server.status = Some(MCPServerStatus::default());
        let mut flow = workflow("wf");
        flow.status = Some(WorkflowStatus::default());
        let server_file = store.write_mcpserver(&server).expect("written");
        let flow_file = store.write_workflow(&flow).expect("written");
        for file in [server_file, flow_file] {
            let text = std::fs::read_to_string(&file).expect("readable");
            assert!(!text.contains("status:"), "{text}");
        }
    }

    #[test]
    fn rewriting_replaces_the_file_and_delete_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        store.write_mcpserver(&stdio("git")).expect("written");
        let mut changed = stdio("git");
        changed.spec.description = Some("changed".into());
        store.write_mcpserver(&changed).expect("rewritten");
        let loaded = load(dir.path()).expect("loads");
        assert_eq!(loaded.servers, vec![changed]);

        assert!(store.delete_mcpserver("git").expect("deleted"));
        assert!(!store.delete_mcpserver("git").expect("nothing to delete"));
        assert!(!store.delete_workflow("never").expect("nothing to delete"));
        assert!(load(dir.path()).expect("loads").servers.is_empty());
    }

    #[test]
    fn a_definition_in_a_differently_named_file_is_rewritten_and_deleted_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let folder = dir.path().join(MCPSERVERS_DIR);
        std::fs::create_dir_all(&folder).expect("mkdir");
        let legacy = folder.join("my-git-server.yml");
        std::fs::write(&legacy, serde_saphyr::to_string(&stdio("git")).expect("yaml")).expect("write");

        let mut changed = stdio("git");
        changed.spec.description = Some("changed".into());
        assert_eq!(store.write_mcpserver(&changed).expect("written"), legacy);
        let loaded = load(dir.path()).expect("loads");
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.servers, vec![changed]);

        assert!(store.delete_mcpserver("git").expect("deleted"));
        assert!(!legacy.exists());
    }

    #[test]
    fn names_that_could_escape_the_directory_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path().join("config"));
        for name in [
            "",
            ".",
            "..",
            "../evil",
            "a/b",
            "/etc/passwd",
            "a\\b",
            "a\0b",
            "line\nbreak",
            ".hidden",
            "C:evil",
        ] {
            assert!(
                matches!(store.write_mcpserver(&stdio(name)), Err(StoreError::InvalidName { .. })),
                "{name:?}"
            );
            assert!(
                matches!(
                    store.write_workflow(&workflow(name)),
                    Err(StoreError::InvalidName { .. })
                ),
                "{name:?}"
            );
            assert!(
                matches!(store.delete_mcpserver(name), Err(StoreError::InvalidName { .. })),
                "{name:?}"
            );
            assert!(
                matches!(store.delete_workflow(name), Err(StoreError::InvalidName { .. })),
                "{name:?}"
            );
        }
        assert!(check_name(&"a".repeat(253)).is_ok());
        assert!(check_name(&"a".repeat(254)).is_err());
        assert!(check_name("special-chars-workflow_123").is_ok());
        // Nothing was created anywhere.
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }

    #[test]
    fn a_document_that_cannot_be_serialized_leaves_the_old_file_intact() {
        struct Unserializable;
        impl Serialize for Unserializable {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("refuses to serialize"))
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let file = store.write_mcpserver(&stdio("git")).expect("written");
        let before = std::fs::read(&file).expect("readable");

        let err = write_document(&file, &Unserializable, "a test document").expect_err("refused");
        assert!(err.to_string().contains("refuses to serialize"), "{err}");
        assert_eq!(std::fs::read(&file).expect("readable"), before);
        assert!(temp_files(file.parent().expect("a folder")).is_empty());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_intact_and_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let file = store.write_mcpserver(&stdio("git")).expect("written");
        let before = std::fs::read(&file).expect("readable");
        let folder = file.parent().expect("a folder").to_owned();

        // A read-only folder refuses the temporary file, unless we are root.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).expect("chmod");
            let probe = folder.join("probe");
            let root = std::fs::write(&probe, b"").is_ok();
            let _ = std::fs::remove_file(&probe);
            if !root {
                let mut changed = stdio("git");
                changed.spec.description = Some("changed".into());
                let err = store.write_mcpserver(&changed).expect_err("read-only folder");
                assert!(matches!(err, StoreError::Io { .. }), "{err}");
                assert_eq!(std::fs::read(&file).expect("readable"), before);
            }
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }

        // A rename that fails (the target became a non-empty folder) removes the temporary file.
        let blocked = folder.join("blocked.yaml");
        std::fs::create_dir_all(blocked.join("inside")).expect("mkdir");
        let err = write_atomic(&blocked, b"kind: MCPServer\n").expect_err("cannot replace a folder");
        assert!(err.to_string().starts_with("cannot replace"), "{err}");
        assert!(blocked.join("inside").is_dir());
        assert!(temp_files(&folder).is_empty());
        assert_eq!(std::fs::read(&file).expect("readable"), before);
    }

    #[test]
    fn replacing_a_file_keeps_its_permissions() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().expect("tempdir");
            let store = ConfigStore::new(dir.path());
            let file = store.write_config(&MusterConfig::default()).expect("written");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            store.write_config(&MusterConfig::default()).expect("rewritten");
            let mode = std::fs::metadata(&file).expect("metadata").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
