//! Prompt discovery: `list_prompts`, `filter_prompts`, `describe_prompt`, and finding the entry
//! `get_prompt` runs.

use std::sync::Arc;

use muster_core::{JsonObject, PromptEntry};
use rmcp::model::PromptArgument;
use serde::Serialize;

use crate::{CatalogError, View, args::required_string, resources::ServerFilters, tools::Scope};

/// One prompt in a listing.
#[derive(Debug, Clone, Serialize)]
pub struct PromptListing<'a> {
    /// The exposed name.
    pub name: &'a str,
    /// Its description.
    pub description: &'a str,
    /// The MCPServer that provides it.
    pub server: &'a str,
}

impl<'a> PromptListing<'a> {
    fn of(entry: &'a PromptEntry) -> Self {
        Self {
            name: entry.name(),
            description: entry.prompt.description.as_deref().unwrap_or_default(),
            server: &entry.server,
        }
    }
}

/// A page of prompts: the answer of `filter_prompts`.
#[derive(Debug, Clone, Serialize)]
pub struct PromptPage<'a> {
    /// The filters applied.
    pub filters: ServerFilters,
    /// Prompts in the caller's catalogue.
    pub total_prompts: usize,
    /// Entries in this page.
    pub filtered_count: usize,
    /// Matches.
    pub total: usize,
    /// Whether more matches follow this page.
    pub truncated: bool,
    /// This page.
    pub prompts: Vec<PromptListing<'a>>,
}

/// The answer of `describe_prompt`.
#[derive(Debug, Clone, Serialize)]
pub struct PromptDescription<'a> {
    /// The exposed name.
    pub name: &'a str,
    /// Its title, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
    /// Its description.
    pub description: &'a str,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a [PromptArgument]>,
    /// The MCPServer that provides it.
    pub server: &'a str,
}

/// `list_prompts`: every prompt with its server.
pub fn list_prompts(view: &View) -> Vec<PromptListing<'_>> {
    view.prompts().map(|e| PromptListing::of(e)).collect()
}

/// `filter_prompts {pattern, server, case_sensitive, limit, offset}`.
pub fn filter_prompts<'a>(view: &'a View, args: &JsonObject) -> Result<PromptPage<'a>, CatalogError> {
    let (filters, matcher) = ServerFilters::from_args(args)?;
    let matches: Vec<&Arc<PromptEntry>> = view
        .prompts()
        .filter(|e| filters.server.as_deref().is_none_or(|s| e.server == s))
        .filter(|e| matcher.as_ref().is_none_or(|m| m.matches(e.name())))
        .collect();
    let (page, truncated) = filters.paging().page(&matches);
    let prompts: Vec<PromptListing<'a>> = page.iter().map(|e| PromptListing::of(e)).collect();
    Ok(PromptPage {
        total_prompts: view.prompts().count(),
        filtered_count: prompts.len(),
        total: matches.len(),
        truncated,
        prompts,
        filters,
    })
}

/// The entry `describe_prompt` and `get_prompt` mean by `{name}`.
pub fn find_prompt<'a>(
    view: &'a View,
    args: &JsonObject,
    scope: Scope<'_>,
) -> Result<&'a Arc<PromptEntry>, CatalogError> {
    let name = required_string(args, "name")?;
    view.prompt(name).ok_or_else(|| match scope.declared {
        Some(toolset) if view.catalog().prompt(name).is_some() => CatalogError::PromptOutsideToolset {
            name: name.to_owned(),
            selectors: toolset.declared().to_vec(),
        },
        _ => CatalogError::PromptNotFound { name: name.to_owned() },
    })
}

/// `describe_prompt {name}`.
pub fn describe_prompt<'a>(
    view: &'a View,
    args: &JsonObject,
    scope: Scope<'_>,
) -> Result<PromptDescription<'a>, CatalogError> {
    let e = find_prompt(view, args, scope)?;
    Ok(PromptDescription {
        name: e.name(),
        title: e.prompt.title.as_deref(),
        description: e.prompt.description.as_deref().unwrap_or_default(),
        arguments: e.prompt.arguments.as_deref(),
        server: &e.server,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use rmcp::model::Prompt;
    use serde_json::{Value, json};

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    fn fixture() -> Arc<Catalog> {
        let mut b = Catalog::builder();
        for (server, name) in [("a", "greet"), ("a", "summarize"), ("b", "greet")] {
            let p = Prompt::new(
                name,
                Some(format!("{name} prompt")),
                Some(vec![PromptArgument::new("who").with_required(true)]),
            );
            b.push_prompt(PromptEntry::downstream(format!("x_{server}_{name}"), server, p));
        }
        Arc::new(b.build())
    }

    #[test]
    fn prompts_are_listed_and_filtered_by_name_and_server() {
        let c = fixture();
        let view = c.view();
        assert_eq!(list_prompts(&view).len(), 3);
        let page = filter_prompts(&view, &obj(json!({"pattern": "x_*_greet"}))).expect("page");
        assert_eq!(page.total, 2);
        let page = filter_prompts(&view, &obj(json!({"server": "a"}))).expect("page");
        let names: Vec<&str> = page.prompts.iter().map(|p| p.name).collect();
        assert_eq!(names, ["x_a_greet", "x_a_summarize"]);
    }

    #[test]
    fn describe_prompt_names_its_arguments_and_refuses_unknown_prompts() {
        let c = fixture();
        let view = c.view();
        let presets = crate::toolset::Presets::default();
        let scope = Scope::unscoped(&presets);
        let d = describe_prompt(&view, &obj(json!({"name": "x_b_greet"})), scope).expect("found");
        let json = serde_json::to_value(&d).expect("json");
        assert_eq!(json["arguments"][0], json!({"name": "who", "required": true}));
        assert_eq!(json["server"], "b");
        let err = describe_prompt(&view, &obj(json!({"name": "x_c_greet"})), scope).expect_err("missing");
        assert_eq!(err.to_string(), "Prompt not found: x_c_greet");
    }
}
