//! The read seam: what a definition source tells the registry. A source (the config
//! directory's watcher, a Kubernetes reflector, an embedder's own) reads MCPServer and Workflow
//! definitions where they are kept and hands the registry either
//!
//! - a change set, a list of [`DefinitionChange`]s (a resource added, changed or deleted), to
//!   `Registry::apply_changes`; or
//! - a [`DefinitionSnapshot`], everything it holds at one moment (a directory read whole, a
//!   list after a watch was lost), to
//!   `Registry::apply_snapshot`, which turns it into
//!   the change set that makes the registry hold exactly that.
//!
//! Either way only what changed is touched: a server whose definition is the one in force keeps
//! its connection, a changed one reconnects, a removed one stops. A definition the source still
//! names but can no longer read (a file that no longer parses) is listed as kept in the
//! snapshot, and keeps its last good definition. The answer is a [`ChangeSummary`].
//!
//! A change set applied to a registry with no gateway:
//!
//! ```
//! use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};
//! use muster_gateway::{
//!     definitions::{DefinitionChange, Origin},
//!     registry::{Registry, RegistryOptions},
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let remote = |url: &str| MCPServerSpec {
//!     server_type: Some(ServerType::StreamableHttp),
//!     url: Some(url.into()),
//!     ..MCPServerSpec::default()
//! };
//! let api = MCPServer::new("api", remote("http://127.0.0.1:9/mcp"));
//! let registry = Registry::new(Default::default(), vec![api.clone()], Vec::new(), RegistryOptions::default())?;
//!
//! // What a watch reported: `api` as it was, `docs` new.
//! let origin = Origin::Other("my source".into());
//! let summary = registry.apply_changes([
//!     DefinitionChange::server_applied(api, origin.clone()),
//!     DefinitionChange::server_applied(MCPServer::new("docs", remote("http://127.0.0.1:9/docs")), origin),
//! ]);
//! assert_eq!(summary.added, ["docs"]);
//! assert!(summary.updated.is_empty(), "api is unchanged, so it is not touched");
//! # Ok(()) }
//! ```

use std::{collections::BTreeSet, fmt, path::PathBuf};

use muster_core::crd::{FieldWarning, MCPServer, Workflow};
use serde::Serialize;

/// Where a definition came from, as the log names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A file of the config directory (or, for a removal a reading of the whole directory
    /// found, the directory).
    File(PathBuf),
    /// A source of the embedder's own, described in its own words.
    Other(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Other(description) => f.write_str(description),
        }
    }
}

/// A definition as a source read it: where from, and the fields it dropped.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sourced<T> {
    /// The definition.
    pub definition: T,
    /// Where it came from.
    pub origin: Origin,
    /// The fields the source dropped from it because the schema does not know them (or they
    /// do not apply): each definition's are told as one Warning event, when it takes effect
    /// anew or they differ from the ones told last.
    pub dropped_fields: Vec<FieldWarning>,
}

impl<T> Sourced<T> {
    /// `definition` from `origin`, with no dropped fields.
    pub fn new(definition: T, origin: Origin) -> Self {
        Self {
            definition,
            origin,
            dropped_fields: Vec::new(),
        }
    }

    /// Sets the fields the source dropped.
    pub fn with_dropped_fields(mut self, dropped_fields: Vec<FieldWarning>) -> Self {
        self.dropped_fields = dropped_fields;
        self
    }
}

/// One change a definition source saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "a change is moved from its source to the registry once; boxing would only add an allocation and a pattern"
)]
pub enum DefinitionChange {
    /// An MCPServer was added or changed (or read again unchanged: applying it changes nothing).
    ServerApplied(Sourced<MCPServer>),
    /// The MCPServer `name` was deleted.
    ServerRemoved {
        /// Its name.
        name: String,
        /// Where it was deleted.
        origin: Origin,
    },
    /// A Workflow was added or changed (or read again unchanged).
    WorkflowApplied(Sourced<Workflow>),
    /// The Workflow `name` was deleted.
    WorkflowRemoved {
        /// Its name.
        name: String,
        /// Where it was deleted.
        origin: Origin,
    },
}

impl DefinitionChange {
    /// `server`, added or changed at `origin`.
    pub fn server_applied(server: MCPServer, origin: Origin) -> Self {
        Self::ServerApplied(Sourced::new(server, origin))
    }

    /// The MCPServer `name`, deleted at `origin`.
    pub fn server_removed(name: impl Into<String>, origin: Origin) -> Self {
        Self::ServerRemoved {
            name: name.into(),
            origin,
        }
    }

    /// `workflow`, added or changed at `origin`.
    pub fn workflow_applied(workflow: Workflow, origin: Origin) -> Self {
        Self::WorkflowApplied(Sourced::new(workflow, origin))
    }

    /// The Workflow `name`, deleted at `origin`.
    pub fn workflow_removed(name: impl Into<String>, origin: Origin) -> Self {
        Self::WorkflowRemoved {
            name: name.into(),
            origin,
        }
    }
}

/// Every definition a source holds at one moment. Applied, the registry holds exactly these,
/// besides the definitions the source names but cannot read now ([`Self::kept_servers`],
/// [`Self::kept_workflows`]), which keep their last good definition.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DefinitionSnapshot {
    /// Where the snapshot was read (the origin of the removals it implies).
    pub origin: Origin,
    /// The MCPServers.
    pub servers: Vec<Sourced<MCPServer>>,
    /// The Workflows.
    pub workflows: Vec<Sourced<Workflow>>,
    /// The MCPServers the source names but cannot read now.
    pub kept_servers: BTreeSet<String>,
    /// The Workflows the source names but cannot read now.
    pub kept_workflows: BTreeSet<String>,
}

impl DefinitionSnapshot {
    /// A snapshot of `origin` holding nothing (yet).
    pub fn new(origin: Origin) -> Self {
        Self {
            origin,
            servers: Vec::new(),
            workflows: Vec::new(),
            kept_servers: BTreeSet::new(),
            kept_workflows: BTreeSet::new(),
        }
    }

    /// Adds an MCPServer.
    pub fn with_server(mut self, server: Sourced<MCPServer>) -> Self {
        self.servers.push(server);
        self
    }

    /// Adds a Workflow.
    pub fn with_workflow(mut self, workflow: Sourced<Workflow>) -> Self {
        self.workflows.push(workflow);
        self
    }
}

/// What applying a change set or a snapshot changed. The servers' lists name each server; the
/// workflows are counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ChangeSummary {
    /// Servers added.
    pub added: Vec<String>,
    /// Servers whose definition changed (they reconnected).
    pub updated: Vec<String>,
    /// Servers removed.
    pub removed: Vec<String>,
    /// Servers a snapshot left out but kept on their last good definition, because their
    /// source names them and cannot read them now.
    pub kept: Vec<String>,
    /// Workflows added, changed or removed.
    pub workflows_changed: usize,
}
