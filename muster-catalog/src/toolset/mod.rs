//! Toolsets: how a platform scopes what an agent sees.
//!
//! A request declares a toolset in the `X-muster-Toolset` header (comma-separated selectors) or,
//! for one `filter_tools` call, in its `toolset` argument. Selectors are `preset:<name>`,
//! `server:<name>`, `workflow:<name>` and `tool:<exposed name>`, at most 32 inline; `toolset:` is
//! reserved and `label:` belongs in presets. Presets ([`Presets`]) are the built-in `read-only`,
//! `none` and `full` plus those of `config.yaml`.
//!
//! A toolset is composition, not authorization: it narrows the session's view (discovery reads
//! the catalogue intersected with it, resources and prompts follow their server) and `call_tool`
//! refuses a tool outside it, but it never widens what the session may see. An invalid toolset is
//! an error on every meta-tool call, never a silent fallback.
//!
//! ```
//! use std::sync::Arc;
//! use muster_catalog::{Catalog, toolset::{InlineToolset, Presets, resolve}};
//! use muster_core::ToolEntry;
//! use rmcp::model::{Tool, ToolAnnotations};
//!
//! let mut b = Catalog::builder();
//! for (name, read_only) in [("get_pods", true), ("delete_pod", false)] {
//!     let t = Tool::new(name, "k8s", Arc::new(Default::default()))
//!         .with_annotations(ToolAnnotations::new().read_only(read_only));
//!     b.push_tool(ToolEntry::downstream(format!("x_k8s_{name}"), "k8s", t));
//! }
//! let catalog = Arc::new(b.build());
//! let toolset = InlineToolset::from_header_value("preset:read-only, tool:x_nope").unwrap();
//! let resolved = resolve(&catalog, &Presets::default(), &toolset).unwrap();
//! let view = catalog.view().restricted(&resolved.selection);
//! assert_eq!(view.tools().map(|e| e.name()).collect::<Vec<_>>(), ["x_k8s_get_pods"]);
//! assert_eq!(resolved.unmatched, ["tool:x_nope"]);
//! ```

mod error;
mod layer;
mod preset;
mod resolve;
mod selection;
mod selector;

pub use error::ToolsetError;
pub use layer::{DeclaredToolset, TOOLSET_HEADER, ToolsetHeader, ToolsetHeaderLayer, ToolsetLayer, ToolsetService};
pub use preset::{BUILT_IN_PRESETS, LabelRule, Preset, PresetConfig, PresetSummary, Presets, Rule, RuleConfig};
pub use resolve::{Resolved, resolve, selects};
pub use selection::Selection;
pub use selector::{InlineToolset, MAX_INLINE_SELECTORS, Selector};

#[cfg(test)]
mod tests;
