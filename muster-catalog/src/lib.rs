//! # muster-catalog
//!
//! The catalogue of a muster gateway: an immutable snapshot of every tool, resource and prompt it
//! exposes, and the discovery operations the meta-tools answer from it: the paged `list_tools`,
//! `filter_tools`, `describe_tool`, `list_core_tools`, and their resource and prompt
//! counterparts.
//!
//! A [`Catalog`] is built once per change (a server connected, a tool list changed) and shared
//! behind an `Arc`; each request reads a [`View`], a selection over the snapshot, so no query
//! copies the catalogue. The operations take their arguments as the JSON object the meta-tool
//! received and answer typed responses that serialize to the documented shapes, or a
//! [`CatalogError`] whose message is the documented one.
//!
//! ```
//! use std::sync::Arc;
//! use muster_catalog::{Catalog, tools::{self, Scope}, toolset::Presets};
//! use muster_core::ToolEntry;
//! use rmcp::model::Tool;
//!
//! let mut builder = Catalog::builder();
//! for name in ["get_pods", "list_nodes", "delete_pod"] {
//!     let tool = Tool::new(name, format!("{name} in the cluster."), Arc::new(Default::default()));
//!     builder.push_tool(ToolEntry::downstream(format!("x_k8s_{name}"), "k8s", tool));
//! }
//! let catalog = Arc::new(builder.build());
//! let args = serde_json::json!({"limit": 2}).as_object().cloned().unwrap_or_default();
//! let presets = Presets::default();
//! let page = tools::list_tools(&catalog.view(), &args, Scope::unscoped(&presets)).unwrap();
//! assert_eq!((page.total, page.tools.len(), page.truncated), (3, 2, true));
//! ```

pub mod args;
mod error;
pub mod pattern;
pub mod prompts;
pub mod rank;
pub mod resources;
mod snapshot;
pub mod tools;
pub mod toolset;

pub use error::CatalogError;
pub use snapshot::{Catalog, CatalogBuilder, CatalogSource, View};
