//! The hybrid ranker end to end over a tiny model: what it adds to BM25F, what it leaves alone,
//! and what `explain` shows of it.

use std::sync::Arc;

use muster_core::{JsonObject, ToolEntry};
use rmcp::model::Tool;
use serde_json::json;

use super::ranked;
use crate::{
    Catalog,
    rank::{
        Fusion, RankingConfig,
        semantic::{SemanticRanking, StaticModel, WordPiece},
    },
    tools::{Scope, filter_tools},
    toolset::Presets,
};

/// Two directions of meaning: messaging (x) and weather (y); "team" and "chat" lean to messaging.
fn model() -> Arc<StaticModel> {
    let vocabulary = [
        ("[UNK]", [0.0, 0.0]),
        ("post", [0.6, 0.2]),
        ("message", [1.0, 0.0]),
        ("chat", [0.9, 0.1]),
        ("team", [0.8, 0.0]),
        ("channel", [0.9, 0.0]),
        ("get", [0.3, 0.3]),
        ("forecast", [0.0, 1.0]),
        ("weather", [0.1, 0.9]),
        ("tomorrow", [0.0, 0.8]),
        ("rain", [0.0, 0.9]),
    ];
    let tokenizer = WordPiece::new(vocabulary.iter().map(|(t, _)| (*t).to_owned()), "[UNK]").expect("has [UNK]");
    let vectors: Vec<Vec<f32>> = vocabulary.iter().map(|(_, v)| v.to_vec()).collect();
    Arc::new(StaticModel::new(tokenizer, &vectors).expect("one vector per token"))
}

fn tools() -> Vec<ToolEntry> {
    [
        ("slack", "post_message", "Post a message to a channel."),
        ("weather", "get_forecast", "The forecast for a place."),
        ("weather", "get_rain", "Rain radar."),
    ]
    .into_iter()
    .map(|(server, name, description)| {
        let tool = Tool::new(name, description, Arc::new(JsonObject::new()));
        ToolEntry::downstream(format!("x_{server}_{name}"), server, tool)
    })
    .collect()
}

fn catalog(ranking: RankingConfig) -> Arc<Catalog> {
    let mut builder = Catalog::builder().with_ranking(ranking);
    for tool in tools() {
        builder.push_tool(tool);
    }
    Arc::new(builder.build())
}

fn hybrid() -> RankingConfig {
    RankingConfig::default().with_semantic(SemanticRanking::new(model()))
}

#[test]
fn without_a_model_nothing_is_embedded_and_an_unmatched_query_finds_nothing() {
    let lexical = catalog(RankingConfig::default());
    assert!(lexical.search_index().vectors().is_none());
    assert!(lexical.search_index().query("tomorrow").vector().is_none());
    assert!(ranked(&lexical, "tomorrow").is_empty());
}

#[test]
fn the_model_finds_tools_no_query_word_occurs_in() {
    let c = catalog(hybrid());
    assert_eq!(c.search_index().vectors().map(|v| v.len()), Some(3));
    assert_eq!(ranked(&c, "chat with my team")[0], "x_slack_post_message");
    assert_eq!(
        ranked(&c, "weather tomorrow")[..2],
        ["x_weather_get_forecast", "x_weather_get_rain"]
    );
}

#[test]
fn a_lexical_match_still_leads_when_the_meaning_is_close() {
    // Both weather tools are close in meaning; the one that names the query's word wins.
    assert_eq!(ranked(&catalog(hybrid()), "rain")[0], "x_weather_get_rain");
}

#[test]
fn a_query_the_model_knows_nothing_of_ranks_by_bm25f_alone() {
    let hybrid = catalog(hybrid());
    let lexical = catalog(RankingConfig::default());
    assert!(hybrid.search_index().query("xyzzy radar").vector().is_none());
    assert_eq!(ranked(&hybrid, "xyzzy radar"), ranked(&lexical, "xyzzy radar"));
}

#[test]
fn the_depth_limits_what_meaning_alone_brings_in() {
    let one = RankingConfig::default().with_semantic(SemanticRanking::new(model()).with_depth(1));
    assert_eq!(ranked(&catalog(hybrid()), "tomorrow").len(), 3);
    assert_eq!(ranked(&catalog(one), "tomorrow"), ["x_weather_get_forecast"]);
}

#[test]
fn explain_shows_both_parts_and_they_add_up_to_the_score() {
    let c = catalog(hybrid());
    let index = c.search_index();
    let query = index.query("post to my team");
    let hits = index.rank(&query, c.tools());
    let why = index.explain_among(&query, hits[0].doc, c.tools());
    let parts = why.hybrid.as_ref().expect("a hybrid explanation");
    assert_eq!((parts.lexical_rank, parts.semantic_rank), (Some(1), Some(1)));
    assert!((parts.lexical_part + parts.semantic_part - hits[0].score).abs() < 1e-12);
    assert!((parts.score - hits[0].score).abs() < 1e-12);
    let expected_semantic = Fusion::DEFAULT_SEMANTIC_WEIGHT;
    assert!((parts.semantic_part - expected_semantic).abs() < 1e-9, "{why}");
    assert!(why.to_string().contains("fused"), "{why}");
}

#[test]
fn filter_tools_explain_carries_the_hybrid_parts() {
    let c = catalog(hybrid());
    let presets = Presets::default();
    let args = json!({"query": "weather tomorrow", "explain": true});
    let page = filter_tools(&c.view(), args.as_object().expect("object"), Scope::unscoped(&presets)).expect("a page");
    let top = &page.tools[0];
    let hybrid = top
        .explanation
        .as_ref()
        .and_then(|e| e.hybrid.as_ref())
        .expect("hybrid parts");
    assert_eq!(hybrid.semantic_rank, Some(1));
    assert!(hybrid.similarity > 0.9, "{hybrid:?}");
    let wire = serde_json::to_value(hybrid).expect("serialises");
    assert!(
        wire.get("semanticPart").is_some() && wire.get("lexicalRank").is_some(),
        "{wire}"
    );
}

/// A catalogue of `tools` built with `semantic`; its tool vectors, row by row.
fn vectors_of(semantic: &SemanticRanking, tools: Vec<ToolEntry>) -> Vec<Vec<f32>> {
    let mut builder = Catalog::builder().with_ranking(RankingConfig::default().with_semantic(semantic.clone()));
    for tool in tools {
        builder.push_tool(tool);
    }
    let catalog = builder.build();
    let vectors = catalog.search_index().vectors().expect("a semantic ranker");
    (0..vectors.len())
        .map(|doc| vectors.vector(doc).expect("a row"))
        .collect()
}

#[test]
fn a_rebuild_takes_unchanged_tools_vectors_from_the_cache_and_embeds_changed_ones_again() {
    let semantic = SemanticRanking::new(model());
    let first = vectors_of(&semantic, tools());
    assert_eq!(semantic.cache.len(), 3, "each tool's vector is kept");

    // The same tools again: the same vectors, nothing new kept.
    assert_eq!(vectors_of(&semantic, tools()), first);
    assert_eq!(semantic.cache.len(), 3);

    // The forecast tool's description now speaks of messages: its vector is computed again.
    let mut changed = tools();
    let tool = Tool::new("get_forecast", "Post a chat message.", Arc::new(JsonObject::new()));
    changed[1] = ToolEntry::downstream("x_weather_get_forecast", "weather", tool);
    let rebuilt = vectors_of(&semantic, changed);
    assert_eq!(semantic.cache.len(), 4);
    assert_eq!(rebuilt[0], first[0]);
    assert_eq!(rebuilt[2], first[2]);
    assert!(
        rebuilt[1][0] > first[1][0],
        "the changed tool leans to messaging now: {:?}",
        rebuilt[1]
    );
    // Vectors computed without the cache are the same.
    let uncached = vectors_of(&SemanticRanking::new(model()), tools());
    assert_eq!(uncached, first);
}

#[test]
fn the_cache_keeps_only_the_last_builds_rows_once_it_outgrows_them() {
    let semantic = SemanticRanking::new(model());
    let many = |generation: usize| -> Vec<ToolEntry> {
        (0..700)
            .map(|i| {
                let tool = Tool::new(
                    format!("tool_{i}"),
                    format!("chat {generation}"),
                    Arc::new(JsonObject::new()),
                );
                ToolEntry::downstream(format!("x_s_tool_{i}"), "s", tool)
            })
            .collect()
    };
    vectors_of(&semantic, many(1));
    assert_eq!(semantic.cache.len(), 700);
    // 1,400 rows: no more than twice the 700 a build asks for, so all are kept.
    vectors_of(&semantic, many(2));
    assert_eq!(semantic.cache.len(), 1400);
    // A third generation would make 2,100: trimmed to the 700 this build asked for.
    vectors_of(&semantic, many(3));
    assert_eq!(semantic.cache.len(), 700);
}
