//! `filter_tools {query}` ranking through the gateway, with a real downstream MCP server over
//! loopback HTTP and a real MCP client.
//!
//! `aggregator.ranking.model`: the shipped static model (`models/`) loaded from config, asked in
//! words no tool's text contains. Without the model the same catalogue finds nothing for them;
//! with it, the tool they mean comes first, and `explain` shows both parts; `semanticWeight` and
//! `semanticDepth` tune the fusion from the config. Without a model, the tools' parameters are a
//! weak field of the lexical ranking.

mod common;

use std::path::PathBuf;

use common::{Harness, fast_supervision, remote, scripted::ScriptedServer};
use muster::{
    core::config::{AggregatorConfig, MusterConfig, RankingSettings},
    gateway::{Gateway, GatewayError},
};
use serde_json::{Value, json};

fn shipped_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/minilm-l6-static")
}

/// A downstream with a few everyday tools, none of whose text says "rain" or "tomorrow".
async fn downstream() -> ScriptedServer {
    let ok = |_: &serde_json::Map<String, Value>| Ok(json!({"ok": true}));
    ScriptedServer::builder()
        .tool("get_forecast", true, ok)
        .described("get_forecast", "Get the weather forecast for a city.")
        .tool("post_message", false, ok)
        .described("post_message", "Post a message to a channel.")
        .tool("create_issue", false, ok)
        .described("create_issue", "Create an issue in a repository.")
        .tool("list_invoices", true, ok)
        .described("list_invoices", "List the invoices of a customer account.")
        .serve()
        .await
}

async fn gateway(model: Option<PathBuf>, server: &ScriptedServer) -> Harness {
    let mut ranking = RankingSettings::default();
    if let Some(model) = model {
        ranking = ranking.with_model(model);
    }
    gateway_ranked(ranking, server).await
}

async fn gateway_ranked(ranking: RankingSettings, server: &ScriptedServer) -> Harness {
    let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_ranking(ranking));
    Harness::start_with(config, vec![remote("apps", &server.url)]).await
}

fn names(page: &Value) -> Vec<String> {
    common::tool_names(page)
}

#[tokio::test]
async fn with_the_model_a_query_in_other_words_finds_the_tool_it_means() {
    let server = downstream().await;
    let query = json!({"query": "will it rain tomorrow", "explain": true});

    let lexical = gateway(None, &server).await;
    let page = lexical.meta_json("filter_tools", query.clone()).await;
    assert!(names(&page).is_empty(), "no tool's text has these words: {page}");

    let hybrid = gateway(Some(shipped_model()), &server).await;
    let page = hybrid.meta_json("filter_tools", query).await;
    let found = names(&page);
    assert_eq!(found.first().map(String::as_str), Some("x_apps_get_forecast"), "{page}");
    let first = &page["tools"][0];
    let parts = &first["explain"]["hybrid"];
    assert!(parts["similarity"].as_f64().is_some_and(|s| s > 0.0), "{first}");
    assert!(parts["semanticPart"].as_f64().is_some_and(|s| s > 0.0), "{first}");
    assert_eq!(
        parts["lexicalPart"].as_f64(),
        Some(0.0),
        "no word of the query is in the tool: {first}"
    );
}

#[tokio::test]
async fn with_the_model_an_exact_name_still_comes_first() {
    let server = downstream().await;
    let hybrid = gateway(Some(shipped_model()), &server).await;
    let page = hybrid.meta_json("filter_tools", json!({"query": "create issue"})).await;
    assert_eq!(
        names(&page).first().map(String::as_str),
        Some("x_apps_create_issue"),
        "{page}"
    );
    // The lexical match is fused, not replaced: describe_tool and call_tool are unchanged.
    let (failed, answer) = hybrid.core("x_apps_create_issue", json!({})).await;
    assert!(!failed, "{answer}");
}

#[tokio::test]
async fn the_semantic_weight_and_depth_of_the_config_reach_the_fused_ranking() {
    let server = downstream().await;
    let query = json!({"query": "will it rain tomorrow", "explain": true});
    let semantic_part = |page: &Value| page["tools"][0]["explain"]["hybrid"]["semanticPart"].as_f64();

    // No word of the query matches, so the most similar tool's part is the whole semantic share.
    let default = gateway(Some(shipped_model()), &server).await;
    let page = default.meta_json("filter_tools", query.clone()).await;
    assert_eq!(semantic_part(&page), Some(0.3), "{page}");
    assert!(names(&page).len() > 1, "several tools are somewhat similar: {page}");

    let tuned = RankingSettings::default()
        .with_model(shipped_model())
        .with_semantic_weight(0.6)
        .with_semantic_depth(1);
    let tuned = gateway_ranked(tuned, &server).await;
    let page = tuned.meta_json("filter_tools", query).await;
    assert_eq!(semantic_part(&page), Some(0.6), "{page}");
    assert_eq!(
        names(&page),
        ["x_apps_get_forecast"],
        "depth 1: only the most similar tool joins: {page}"
    );
}

/// `RankingSettings` (muster-core) documents the ranker's defaults (muster-catalog) in words; the
/// generated reference must say what the ranker does when the keys are left out.
#[test]
fn the_documented_fusion_defaults_are_the_rankers() {
    use muster::catalog::rank::{Fusion, semantic::SemanticRanking};
    let reference = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/config-reference.md"))
        .expect("docs/config-reference.md");
    let row = |key: &str| {
        reference
            .lines()
            .find(|l| l.starts_with(&format!("| `aggregator.ranking.{key}` |")))
            .unwrap_or_else(|| panic!("no row for {key}"))
            .to_owned()
    };
    assert_eq!(
        Fusion::default(),
        Fusion::WeightedSum {
            semantic_weight: Fusion::DEFAULT_SEMANTIC_WEIGHT
        }
    );
    let weight = row("semanticWeight");
    assert!(
        weight.contains(&format!("Default: {}", Fusion::DEFAULT_SEMANTIC_WEIGHT)),
        "{weight}"
    );
    let depth = row("semanticDepth");
    assert!(
        depth.contains(&format!("Default: {}.", SemanticRanking::DEFAULT_DEPTH)),
        "{depth}"
    );
}

#[test]
fn a_semantic_weight_out_of_range_refuses_to_start_naming_the_key() {
    let ranking = RankingSettings::default()
        .with_model(shipped_model())
        .with_semantic_weight(1.5);
    let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_ranking(ranking));
    let refused = Gateway::with_supervision(config, Vec::new(), Vec::new(), fast_supervision());
    let Err(error) = refused else {
        panic!("a gateway started with a semantic weight of 1.5");
    };
    assert!(matches!(error, GatewayError::RankingSettings(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("aggregator.ranking.semanticWeight must be between 0 and 1, not 1.5"),
        "{message}"
    );
}

#[test]
fn a_model_that_cannot_be_loaded_refuses_to_start_naming_the_key_and_the_file() {
    let missing = PathBuf::from("/nonexistent/muster-model");
    let config = MusterConfig::default()
        .with_aggregator(AggregatorConfig::default().with_ranking(RankingSettings::default().with_model(&missing)));
    let refused = Gateway::with_supervision(config, Vec::new(), Vec::new(), fast_supervision());
    let Err(error) = refused else {
        panic!("a gateway started with a model folder that does not exist");
    };
    assert!(
        matches!(error, GatewayError::RankingModel { ref path, .. } if *path == missing),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("aggregator.ranking.model"), "{message}");
    assert!(message.contains("/nonexistent/muster-model"), "{message}");
}

#[tokio::test]
async fn a_parameters_description_finds_its_tool_after_a_description_that_says_the_word() {
    let ok = |_: &serde_json::Map<String, Value>| Ok(json!({"ok": true}));
    let server = ScriptedServer::builder()
        .tool("post_message", false, ok)
        .described("post_message", "Post a message.")
        .with_parameters(
            "post_message",
            json!({"channel": {"type": "string", "description": "The Slack workspace channel to post to"}}),
        )
        .tool("invite_user", false, ok)
        .described("invite_user", "Invite a user to a Slack workspace.")
        .tool("create_issue", false, ok)
        .described("create_issue", "Create an issue.")
        .with_parameters("create_issue", json!({"title": {"type": "string"}}))
        .serve()
        .await;
    let lexical = gateway(None, &server).await;
    let page = lexical
        .meta_json("filter_tools", json!({"query": "slack workspace", "explain": true}))
        .await;
    assert_eq!(names(&page), ["x_apps_invite_user", "x_apps_post_message"], "{page}");
    let fields: Vec<&str> = page["tools"][1]["explain"]["terms"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["fields"].as_array().into_iter().flatten())
        .filter_map(|f| f["field"].as_str())
        .collect();
    assert!(
        !fields.is_empty() && fields.iter().all(|&f| f == "parameters"),
        "{page}"
    );
}

/// `config.yaml`'s camelCase keys reach the ranking of a gateway run from a config directory, and
/// a weight out of range is a load problem naming the key: the gateway still starts, on the
/// defaults (BM25F alone), as with any invalid `config.yaml`.
#[tokio::test]
async fn config_yaml_tunes_the_fusion_and_a_bad_weight_is_a_named_problem() {
    let server = downstream().await;
    let model = shipped_model();
    let query = json!({"query": "will it rain tomorrow", "explain": true});
    for (weight, expected_part) in [("0.45", Some(0.45)), ("2", None)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = format!(
            "aggregator:\n  ranking:\n    model: {}\n    semanticWeight: {weight}\n",
            model.display()
        );
        std::fs::write(dir.path().join("config.yaml"), config).expect("config.yaml");
        std::fs::create_dir_all(dir.path().join("mcpservers")).expect("mcpservers/");
        let server_yaml = format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: apps\nspec:\n  type: streamable-http\n  autoStart: true\n  url: {}\n",
            server.url
        );
        std::fs::write(dir.path().join("mcpservers/apps.yaml"), server_yaml).expect("apps.yaml");

        let (gateway, problems) = Gateway::from_config_dir(dir.path(), fast_supervision()).expect("starts");
        let reported: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let h = Harness::serve(gateway).await;
        let has_tools = || async {
            let page = h.meta_json("list_tools", json!({})).await;
            names(&page).contains(&"x_apps_get_forecast".to_owned())
        };
        assert!(common::eventually(10, has_tools).await, "the downstream's tools appear");
        let page = h.meta_json("filter_tools", query.clone()).await;
        match expected_part {
            Some(part) => {
                assert!(reported.is_empty(), "{reported:?}");
                let first = &page["tools"][0];
                assert_eq!(first["name"], "x_apps_get_forecast", "{page}");
                assert_eq!(
                    first["explain"]["hybrid"]["semanticPart"].as_f64(),
                    Some(part),
                    "{page}"
                );
            }
            None => {
                assert!(
                    reported
                        .iter()
                        .any(|p| p.contains("aggregator.ranking.semanticWeight must be between 0 and 1, not 2")),
                    "{reported:?}"
                );
                assert!(names(&page).is_empty(), "the defaults rank by BM25F alone: {page}");
            }
        }
        h.stop().await;
    }
}
