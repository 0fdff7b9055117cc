//! The write seam: [`DefinitionStore`], where the definition writes of the core tools go.
//!
//! `core_mcpserver_create`, `_update` and `_delete` and `core_workflow_create`, `_update` and
//! `_delete` check a definition, write it to the registry's store (when it has one), and only
//! then apply to the registry the definition the store answers (a store may add to it: a
//! namespace, defaults). A store that refuses or fails leaves the registry as it was, and the
//! tool answers with the store's error: [`DefinitionStoreError::Refused`] as invalid arguments,
//! [`DefinitionStoreError::Failed`] as an internal error.
//!
//! Each write carries the [`CallContext`] of the call that asked for it: the principal the
//! front door authenticated and, in its extensions, the bearer token it validated, so that a
//! store can write as the caller (Kubernetes impersonation or the caller's own token) and the
//! system behind it can decide and record who did it. The config directory's
//! [`ConfigStore`](super::config_dir::ConfigStore) writes files and needs neither.
//!
//! A store kept in memory, used by `core_mcpserver_create` on a registry with no gateway:
//!
//! ```
//! use std::{collections::BTreeMap, sync::{Arc, Mutex}};
//!
//! use futures::future::{BoxFuture, FutureExt};
//! use muster_core::{CallContext, Principal, ToolCall, crd::{MCPServer, Workflow}};
//! use muster_gateway::{
//!     core_tools::CoreTools,
//!     definitions::{DefinitionStore, DefinitionStoreError, Stored},
//!     registry::{Registry, RegistryOptions},
//! };
//! use tower::ServiceExt;
//!
//! /// Each definition's YAML and who wrote it, by kind and name.
//! #[derive(Debug, Default)]
//! struct InMemory {
//!     written: Mutex<BTreeMap<(&'static str, String), (String, String)>>,
//! }
//!
//! impl InMemory {
//!     fn put(&self, kind: &'static str, name: &str, yaml: String, caller: &CallContext) {
//!         let who = caller.principal.as_ref().map_or("anonymous", |p| p.subject.as_str());
//!         let mut written = self.written.lock().expect("not poisoned");
//!         written.insert((kind, name.to_owned()), (yaml, who.to_owned()));
//!     }
//!
//!     fn delete(&self, kind: &'static str, name: &str) {
//!         self.written.lock().expect("not poisoned").remove(&(kind, name.to_owned()));
//!     }
//! }
//!
//! fn yaml<T: serde::Serialize>(definition: &T) -> Result<String, DefinitionStoreError> {
//!     serde_json::to_string(definition).map_err(|e| DefinitionStoreError::failed(e.to_string(), e))
//! }
//!
//! impl DefinitionStore for InMemory {
//!     fn put_mcpserver<'a>(
//!         &'a self,
//!         server: MCPServer,
//!         caller: &'a CallContext,
//!     ) -> BoxFuture<'a, Result<Stored<MCPServer>, DefinitionStoreError>> {
//!         async move {
//!             self.put("MCPServer", &server.metadata.name, yaml(&server)?, caller);
//!             Ok(Stored::new(server))
//!         }
//!         .boxed()
//!     }
//!
//!     fn delete_mcpserver<'a>(
//!         &'a self,
//!         name: &'a str,
//!         _caller: &'a CallContext,
//!     ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
//!         async move { Ok(self.delete("MCPServer", name)) }.boxed()
//!     }
//!
//!     fn put_workflow<'a>(
//!         &'a self,
//!         workflow: Workflow,
//!         caller: &'a CallContext,
//!     ) -> BoxFuture<'a, Result<Stored<Workflow>, DefinitionStoreError>> {
//!         async move {
//!             self.put("Workflow", &workflow.metadata.name, yaml(&workflow)?, caller);
//!             Ok(Stored::new(workflow))
//!         }
//!         .boxed()
//!     }
//!
//!     fn delete_workflow<'a>(
//!         &'a self,
//!         name: &'a str,
//!         _caller: &'a CallContext,
//!     ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
//!         async move { Ok(self.delete("Workflow", name)) }.boxed()
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(InMemory::default());
//! let registry = Registry::new(Default::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! let core_tools = CoreTools::new(Arc::clone(&registry)).with_definition_store(store.clone());
//!
//! let args = serde_json::json!({"name": "api", "type": "streamable-http", "url": "http://127.0.0.1:9/mcp"});
//! let caller = CallContext::default().with_principal(Principal::new("ada"));
//! let create = ToolCall::new("core_mcpserver_create", args.as_object().cloned().unwrap_or_default(), caller);
//! let answer = core_tools.oneshot(create).await?;
//! assert!(!answer.is_error());
//!
//! // Written as its caller, then applied to the registry.
//! let written = store.written.lock().expect("not poisoned");
//! assert_eq!(written[&("MCPServer", "api".to_owned())].1, "ada");
//! assert!(registry.server("api").is_some());
//! # Ok(()) }
//! ```

use futures::future::BoxFuture;
use muster_core::{
    BoxError, CallContext, ToolError,
    crd::{MCPServer, Workflow},
};

/// Where definition writes go: MCPServer and Workflow definitions put (created or replaced) and
/// deleted, each on behalf of the call in `caller`.
///
/// The config directory ([`ConfigStore`](super::config_dir::ConfigStore)) is one; core tools
/// without one keep their changes in memory only. A store answers the definition as
/// it holds it after a put ([`Stored`]), and that is what the registry applies.
pub trait DefinitionStore: std::fmt::Debug + Send + Sync {
    /// Creates or replaces the MCPServer `server` (its `status` is observed state: a store does
    /// not keep it).
    fn put_mcpserver<'a>(
        &'a self,
        server: MCPServer,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<MCPServer>, DefinitionStoreError>>;

    /// Deletes the MCPServer `name`; deleting one the store does not hold succeeds.
    fn delete_mcpserver<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>>;

    /// Creates or replaces the Workflow `workflow` (without its `status`).
    fn put_workflow<'a>(
        &'a self,
        workflow: Workflow,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<Workflow>, DefinitionStoreError>>;

    /// Deletes the Workflow `name`; deleting one the store does not hold succeeds.
    fn delete_workflow<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>>;

    /// Whether a server's lifecycle is a write of its definition here: `core_service_stop`
    /// puts `spec.suspended: true`, `core_service_start` puts `spec.suspended: false` (and, for
    /// a server that is down, `spec.restartRequestedAt`), `core_service_restart` puts
    /// `spec.restartRequestedAt`, each as its caller, and the changed definition does the rest
    /// (Kubernetes mode). `false` (the default): they command the running server only.
    fn writes_lifecycle(&self) -> bool {
        false
    }
}

/// What a [`DefinitionStore`] answers for a definition it wrote.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stored<T> {
    /// The definition as the store holds it now: what the registry applies.
    pub definition: T,
    /// The file that holds it, as the tool's answer names it (relative to the config
    /// directory); `None` when the store keeps no files.
    pub file: Option<String>,
}

impl<T> Stored<T> {
    /// `definition`, held as it was given, in no file.
    pub fn new(definition: T) -> Self {
        Self { definition, file: None }
    }

    /// Names the file that holds the definition.
    pub fn with_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
}

/// Why a [`DefinitionStore`] did not write: nothing was written, and the registry is left as
/// it was. Its text is what the tool answers, so it names no more than the caller may see.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionStoreError {
    /// The store will not take the write as asked, and the caller can change that: the
    /// definition's file defines another one, the caller may not write it, the definition
    /// changed meanwhile. Answered as invalid arguments.
    #[error("{reason}")]
    Refused {
        /// Why, as the caller is told.
        reason: String,
    },
    /// The write failed in the store (a file system or a remote store's error). Answered as an
    /// internal error.
    #[error("{message}")]
    Failed {
        /// What failed, as the caller is told.
        message: String,
        /// The whole error, for the gateway's own log (it may name what the caller is not
        /// shown, such as the host's paths); the store logs it where it fails.
        #[source]
        source: BoxError,
    },
}

impl DefinitionStoreError {
    /// `Refused` for `reason`.
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::Refused { reason: reason.into() }
    }

    /// `Failed`: the caller is told `message`; `source` is the whole error.
    pub fn failed(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Failed {
            message: message.into(),
            source: source.into(),
        }
    }
}

impl From<DefinitionStoreError> for ToolError {
    fn from(error: DefinitionStoreError) -> Self {
        match error {
            DefinitionStoreError::Refused { reason } => ToolError::invalid_arguments(reason),
            DefinitionStoreError::Failed { message, .. } => ToolError::internal(message),
        }
    }
}

#[cfg(test)]
pub(crate) mod testing;
