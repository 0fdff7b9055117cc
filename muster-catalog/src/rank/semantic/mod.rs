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

mod model;
mod safetensors;
mod wordpiece;

use std::sync::Arc;

use muster_core::ToolEntry;

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
}

impl SemanticRanking {
    /// `model` with the default fusion and depth.
    pub fn new(model: Arc<StaticModel>) -> Self {
        Self {
            model,
            fusion: Fusion::default(),
            depth: Self::DEFAULT_DEPTH,
        }
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

/// The unit vector of every tool of a snapshot, row by row in document order.
#[derive(Debug, Clone, Default)]
pub struct ToolVectors {
    dimensions: usize,
    values: Vec<f32>,
}

impl ToolVectors {
    /// Embeds each entry's [`tool_text`] with `model`.
    pub fn build<'a>(model: &StaticModel, entries: impl IntoIterator<Item = &'a Arc<ToolEntry>>) -> Self {
        let dimensions = model.dimensions();
        let mut values = Vec::new();
        let mut text = String::new();
        for entry in entries {
            let start = values.len();
            values.resize(start + dimensions, 0.0);
            tool_text(entry, &mut text);
            model.embed_into(&text, &mut values[start..]);
        }
        Self { dimensions, values }
    }

    /// The vector of document `doc` (its position in the snapshot).
    pub fn vector(&self, doc: usize) -> Option<&[f32]> {
        self.values.get(doc * self.dimensions..(doc + 1) * self.dimensions)
    }

    /// The cosine similarity of document `doc` and the unit vector `query` (0 for a document
    /// without a vector).
    pub fn similarity(&self, doc: usize, query: &[f32]) -> f32 {
        self.vector(doc).map_or(0.0, |v| dot(v, query))
    }

    /// Bytes held by the vectors.
    pub fn bytes(&self) -> usize {
        self.values.len() * size_of::<f32>()
    }
}

/// The dot product, in eight lanes so that it vectorises.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The text a tool is embedded from, written into `out`: its own name as words (`get_forecast`,
/// `getForecast` → `get forecast`), then its description. The server prefix is left out: every
/// tool of a server has it, so it would pull them all towards each other.
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
    fn a_tool_is_embedded_from_its_own_name_as_words_and_its_description() {
        let mut text = String::new();
        tool_text(&entry("postMessage_toChannel", "Posts a message."), &mut text);
        assert_eq!(text, "post Message to Channel. Posts a message.");
    }

    #[test]
    fn the_dot_product_covers_every_lane_and_the_tail() {
        let a: Vec<f32> = (0..11).map(|i| i as f32).collect();
        let b = vec![1.0; 11];
        assert_eq!(dot(&a, &b), 55.0);
    }

    #[test]
    fn each_tool_gets_a_unit_vector_and_an_unknown_one_a_zero_vector() {
        let tokenizer = WordPiece::new(["[UNK]", "post", "message"].map(str::to_owned), "[UNK]").expect("has [UNK]");
        let model = StaticModel::new(tokenizer, &[vec![0.0, 0.0], vec![3.0, 0.0], vec![0.0, 4.0]]).expect("fits");
        let entries = [Arc::new(entry("post", "")), Arc::new(entry("zzz", "qqq"))];
        let vectors = ToolVectors::build(&model, &entries);
        assert_eq!(vectors.vector(0), Some(&[1.0, 0.0][..]));
        assert_eq!(vectors.vector(1), Some(&[0.0, 0.0][..]));
        assert_eq!(vectors.similarity(0, &[0.6, 0.8]), 0.6);
        assert_eq!(vectors.bytes(), 16);
    }
}
