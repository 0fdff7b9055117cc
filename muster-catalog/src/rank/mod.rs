//! Relevance ranking for `filter_tools {query}`: field-weighted BM25F over an index built once
//! per catalogue snapshot.
//!
//! [`SearchIndex`] is built by [`crate::CatalogBuilder::build`] (reach it through
//! [`crate::Catalog::search_index`]): per document and field the term frequencies and lengths,
//! per field the average length, per term the document frequency, over the whole snapshot. A
//! query never re-reads the tools' text: [`SearchIndex::rank`] scores a candidate set (the tools
//! that passed the pattern, description and label filters and the caller's view) against those
//! statistics, reading only the postings of the query's terms. The statistics sit behind
//! [`CorpusStatistics`], so a view with statistics of its own can reuse the scorer.
//!
//! ```
//! use std::sync::Arc;
//! use muster_catalog::{Catalog, rank::Field};
//! use muster_core::ToolEntry;
//! use rmcp::model::Tool;
//!
//! let mut builder = Catalog::builder();
//! for (name, description) in [
//!     ("get_policy", "Get one OPA policy by name."),
//!     ("list_pods", "List pods in a namespace."),
//!     ("delete_pod", "Delete a pod."),
//! ] {
//!     let tool = Tool::new(name, description, Arc::new(Default::default()));
//!     builder.push_tool(ToolEntry::downstream(format!("x_k8s_{name}"), "k8s", tool));
//! }
//! let catalog = builder.build();
//! let index = catalog.search_index();
//!
//! // Function words go, `list` counts a quarter, `pods` and `policies` fold onto `pod`, `policy`.
//! let query = index.query("how do I list the pods?");
//! let hits = index.rank(&query, catalog.tools());
//! let names: Vec<&str> = hits.iter().map(|h| catalog.tools()[h.position].name()).collect();
//! assert_eq!(names, ["x_k8s_list_pods", "x_k8s_delete_pod"]);
//!
//! // Why the first one is first: which term matched which field, with what weight.
//! let why = index.explain(&query, hits[0].doc);
//! assert_eq!(why.term("pod").and_then(|t| t.field(Field::Name)).map(|f| f.tf), Some(1));
//! assert!((why.score - hits[0].score).abs() < 1e-12);
//!
//! let policies = index.query("policies");
//! assert_eq!(index.rank(&policies, catalog.tools()).len(), 1);
//! ```
//!
//! # The design, and how it was chosen
//!
//! - **Fields** ([`Field`]): the tool's own name, the first non-empty line of its description,
//!   the rest of the description, its parameters' names and descriptions; weights 3, 1, 0.5 and
//!   0.3. BM25F: the weighted, length-normalised term frequencies of the fields are summed
//!   before one saturation, so a term repeated across fields saturates once:
//!
//!   ```text
//!   norm(d, f)  = 1 − b_f + b_f · len(d, f) / avglen(f)          length_norm
//!   wtf(t, d)   = Σ_f w_f · tf(t, d, f) / norm(d, f)             weighted_field_tf, summed
//!   idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))      idf
//!   score(t, d) = q(t) · idf(t) · wtf · (k1 + 1) / (wtf + k1)    saturate, TermWeight
//!   score(d)    = Σ over the query's distinct terms t
//!   ```
//! - **Parameters** ([`Bm25fParams`]): k1 1.2; b 0.5 for the name and the first line (short
//!   fields, whose length says little), 0.75 for the rest and the parameters. The rest field is
//!   not exercised by the benchmark data (single-line descriptions), so its 0.5 is a choice, not
//!   a measurement.
//! - **The parameters field**: what a tool takes says much of what it is for ("channel: where
//!   the message goes"), but less than its description, hence a weak field. Only bfcl's tools
//!   describe parameters; there recall@5 went .780 → .841 (weight 0.15: .829, 0.5: .848; R@1
//!   .516 → .582, MRR@10 .658 → .722), and the other sets cannot move. 0.3 keeps it under the
//!   rest of the description. Read with [`muster_core::SchemaText::for_each_parameter`], the
//!   schema's maps are not built.
//! - **Server prefix** ([`PrefixTokens`]): the `x_<server>_` of an exposed name matches (a query
//!   naming the server finds its tools) but does not count in the name's length, since every tool
//!   of the server carries it. Counting it or dropping it moved recall@5 by at most 0.003.
//! - **Tokens** ([`Analyzer`]): alphanumeric runs, split at camelCase (`runJarAgent`), after an
//!   acronym (`HTTPServer`) and before a capital after a digit (`ec2Instance`); lowercased.
//! - **Folding** ([`fold`]): a light English folding of plurals and inflections, applied to the
//!   index and the query alike. Measured on the three data sets (recall@5, bfcl / metatool /
//!   metatool_multi, metatool on every 4th query): none .737 / .566 / .597; plurals only
//!   .760 / .625 / .647; this folding .780 / .639 / .687; the Snowball English stemmer
//!   (`rust-stemmers`) .778 / .644 / .691. The stemmer does not measurably help (±.005, either
//!   way), so there is no dependency and terms stay readable in an [`Explanation`].
//! - **Function words** are dropped from the query unless it has no other word (a general
//!   English stop-word list); keeping them costs .026 / .074 / .128 recall@5.
//! - **Ubiquitous verbs** (list, get, show, find, fetch, help, want, ...) count a quarter
//!   (`q(t)` = 0.25); a general list of reading and asking verbs, not one drawn from the data.
//! - **Order**: best first by `total_cmp`, ties by candidate (catalogue) order; zero scores are
//!   dropped; shown scores are [`display_score`]s (4 decimals, at least 0.0001).
//!
//! Parameters were tuned on the data sets with coarse grids (k1 0.6–3, name weight 1.5–6, b
//! 0.3–1, verb weight 0–1) and the round values of a broad plateau kept: over those ranges bfcl
//! and metatool recall@5 move by about 0.01 (dropping verbs outright, weight 0, costs bfcl 0.013),
//! metatool_multi (497 queries over 15 distinct tools) by up to 0.03. Nothing is per data set. `reference` is a port of Go muster's ranker
//! for comparison (the `rankbench` example and the benches); [`RankingConfig::muster_compatible`]
//! runs this engine with Go's settings and reproduces its ranking.

//!
//! # Hybrid ranking (optional)
//!
//! With a [`semantic::SemanticRanking`] in the [`RankingConfig`] (the gateway's
//! `aggregator.ranking.model`), BM25F is fused with the cosine similarity of a static embedding
//! model ([`semantic`]): every tool's vector is computed when the snapshot's index is built, a
//! query's when it is analysed, and [`fuse`] combines the two rankings of the candidate set.
//! Without one, nothing of it runs and the ranking is the BM25F above, unchanged. Measured with
//! `cargo run --release --example rankbench -- --model models/minilm-l6-static` (R@5, bfcl /
//! metatool / metatool_multi; BM25F alone .780 / .640 / .687; the figures below are from before
//! the parameters field, with it BM25F alone reaches .841 on bfcl and the hybrid .851):
//!
//! - **Fusion**: the weighted sum of max-normalised scores, semantic share 0.3
//!   ([`Fusion::DEFAULT_SEMANTIC_WEIGHT`]): .820 / .679 / .720 (.786 on bfcl before the
//!   parameters joined the tool text), and every other metric (R@1, R@10, MRR@10, nDCG@10) above
//!   BM25F's on every set. Reciprocal rank fusion (k 60, equal
//!   weights) lost on two sets (.680 / .635 / .673): it gives a tool ranked first by meaning alone
//!   the credit of an exact name match. Shares from 0.2 to 0.4 all gain everywhere; 0.3 is the
//!   middle of that plateau, not a per-set optimum.
//! - **Depth**: the 50 candidates most similar to the query join the lexical matches (10 to 1,000
//!   move R@5 by under .015); the rest stay out, so a query keeps a meaningful match count.
//! - **Model**: all-MiniLM-L6-v2 distilled with model2vec to 64 dimensions
//!   (`scripts/model/build-static-model.py`; shipped in `models/minilm-l6-static`, 4.2 MB,
//!   Apache-2.0). 128 and 256 dimensions gain at most .01 on any set (128: .787 / .684 / .725) and
//!   cost the query time: at 10,000 tools, 128 dimensions took 2.0× BM25F's query time, 64 took
//!   1.6×.
//! - **Tool text** ([`semantic::tool_text`]): the tool's own name split into words (without the
//!   server prefix, which every tool of a server shares), its description, then its parameters'
//!   names and descriptions (bfcl R@5 .786 → .820; the other sets' tools have no parameters).
//! - **Vectors** are stored as `i8` with a scale per tool (0.66 MB at 10,000 tools and 64
//!   dimensions): the `f32` scan was memory-bound; quantising moved no R@5 by more than .002.

mod analyzer;
mod bm25f;
mod explain;
mod fusion;
mod index;
#[doc(hidden)]
pub mod reference;
pub mod semantic;
mod words;

pub use analyzer::{Analyzer, Folding, TermClass, fold};
pub use bm25f::{
    Bm25fParams, CorpusStatistics, FieldParams, TermWeight, display_score, idf, length_norm, saturate,
    weighted_field_tf,
};
pub use explain::{Explanation, FieldExplanation, HybridExplanation, TermExplanation};
pub use fusion::{Fused, Fusion, fuse, rank_of, reciprocal_rank};
pub use index::{Hit, PrefixTokens, Query, QueryTerm, RankingConfig, SearchIndex, SnapshotStatistics};

/// A field of a tool's text, most to least weighty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The tool's name (its own name; the server prefix see [`PrefixTokens`]).
    Name,
    /// The first non-empty line of the description.
    FirstLine,
    /// The rest of the description.
    Rest,
    /// The names and descriptions of the tool's parameters (the input schema's top-level
    /// properties).
    Parameters,
}

impl Field {
    /// How many fields there are.
    pub const COUNT: usize = 4;
    /// Every field, most weighty first.
    pub const ALL: [Field; Field::COUNT] = [Field::Name, Field::FirstLine, Field::Rest, Field::Parameters];

    /// The field's position in per-field arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name for the field.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::FirstLine => "first_line",
            Field::Rest => "rest",
            Field::Parameters => "parameters",
        }
    }
}

/// A document of the index: a tool's position in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(pub u32);

impl DocId {
    /// The position, as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A term of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TermId(pub u32);

impl TermId {
    /// The term's position in per-term arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests;
