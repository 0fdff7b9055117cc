//! BM25F: the formula, its parameters, and the statistics it reads.
//!
//! For a query term `t` and a document `d` with fields `f`:
//!
//! ```text
//! norm(d, f)   = 1 − b_f + b_f · len(d, f) / avglen(f)                 (length_norm)
//! wtf(t, d)    = Σ_f  w_f · tf(t, d, f) / norm(d, f)                   (weighted_tf)
//! idf(t)       = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))             (idf)
//! score(t, d)  = q(t) · idf(t) · wtf · (k1 + 1) / (wtf + k1)           (saturate)
//! score(d)     = Σ_t score(t, d)            over the distinct query terms
//! ```
//!
//! `q(t)` is 1, or the ubiquitous-verb weight for `list`, `get` and the like. The field weights
//! enter before the saturation, so a term repeated across fields saturates once (that is what
//! makes it BM25F rather than a sum of per-field BM25s). `N`, `df`, and the average lengths come
//! from a [`CorpusStatistics`]; the index computes them once per catalogue snapshot.

use super::{Field, TermId};

/// Per-field parameters: the weight of a match in the field and its length normalisation `b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldParams {
    /// How much a match in this field counts (0: the field is not indexed).
    pub weight: f64,
    /// Length normalisation: 0 ignores the field's length, 1 divides by it relative to the mean.
    pub b: f64,
}

/// The parameters of the ranking formula.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Bm25fParams {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Per field, indexed by [`Field::index`].
    pub fields: [FieldParams; Field::COUNT],
    /// The factor on a ubiquitous verb's contribution.
    pub ubiquitous_verb_weight: f64,
}

impl Default for Bm25fParams {
    /// The tuned parameters (see the module doc of [`crate::rank`] for how they were chosen).
    fn default() -> Self {
        Self {
            k1: 1.2,
            fields: [
                FieldParams { weight: 3.0, b: 0.5 },
                FieldParams { weight: 1.0, b: 0.5 },
                FieldParams { weight: 0.5, b: 0.75 },
                FieldParams { weight: 0.3, b: 0.75 },
            ],
            ubiquitous_verb_weight: 0.25,
        }
    }
}

impl Bm25fParams {
    /// Go muster's parameters: name 3, first line 1, the rest of the description not indexed,
    /// k1 1.5, b 0.75, ubiquitous verbs 0.25.
    pub fn muster_compatible() -> Self {
        Self {
            k1: 1.5,
            fields: [
                FieldParams { weight: 3.0, b: 0.75 },
                FieldParams { weight: 1.0, b: 0.75 },
                FieldParams { weight: 0.0, b: 0.75 },
                FieldParams { weight: 0.0, b: 0.75 },
            ],
            ubiquitous_verb_weight: 0.25,
        }
    }

    /// With another `k1`.
    pub fn with_k1(mut self, k1: f64) -> Self {
        self.k1 = k1;
        self
    }

    /// With other parameters for `field`.
    pub fn with_field(mut self, field: Field, weight: f64, b: f64) -> Self {
        self.fields[field.index()] = FieldParams { weight, b };
        self
    }

    /// With another ubiquitous-verb factor.
    pub fn with_ubiquitous_verb_weight(mut self, weight: f64) -> Self {
        self.ubiquitous_verb_weight = weight;
        self
    }

    /// The parameters of `field`.
    pub fn field(&self, field: Field) -> FieldParams {
        self.fields[field.index()]
    }
}

/// The corpus statistics BM25F needs, over whichever set of documents defines "the corpus" (the
/// whole snapshot for [`super::SearchIndex`]; a later view may compute its own).
pub trait CorpusStatistics {
    /// `N`: how many documents.
    fn document_count(&self) -> u64;
    /// `df(t)`: how many documents contain `term` in any indexed field.
    fn document_frequency(&self, term: TermId) -> u64;
    /// The mean length of `field`, in terms.
    fn average_field_length(&self, field: Field) -> f64;
}

/// Inverse document frequency, the non-negative BM25 variant.
pub fn idf(document_count: u64, document_frequency: u64) -> f64 {
    let n = document_count as f64;
    let df = document_frequency as f64;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The length normaliser of a field of `length` terms (1 when the field is empty everywhere).
pub fn length_norm(length: u32, average_length: f64, b: f64) -> f64 {
    if average_length > 0.0 {
        1.0 - b + b * f64::from(length) / average_length
    } else {
        1.0
    }
}

/// One field's term frequency, weighted and normalised: `w · tf / norm`.
pub fn weighted_field_tf(weight: f64, tf: u32, norm: f64) -> f64 {
    weight * (f64::from(tf) / norm)
}

/// Term-frequency saturation: `wtf · (k1 + 1) / (wtf + k1)`.
pub fn saturate(weighted_tf: f64, k1: f64) -> f64 {
    weighted_tf * (k1 + 1.0) / (weighted_tf + k1)
}

/// A query term's weight for one corpus, computed once per query: `q(t) · idf(t)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermWeight {
    /// `q(t)`: 1, or the ubiquitous-verb factor.
    pub query_weight: f64,
    /// `idf(t)`.
    pub idf: f64,
    /// `k1`.
    pub k1: f64,
}

impl TermWeight {
    /// The weight of `term` in the corpus `stats` describes.
    pub fn new(stats: &impl CorpusStatistics, term: TermId, query_weight: f64, params: &Bm25fParams) -> Self {
        Self {
            query_weight,
            idf: idf(stats.document_count(), stats.document_frequency(term)),
            k1: params.k1,
        }
    }

    /// The contribution of a document whose weighted term frequency is `weighted_tf`.
    pub fn score(&self, weighted_tf: f64) -> f64 {
        if weighted_tf > 0.0 {
            self.idf * saturate(weighted_tf, self.k1) * self.query_weight
        } else {
            0.0
        }
    }
}

/// The score Go muster shows: rounded to 4 decimals, at least 0.0001 (a match never shows 0).
pub fn display_score(score: f64) -> f64 {
    ((score * 10_000.0).round() / 10_000.0).max(0.0001)
}
