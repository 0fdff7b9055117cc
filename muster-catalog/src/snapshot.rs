//! The immutable catalogue snapshot and the views requests read it through.

use std::{collections::HashMap, sync::Arc};

use muster_core::{PromptEntry, ResourceEntry, ToolEntry};

/// Every tool, resource and prompt the gateway exposes at one moment. Built once per change,
/// shared behind an `Arc`, never mutated.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Arc<ToolEntry>>,
    tool_index: HashMap<Arc<str>, usize>,
    resources: Vec<Arc<ResourceEntry>>,
    prompts: Vec<Arc<PromptEntry>>,
    prompt_index: HashMap<Arc<str>, usize>,
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

    /// A view of the whole catalogue.
    pub fn view(self: &Arc<Self>) -> View {
        View {
            catalog: Arc::clone(self),
        }
    }
}

/// Collects entries for a [`Catalog`]. Entries keep the order they are pushed in; a second entry
/// with a name already taken is dropped (the first keeps it) and reported by [`Self::build`]'s
/// log line, so a collision never makes a name ambiguous.
#[derive(Debug, Default)]
pub struct CatalogBuilder {
    catalog: Catalog,
}

impl CatalogBuilder {
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

    /// The finished snapshot.
    pub fn build(self) -> Catalog {
        self.catalog
    }
}

/// What one request sees of a catalogue: a selection over the snapshot, never a copy.
#[derive(Debug, Clone)]
pub struct View {
    catalog: Arc<Catalog>,
}

impl View {
    /// The snapshot this view reads.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The tools in view, in catalogue order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<ToolEntry>> + '_ {
        self.catalog.tools.iter()
    }

    /// How many tools are in view.
    pub fn tool_count(&self) -> usize {
        self.catalog.tools.len()
    }

    /// The tool exposed as `name`, when it is in view.
    pub fn tool(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.catalog.tool(name)
    }

    /// The resources in view, in catalogue order.
    pub fn resources(&self) -> impl Iterator<Item = &Arc<ResourceEntry>> + '_ {
        self.catalog.resources.iter()
    }

    /// The prompts in view, in catalogue order.
    pub fn prompts(&self) -> impl Iterator<Item = &Arc<PromptEntry>> + '_ {
        self.catalog.prompts.iter()
    }

    /// The prompt exposed as `name`, when it is in view.
    pub fn prompt(&self, name: &str) -> Option<&Arc<PromptEntry>> {
        self.catalog.prompt(name)
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
}
