//! A static embedding model: one vector per token of a WordPiece vocabulary; a text's vector is
//! the mean of its tokens' vectors, normalised to unit length.
//!
//! The files are model2vec's layout, so any model2vec model with a WordPiece tokenizer loads:
//! `model.safetensors` (tensor `embeddings`, rows × dimensions, float32/16; optionally
//! `weights`, a factor per token, and `mapping`, the row of each token when rows are shared) and
//! `tokenizer.json`. Special tokens (`[CLS]`, `[PAD]`, ...) and unknown words carry no meaning
//! and are skipped, as model2vec does.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use super::{
    safetensors::{SafetensorsProblem, Tensors},
    wordpiece::{TokenizerFile, TokenizerProblem, WordPiece},
};

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A file of the model could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `tokenizer.json` is not JSON of the expected shape.
    #[error("{} is not a tokenizer.json: {source}", path.display())]
    TokenizerJson {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The tokenizer is not one this reader runs.
    #[error("{}: {problem}", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: TokenizerProblem,
    },
    /// `model.safetensors` cannot be read as a model.
    #[error("{}: {problem}", path.display())]
    Tensors {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: SafetensorsProblem,
    },
    /// The vectors do not fit the vocabulary: each token needs a row.
    #[error("{} has {rows} vectors of {dimensions} for a vocabulary of {tokens} tokens", path.display())]
    Mismatch {
        /// The tensors' file.
        path: PathBuf,
        /// Rows of the embedding matrix.
        rows: usize,
        /// Its dimensions.
        dimensions: usize,
        /// Tokens of the vocabulary.
        tokens: usize,
    },
}

/// A static embedding model: a WordPiece tokenizer and a vector per token.
///
/// Build one from files with [`StaticModel::load`], or from a vocabulary and its vectors with
/// [`StaticModel::new`] (how tests make a tiny one).
pub struct StaticModel {
    tokenizer: WordPiece,
    dimensions: usize,
    /// Per token, its vector times its weight (a zero row for tokens that carry no meaning), as
    /// bfloat16 ([`Bf16`]): half the memory of `f32`, and read back with a shift.
    rows: Vec<Bf16>,
    source: Option<PathBuf>,
}

impl fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticModel")
            .field("tokens", &self.tokenizer.len())
            .field("dimensions", &self.dimensions)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl StaticModel {
    /// The model in folder `dir` (model2vec layout: `model.safetensors`, `tokenizer.json`).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, ModelError> {
        let dir = dir.as_ref();
        let tokenizer_path = dir.join("tokenizer.json");
        let bytes = read(&tokenizer_path)?;
        let file: TokenizerFile = serde_json::from_slice(&bytes).map_err(|source| ModelError::TokenizerJson {
            path: tokenizer_path.clone(),
            source,
        })?;
        let specials = special_tokens(&bytes);
        let tokenizer = file.into_word_piece().map_err(|problem| ModelError::Tokenizer {
            path: tokenizer_path,
            problem,
        })?;

        let tensors_path = dir.join("model.safetensors");
        let bytes = read(&tensors_path)?;
        let problem = |problem| ModelError::Tensors {
            path: tensors_path.clone(),
            problem,
        };
        let tensors = Tensors::parse(&bytes).map_err(problem)?;
        let embeddings = tensors.floats("embeddings").map_err(problem)?;
        let &[rows, dimensions] = embeddings.shape.as_slice() else {
            return Err(problem(SafetensorsProblem::Shape("embeddings".into())));
        };
        let tokens = tokenizer.len();
        let mismatch = || ModelError::Mismatch {
            path: tensors_path.clone(),
            rows,
            dimensions,
            tokens,
        };
        let mapping = if tensors.has("mapping") {
            tensors.indices("mapping").map_err(problem)?
        } else {
            (0..u32::try_from(rows).map_err(|_| mismatch())?).collect()
        };
        let weights = if tensors.has("weights") {
            tensors.floats("weights").map_err(problem)?.values
        } else {
            vec![1.0; tokens]
        };
        if dimensions == 0 || mapping.len() != tokens || weights.len() != tokens {
            return Err(mismatch());
        }
        let mut table = Vec::with_capacity(tokens * dimensions);
        for (&row, &weight) in mapping.iter().zip(&weights) {
            let start = row as usize * dimensions;
            let vector = embeddings.values.get(start..start + dimensions).ok_or_else(mismatch)?;
            table.extend(vector.iter().map(|v| v * weight));
        }
        let mut model = Self::from_table(tokenizer, dimensions, table, &specials);
        model.source = Some(dir.to_owned());
        Ok(model)
    }

    /// A model over `tokenizer`'s vocabulary with `vectors[i]` the vector of token `i`; `None`
    /// when the counts differ or the vectors are not all of one non-zero length. The unknown
    /// token's vector is never used.
    pub fn new(tokenizer: WordPiece, vectors: &[Vec<f32>]) -> Option<Self> {
        let dimensions = vectors.first()?.len();
        if dimensions == 0 || vectors.len() != tokenizer.len() || vectors.iter().any(|v| v.len() != dimensions) {
            return None;
        }
        let table = vectors.concat();
        Some(Self::from_table(tokenizer, dimensions, table, &[]))
    }

    fn from_table(tokenizer: WordPiece, dimensions: usize, mut rows: Vec<f32>, specials: &[u32]) -> Self {
        for &id in specials.iter().chain([&tokenizer.unknown()]) {
            let start = id as usize * dimensions;
            if let Some(row) = rows.get_mut(start..start + dimensions) {
                row.fill(0.0);
            }
        }
        Self {
            tokenizer,
            dimensions,
            rows: rows.into_iter().map(Bf16::from_f32).collect(),
            source: None,
        }
    }

    /// The length of the model's vectors.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.tokenizer
    }

    /// The folder the model was loaded from, if it was.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// The tokens of `text` that carry a vector (unknown words and special tokens left out).
    pub fn tokens(&self, text: &str) -> Vec<&str> {
        self.tokenizer
            .token_ids(text)
            .filter(|&id| self.has_meaning(id))
            .map(|id| self.tokenizer.token(id))
            .collect()
    }

    /// Writes the unit vector of `text` into `out` (of [`Self::dimensions`] length): the mean of
    /// its tokens' vectors, normalised; all zeros when no token of it has a vector. Returns
    /// whether it is non-zero.
    pub fn embed_into(&self, text: &str, out: &mut [f32]) -> bool {
        assert_eq!(out.len(), self.dimensions, "the output has the model's dimensions");
        out.fill(0.0);
        for id in self.tokenizer.token_ids(text) {
            let start = id as usize * self.dimensions;
            for (o, v) in out.iter_mut().zip(&self.rows[start..start + self.dimensions]) {
                *o += v.to_f32();
            }
        }
        normalise(out)
    }

    /// The unit vector of `text` (see [`Self::embed_into`]).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut out = vec![0.0; self.dimensions];
        self.embed_into(text, &mut out);
        out
    }

    /// Bytes held by the token vectors.
    pub fn vector_bytes(&self) -> usize {
        self.rows.len() * size_of::<Bf16>()
    }

    fn has_meaning(&self, id: u32) -> bool {
        let start = id as usize * self.dimensions;
        self.rows[start..start + self.dimensions]
            .iter()
            .any(|v| v.to_f32() != 0.0)
    }
}

/// A bfloat16: the upper half of an `f32` (sign, the whole exponent, 7 bits of mantissa), so it
/// converts back with a shift that the embedding loop vectorises. Models ship as float16 or
/// float32 and a text's vector is a normalised mean of many rows, which the lost mantissa bits
/// do not move: over the three rankbench sets no metric moved by more than .001 against `f32`
/// rows (`rankbench --model models/minilm-l6-static`), and the shipped model's table takes 3.8 MB
/// instead of 7.6.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bf16(u16);

impl Bf16 {
    /// The nearest bfloat16 (ties to even); `v` is finite, as every model value is.
    fn from_f32(v: f32) -> Self {
        let bits = v.to_bits();
        let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
        Self((rounded >> 16) as u16)
    }

    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

/// Scales `v` to unit length; `false` (and `v` left all zeros) when it is zero.
pub(super) fn normalise(v: &mut [f32]) -> bool {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
        true
    } else {
        v.fill(0.0);
        false
    }
}

/// The ids of `tokenizer.json`'s special added tokens (`[CLS]`, `[SEP]`, `[PAD]`, `[MASK]`...).
fn special_tokens(tokenizer_json: &[u8]) -> Vec<u32> {
    #[derive(serde::Deserialize)]
    struct Added {
        id: u32,
        #[serde(default)]
        special: bool,
    }
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        added_tokens: Vec<Added>,
    }
    serde_json::from_slice::<File>(tokenizer_json)
        .map(|f| f.added_tokens.into_iter().filter(|a| a.special).map(|a| a.id).collect())
        .unwrap_or_default()
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|source| ModelError::Read {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::{super::safetensors::write, *};

    const TOKENIZER: &str = r###"{
        "added_tokens": [{"id": 0, "content": "[UNK]", "special": true}, {"id": 1, "content": "[CLS]", "special": true}],
        "normalizer": {"type": "BertNormalizer", "lowercase": true, "strip_accents": null},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100,
                  "vocab": {"[UNK]": 0, "[CLS]": 1, "weather": 2, "forecast": 3, "slack": 4}}
    }"###;

    fn f16(values: &[f32]) -> Vec<u8> {
        // Values exactly representable in half precision: 0, ±1, ±0.5, ±2.
        values
            .iter()
            .map(|&v| match v {
                0.0 => 0x0000u16,
                1.0 => 0x3c00,
                -1.0 => 0xbc00,
                0.5 => 0x3800,
                2.0 => 0x4000,
                _ => panic!("not in the table: {v}"),
            })
            .flat_map(u16::to_le_bytes)
            .collect()
    }

    fn model_dir(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::write(dir.path().join("tokenizer.json"), TOKENIZER).expect("written");
        std::fs::write(dir.path().join("model.safetensors"), write(tensors)).expect("written");
        dir
    }

    #[rustfmt::skip]
    const ROWS: [f32; 10] = [
        1.0, 1.0,   // [UNK]
        1.0, 1.0,   // [CLS]
        1.0, 0.0,   // weather
        0.5, 0.5,   // forecast
        0.0, 2.0,   // slack
    ];

    #[test]
    fn a_model2vec_folder_loads_and_embeds_as_the_normalised_mean() {
        let dir = model_dir(&[("embeddings", "F16", vec![5, 2], f16(&ROWS))]);
        let model = StaticModel::load(dir.path()).expect("loads");
        assert_eq!(model.dimensions(), 2);
        let v = model.embed("Weather forecast");
        // (1 + 0.5, 0 + 0.5) normalised.
        let n = (1.5f32 * 1.5 + 0.25).sqrt();
        assert!((v[0] - 1.5 / n).abs() < 1e-6 && (v[1] - 0.5 / n).abs() < 1e-6, "{v:?}");
    }

    #[test]
    fn special_and_unknown_tokens_carry_no_meaning() {
        let dir = model_dir(&[("embeddings", "F16", vec![5, 2], f16(&ROWS))]);
        let model = StaticModel::load(dir.path()).expect("loads");
        assert_eq!(model.tokens("[CLS] slack gibberish"), ["slack"]);
        assert_eq!(model.embed("gibberish"), [0.0, 0.0]);
        assert_eq!(model.embed("slack gibberish"), [0.0, 1.0]);
    }

    #[test]
    fn weights_and_a_mapping_shape_the_token_vectors() {
        let rows = f16(&[1.0, 0.0, 0.0, 1.0]);
        let mapping: Vec<u8> = [0i32, 0, 0, 1, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let weights: Vec<u8> = [1.0f32, 1.0, 2.0, 1.0, 1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let dir = model_dir(&[
            ("embeddings", "F16", vec![2, 2], rows),
            ("mapping", "I32", vec![5], mapping),
            ("weights", "F32", vec![5], weights),
        ]);
        let model = StaticModel::load(dir.path()).expect("loads");
        // weather → row 0 × 2, forecast → row 1 × 1: mean direction (2, 1).
        let v = model.embed("weather forecast");
        let n = 5f32.sqrt();
        assert!((v[0] - 2.0 / n).abs() < 1e-6 && (v[1] - 1.0 / n).abs() < 1e-6, "{v:?}");
    }

    #[test]
    fn rows_are_kept_as_the_nearest_bfloat16() {
        let round = |v: f32| Bf16::from_f32(v).to_f32();
        assert_eq!(round(1.0), 1.0);
        assert_eq!(round(-0.375), -0.375);
        assert_eq!(round(0.0), 0.0);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa.
        assert_eq!(round(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(round(1.0 + 1.0 / 512.0), 1.0);
        let third = round(1.0 / 3.0);
        assert!((third - 1.0 / 3.0).abs() < 1.0 / 3.0 / 256.0, "{third}");
    }

    #[test]
    fn vectors_that_do_not_fit_the_vocabulary_are_refused() {
        let dir = model_dir(&[("embeddings", "F16", vec![2, 2], f16(&[1.0, 0.0, 0.0, 1.0]))]);
        let err = StaticModel::load(dir.path()).expect_err("four tokens lack a row");
        assert!(matches!(err, ModelError::Mismatch { rows: 2, tokens: 5, .. }), "{err}");
    }

    #[test]
    fn a_missing_folder_names_the_file() {
        let err = StaticModel::load("/nonexistent/model").expect_err("no such folder");
        assert!(err.to_string().contains("/nonexistent/model/tokenizer.json"), "{err}");
    }
}
