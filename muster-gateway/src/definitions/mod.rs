//! Where the MCPServer and Workflow definitions live, behind two seams, so that another backend
//! (Kubernetes custom resources, say) plugs in without touching the registry or the core tools:
//!
//! - **the read seam** ([`DefinitionChange`], [`DefinitionSnapshot`]): a source reads the
//!   definitions where they are kept and hands the registry what changed
//!   (`Registry::apply_changes`) or everything it
//!   holds (`Registry::apply_snapshot`); only the
//!   definitions that changed are touched;
//! - **the write seam** ([`DefinitionStore`]): where the core tools' writes go
//!   (`core_mcpserver_create`, `_update`, `_delete` and the same of `core_workflow_*`), each on
//!   behalf of its caller, before the registry applies them
//!   (`CoreTools::with_definition_store`, `GatewayOptions::with_definition_store`).
//!
//! [`config_dir`] is filesystem mode, one implementation of both: [`config_dir::load`] reads the
//! directory, [`config_dir::ConfigStore`] writes it (and makes the snapshots of what it read),
//! and [`config_dir::watch`] reads it again after each change and hands each snapshot on.
//!
//! The two seams sit below the registry and know nothing of it; the registry applies what a
//! source says, and holds the store the core tools write through.

pub mod config_dir;
pub mod source;
pub mod store;

pub use source::{ChangeSummary, DefinitionChange, DefinitionSnapshot, Origin, Sourced};
pub use store::{DefinitionStore, DefinitionStoreError, Stored};
