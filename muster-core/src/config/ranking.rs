//! `aggregator.ranking`: how `filter_tools {query}` ranks the catalogue. Without a `model` it is
//! BM25F alone (the default); with one, BM25F fused with the similarity of a static embedding
//! model loaded from that folder (model2vec layout: `model.safetensors`, `tokenizer.json`; built
//! by the repository's `scripts/model/build-static-model.py`). The model is read once when the
//! gateway starts (one it cannot load stops it, naming the file and what is wrong), never
//! downloaded; a relative path is taken from the gateway's working folder.
//!
//! ```
//! use muster_core::config::MusterConfig;
//!
//! let doc = serde_json::json!({ "aggregator": { "ranking": { "model": "/opt/muster/model" } } });
//! let config: MusterConfig = serde_json::from_value(doc)?;
//! assert_eq!(config.aggregator.ranking.model.as_deref(), Some(std::path::Path::new("/opt/muster/model")));
//! assert_eq!(MusterConfig::default().aggregator.ranking.model, None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `aggregator.ranking`: the ranking of `filter_tools {query}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct RankingSettings {
    /// Folder of a static embedding model to fuse with BM25F (hybrid ranking; the repository
    /// ships `models/minilm-l6-static`). Default: none, BM25F alone. Read when the gateway
    /// starts, a relative path from its working folder; a gateway refuses to start with a model
    /// it cannot load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
}

impl RankingSettings {
    /// With the model in folder `model`.
    pub fn with_model(mut self, model: impl Into<PathBuf>) -> Self {
        self.model = Some(model.into());
        self
    }
}
