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
//!
//! [`discovery::Discovery`] serves all of them as one tower service over any [`CatalogSource`],
//! answering each meta-tool's result, scoped by the request's toolset (see its module for an
//! example).
//!
//! The toolset is enforced on any tool service by [`toolset::ToolsetLayer`] (and read from the
//! `X-muster-Toolset` header of an HTTP request by [`toolset::ToolsetHeaderLayer`]):
//!
//! ```
//! use std::sync::Arc;
//! use muster_catalog::{Catalog, CatalogSource, toolset::{Presets, ToolsetLayer}};
//! use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolEntry, ToolError};
//! use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut builder = Catalog::builder();
//! for (name, read_only) in [("get_pods", true), ("delete_pod", false)] {
//!     let tool = Tool::new(name, "k8s", Arc::new(Default::default()))
//!         .with_annotations(ToolAnnotations::new().read_only(read_only));
//!     builder.push_tool(ToolEntry::downstream(format!("x_k8s_{name}"), "k8s", tool));
//! }
//! let catalog = Arc::new(builder.build());
//! let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
//! let run = tower::service_fn(|_: ToolCall| async { Ok::<_, ToolError>(CallToolResult::success(vec![]).into()) });
//! let tools = BoxToolService::new(
//!     ServiceBuilder::new().layer(ToolsetLayer::new(source, Arc::new(Presets::default()))).service(run),
//! );
//! let read_only = || CallContext::default().with_toolset(vec!["preset:read-only".to_owned()]);
//! let call = |name: &str| ToolCall::new(name, JsonObject::new(), read_only());
//! assert!(tools.clone().oneshot(call("x_k8s_get_pods")).await.is_ok());
//! let refused = tools.oneshot(call("x_k8s_delete_pod")).await.unwrap_err();
//! assert_eq!(refused.to_string(), r#"tool "x_k8s_delete_pod" is outside the toolset [preset:read-only]"#);
//! # }
//! ```

pub mod args;
pub mod discovery;
mod error;
pub mod meta;
pub mod pattern;
pub mod prompts;
pub mod rank;
pub mod resources;
mod snapshot;
pub mod tools;
pub mod toolset;

pub use error::CatalogError;
pub use snapshot::{Catalog, CatalogBuilder, CatalogSource, View};

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
