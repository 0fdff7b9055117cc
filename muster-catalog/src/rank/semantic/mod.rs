//! The optional semantic half of ranking: a static embedding model gives each tool a vector when
//! the snapshot is built and each query one when it is analysed; their cosine similarity is a
//! second ranking, fused with BM25F (see [`super::fuse`]).
//!
//! A static model (model2vec's kind) is a table of token vectors: a text's vector is the mean of
//! its tokens' vectors, so embedding costs a tokenisation and some additions, with no neural
//! network at query time. It finds tools whose words differ from the query's ("message my team"
//! for `post_message`), which BM25F cannot.
//!
//! Without a [`SemanticRanking`] in the [`super::RankingConfig`] nothing here runs and ranking
//! is BM25F alone.
//!
//! ```
//! use std::sync::Arc;
//! use muster_catalog::{Catalog, rank::{RankingConfig, semantic::{SemanticRanking, StaticModel, WordPiece}}};
//! use muster_core::ToolEntry;
//! use rmcp::model::Tool;
//!
//! // A tiny model: "team" and "chat" point the same way, "forecast" elsewhere.
//! let vocabulary = ["[UNK]", "team", "chat", "post", "forecast", "weather"];
//! let tokenizer = WordPiece::new(vocabulary.iter().map(|t| t.to_string()), "[UNK]").expect("has [UNK]");
//! let vectors = [[0.0, 0.0], [1.0, 0.1], [0.9, 0.0], [0.5, 0.5], [0.0, 1.0], [0.1, 0.9]];
//! let model = StaticModel::new(tokenizer, &vectors.map(|v| v.to_vec())).expect("one vector per token");
//!
//! let mut builder = Catalog::builder()
//!     .with_ranking(RankingConfig::default().with_semantic(SemanticRanking::new(Arc::new(model))));
//! for (name, description) in [("post_message", "Post to a chat channel."), ("get_forecast", "The weather forecast.")] {
//!     let tool = Tool::new(name, description, Arc::new(Default::default()));
//!     builder.push_tool(ToolEntry::downstream(format!("x_slack_{name}"), "slack", tool));
//! }
//! let catalog = builder.build();
//! let index = catalog.search_index();
//!
//! // No word of the query is in either tool, but "team" is close to "chat".
//! let query = index.query("my team");
//! let hits = index.rank(&query, catalog.tools());
//! assert_eq!(catalog.tools()[hits[0].position].name(), "x_slack_post_message");
//! ```

mod cache;
mod model;
mod safetensors;
mod wordpiece;

use std::sync::Arc;

use muster_core::ToolEntry;

pub use cache::VectorCache;
pub use model::{ModelError, StaticModel};
pub use safetensors::SafetensorsProblem;
pub use wordpiece::{TokenizerProblem, WordPiece};

use super::fusion::Fusion;

/// The semantic ranker's settings: the model, and how its ranking fuses with BM25F.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SemanticRanking {
    /// The model.
    pub model: Arc<StaticModel>,
    /// How the two rankings combine.
    pub fusion: Fusion,
    /// How many of the candidates most similar to a query join its lexical matches.
    pub depth: usize,
    /// The tool vectors of earlier builds, shared by the clones of this.
    pub cache: Arc<VectorCache>,
}

impl SemanticRanking {
    /// `model` with the default fusion and depth.
    pub fn new(model: Arc<StaticModel>) -> Self {
        Self {
            model,
            fusion: Fusion::default(),
            depth: Self::DEFAULT_DEPTH,
            cache: Arc::default(),
        }
    }

    /// The model in folder `dir` (see [`StaticModel::load`]) with the default fusion and depth:
    /// what the gateway's `aggregator.ranking.model` asks for.
    pub fn load(dir: impl AsRef<std::path::Path>) -> Result<Self, ModelError> {
        Ok(Self::new(Arc::new(StaticModel::load(dir)?)))
    }

    /// How many similar candidates join the lexical matches by default.
    pub const DEFAULT_DEPTH: usize = 50;

    /// With another fusion.
    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// With another depth.
    pub fn with_depth(mut self, depth: usize) -> Self {
        self.depth = depth;
        self
    }
}

/// The unit vector of every tool of a snapshot, row by row in document order, quantised to
/// `i8` with a scale per row: a quarter of the memory of `f32` rows, and a quarter of the bytes
/// a query streams through (at 10,000 tools, 1.3 MB at 128 dimensions instead of 5.1 MB, which
/// decided it: the `f32` scan was memory-bound). Cosine similarities move by about 0.005.
#[derive(Debug, Clone, Default)]
pub struct ToolVectors {
    dimensions: usize,
    values: Vec<i8>,
    scales: Vec<f32>,
}

/// A query's unit vector quantised as the tool vectors are, to compare with them.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedVector {
    values: Vec<i8>,
    scale: f32,
}

impl QuantizedVector {
    /// `vector` quantised: each value mapped onto −127..=127 by the largest magnitude.
    pub fn new(vector: &[f32]) -> Self {
        let max = vector.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 0.0 };
        let values = vector
            .iter()
            .map(|v| {
                if scale > 0.0 {
                    (v / scale).round().clamp(-127.0, 127.0) as i8
                } else {
                    0
                }
            })
            .collect();
        Self { values, scale }
    }
}

impl ToolVectors {
    /// Embeds each entry's [`tool_text`] with `semantic`'s model, taking the vector of a tool
    /// embedded before (the same name, description and schema) from its [`VectorCache`] and
    /// keeping the new ones there.
    pub fn build<'a>(semantic: &SemanticRanking, entries: impl IntoIterator<Item = &'a Arc<ToolEntry>>) -> Self {
        let model = &semantic.model;
        let dimensions = model.dimensions();
        let entries: Vec<&Arc<ToolEntry>> = entries.into_iter().collect();
        let keys: Vec<u64> = entries.iter().map(|e| VectorCache::key(e)).collect();
        let kept = semantic.cache.get_all(&keys);
        let mut out = Self {
            dimensions,
            values: Vec::with_capacity(entries.len() * dimensions),
            scales: Vec::with_capacity(entries.len()),
        };
        let mut computed = Vec::new();
        let mut text = String::new();
        let mut vector = vec![0.0; dimensions];
        for ((entry, key), kept) in entries.iter().zip(&keys).zip(kept) {
            let (values, scale) = match kept {
                Some(row) if row.0.len() == dimensions => row,
                _ => {
                    tool_text(entry, &mut text);
                    model.embed_into(&text, &mut vector);
                    let quantized = QuantizedVector::new(&vector);
                    let row: cache::Row = (quantized.values.into_boxed_slice(), quantized.scale);
                    computed.push((*key, row.clone()));
                    row
                }
            };
            out.values.extend_from_slice(&values);
            out.scales.push(scale);
        }
        semantic.cache.keep(computed, &keys);
        out
    }

    /// How many vectors there are (one per document).
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// The (dequantised) vector of document `doc` (its position in the snapshot).
    pub fn vector(&self, doc: usize) -> Option<Vec<f32>> {
        let scale = *self.scales.get(doc)?;
        let row = &self.values[doc * self.dimensions..(doc + 1) * self.dimensions];
        Some(row.iter().map(|&v| f32::from(v) * scale).collect())
    }

    /// The cosine similarity of document `doc` and the query (0 for a document without a
    /// vector, or one this snapshot does not have).
    pub fn similarity(&self, doc: usize, query: &QuantizedVector) -> f32 {
        match self.scales.get(doc) {
            Some(&scale) if query.values.len() == self.dimensions => {
                let row = &self.values[doc * self.dimensions..(doc + 1) * self.dimensions];
                dot_i8(row, &query.values) as f32 * scale * query.scale
            }
            _ => 0.0,
        }
    }

    /// Bytes held by the vectors and their scales.
    pub fn bytes(&self) -> usize {
        self.values.len() + self.scales.len() * size_of::<f32>()
    }
}

/// The dot product of two `i8` vectors, in sixteen `i32` lanes so that it vectorises.
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 16;
    let mut lanes = [0i32; LANES];
    let (a16, b16) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: i32 = a16
        .remainder()
        .iter()
        .zip(b16.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    for (x, y) in a16.zip(b16) {
        for ((lane, &x), &y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += i32::from(x) * i32::from(y);
        }
    }
    lanes.iter().sum::<i32>() + tail
}

/// The text a tool is embedded from, written into `out`: its own name as words (`get_forecast`,
/// `getForecast` → `get forecast`), its description, then each parameter of its input schema as
/// its name in words and its description. The server prefix is left out: every tool of a server
/// has it, so it would pull them all towards each other.
///
/// The parameters were measured on bfcl, the one open data set whose tools describe them (R@5
/// .786 → .820, R@1 .517 → .550, MRR@10 .661 → .693; descriptions alone .817): what a tool takes
/// says much of what it is for. metatool's tools have no parameters, so it cannot move there.
pub fn tool_text(entry: &ToolEntry, out: &mut String) {
    out.clear();
    let name = entry.name();
    let own = match entry.server_tool.as_deref() {
        Some(own) if name.ends_with(own) => own,
        _ => name,
    };
    identifier_words(own, out);
    out.push_str(". ");
    out.push_str(entry.description());
    entry.tool.input_schema().for_each_parameter(|name, description| {
        out.push_str(". ");
        identifier_words(name, out);
        if let Some(description) = description {
            out.push(' ');
            out.push_str(description);
        }
    });
}

/// `snake_case`, `kebab-case` and `camelCase` identifiers as space-separated words.
fn identifier_words(identifier: &str, out: &mut String) {
    let mut previous: Option<char> = None;
    for c in identifier.chars() {
        if !c.is_alphanumeric() {
            out.push(' ');
        } else {
            if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) {
                out.push(' ');
            }
            out.push(c);
        }
        previous = Some(c);
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::Tool;

    use super::*;

    fn entry(name: &str, description: &'static str) -> ToolEntry {
        let tool = Tool::new(name.to_owned(), description, Arc::new(Default::default()));
        ToolEntry::downstream(format!("x_slack_{name}"), "slack", tool)
    }

    #[test]
    fn a_tool_is_embedded_with_its_parameters_names_and_descriptions() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "channelId": {"type": "string", "description": "Where to post."},
            "text": {"type": "string"}
        }});
        let schema = schema.as_object().expect("an object").clone();
        let tool = Tool::new("post", "Posts a message.", Arc::new(schema));
        let mut text = String::new();
        tool_text(&ToolEntry::downstream("x_slack_post", "slack", tool), &mut text);
        assert_eq!(text, "post. Posts a message.. channel Id Where to post.. text");
    }

    #[test]
    fn a_tool_is_embedded_from_its_own_name_as_words_and_its_description() {
        let mut text = String::new();
        tool_text(&entry("postMessage_toChannel", "Posts a message."), &mut text);
        assert_eq!(text, "post Message to Channel. Posts a message.");
    }

    #[test]
    fn the_dot_product_covers_every_lane_and_the_tail() {
        let a: Vec<i8> = (0..67).collect();
        let b = vec![-1; 67];
        assert_eq!(dot_i8(&a, &b), -2211);
        assert_eq!(dot_i8(&[127; 64], &[-127; 64]), -127 * 127 * 64);
    }

    #[test]
    fn quantisation_keeps_the_cosine_close() {
        let a = [0.6f32, -0.8, 0.0];
        let b = [0.8f32, 0.0, -0.6];
        let (qa, qb) = (QuantizedVector::new(&a), QuantizedVector::new(&b));
        assert_eq!(qa.values, [95, -127, 0]);
        let cosine = dot_i8(&qa.values, &qb.values) as f32 * qa.scale * qb.scale;
        assert!((cosine - 0.48).abs() < 0.005, "{cosine}");
    }

    #[test]
    fn each_tool_gets_a_unit_vector_and_an_unknown_one_a_zero_vector() {
        let tokenizer = WordPiece::new(["[UNK]", "post", "message"].map(str::to_owned), "[UNK]").expect("has [UNK]");
        let model = StaticModel::new(tokenizer, &[vec![0.0, 0.0], vec![3.0, 0.0], vec![0.0, 4.0]]).expect("fits");
        let entries = [Arc::new(entry("post", "")), Arc::new(entry("zzz", "qqq"))];
        let vectors = ToolVectors::build(&SemanticRanking::new(Arc::new(model)), &entries);
        assert_eq!(vectors.vector(0), Some(vec![1.0, 0.0]));
        assert_eq!(vectors.vector(1), Some(vec![0.0, 0.0]));
        let similarity = vectors.similarity(0, &QuantizedVector::new(&[0.6, 0.8]));
        assert!((similarity - 0.6).abs() < 0.005, "{similarity}");
        assert_eq!(vectors.similarity(1, &QuantizedVector::new(&[0.6, 0.8])), 0.0);
        assert_eq!(vectors.bytes(), 2 * 2 + 2 * 4);
    }
}
