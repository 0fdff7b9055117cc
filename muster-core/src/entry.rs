//! Catalogue entries: the tools, resources and prompts the gateway exposes, each with where it
//! comes from.
//!
//! An entry keeps the downstream definition as rmcp's typed model (renamed to its exposed name;
//! a tool's schemas as compact JSON text, see [`CompactTool`]) and the facts the catalogue needs
//! to list, filter, describe and route it: its kind, its server and the server's own name for
//! it, its one-line summary (computed once) and its labels.
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::{ToolEntry, ToolKind};
//! use rmcp::model::Tool;
//!
//! let tool = Tool::new("get_pods", "List pods in a namespace.\n\nLonger text.", Arc::new(Default::default()));
//! let entry = ToolEntry::downstream("x_kubernetes_get_pods", "kubernetes", tool);
//! assert_eq!(entry.name(), "x_kubernetes_get_pods");
//! assert_eq!(entry.summary, "List pods in a namespace.");
//! assert_eq!(entry.kind, ToolKind::Tool);
//! assert_eq!(entry.server_tool.as_deref(), Some("get_pods"));
//! ```

use std::{collections::BTreeMap, sync::Arc};

use rmcp::model::{Prompt, Resource};
use serde::{Deserialize, Serialize};

use crate::CompactTool;

/// The most characters a summary has, `...` included.
pub const SUMMARY_MAX_CHARS: usize = 120;
/// The `_meta` key under which a tool carries its labels.
pub const LABELS_META_KEY: &str = "muster.giantswarm.io/labels";

/// What kind of thing runs when a tool is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// A downstream MCP server's tool.
    Tool,
    /// A workflow's execution tool (`workflow_<name>`).
    Workflow,
    /// A muster core tool (`core_*`).
    Core,
}

/// One tool of the catalogue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolEntry {
    /// The definition as exposed: its `name` is the exposed name.
    pub tool: CompactTool,
    /// What runs it.
    pub kind: ToolKind,
    /// The MCPServer that provides it (downstream tools only).
    pub server: Option<String>,
    /// The server's own name for it (downstream tools only).
    pub server_tool: Option<String>,
    /// The first non-empty line of the description, at most [`SUMMARY_MAX_CHARS`] characters.
    pub summary: String,
    /// Labels (workflows inherit their Workflow's `metadata.labels`).
    pub labels: BTreeMap<String, String>,
    /// For a family tool: how a call picks the member server.
    pub family: Option<Arc<FamilyRoute>>,
}

/// How a family tool routes a call: its instance argument names the member server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FamilyRoute {
    /// The family's name.
    pub family: String,
    /// The required argument that selects the instance (stripped before forwarding).
    pub instance_arg: String,
    /// Member server name -> that server's own name for the tool.
    pub members: BTreeMap<String, String>,
}

impl FamilyRoute {
    /// A route for `family` selected by `instance_arg` over `members`.
    pub fn new(family: impl Into<String>, instance_arg: impl Into<String>, members: BTreeMap<String, String>) -> Self {
        Self {
            family: family.into(),
            instance_arg: instance_arg.into(),
            members,
        }
    }
}

impl ToolEntry {
    /// A downstream tool: `tool` as the server defines it, exposed as `exposed_name`.
    pub fn downstream(
        exposed_name: impl Into<String>,
        server: impl Into<String>,
        tool: impl Into<CompactTool>,
    ) -> Self {
        let mut tool = tool.into();
        let server_tool = tool.rename(exposed_name);
        Self::build(
            tool,
            ToolKind::Tool,
            Some(server.into()),
            Some(server_tool),
            BTreeMap::new(),
        )
    }

    /// A core or workflow tool, defined by muster itself under its exposed name.
    pub fn builtin(kind: ToolKind, tool: impl Into<CompactTool>) -> Self {
        Self::build(tool.into(), kind, None, None, BTreeMap::new())
    }

    /// A family tool: `tool` exposed under the family's name, routed by `route`.
    pub fn family(tool: impl Into<CompactTool>, route: FamilyRoute) -> Self {
        let mut entry = Self::build(
            tool.into(),
            ToolKind::Tool,
            Some(route.family.clone()),
            None,
            BTreeMap::new(),
        );
        entry.family = Some(Arc::new(route));
        entry
    }

    /// Sets the labels (and mirrors them into the tool's `_meta`).
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        if !labels.is_empty() {
            let meta = self.tool.meta_mut().get_or_insert_with(Default::default);
            meta.0.insert(
                LABELS_META_KEY.to_owned(),
                serde_json::to_value(&labels).unwrap_or_default(),
            );
        }
        self.labels = labels;
        self
    }

    fn build(
        tool: CompactTool,
        kind: ToolKind,
        server: Option<String>,
        server_tool: Option<String>,
        labels: BTreeMap<String, String>,
    ) -> Self {
        let summary = summarize(tool.description().unwrap_or_default());
        Self {
            tool,
            kind,
            server,
            server_tool,
            summary,
            labels,
            family: None,
        }
    }

    /// The exposed name.
    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// The full description (empty when the tool has none).
    pub fn description(&self) -> &str {
        self.tool.description().unwrap_or_default()
    }

    /// The tool's title: its own, else its annotations' title.
    pub fn title(&self) -> Option<&str> {
        self.tool
            .title()
            .or_else(|| self.tool.annotations().and_then(|a| a.title.as_deref()))
    }

    /// Whether the tool says it only reads (its `readOnlyHint` annotation is true).
    pub fn is_read_only(&self) -> bool {
        self.tool.annotations().and_then(|a| a.read_only_hint) == Some(true)
    }
}

/// One resource of the catalogue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResourceEntry {
    /// The definition as exposed: its `uri` is the exposed URI.
    pub resource: Resource,
    /// The MCPServer that provides it.
    pub server: String,
    /// The server's own URI for it.
    pub server_uri: String,
}

impl ResourceEntry {
    /// A downstream resource, exposed under `exposed_uri`.
    pub fn downstream(exposed_uri: impl Into<String>, server: impl Into<String>, mut resource: Resource) -> Self {
        let server_uri = std::mem::replace(&mut resource.uri, exposed_uri.into());
        Self {
            resource,
            server: server.into(),
            server_uri,
        }
    }

    /// The exposed URI.
    pub fn uri(&self) -> &str {
        &self.resource.uri
    }
}

/// One prompt of the catalogue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PromptEntry {
    /// The definition as exposed: its `name` is the exposed name.
    pub prompt: Prompt,
    /// The MCPServer that provides it.
    pub server: String,
    /// The server's own name for it.
    pub server_prompt: String,
}

impl PromptEntry {
    /// A downstream prompt, exposed as `exposed_name`.
    pub fn downstream(exposed_name: impl Into<String>, server: impl Into<String>, mut prompt: Prompt) -> Self {
        let server_prompt = std::mem::replace(&mut prompt.name, exposed_name.into());
        Self {
            prompt,
            server: server.into(),
            server_prompt,
        }
    }

    /// The exposed name.
    pub fn name(&self) -> &str {
        &self.prompt.name
    }
}

/// A shared, immutable tool entry.
pub type SharedToolEntry = Arc<ToolEntry>;

/// The one-line summary of a description: its first non-empty line, trimmed, cut to at most
/// [`SUMMARY_MAX_CHARS`] characters with `...` marking the cut.
pub fn summarize(description: &str) -> String {
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= SUMMARY_MAX_CHARS {
        return line.to_owned();
    }
    let kept: String = line.chars().take(SUMMARY_MAX_CHARS - 3).collect();
    format!("{}...", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Tool;

    #[test]
    fn a_summary_is_the_first_non_empty_line() {
        assert_eq!(summarize("\n\n  Get pods.  \nMore."), "Get pods.");
        assert_eq!(summarize(""), "");
    }

    #[test]
    fn a_long_first_line_is_cut_to_120_characters_with_an_ellipsis() {
        let long = "é".repeat(300);
        let s = summarize(&long);
        assert_eq!(s.chars().count(), SUMMARY_MAX_CHARS);
        assert!(s.ends_with("..."));
        let exact = "a".repeat(SUMMARY_MAX_CHARS);
        assert_eq!(summarize(&exact), exact);
    }

    #[test]
    fn a_downstream_entry_remembers_the_servers_own_name() {
        let tool = Tool::new("echo", "Echo back.", Arc::new(Default::default()));
        let e = ToolEntry::downstream("x_everything_echo", "everything", tool);
        assert_eq!(e.name(), "x_everything_echo");
        assert_eq!(e.server.as_deref(), Some("everything"));
        assert_eq!(e.server_tool.as_deref(), Some("echo"));
    }

    #[test]
    fn labels_are_mirrored_into_meta() {
        let tool = Tool::new("workflow_deploy", "Deploy.", Arc::new(Default::default()));
        let labels = BTreeMap::from([("category".to_owned(), "ops".to_owned())]);
        let e = ToolEntry::builtin(ToolKind::Workflow, tool).with_labels(labels);
        let meta = e.tool.meta().expect("meta");
        assert_eq!(meta.0[LABELS_META_KEY]["category"], "ops");
    }

    #[test]
    fn the_title_falls_back_to_the_annotations_title() {
        let tool = Tool::new("t", "d", Arc::new(Default::default()))
            .with_annotations(rmcp::model::ToolAnnotations::with_title("From annotations"));
        assert_eq!(
            ToolEntry::builtin(ToolKind::Core, tool).title(),
            Some("From annotations")
        );
    }
}
