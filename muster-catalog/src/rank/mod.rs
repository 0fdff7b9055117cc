//! Relevance ranking for `filter_tools {query}`: field-weighted BM25F over a snapshot index.
//!
//! (Design notes are completed after tuning.)

mod analyzer;
mod bm25f;
mod explain;
mod index;
#[doc(hidden)]
pub mod reference;
mod words;

pub use analyzer::{Analyzer, Folding, TermClass, fold};
pub use bm25f::{
    Bm25fParams, CorpusStatistics, FieldParams, TermWeight, display_score, idf, length_norm, saturate,
    weighted_field_tf,
};
pub use explain::{Explanation, FieldExplanation, TermExplanation};
pub use index::{Hit, PrefixTokens, Query, QueryTerm, RankingConfig, SearchIndex, SnapshotStatistics};

/// A field of a tool's text, most to least weighty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The tool's name (its own name; the server prefix see [`PrefixTokens`]).
    Name,
    /// The first non-empty line of the description.
    FirstLine,
    /// The rest of the description.
    Rest,
}

impl Field {
    /// How many fields there are.
    pub const COUNT: usize = 3;
    /// Every field, most weighty first.
    pub const ALL: [Field; Field::COUNT] = [Field::Name, Field::FirstLine, Field::Rest];

    /// The field's position in per-field arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name for the field.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::FirstLine => "first_line",
            Field::Rest => "rest",
        }
    }
}

/// A document of the index: a tool's position in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(pub u32);

impl DocId {
    /// The position, as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A term of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TermId(pub u32);

impl TermId {
    /// The term's position in per-term arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests;
