//! Why a document scores what it does: the twin of the scorer, for tests and debugging.

use std::fmt;

use super::{DocId, Field, TermClass};

/// How one document scored for one query.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The document.
    pub doc: DocId,
    /// Its tool's exposed name.
    pub name: String,
    /// The BM25F score: the sum of the terms' contributions.
    pub score: f64,
    /// The query terms the document matched, in query order.
    pub terms: Vec<TermExplanation>,
    /// With a semantic ranker: the similarity and how the two rankings fused.
    pub hybrid: Option<HybridExplanation>,
}

/// How a document's fused score came about: its BM25F rank, its similarity rank, and what each
/// adds.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridExplanation {
    /// Cosine similarity of the tool's and the query's vectors.
    pub similarity: f32,
    /// Rank among the lexical matches (1 = best), when it is one.
    pub lexical_rank: Option<usize>,
    /// Rank among the most similar candidates, when it is one of them.
    pub semantic_rank: Option<usize>,
    /// What the lexical ranking adds.
    pub lexical_part: f64,
    /// What the semantic ranking adds.
    pub semantic_part: f64,
    /// The fused score: the sum of the parts.
    pub score: f64,
}

impl Explanation {
    /// The explanation of the query term `term` (as analysed), when the document matched it.
    pub fn term(&self, term: &str) -> Option<&TermExplanation> {
        self.terms.iter().find(|t| t.term == term)
    }
}

/// One query term's contribution to a document's score.
#[derive(Debug, Clone, PartialEq)]
pub struct TermExplanation {
    /// The analysed term.
    pub term: String,
    /// What kind of word it is.
    pub class: TermClass,
    /// `q(t)`: 1, or the ubiquitous-verb factor.
    pub query_weight: f64,
    /// `df(t)` in the snapshot.
    pub document_frequency: u64,
    /// `idf(t)`.
    pub idf: f64,
    /// The fields it occurs in.
    pub fields: Vec<FieldExplanation>,
    /// `wtf`: the sum of the fields' weighted, normalised term frequencies.
    pub weighted_tf: f64,
    /// `q(t) · idf(t) · saturate(wtf)`.
    pub contribution: f64,
}

impl TermExplanation {
    /// The field explanation of `field`, when the term occurs there.
    pub fn field(&self, field: Field) -> Option<&FieldExplanation> {
        self.fields.iter().find(|f| f.field == field)
    }
}

/// One field's part of a term's weighted term frequency.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldExplanation {
    /// The field.
    pub field: Field,
    /// How often the term occurs in it.
    pub tf: u32,
    /// The field's length in this document, in terms.
    pub length: u32,
    /// The field's average length over the snapshot.
    pub average_length: f64,
    /// The field's weight.
    pub weight: f64,
    /// The field's length normalisation.
    pub b: f64,
    /// `weight · tf / norm`.
    pub weighted_tf: f64,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} (doc {}): score {:.4}", self.name, self.doc.index(), self.score)?;
        if let Some(h) = &self.hybrid {
            let rank = |r: Option<usize>| r.map_or_else(|| "-".to_owned(), |r| r.to_string());
            writeln!(
                f,
                "  fused {:.4} = lexical {:.4} (rank {}) + semantic {:.4} (rank {}, similarity {:.4})",
                h.score,
                h.lexical_part,
                rank(h.lexical_rank),
                h.semantic_part,
                rank(h.semantic_rank),
                h.similarity
            )?;
        }
        for t in &self.terms {
            writeln!(
                f,
                "  {:<16} {:.4} = q {} × idf {:.4} (df {}) × sat(wtf {:.4})",
                t.term, t.contribution, t.query_weight, t.idf, t.document_frequency, t.weighted_tf
            )?;
            for x in &t.fields {
                writeln!(
                    f,
                    "    {:<10} tf {} len {} (avg {:.2}) weight {} b {} -> {:.4}",
                    x.field.name(),
                    x.tf,
                    x.length,
                    x.average_length,
                    x.weight,
                    x.b,
                    x.weighted_tf
                )?;
            }
        }
        Ok(())
    }
}
