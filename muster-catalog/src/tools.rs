//! Tool discovery: `list_tools`, `filter_tools`, `describe_tool` and `list_core_tools`.
//!
//! Every operation reads a [`View`] and answers a typed response that serializes to the shape
//! `muster-mcp-tools.txt` documents. Entries are the discovery-tier projection (name, one-line
//! summary, server, kind, annotations) unless `include_schema` asks for the full description and
//! the input schema; `describe_tool` is the authoritative detail.
//!
//! `query` ranks by field-weighted BM25F (see [`crate::rank`]) over the tool's name, the first
//! non-empty line of its description and the rest of it, in falling weight, against statistics
//! the catalogue computed once when it was built. The query's function words (the, how, of, ...)
//! are dropped unless it has no other word, ubiquitous verbs (list, get, ...) count a quarter,
//! and plurals and other inflections fold onto their base word (`policies` finds `policy`).
//! Ranked tools come best first with a score (rounded to 4 decimals, at least 0.0001), ties in
//! catalogue order; tools matching no query term are dropped. With `explain: true` each ranked
//! tool also carries its [`ScoreExplanation`]: the terms it matched, each term's idf and
//! contribution, and the fields (`name`, `first_line`, `rest`, `parameters`) it occurs in.

use std::{collections::BTreeMap, sync::Arc};

use muster_core::{JsonObject, SchemaText, ToolEntry, ToolKind};
use rmcp::model::ToolAnnotations;
use serde::Serialize;

use crate::{
    CatalogError, View,
    args::{
        FILTER_DEFAULT_LIMIT, LIST_TOOLS_DEFAULT_LIMIT, Paging, opt_bool, opt_string, opt_string_map, required_string,
    },
    pattern::NamePattern,
    toolset::{InlineToolset, PresetSummary, Presets, resolve},
};

/// What bounds a discovery request besides its view: the toolset the request declared (already
/// applied to the view) and the presets selectors resolve against.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The known presets.
    pub presets: &'a Presets,
    /// The request's declared toolset (`X-muster-Toolset`), when it declared one.
    pub declared: Option<&'a InlineToolset>,
    /// The declared selectors that selected nothing.
    pub declared_unmatched: &'a [String],
}

impl<'a> Scope<'a> {
    /// A request that declared no toolset.
    pub fn unscoped(presets: &'a Presets) -> Self {
        Self {
            presets,
            declared: None,
            declared_unmatched: &[],
        }
    }
}

/// A server whose tools a sign-in would unlock (`servers_requiring_auth`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerAuthHint {
    /// The MCPServer's name.
    pub name: String,
    /// Its session state, `auth_required` typically.
    pub status: String,
    /// The tool that signs in (`core_auth_login`).
    pub auth_tool: String,
    /// The prefix its tools will carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_prefix: Option<String>,
    /// Its family, for a family member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
}

/// The filters a page was computed with, echoed in the response.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolFilters {
    /// The name glob.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The description substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_filter: Option<String>,
    /// The ranking query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The label facets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Whether names matched case-sensitively.
    pub case_sensitive: bool,
    /// Whether full descriptions and schemas were returned.
    pub include_schema: bool,
    /// The page size.
    pub limit: usize,
    /// The entries skipped.
    pub offset: usize,
}

/// One tool in a page: the entry, and how it is shown.
#[derive(Debug, Clone)]
pub struct ToolListing {
    /// The catalogue entry.
    pub entry: Arc<ToolEntry>,
    /// Whether the full description and the input schema are shown (else the summary).
    pub include_schema: bool,
    /// The relevance score, when the page was ranked by a query.
    pub score: Option<f64>,
    /// Why it scored so, when `explain` asked.
    pub explanation: Option<ScoreExplanation>,
}

/// Why a tool scored what it did for a `filter_tools` query (`explain: true`): the wire form of
/// the ranker's [`Explanation`](crate::rank::Explanation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreExplanation {
    /// The unrounded BM25F score: the sum of the terms' contributions.
    pub score: f64,
    /// The query terms the tool matched, in query order.
    pub terms: Vec<TermScore>,
    /// With a semantic ranker: how its ranking and BM25F's fused into the tool's score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<HybridScore>,
}

/// How a tool's fused score came about (hybrid ranking).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HybridScore {
    /// Cosine similarity of the tool's and the query's vectors.
    pub similarity: f32,
    /// Rank among the lexical (BM25F) matches, 1 = best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_rank: Option<usize>,
    /// Rank among the candidates most similar to the query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_rank: Option<usize>,
    /// What the lexical ranking adds to the fused score.
    pub lexical_part: f64,
    /// What the semantic ranking adds.
    pub semantic_part: f64,
    /// The fused score (unrounded): the sum of the parts.
    pub score: f64,
}

/// One query term's part of a score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TermScore {
    /// The term as analysed (lowercase, inflections folded).
    pub term: String,
    /// `content`, `ubiquitous_verb` (counts a quarter) or `function_word`.
    pub class: &'static str,
    /// Its inverse document frequency in the catalogue.
    pub idf: f64,
    /// How many tools of the catalogue contain it.
    pub document_frequency: u64,
    /// The sum of the fields' weighted term frequencies.
    pub weighted_tf: f64,
    /// What it adds to the score: query weight × idf × saturated `weighted_tf`.
    pub contribution: f64,
    /// The fields it occurs in.
    pub fields: Vec<FieldScore>,
}

/// One field's part of a term's weighted term frequency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldScore {
    /// `name`, `first_line` (of the description), `rest` (of the description) or `parameters`
    /// (their names and descriptions).
    pub field: &'static str,
    /// How often the term occurs in it.
    pub tf: u32,
    /// The field's weight.
    pub weight: f64,
    /// Its length in terms, against the catalogue's average.
    pub length: u32,
    /// The catalogue's average length of the field.
    pub average_length: f64,
    /// `weight · tf / length norm`.
    pub weighted_tf: f64,
}

impl From<crate::rank::Explanation> for ScoreExplanation {
    fn from(explanation: crate::rank::Explanation) -> Self {
        use crate::rank::TermClass;
        Self {
            score: explanation.score,
            hybrid: explanation.hybrid.map(|h| HybridScore {
                similarity: h.similarity,
                lexical_rank: h.lexical_rank,
                semantic_rank: h.semantic_rank,
                lexical_part: h.lexical_part,
                semantic_part: h.semantic_part,
                score: h.score,
            }),
            terms: explanation
                .terms
                .into_iter()
                .map(|t| TermScore {
                    term: t.term,
                    class: match t.class {
                        TermClass::Content => "content",
                        TermClass::UbiquitousVerb => "ubiquitous_verb",
                        TermClass::FunctionWord => "function_word",
                    },
                    idf: t.idf,
                    document_frequency: t.document_frequency,
                    weighted_tf: t.weighted_tf,
                    contribution: t.contribution,
                    fields: t
                        .fields
                        .into_iter()
                        .map(|f| FieldScore {
                            field: f.field.name(),
                            tf: f.tf,
                            weight: f.weight,
                            length: f.length,
                            average_length: f.average_length,
                            weighted_tf: f.weighted_tf,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl ToolListing {
    fn of(entry: &Arc<ToolEntry>, include_schema: bool, score: Option<f64>) -> Self {
        Self {
            entry: Arc::clone(entry),
            include_schema,
            score,
            explanation: None,
        }
    }

    /// The exposed name.
    pub fn name(&self) -> &str {
        self.entry.name()
    }
}

/// The wire shape of a [`ToolListing`].
#[derive(Serialize)]
struct ListingRepr<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<&'a str>,
    kind: ToolKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a ToolAnnotations>,
    #[serde(rename = "inputSchema", skip_serializing_if = "Option::is_none")]
    input_schema: Option<&'a SchemaText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explain: Option<&'a ScoreExplanation>,
}

impl Serialize for ToolListing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = &self.entry;
        ListingRepr {
            name: e.name(),
            description: self.include_schema.then(|| e.description()),
            summary: (!self.include_schema).then_some(e.summary.as_str()),
            score: self.score,
            labels: &e.labels,
            server: e.server.as_deref(),
            kind: e.kind,
            annotations: e.tool.annotations(),
            input_schema: self.include_schema.then(|| e.tool.input_schema()),
            explain: self.explanation.as_ref(),
        }
        .serialize(serializer)
    }
}

/// A page of tools: the answer of `list_tools`, `filter_tools` and `list_core_tools`.
#[derive(Debug, Clone, Serialize)]
pub struct ToolPage {
    /// The filters applied.
    pub filters: ToolFilters,
    /// Tools in the caller's catalogue.
    pub total_tools: usize,
    /// Entries in this page.
    pub filtered_count: usize,
    /// Matches across the caller's catalogue.
    pub total: usize,
    /// Whether more matches follow this page.
    pub truncated: bool,
    /// This page.
    pub tools: Vec<ToolListing>,
    /// The toolset selectors that bound the request, when it declared one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolset: Option<Vec<String>>,
    /// The selectors of `toolset` that selected nothing for the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolset_unmatched: Option<Vec<String>>,
    /// Servers a sign-in would unlock whose tools the toolset selects.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub toolset_requiring_auth: Vec<ServerAuthHint>,
    /// The known presets (with a `toolset` argument or `include_presets`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presets: Option<Vec<PresetSummary>>,
    /// Servers a sign-in would unlock (neither paged nor narrowed by a toolset).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers_requiring_auth: Vec<ServerAuthHint>,
}

/// `list_tools {limit, offset}`: one bounded page of the caller's catalogue (50 by default).
pub fn list_tools(view: &View, args: &JsonObject, scope: Scope<'_>) -> Result<ToolPage, CatalogError> {
    let paging = Paging::from_args(args, LIST_TOOLS_DEFAULT_LIMIT)?;
    let all: Vec<&Arc<ToolEntry>> = view.tools().collect();
    let mut page = page_of(view, &all, None, paging, ToolFilters::default(), false);
    page.toolset = scope.declared.map(|t| t.declared().to_vec());
    Ok(page)
}

/// `filter_tools`: the discovery tier (pattern, description filter, query, labels, paging, an
/// inline `toolset` resolved within the request's view, `include_presets`).
pub fn filter_tools(view: &View, args: &JsonObject, scope: Scope<'_>) -> Result<ToolPage, CatalogError> {
    let inline = match args.get("toolset") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Array(items)) => {
            let declared = items
                .iter()
                .map(|v| v.as_str().map(|s| s.trim().to_owned()))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| CatalogError::invalid("toolset must be an array of strings"))?;
            Some(InlineToolset::parse(declared).map_err(CatalogError::from)?)
        }
        Some(_) => return Err(CatalogError::invalid("toolset must be an array of strings")),
    };
    let include_presets = opt_bool(args, "include_presets", false)?;
    let (scoped, echo, unmatched) = match &inline {
        Some(toolset) => {
            let resolved = resolve(view.catalog(), scope.presets, toolset)?;
            (
                view.restricted(&resolved.selection),
                Some(toolset.declared().to_vec()),
                Some(resolved.unmatched),
            )
        }
        None => (
            view.clone(),
            scope.declared.map(|t| t.declared().to_vec()),
            scope.declared.map(|_| scope.declared_unmatched.to_vec()),
        ),
    };
    let mut page = filter_in(&scoped, args)?;
    page.toolset = echo;
    page.toolset_unmatched = unmatched;
    page.presets = (inline.is_some() || include_presets).then(|| scope.presets.summaries());
    Ok(page)
}

fn filter_in(view: &View, args: &JsonObject) -> Result<ToolPage, CatalogError> {
    let paging = Paging::from_args(args, FILTER_DEFAULT_LIMIT)?;
    let pattern = opt_string(args, "pattern")?.filter(|p| !p.is_empty());
    let description_filter = opt_string(args, "description_filter")?.filter(|d| !d.is_empty());
    let query = opt_string(args, "query")?.filter(|q| !q.trim().is_empty());
    let labels = opt_string_map(args, "labels")?;
    let case_sensitive = opt_bool(args, "case_sensitive", false)?;
    let include_schema = opt_bool(args, "include_schema", false)?;
    let explain = opt_bool(args, "explain", false)?;
    if explain && query.is_none() {
        return Err(CatalogError::invalid(
            "explain explains a query's ranking: give a query too",
        ));
    }
    let matcher = pattern.map(|p| NamePattern::new(p, case_sensitive)).transpose()?;
    let description_lower = description_filter.map(str::to_lowercase);

    let mut matches: Vec<&Arc<ToolEntry>> = view
        .tools()
        .filter(|e| matcher.as_ref().is_none_or(|m| m.matches(e.name())))
        .filter(|e| {
            description_lower
                .as_deref()
                .is_none_or(|d| e.description().to_lowercase().contains(d))
        })
        .filter(|e| labels.iter().all(|(k, v)| e.labels.get(k) == Some(v)))
        .collect();

    // The candidate set a query ranks, kept for `explain` (fused ranks depend on it).
    let candidates = if explain { matches.clone() } else { Vec::new() };
    let scores = query.map(|q| {
        let ranked = rank(view, &matches, q, paging.offset.saturating_add(paging.limit));
        matches = ranked.iter().map(|&(i, _)| matches[i]).collect();
        ranked.into_iter().map(|(_, s)| s).collect::<Vec<_>>()
    });

    let filters = ToolFilters {
        pattern: pattern.map(str::to_owned),
        description_filter: description_filter.map(str::to_owned),
        query: query.map(str::to_owned),
        labels,
        case_sensitive,
        include_schema,
        limit: paging.limit,
        offset: paging.offset,
    };
    let mut page = page_of(view, &matches, scores.as_deref(), paging, filters, include_schema);
    if explain && let Some(query) = query {
        let index = view.catalog().search_index();
        let query = index.query(query);
        for listing in &mut page.tools {
            listing.explanation = index
                .doc_id(&listing.entry)
                .map(|doc| ScoreExplanation::from(index.explain_among(&query, doc, &candidates)));
        }
    }
    Ok(page)
}

/// `list_core_tools {include_schema = true}`: every core tool, uncapped.
pub fn list_core_tools(view: &View, args: &JsonObject) -> Result<ToolPage, CatalogError> {
    let include_schema = opt_bool(args, "include_schema", true)?;
    let core: Vec<&Arc<ToolEntry>> = view.tools().filter(|e| e.kind == ToolKind::Core).collect();
    let paging = Paging {
        limit: core.len().max(1),
        offset: 0,
    };
    let filters = ToolFilters {
        pattern: Some("core_*".to_owned()),
        include_schema,
        limit: paging.limit,
        ..ToolFilters::default()
    };
    Ok(page_of(view, &core, None, paging, filters, include_schema))
}

fn page_of(
    view: &View,
    matches: &[&Arc<ToolEntry>],
    scores: Option<&[f64]>,
    paging: Paging,
    mut filters: ToolFilters,
    include_schema: bool,
) -> ToolPage {
    filters.limit = paging.limit;
    filters.offset = paging.offset;
    let (page, truncated) = paging.page(matches);
    let start = paging.offset.min(matches.len());
    let tools: Vec<ToolListing> = page
        .iter()
        .enumerate()
        .map(|(i, e)| ToolListing::of(e, include_schema, scores.map(|s| s[start + i])))
        .collect();
    ToolPage {
        filters,
        total_tools: view.tool_count(),
        filtered_count: tools.len(),
        total: matches.len(),
        truncated,
        tools,
        toolset: None,
        toolset_unmatched: None,
        toolset_requiring_auth: Vec::new(),
        presets: None,
        servers_requiring_auth: Vec::new(),
    }
}

/// BM25F ranking of `candidates` against the snapshot's search index (built once with the
/// catalogue): (index into candidates, shown score) for every match, the best `top` first and in
/// order (ties in candidate order), the rest after them unordered; candidates matching no query
/// term are dropped.
fn rank(view: &View, candidates: &[&Arc<ToolEntry>], query: &str, top: usize) -> Vec<(usize, f64)> {
    let index = view.catalog().search_index();
    index
        .rank_top(&index.query(query), candidates, top)
        .into_iter()
        .map(|hit| (hit.position, crate::rank::display_score(hit.score)))
        .collect()
}

/// The answer of `describe_tool`: the authoritative detail and how to call the tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescription<'a> {
    /// The exposed name.
    pub name: &'a str,
    /// The tool's title (its own, else its annotations').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
    /// The full description.
    pub description: &'a str,
    /// The MCPServer that provides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<&'a str>,
    /// tool, workflow or core.
    pub kind: ToolKind,
    /// The MCP annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<&'a ToolAnnotations>,
    /// The labels, when it has any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: &'a BTreeMap<String, String>,
    /// The input schema.
    pub input_schema: &'a SchemaText,
    /// The contract of the structuredContent it returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<&'a SchemaText>,
    /// The call that runs it.
    pub invocation: String,
}

/// `describe_tool {name}`.
pub fn describe_tool<'a>(
    view: &'a View,
    args: &JsonObject,
    scope: Scope<'_>,
) -> Result<ToolDescription<'a>, CatalogError> {
    let name = required_string(args, "name")?;
    let entry = view.tool(name).ok_or_else(|| match scope.declared {
        Some(toolset) if view.hides_tool(name) => CatalogError::ToolOutsideToolset {
            name: name.to_owned(),
            selectors: toolset.declared().to_vec(),
        },
        _ => CatalogError::ToolNotFound { name: name.to_owned() },
    })?;
    Ok(ToolDescription {
        name: entry.name(),
        title: entry.title(),
        description: entry.description(),
        server: entry.server.as_deref(),
        kind: entry.kind,
        annotations: entry.tool.annotations(),
        labels: &entry.labels,
        input_schema: entry.tool.input_schema(),
        output_schema: entry.tool.output_schema(),
        invocation: invocation(entry.name()),
    })
}

/// The `invocation` line of `describe_tool`.
pub fn invocation(name: &str) -> String {
    format!(
        "Call it through the call_tool meta-tool: call_tool with {{\"name\": \"{name}\", \"arguments\": {{...}}}}, \
         arguments per inputSchema. Tools inside muster are not callable by name directly \u{2014} only the meta-tools are."
    )
}

#[cfg(test)]
mod tests;
