//! `aggregator.ranking`: how `filter_tools {query}` ranks the catalogue. Without a `model` it is
//! BM25F alone (the default); with one, BM25F fused with the similarity of a static embedding
//! model loaded from that folder (model2vec layout: `model.safetensors`, `tokenizer.json`; built
//! by the repository's `scripts/model/build-static-model.py`). The model is read once when the
//! gateway starts (one it cannot load stops it, naming the file and what is wrong), never
//! downloaded; a relative path is taken from the gateway's working folder.
//!
//! `semanticWeight` and `semanticDepth` tune the fusion for a catalogue whose agents ask in words
//! of their own more than the tools' (a larger share), or less: the defaults were measured on the
//! open tool-retrieval sets (`examples/rankbench`, which ranks any catalogue in their format with
//! `--data DIR --fusion sum:ALPHA`, to choose by measurement).
//!
//! ```
//! use muster_core::config::MusterConfig;
//!
//! let doc = serde_json::json!({ "aggregator": { "ranking": {
//!     "model": "/opt/muster/model", "semanticWeight": 0.4
//! } } });
//! let config: MusterConfig = serde_json::from_value(doc)?;
//! let ranking = &config.aggregator.ranking;
//! assert_eq!(ranking.model.as_deref(), Some(std::path::Path::new("/opt/muster/model")));
//! assert_eq!((ranking.semantic_weight, ranking.semantic_depth), (Some(0.4), None));
//! assert_eq!(MusterConfig::default().aggregator.ranking.model, None);
//! config.validate_config()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::crd::ValidationErrors;

/// `aggregator.ranking`: the ranking of `filter_tools {query}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct RankingSettings {
    /// Folder of a static embedding model to fuse with BM25F (hybrid ranking; the repository
    /// ships `models/minilm-l6-static`). Default: none, BM25F alone. Read when the gateway
    /// starts, a relative path from its working folder; a gateway refuses to start with a model
    /// it cannot load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// The model's share of the fused score, from 0 (BM25F orders, the model only adds the tools
    /// whose words differ from the query's) to 1 (similarity alone orders). Default: 0.3, where
    /// BM25F leads. Needs `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_weight: Option<f64>,
    /// How many of the tools most similar to a query join its lexical matches, at least 1.
    /// Default: 50. Needs `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_depth: Option<usize>,
}

impl RankingSettings {
    /// With the model in folder `model`.
    pub fn with_model(mut self, model: impl Into<PathBuf>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// With the model's share of the fused score.
    pub fn with_semantic_weight(mut self, weight: f64) -> Self {
        self.semantic_weight = Some(weight);
        self
    }

    /// With how many of the most similar tools join the lexical matches.
    pub fn with_semantic_depth(mut self, depth: usize) -> Self {
        self.semantic_depth = Some(depth);
        self
    }

    /// Checks what serde does not: the weight within 0..=1, a depth of at least 1, and neither
    /// without a model. [`super::MusterConfig::validate_config`] includes it.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        self.validate_into(&mut errors);
        errors.into_result()
    }

    pub(super) fn validate_into(&self, errors: &mut ValidationErrors) {
        if let Some(weight) = self.semantic_weight
            && !(0.0..=1.0).contains(&weight)
        {
            errors.push(
                "aggregator.ranking.semanticWeight",
                format!("aggregator.ranking.semanticWeight must be between 0 and 1, not {weight}"),
            );
        }
        if self.semantic_depth == Some(0) {
            errors.push(
                "aggregator.ranking.semanticDepth",
                "aggregator.ranking.semanticDepth must be at least 1",
            );
        }
        if self.model.is_none() {
            for (key, set) in [
                ("semanticWeight", self.semantic_weight.is_some()),
                ("semanticDepth", self.semantic_depth.is_some()),
            ] {
                if set {
                    errors.push(
                        format!("aggregator.ranking.{key}"),
                        format!(
                            "aggregator.ranking.{key} tunes the hybrid ranking, which needs aggregator.ranking.model; \
                             set the model or remove the key"
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(settings: &RankingSettings) -> String {
        settings.validate().err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn tuning_within_range_with_a_model_is_valid() {
        let settings = RankingSettings::default()
            .with_model("models/m")
            .with_semantic_weight(1.0)
            .with_semantic_depth(1);
        assert_eq!(problems(&settings), "");
        assert_eq!(problems(&settings.clone().with_semantic_weight(0.0)), "");
    }

    #[test]
    fn a_weight_out_of_range_or_not_a_number_and_a_zero_depth_are_named() {
        for weight in [1.5, -0.1, f64::NAN] {
            let text = problems(&RankingSettings::default().with_model("m").with_semantic_weight(weight));
            assert!(
                text.contains("aggregator.ranking.semanticWeight must be between 0 and 1, not"),
                "{weight}: {text}"
            );
        }
        let text = problems(&RankingSettings::default().with_model("m").with_semantic_depth(0));
        assert!(
            text.contains("aggregator.ranking.semanticDepth must be at least 1"),
            "{text}"
        );
    }

    #[test]
    fn tuning_without_a_model_is_refused_naming_the_key() {
        let text = problems(
            &RankingSettings::default()
                .with_semantic_weight(0.5)
                .with_semantic_depth(10),
        );
        for key in ["semanticWeight", "semanticDepth"] {
            assert!(
                text.contains(&format!(
                    "aggregator.ranking.{key} tunes the hybrid ranking, which needs aggregator.ranking.model"
                )),
                "{key}: {text}"
            );
        }
    }
}
