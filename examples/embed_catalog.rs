//! BM25F tool search over your own tool list, with no server: the catalogue of muster-catalog as
//! a library.
//!
//! ```text
//! cargo run --example embed_catalog                                  # a few sample queries
//! cargo run --example embed_catalog -- "create a pull request"       # your query
//! cargo run --example embed_catalog -- --explain "restart the pods"  # and why the top hit won
//! ```
//!
//! It builds a [`Catalog`] from a list of rmcp [`Tool`]s (here a fixed list standing in for the
//! tools of three MCP servers; in your program, whatever tools you have), then answers queries
//! the way the gateway's `filter_tools` meta-tool does: ranked best first with a score, over the
//! tool's name, the first line of its description and the rest of it. The catalogue is built
//! once (its search index with it); each query reads it without copying anything.
//!
//! `filter_tools` takes the meta-tool's JSON arguments (`query`, `pattern`, `labels`, `limit`,
//! ...) and answers its documented page; the lower level, [`SearchIndex`], ranks any candidate
//! set and explains a score term by term.
//!
//! [`SearchIndex`]: muster::catalog::rank::SearchIndex

#![allow(clippy::print_stdout, reason = "an example that prints its results")]

use std::sync::Arc;

use muster::{
    catalog::{
        Catalog,
        tools::{self, Scope},
        toolset::Presets,
    },
    core::{JsonObject, NameRules, ToolEntry},
};
use rmcp::model::{Tool, ToolAnnotations};

/// The tools to search: (server, tool name, description, read-only).
const TOOLS: &[(&str, &str, &str, bool)] = &[
    (
        "github",
        "create_pull_request",
        "Create a pull request.\nOpens a pull request from a branch against the base branch.",
        false,
    ),
    (
        "github",
        "list_pull_requests",
        "List the open pull requests of a repository.",
        true,
    ),
    (
        "github",
        "merge_pull_request",
        "Merge a pull request once its checks pass.",
        false,
    ),
    ("github", "create_issue", "Open a new issue in a repository.", false),
    (
        "github",
        "search_issues",
        "Search issues and pull requests by text, label or author.",
        true,
    ),
    (
        "kubernetes",
        "list_pods",
        "List pods in a namespace with their status.",
        true,
    ),
    (
        "kubernetes",
        "get_pod_logs",
        "Get the logs of one container of a pod.",
        true,
    ),
    (
        "kubernetes",
        "restart_deployment",
        "Restart a deployment.\nRolls its pods one by one; the deployment keeps serving.",
        false,
    ),
    (
        "kubernetes",
        "scale_deployment",
        "Scale a deployment to a number of replicas.",
        false,
    ),
    (
        "calendar",
        "list_events",
        "List calendar events between two dates.",
        true,
    ),
    (
        "calendar",
        "create_event",
        "Create a calendar event and invite people to it.",
        false,
    ),
    (
        "calendar",
        "find_free_time",
        "Find a free slot in the calendars of several people.",
        true,
    ),
];

/// The catalogue of [`TOOLS`], exposed as muster would (`x_<server>_<tool>`).
fn catalog() -> Arc<Catalog> {
    let names = NameRules::default();
    let mut builder = Catalog::builder();
    for &(server, name, description, read_only) in TOOLS {
        let tool = Tool::new(name, description, Arc::new(JsonObject::new()))
            .with_annotations(ToolAnnotations::new().read_only(read_only));
        builder.push_tool(ToolEntry::downstream(names.server_tool(server, name), server, tool));
    }
    Arc::new(builder.build())
}

/// `filter_tools {query, limit}` over `catalog`: the tools' names with their scores, best first.
fn search(catalog: &Arc<Catalog>, query: &str, limit: usize) -> Vec<(String, f64)> {
    let mut args = JsonObject::new();
    args.insert("query".into(), query.into());
    args.insert("limit".into(), limit.into());
    let presets = Presets::default();
    match tools::filter_tools(&catalog.view(), &args, Scope::unscoped(&presets)) {
        Ok(page) => page
            .tools
            .iter()
            .map(|t| (t.name().to_owned(), t.score.unwrap_or_default()))
            .collect(),
        // The error is the meta-tool's documented message (a bad pattern, a bad limit, ...).
        Err(e) => {
            eprintln!("filter_tools: {e}");
            Vec::new()
        }
    }
}

fn main() {
    let mut explain = false;
    let mut queries = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--explain" => explain = true,
            _ => queries.push(arg),
        }
    }
    if queries.is_empty() {
        queries = [
            "create a pull request",
            "show me the logs of a pod",
            "when is everyone free",
            "the issues",
        ]
        .map(str::to_owned)
        .to_vec();
    }
    let catalog = catalog();
    println!("{} tools in the catalogue\n", catalog.tools().len());
    for query in &queries {
        println!("query: {query:?}");
        let hits = search(&catalog, query, 5);
        if hits.is_empty() {
            println!("  (no tool matches)");
        }
        for (name, score) in &hits {
            let summary = catalog.tool(name).map(|e| e.summary.as_str()).unwrap_or_default();
            println!("  {score:>8.4}  {name:<36} {summary}");
        }
        if explain && let Some((top, _)) = hits.first() {
            // The scorer's twin: which query term matched which field, with what weight.
            let index = catalog.search_index();
            let analysed = index.query(query);
            if let Some(doc) = catalog.tool(top).and_then(|e| index.doc_id(e)) {
                println!("\n{}", index.explain(&analysed, doc));
            }
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(query: &str) -> Option<String> {
        search(&catalog(), query, 5).into_iter().next().map(|(name, _)| name)
    }

    #[test]
    fn a_query_finds_its_tool_first() {
        assert_eq!(
            top("create a pull request").as_deref(),
            Some("x_github_create_pull_request")
        );
        assert_eq!(
            top("show me the logs of a pod").as_deref(),
            Some("x_kubernetes_get_pod_logs")
        );
        assert_eq!(
            top("restart the pods").as_deref(),
            Some("x_kubernetes_restart_deployment")
        );
        assert_eq!(
            top("when is everyone free").as_deref(),
            Some("x_calendar_find_free_time")
        );
    }

    #[test]
    fn plurals_fold_and_function_words_are_dropped() {
        let hits = search(&catalog(), "the issues", 5);
        let names: Vec<&str> = hits.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x_github_create_issue", "x_github_search_issues"]);
        assert!(hits[0].1 > hits[1].1, "best first: {hits:?}");
    }

    #[test]
    fn equal_scores_keep_the_catalogue_order() {
        let hits = search(&catalog(), "create a pull request", 5);
        assert_eq!(hits[1].1, hits[2].1, "{hits:?}");
        assert_eq!(
            [hits[1].0.as_str(), hits[2].0.as_str()],
            ["x_github_list_pull_requests", "x_github_merge_pull_request"]
        );
    }

    #[test]
    fn a_query_that_matches_nothing_answers_no_tools() {
        assert!(search(&catalog(), "quantum entanglement", 5).is_empty());
    }
}
