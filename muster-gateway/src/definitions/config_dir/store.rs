//! The write side of the config directory: [`ConfigStore`] writes and deletes MCPServer and
//! Workflow definitions and `config.yaml`, in the layout [`load`](super::load) reads, and is
//! the directory's [`DefinitionStore`].
//!
//! Every write is atomic: the document is serialized first (a failure there touches no file),
//! written to a temporary file in the same folder, flushed to disk, renamed over the target,
//! and the folder is flushed to disk, so a crash leaves either the old file or the new one,
//! never a torn one. Folders are created as needed. `status` is never written: it is observed
//! state, not a definition.
//!
//! A name becomes a file name, so it is checked first ([`check_name`]): it must be one
//! printable path segment, so no name can reach outside the directory. A definition goes to
//! the file that defines it already, whatever that file's name; a file named after it that
//! defines another definition is never written over or deleted ([`StoreError::Occupied`],
//! and [`StoreError::DefinesAnother`] for a file that defined another one when the directory
//! was last read and no longer loads).
//!
//! The methods do blocking file I/O (and `fsync`); from async code call them inside
//! `tokio::task::spawn_blocking`, as the [`DefinitionStore`] methods do.
//!
//! ```
//! use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};
//! use muster_gateway::definitions::config_dir::{self, ConfigStore};
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
//! let loaded = config_dir::load(dir.path())?;
//! assert_eq!(loaded.servers[0].metadata.name, "api-tools");
//!
//! assert!(store.remove_mcpserver("api-tools")?);
//! assert!(store.write_mcpserver(&MCPServer::new("../escape", MCPServerSpec::default())).is_err());
//! # Ok(()) }
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use futures::future::BoxFuture;
use muster_core::{
    CallContext,
    config::MusterConfig,
    crd::{MCPServer, Workflow},
};
use serde::{Deserialize, Serialize};

use super::{
    CONFIG_FILE, LoadedConfig, MCPSERVERS_DIR, WORKFLOWS_DIR,
    read::{read_small_file, yaml_files},
    relative_path,
};
use crate::definitions::{DefinitionSnapshot, DefinitionStore, DefinitionStoreError, Origin, Sourced, Stored};

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
    /// The file named after the definition defined another one when the directory was last
    /// read (it may not load now): writing or deleting by its name would lose that one.
    #[error("file {} defines {kind} {defined}, not {name}; rename it before changing {kind} {name}", path.display())]
    DefinesAnother {
        /// The file.
        path: PathBuf,
        /// What kind of definition, in prose: `MCP server` or `workflow`.
        kind: &'static str,
        /// The definition the file defined.
        defined: String,
        /// The definition that was to be written or deleted.
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
            Self::DefinesAnother {
                path,
                kind,
                defined,
                name,
            } => format!(
                "file {} defines {kind} {defined}, not {name}; rename it before changing {kind} {name}",
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

/// The two kinds of definition, and where each goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Server,
    Workflow,
}

impl Kind {
    /// Its folder of the config directory.
    fn folder(self) -> &'static str {
        match self {
            Self::Server => MCPSERVERS_DIR,
            Self::Workflow => WORKFLOWS_DIR,
        }
    }

    /// Its `kind`, as documents and [`StoreError::Occupied`] name it.
    fn resource(self) -> &'static str {
        match self {
            Self::Server => MCPServer::KIND,
            Self::Workflow => Workflow::KIND,
        }
    }

    /// Its name in prose, as the tools' messages say it.
    fn prose(self) -> &'static str {
        match self {
            Self::Server => "MCP server",
            Self::Workflow => "workflow",
        }
    }
}

/// Which file of the directory defined which definition when it was last read: the files that
/// loaded, and the files that no longer load but still count for the definition they defined
/// last (which keeps that definition in force).
#[derive(Debug, Clone, Default)]
struct Defined {
    servers: BTreeMap<PathBuf, String>,
    workflows: BTreeMap<PathBuf, String>,
}

impl Defined {
    fn of(&self, kind: Kind) -> &BTreeMap<PathBuf, String> {
        match kind {
            Kind::Server => &self.servers,
            Kind::Workflow => &self.workflows,
        }
    }
}

/// The config directory as a store: writes and deletes its definitions and `config.yaml`, and
/// makes the [`DefinitionSnapshot`] of what [`load`](super::load) read from it. Clones share
/// what the last snapshot recorded of which file defines what.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    dir: PathBuf,
    defined: Arc<Mutex<Defined>>,
}

impl ConfigStore {
    /// The store of the config directory `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            defined: Arc::default(),
        }
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
    /// `metadata.name` it is), else `mcpservers/<name>.yaml`. Refused when the file named after
    /// it defined another server when the directory was last read, even if it no longer loads.
    pub fn write_mcpserver(&self, server: &MCPServer) -> Result<PathBuf, StoreError> {
        let mut document = server.clone();
        document.status = None;
        self.write(Kind::Server, &server.metadata.name, &document)
    }

    /// Removes the MCPServer `name`: every file in `mcpservers/` that defines it. `false` when
    /// none did.
    pub fn remove_mcpserver(&self, name: &str) -> Result<bool, StoreError> {
        self.delete(Kind::Server, name)
    }

    /// Writes `workflow` (without its status), like [`ConfigStore::write_mcpserver`], to
    /// `workflows/`.
    pub fn write_workflow(&self, workflow: &Workflow) -> Result<PathBuf, StoreError> {
        let mut document = workflow.clone();
        document.status = None;
        self.write(Kind::Workflow, &workflow.metadata.name, &document)
    }

    /// Removes the Workflow `name`: every file in `workflows/` that defines it. `false` when
    /// none did.
    pub fn remove_workflow(&self, name: &str) -> Result<bool, StoreError> {
        self.delete(Kind::Workflow, name)
    }

    /// Writes `config` to `config.yaml`.
    pub fn write_config(&self, config: &MusterConfig) -> Result<PathBuf, StoreError> {
        let target = self.dir.join(CONFIG_FILE);
        write_document(&target, config, "the configuration")?;
        Ok(target)
    }

    /// What `loaded` (read from this directory by [`load`](super::load)) holds, to apply with
    /// `Registry::apply_snapshot`: every definition
    /// that loaded, with its file and its dropped fields, and as kept the definitions whose file
    /// no longer loads. Records which file defines what, for the next snapshot and the writes.
    pub fn snapshot(&self, loaded: &LoadedConfig) -> DefinitionSnapshot {
        let unreadable: BTreeSet<&Path> = loaded.problems.iter().map(|p| p.file.as_path()).collect();
        let mut snapshot = DefinitionSnapshot::new(Origin::File(loaded.path.clone()));
        {
            let mut defined = self.defined.lock().unwrap_or_else(PoisonError::into_inner);
            snapshot.kept_servers = still_defined(&defined.servers, &unreadable);
            snapshot.kept_workflows = still_defined(&defined.workflows, &unreadable);
            defined.servers = recorded(&loaded.server_files, &defined.servers, &snapshot.kept_servers);
            defined.workflows = recorded(&loaded.workflow_files, &defined.workflows, &snapshot.kept_workflows);
        }
        let sourced = |kind: &str, name: &str, files: &BTreeMap<PathBuf, String>| {
            let file = files.iter().find(|(_, defined)| *defined == name).map(|(file, _)| file);
            let dropped = loaded
                .warnings
                .iter()
                .filter(|w| w.kind == kind && w.name == name)
                .map(|w| w.warning.clone())
                .collect();
            (Origin::File(file.unwrap_or(&loaded.path).clone()), dropped)
        };
        for server in &loaded.servers {
            let (origin, dropped) = sourced(MCPServer::KIND, &server.metadata.name, &loaded.server_files);
            snapshot = snapshot.with_server(Sourced::new(server.clone(), origin).with_dropped_fields(dropped));
        }
        for workflow in &loaded.workflows {
            let (origin, dropped) = sourced(Workflow::KIND, &workflow.metadata.name, &loaded.workflow_files);
            snapshot = snapshot.with_workflow(Sourced::new(workflow.clone(), origin).with_dropped_fields(dropped));
        }
        snapshot
    }

    /// Writes `document`, the definition `name` of `kind`, and returns its file.
    fn write<T: Serialize>(&self, kind: Kind, name: &str, document: &T) -> Result<PathBuf, StoreError> {
        check_name(name)?;
        self.refuse_another_definitions_file(kind, name)?;
        let target = self.target(&self.dir.join(kind.folder()), name, kind.resource())?;
        write_document(&target, document, &format!("{} {name:?}", kind.resource()))?;
        Ok(target)
    }

    /// Refuses to touch the definition `name` of `kind` when the file named after it defined
    /// another one when the directory was last read. The write would go to that file by its
    /// name (a file that does not parse counts as the broken file of the definition it is
    /// named after), and replace or delete the other definition's last good file.
    fn refuse_another_definitions_file(&self, kind: Kind, name: &str) -> Result<(), StoreError> {
        let defined = self.defined.lock().unwrap_or_else(PoisonError::into_inner);
        let found = defined.of(kind).iter().find(|(file, defined)| {
            *defined != name
                && file
                    .parent()
                    .and_then(|p| p.file_name())
                    .is_some_and(|d| d == kind.folder())
                && file.file_stem().is_some_and(|s| s == name)
                && file.extension().is_some_and(|x| x == "yaml" || x == "yml")
        });
        match found {
            Some((file, defined)) => Err(StoreError::DefinesAnother {
                path: file.clone(),
                kind: kind.prose(),
                defined: defined.clone(),
                name: name.to_owned(),
            }),
            None => Ok(()),
        }
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

    fn delete(&self, kind: Kind, name: &str) -> Result<bool, StoreError> {
        check_name(name)?;
        self.refuse_another_definitions_file(kind, name)?;
        let folder = self.dir.join(kind.folder());
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

    /// Runs `op` off the async runtime (its writes sync files and folders); a failure is told
    /// with files named relative to the directory, and logged whole.
    pub(crate) async fn off_runtime<T: Send + 'static>(
        &self,
        op: impl FnOnce(&ConfigStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, DefinitionStoreError> {
        let store = self.clone();
        let done = tokio::task::spawn_blocking(move || op(&store))
            .await
            .map_err(|e| DefinitionStoreError::failed(e.to_string(), e))?;
        done.map_err(|error| match error {
            StoreError::DefinesAnother { .. } => DefinitionStoreError::refused(error.relative_to(&self.dir)),
            error => {
                tracing::warn!(%error, "writing the config directory failed");
                DefinitionStoreError::failed(error.relative_to(&self.dir), error)
            }
        })
    }
}

/// The definitions of `files` whose file is one of `unreadable`.
fn still_defined(files: &BTreeMap<PathBuf, String>, unreadable: &BTreeSet<&Path>) -> BTreeSet<String> {
    files
        .iter()
        .filter(|(file, _)| unreadable.contains(file.as_path()))
        .map(|(_, name)| name.clone())
        .collect()
}

/// The record of a new reading: the files that `loaded`, and the files `previous` recorded for
/// the definitions `kept`.
fn recorded(
    loaded: &BTreeMap<PathBuf, String>,
    previous: &BTreeMap<PathBuf, String>,
    kept: &BTreeSet<String>,
) -> BTreeMap<PathBuf, String> {
    let mut files = loaded.clone();
    for (file, name) in previous {
        if kept.contains(name) {
            files.insert(file.clone(), name.clone());
        }
    }
    files
}

impl ConfigStore {
    /// Writes `definition` (a `kind`) with `write` off the runtime, and answers it with its
    /// file.
    async fn put<T: Send + 'static>(
        &self,
        definition: T,
        kind: Kind,
        write: fn(&ConfigStore, &T) -> Result<PathBuf, StoreError>,
    ) -> Result<Stored<T>, DefinitionStoreError> {
        let (definition, path) = self
            .off_runtime(move |store| write(store, &definition).map(|path| (definition, path)))
            .await?;
        tracing::info!(file = %path.display(), "{} definition written", kind.resource());
        Ok(Stored::new(definition).with_file(self.relative(&path)))
    }

    /// Removes the definition `name` with `remove` off the runtime.
    async fn remove(
        &self,
        name: &str,
        remove: fn(&ConfigStore, &str) -> Result<bool, StoreError>,
    ) -> Result<(), DefinitionStoreError> {
        let name = name.to_owned();
        self.off_runtime(move |store| remove(store, &name)).await.map(drop)
    }
}

/// The config directory's files, written on behalf of any caller (the core tools log who).
impl DefinitionStore for ConfigStore {
    fn put_mcpserver<'a>(
        &'a self,
        server: MCPServer,
        _caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<MCPServer>, DefinitionStoreError>> {
        Box::pin(self.put(server, Kind::Server, Self::write_mcpserver))
    }

    fn delete_mcpserver<'a>(
        &'a self,
        name: &'a str,
        _caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        Box::pin(self.remove(name, Self::remove_mcpserver))
    }

    fn put_workflow<'a>(
        &'a self,
        workflow: Workflow,
        _caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<Workflow>, DefinitionStoreError>> {
        Box::pin(self.put(workflow, Kind::Workflow, Self::write_workflow))
    }

    fn delete_workflow<'a>(
        &'a self,
        name: &'a str,
        _caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        Box::pin(self.remove(name, Self::remove_workflow))
    }
}

/// The YAML files of `folder` that define `name`: `<name>.yaml` and `<name>.yml` first, then
/// any other whose `metadata.name` is `name` (the loader goes by that, not by file name).
fn defining_files(folder: &Path, name: &str) -> Result<Vec<PathBuf>, StoreError> {
    let yaml = yaml_files(folder).map_err(|source| StoreError::Io {
        action: "cannot list",
        path: folder.to_owned(),
        source,
    })?;
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
    let text = read_small_file(file).ok()?;
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
mod tests;
