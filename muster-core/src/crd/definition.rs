//! Reading a definition the way Kubernetes does with server-side field validation `Warn`.
//!
//! A field the schema does not know is accepted, dropped, and reported by its path as a
//! [`FieldWarning`] (`unknown field "spec.steps[0].retries"`); it is never dropped silently.
//! A field the schema knows whose value does not fit is a [`DefinitionError`] naming its path.
//! An MCPServer field that does not apply to the server's type (`url` on a stdio server) is
//! dropped with a warning too, unless the reference refuses it (`env` on a remote server):
//! [`MCPServerSpec::drop_inapplicable`].
//!
//! The parse functions here are the one way the gateway reads a definition: the files of the
//! config directory ([`MCPServer::from_document`], [`Workflow::from_document`]) and the
//! arguments of the create, update and validate tools ([`parse_spec`]).
//!
//! ```
//! use muster_core::crd::Workflow;
//! use serde_json::json;
//!
//! let doc = json!({
//!     "apiVersion": "muster.giantswarm.io/v1alpha1",
//!     "kind": "Workflow",
//!     "metadata": {"name": "hello", "uid": "from a cluster: not reported"},
//!     "spec": {"steps": [{"id": "a", "tool": "x_echo", "retries": 3}]}
//! });
//! let (workflow, warnings) = Workflow::from_document(&doc)?;
//! assert_eq!(workflow.spec.steps[0].tool.as_deref(), Some("x_echo"));
//! assert_eq!(warnings.len(), 1);
//! assert_eq!(warnings[0].path, "spec.steps[0].retries");
//! assert_eq!(warnings[0].to_string(), r#"unknown field "spec.steps[0].retries" (dropped)"#);
//!
//! // A known field with a wrong value is still refused, naming its path.
//! let bad = json!({"kind": "Workflow", "metadata": {"name": "x"},
//!                  "spec": {"steps": [{"id": "a", "tool": 7}]}});
//! let error = Workflow::from_document(&bad).unwrap_err();
//! assert_eq!(error.path.as_deref(), Some("spec.steps[0].tool"));
//! # Ok::<(), muster_core::crd::DefinitionError>(())
//! ```
//!
//! [`MCPServerSpec::drop_inapplicable`]: super::MCPServerSpec::drop_inapplicable
//! [`MCPServer::from_document`]: super::MCPServer::from_document
//! [`Workflow::from_document`]: super::Workflow::from_document

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{MCPServer, MCPServerSpec, ServerType, Workflow};

/// Why a field of a definition was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DroppedBecause {
    /// The schema has no such field.
    Unknown,
    /// The field exists but does not apply to a server of this type (`url` on a stdio server).
    NotForType(ServerType),
}

/// A field of a definition that was accepted and dropped: reported in the log, the event and
/// the answer of the create, update and validate tools.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldWarning {
    /// Path of the field, e.g. `spec.steps[0].retries` (a document) or `steps[0].retries` (the
    /// arguments of a tool, which are a bare spec).
    pub path: String,
    /// Why it was dropped.
    pub because: DroppedBecause,
}

impl FieldWarning {
    /// A field the schema does not know.
    pub fn unknown(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            because: DroppedBecause::Unknown,
        }
    }

    /// A field that does not apply to a server of type `server_type`.
    pub fn not_for_type(path: impl Into<String>, server_type: ServerType) -> Self {
        Self {
            path: path.into(),
            because: DroppedBecause::NotForType(server_type),
        }
    }
}

impl fmt::Display for FieldWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.because {
            // Kubernetes' own words (`Warning: unknown field "spec.foo"`), which people grep for.
            DroppedBecause::Unknown => write!(f, "unknown field \"{}\" (dropped)", self.path),
            DroppedBecause::NotForType(t) => {
                write!(f, "field \"{}\" does not apply to a {t} server (dropped)", self.path)
            }
        }
    }
}

/// A definition whose known field has a value that does not fit, or that is not an object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DefinitionError {
    /// Path of the field at fault, e.g. `spec.timeout`; `None` for the document as a whole.
    pub path: Option<String>,
    /// What is wrong, e.g. ``invalid type: string "x", expected u32``.
    pub message: String,
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{path}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DefinitionError {}

/// A definition read with the fields dropped from it, or why it cannot be read.
pub type DefinitionResult<T> = Result<(T, Vec<FieldWarning>), DefinitionError>;

/// Parses `value` as `T`, reporting every field `T` does not know (dropped) and refusing a
/// known field whose value does not fit. Paths are relative to `value`: `steps[0].retries`.
pub fn parse_spec<T: DeserializeOwned>(value: &Value) -> DefinitionResult<T> {
    let mut unknown = Vec::new();
    let mut report = |path: serde_ignored::Path<'_>| unknown.push(FieldWarning::unknown(path_text(&path)));
    let ignored = serde_ignored::Deserializer::new(value, &mut report);
    let parsed = serde_path_to_error::deserialize(ignored).map_err(|e| {
        let path = e.path().to_string();
        DefinitionError {
            path: (path != ".").then_some(path),
            message: e.into_inner().to_string(),
        }
    })?;
    Ok((parsed, unknown))
}

/// Parses a whole document (`apiVersion`, `kind`, `metadata`, `spec`). `metadata` carries the
/// many fields of Kubernetes' `ObjectMeta` a manifest exported from a cluster has (`uid`,
/// `managedFields`, ...): Kubernetes knows them, so they are not reported.
fn parse_document<T: DeserializeOwned>(value: &Value) -> DefinitionResult<T> {
    if !value.is_object() {
        return Err(DefinitionError {
            path: None,
            message: "the document is not a mapping".to_owned(),
        });
    }
    let (parsed, mut warnings) = parse_spec(value)?;
    warnings.retain(|w| w.path != "metadata" && !w.path.starts_with("metadata."));
    Ok((parsed, warnings))
}

/// `spec.steps[0].retries` from serde_ignored's path.
fn path_text(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", path_text(parent)),
        Path::Map { parent, key } => match path_text(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => path_text(parent),
    }
}

impl Workflow {
    /// Reads a Workflow document: unknown fields are dropped and reported, a known field with
    /// a wrong value is an error naming its path. The document is not validated
    /// ([`Workflow::validate`]).
    pub fn from_document(value: &Value) -> DefinitionResult<Self> {
        parse_document(value)
    }
}

impl MCPServer {
    /// Reads an MCPServer document: unknown fields, and fields that do not apply to the
    /// server's type ([`MCPServerSpec::drop_inapplicable`]), are dropped and reported; a known field
    /// with a wrong value is an error naming its path. The document is not validated
    /// ([`MCPServer::validate`]).
    pub fn from_document(value: &Value) -> DefinitionResult<Self> {
        let (mut server, mut warnings): (Self, _) = parse_document(value)?;
        warnings.extend(server.spec.drop_inapplicable("spec."));
        Ok((server, warnings))
    }
}

impl MCPServerSpec {
    /// Drops the fields that do not apply to the server's type and reports each: `command`,
    /// `args` and `autoStart` on a remote server; `url`, `headers`, `headersFrom` and `auth` on
    /// a stdio server. Paths start with `prefix` (`spec.` in a document, nothing in a tool's
    /// arguments). `env` on a remote server stays: the reference refuses it, and
    /// [`MCPServer::validate`] does.
    pub fn drop_inapplicable(&mut self, prefix: &str) -> Vec<FieldWarning> {
        let mut dropped = Vec::new();
        let Some(server_type) = self.server_type else {
            return dropped;
        };
        let mut drop_if = |present: bool, field: &str| {
            if present {
                dropped.push(FieldWarning::not_for_type(format!("{prefix}{field}"), server_type));
            }
            present
        };
        if server_type.is_remote() {
            if drop_if(self.command.is_some(), "command") {
                self.command = None;
            }
            if drop_if(!self.args.is_empty(), "args") {
                self.args.clear();
            }
            if drop_if(self.auto_start, "autoStart") {
                self.auto_start = false;
            }
        } else {
            if drop_if(self.url.is_some(), "url") {
                self.url = None;
            }
            if drop_if(!self.headers.is_empty(), "headers") {
                self.headers.clear();
            }
            if drop_if(!self.headers_from.is_empty(), "headersFrom") {
                self.headers_from.clear();
            }
            if drop_if(self.auth.is_some(), "auth") {
                self.auth = None;
            }
        }
        dropped
    }
}
