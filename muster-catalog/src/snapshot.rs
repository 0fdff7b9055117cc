//! The immutable catalogue snapshot and the views requests read it through.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use muster_core::{PromptEntry, ResourceEntry, ToolEntry};

use crate::{
    rank::{RankingConfig, SearchIndex},
    toolset::Selection,
};

/// Every tool, resource and prompt the gateway exposes at one moment. Built once per change,
/// shared behind an `Arc`, never mutated.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Arc<ToolEntry>>,
    tool_index: HashMap<Arc<str>, usize>,
    resources: Vec<Arc<ResourceEntry>>,
    prompts: Vec<Arc<PromptEntry>>,
    prompt_index: HashMap<Arc<str>, usize>,
    server_labels: HashMap<String, BTreeMap<String, String>>,
    search_index: SearchIndex,
}

impl Catalog {
    /// A builder for a new snapshot.
    pub fn builder() -> CatalogBuilder {
        CatalogBuilder::default()
    }

    /// An empty catalogue.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every tool, in catalogue order.
    pub fn tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    /// The tool exposed as `name`.
    pub fn tool(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.tool_index.get(name).map(|&i| &self.tools[i])
    }

    /// Every resource, in catalogue order.
    pub fn resources(&self) -> &[Arc<ResourceEntry>] {
        &self.resources
    }

    /// Every prompt, in catalogue order.
    pub fn prompts(&self) -> &[Arc<PromptEntry>] {
        &self.prompts
    }

    /// The prompt exposed as `name`.
    pub fn prompt(&self, name: &str) -> Option<&Arc<PromptEntry>> {
        self.prompt_index.get(name).map(|&i| &self.prompts[i])
    }

    /// The index of the tool exposed as `name`, in catalogue order.
    pub fn tool_index(&self, name: &str) -> Option<usize> {
        self.tool_index.get(name).copied()
    }

    /// The `metadata.labels` of MCPServer `server` (toolset `label` rules read them).
    pub fn server_labels(&self, server: &str) -> Option<&BTreeMap<String, String>> {
        self.server_labels.get(server)
    }

    /// The BM25F index of the tools, built with the snapshot (`filter_tools {query}` ranks
    /// against it; document ids are catalogue indices).
    pub fn search_index(&self) -> &SearchIndex {
        &self.search_index
    }

    /// A view of the whole catalogue.
    pub fn view(self: &Arc<Self>) -> View {
        View {
            catalog: Arc::clone(self),
            selection: None,
        }
    }
}

/// Where the current catalogue snapshot comes from (the gateway's registry, a test's fixture).
pub trait CatalogSource: Send + Sync + 'static {
    /// The current snapshot.
    fn catalog(&self) -> Arc<Catalog>;

    /// The snapshot session `session` sees (a session may see more than the shared catalogue:
    /// the tools of servers it signed in to). The shared catalogue unless overridden.
    fn catalog_for(&self, session: &muster_core::SessionId) -> Arc<Catalog> {
        let _ = session;
        self.catalog()
    }
}

impl<F> CatalogSource for F
where
    F: Fn() -> Arc<Catalog> + Send + Sync + 'static,
{
    fn catalog(&self) -> Arc<Catalog> {
        self()
    }
}

/// Collects entries for a [`Catalog`]. Entries keep the order they are pushed in; a second entry
/// with a name already taken is dropped (the first keeps it) and reported by [`Self::build`]'s
/// log line, so a collision never makes a name ambiguous.
#[derive(Debug, Default)]
pub struct CatalogBuilder {
    catalog: Catalog,
    ranking: RankingConfig,
}

impl CatalogBuilder {
    /// Ranks the snapshot with `ranking` (default: BM25F alone). With a semantic ranker, every
    /// tool's vector is computed by [`Self::build`].
    pub fn with_ranking(mut self, ranking: RankingConfig) -> Self {
        self.ranking = ranking;
        self
    }

    /// Adds a tool; returns `false` (and keeps the first) when the name is taken.
    pub fn push_tool(&mut self, entry: ToolEntry) -> bool {
        let name: Arc<str> = Arc::from(entry.name());
        if self.catalog.tool_index.contains_key(&name) {
            tracing::warn!(tool = %name, server = ?entry.server, "duplicate tool name; keeping the first");
            return false;
        }
        self.catalog.tool_index.insert(name, self.catalog.tools.len());
        self.catalog.tools.push(Arc::new(entry));
        true
    }

    /// The tool pushed under `name`, if any.
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.catalog.tool(name).map(|entry| &**entry)
    }

    /// Adds a resource. Several servers may expose the same URI: requests then name the server.
    pub fn push_resource(&mut self, entry: ResourceEntry) {
        self.catalog.resources.push(Arc::new(entry));
    }

    /// Adds a prompt; returns `false` (and keeps the first) when the name is taken.
    pub fn push_prompt(&mut self, entry: PromptEntry) -> bool {
        let name: Arc<str> = Arc::from(entry.name());
        if self.catalog.prompt_index.contains_key(&name) {
            tracing::warn!(prompt = %name, server = %entry.server, "duplicate prompt name; keeping the first");
            return false;
        }
        self.catalog.prompt_index.insert(name, self.catalog.prompts.len());
        self.catalog.prompts.push(Arc::new(entry));
        true
    }

    /// Records the labels of MCPServer `server`.
    pub fn set_server_labels(&mut self, server: impl Into<String>, labels: BTreeMap<String, String>) {
        self.catalog.server_labels.insert(server.into(), labels);
    }

    /// The finished snapshot, with its search index (and its tool vectors, with a semantic
    /// ranker).
    pub fn build(mut self) -> Catalog {
        self.catalog.search_index = SearchIndex::build_with(&self.catalog.tools, self.ranking);
        self.catalog
    }
}

/// What one request sees of a catalogue: a selection over the snapshot (the session's
/// visibility, its toolset), never a copy.
#[derive(Debug, Clone)]
pub struct View {
    catalog: Arc<Catalog>,
    selection: Option<Arc<ViewSelection>>,
}

#[derive(Debug)]
struct ViewSelection {
    tools: Selection,
    /// Servers with a selected tool: their resources and prompts are in view.
    servers: HashSet<String>,
}

impl View {
    /// The snapshot this view reads.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// This view narrowed to `selection` (tools by catalogue index); never wider than before.
    pub fn restricted(&self, selection: &Selection) -> View {
        let mut tools = selection.clone();
        if let Some(current) = &self.selection {
            tools.intersect_with(&current.tools);
        }
        let servers = tools
            .iter()
            .filter_map(|i| self.catalog.tools.get(i).and_then(|e| e.server.clone()))
            .collect();
        View {
            catalog: Arc::clone(&self.catalog),
            selection: Some(Arc::new(ViewSelection { tools, servers })),
        }
    }

    /// Whether the view is narrower than the whole catalogue.
    pub fn is_restricted(&self) -> bool {
        self.selection.is_some()
    }

    fn selects(&self, index: usize) -> bool {
        self.selection.as_ref().is_none_or(|s| s.tools.contains(index))
    }

    fn selects_server(&self, server: &str) -> bool {
        self.selection.as_ref().is_none_or(|s| s.servers.contains(server))
    }

    /// The tools in view with their catalogue indices, in catalogue order.
    pub fn indexed_tools(&self) -> impl Iterator<Item = (usize, &Arc<ToolEntry>)> + '_ {
        self.catalog.tools.iter().enumerate().filter(|(i, _)| self.selects(*i))
    }

    /// The tools in view, in catalogue order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<ToolEntry>> + '_ {
        self.indexed_tools().map(|(_, e)| e)
    }

    /// How many tools are in view.
    pub fn tool_count(&self) -> usize {
        self.selection
            .as_ref()
            .map_or(self.catalog.tools.len(), |s| s.tools.count())
    }

    /// The tool exposed as `name`, when it is in view.
    pub fn tool(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        let index = self.catalog.tool_index(name)?;
        self.selects(index).then(|| &self.catalog.tools[index])
    }

    /// Whether the catalogue has a tool `name` that this view leaves out.
    pub fn hides_tool(&self, name: &str) -> bool {
        self.catalog.tool_index(name).is_some_and(|i| !self.selects(i))
    }

    /// The resources in view (those of servers in view), in catalogue order.
    pub fn resources(&self) -> impl Iterator<Item = &Arc<ResourceEntry>> + '_ {
        self.catalog.resources.iter().filter(|r| self.selects_server(&r.server))
    }

    /// Whether the catalogue has a resource `uri` that this view leaves out.
    pub fn hides_resource(&self, uri: &str) -> bool {
        self.catalog.resources.iter().any(|r| r.uri() == uri) && !self.resources().any(|r| r.uri() == uri)
    }

    /// The prompts in view (those of servers in view), in catalogue order.
    pub fn prompts(&self) -> impl Iterator<Item = &Arc<PromptEntry>> + '_ {
        self.catalog.prompts.iter().filter(|p| self.selects_server(&p.server))
    }

    /// The prompt exposed as `name`, when it is in view.
    pub fn prompt(&self, name: &str) -> Option<&Arc<PromptEntry>> {
        self.catalog.prompt(name).filter(|p| self.selects_server(&p.server))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Tool;

    #[test]
    fn a_duplicate_tool_name_keeps_the_first_entry() {
        let mut b = Catalog::builder();
        let t = |desc: &str| Tool::new("echo", desc.to_owned(), Arc::new(Default::default()));
        assert!(b.push_tool(ToolEntry::downstream("x_a_echo", "a", t("first"))));
        assert!(!b.push_tool(ToolEntry::downstream("x_a_echo", "b", t("second"))));
        let c = Arc::new(b.build());
        assert_eq!(c.tools().len(), 1);
        assert_eq!(c.tool("x_a_echo").map(|e| e.description()), Some("first"));
        assert_eq!(c.view().tool_count(), 1);
    }

    #[test]
    fn a_restricted_view_never_widens_and_keeps_resources_of_selected_servers() {
        let mut b = Catalog::builder();
        for (server, tool) in [("a", "one"), ("a", "two"), ("b", "three")] {
            let t = Tool::new(tool, "d", Arc::new(Default::default()));
            b.push_tool(ToolEntry::downstream(format!("x_{server}_{tool}"), server, t));
        }
        for server in ["a", "b"] {
            let r = rmcp::model::Resource::new("r://x", "x");
            b.push_resource(ResourceEntry::downstream("r://x", server, r));
        }
        let c = Arc::new(b.build());
        let mut only_b = Selection::none(3);
        only_b.insert(2);
        let view = c.view().restricted(&only_b);
        assert_eq!(view.tools().map(|e| e.name()).collect::<Vec<_>>(), ["x_b_three"]);
        assert!(view.tool("x_a_one").is_none() && view.hides_tool("x_a_one"));
        assert!(!view.hides_tool("x_nope"));
        assert_eq!(view.resources().map(|r| r.server.as_str()).collect::<Vec<_>>(), ["b"]);
        let mut a_and_b = Selection::all(3);
        a_and_b.insert(0);
        let narrower = view.restricted(&a_and_b);
        assert_eq!(narrower.tool_count(), 1, "restricting again never widens");
    }
}
