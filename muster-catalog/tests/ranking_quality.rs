//! The ranking quality gate: recall@5 of `filter_tools {query}` on a fixed sample of each
//! tool-retrieval data set, asserted against a floor a little under what the ranker scores today,
//! so a ranking regression turns CI red.
//!
//! Where the data come from (`benches/support/rankbench.rs`, `search_path`):
//! - `bfcl` needs nothing beside the repository: `scripts/test` builds it from the `bfcl-eval`
//!   wheel on PyPI (`scripts/rankbench-bfcl.py`, into `target/rankbench/bfcl`);
//! - `metatool` and `metatool_multi` are the team's copies in `../shared/rankbench` (or
//!   `$MUSTER_SHARED/rankbench`, or `$MUSTER_RANKBENCH`).
//!
//! A data set that is not there is skipped with a note saying where to point, except under
//! `CI=true`, where it fails: CI never skips a gate silently.
//!
//! The sample is deterministic (every Nth query, a few hundred per data set) and the tools are
//! exposed as the gateway exposes them (`x_<server>_<name>`). The full evaluation, with Go
//! muster's ranker beside ours, is the `rankbench` example:
//! `cargo run --release --example rankbench`.
//!
//! The hybrid ranker (BM25F fused with a static embedding model) is gated too, with the model the
//! repository ships (`models/minilm-l6-static`, 4 MB, built by
//! `scripts/model/build-static-model.py`): its recall@5 has a floor of its own, and on the same
//! sample it may not fall below BM25F alone.

#[path = "../../benches/support/rankbench.rs"]
#[allow(dead_code, unreachable_pub)]
mod rankbench;

use std::sync::Arc;

use muster_catalog::{
    Catalog,
    rank::{RankingConfig, semantic::SemanticRanking},
    tools::{Scope, filter_tools},
    toolset::Presets,
};
use serde_json::json;

/// The hybrid ranking with the model the repository ships (which is always there).
fn hybrid() -> RankingConfig {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/minilm-l6-static");
    let semantic = SemanticRanking::load(&dir).unwrap_or_else(|e| panic!("the shipped model: {e}"));
    RankingConfig::default().with_semantic(semantic)
}

/// Recall@5 of `filter_tools` ranking with `ranking` over every `step`th query of `data_set`, and
/// how many queries; `None` when the data set is not there and this is not CI (a note on stderr
/// says so).
fn recall_at_5(data_set: &'static str, step: usize, ranking: RankingConfig) -> Option<(f64, usize)> {
    let data = match rankbench::load(data_set) {
        Ok(data) => data,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!(
                "ranking gate for {data_set} skipped: {e}. Point MUSTER_SHARED at the team's shared \
                 folder (bfcl: run scripts/test, which builds it from PyPI)"
            );
            return None;
        }
        Err(e) => panic!("ranking gate for {data_set}: {e} (CI=true: the gate cannot be skipped)"),
    };
    let mut builder = Catalog::builder().with_ranking(ranking);
    for tool in data.tools {
        builder.push_tool(tool);
    }
    let catalog = Arc::new(builder.build());
    let view = catalog.view();
    let presets = Presets::default();
    let mut metrics = rankbench::Metrics::default();
    for case in data.cases.iter().step_by(step) {
        let args = json!({"query": case.query, "limit": 5});
        let page = filter_tools(&view, args.as_object().expect("object"), Scope::unscoped(&presets)).expect("page");
        let ranked: Vec<&str> = page.tools.iter().map(|t| t.name()).collect();
        metrics.add(&ranked, &case.relevant);
    }
    Some((metrics.r5 / metrics.queries.max(1) as f64, metrics.queries))
}

/// Asserts recall@5 over every `step`th query of `data_set` is at least `floor`. The floors sit
/// about 0.02 under what this sample measured when they were set (bfcl 0.825 since parameters
/// are a field of their own, 0.759 before; metatool 0.619, metatool_multi 0.685; one query is
/// about 0.003): raise them when the ranking improves.
fn gate(data_set: &'static str, step: usize, floor: f64) {
    let Some((recall, queries)) = recall_at_5(data_set, step, RankingConfig::default()) else {
        return;
    };
    eprintln!("{data_set}: recall@5 {recall:.4} over {queries} queries (floor {floor})");
    assert!(queries >= 200, "{data_set}: only {queries} queries sampled");
    assert!(
        recall >= floor,
        "{data_set}: recall@5 fell to {recall:.4}, under the floor {floor}"
    );
}

#[test]
fn bfcl_recall_at_5_stays_above_its_floor() {
    gate("bfcl", 8, 0.80);
}

#[test]
fn metatool_recall_at_5_stays_above_its_floor() {
    gate("metatool", 64, 0.60);
}

#[test]
fn metatool_multi_recall_at_5_stays_above_its_floor() {
    gate("metatool_multi", 2, 0.66);
}

/// Asserts hybrid recall@5 over every `step`th query of `data_set` is at least `floor`, and at
/// least BM25F's alone on the same sample. The floors sit about 0.02 under what this sample
/// measured when they were set (bfcl 0.825, metatool 0.650, metatool_multi 0.713; BM25F alone
/// 0.825, 0.619, 0.685: on bfcl's sample the parameters field took BM25F to the hybrid's recall,
/// over all of bfcl's queries the hybrid is still ahead, .851 to .841).
fn hybrid_gate(data_set: &'static str, step: usize, floor: f64) {
    let Some((lexical, _)) = recall_at_5(data_set, step, RankingConfig::default()) else {
        return;
    };
    let Some((recall, queries)) = recall_at_5(data_set, step, hybrid()) else {
        return;
    };
    eprintln!("{data_set}: hybrid recall@5 {recall:.4} over {queries} queries (BM25F {lexical:.4}, floor {floor})");
    assert!(
        recall >= floor,
        "{data_set}: hybrid recall@5 fell to {recall:.4}, under the floor {floor}"
    );
    // Equal recalls summed from different per-query parts (a query with several relevant tools
    // adds a fraction) may differ in the last bits; a query is worth 1/queries, far above this
    // margin.
    assert!(
        recall >= lexical - 1e-9,
        "{data_set}: hybrid recall@5 {recall:.4} is under BM25F's alone, {lexical:.4}"
    );
}

#[test]
fn bfcl_hybrid_recall_at_5_stays_above_its_floor_and_bm25f() {
    hybrid_gate("bfcl", 8, HYBRID_FLOORS[0]);
}

#[test]
fn metatool_hybrid_recall_at_5_stays_above_its_floor_and_bm25f() {
    hybrid_gate("metatool", 64, HYBRID_FLOORS[1]);
}

#[test]
fn metatool_multi_hybrid_recall_at_5_stays_above_its_floor_and_bm25f() {
    hybrid_gate("metatool_multi", 2, HYBRID_FLOORS[2]);
}

/// bfcl, metatool, metatool_multi.
const HYBRID_FLOORS: [f64; 3] = [0.80, 0.63, 0.69];
