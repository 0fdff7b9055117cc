//! The search index of one catalogue snapshot and the ranking of candidate sets against it.

use std::{
    collections::HashMap,
    fmt,
    hash::{BuildHasherDefault, Hasher},
    sync::Arc,
};

use muster_core::ToolEntry;

use super::{
    DocId, Field, TermId,
    analyzer::{Analyzer, TermClass},
    bm25f::{Bm25fParams, CorpusStatistics, TermWeight, length_norm, weighted_field_tf},
    explain::{Explanation, FieldExplanation, HybridExplanation, TermExplanation},
    fusion::{Fused, fuse, rank_of},
    semantic::{QuantizedVector, SemanticRanking, ToolVectors},
};

/// What the `x_<server>_` prefix of a downstream tool's exposed name is to its name field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PrefixTokens {
    /// The prefix's terms match (a query naming the server finds its tools) but do not lengthen
    /// the name: every tool of a server carries them, so they say nothing about what the tool
    /// does, and a long server name must not make its tools' names read as long.
    #[default]
    MatchOnly,
    /// The prefix is part of the name like any other word, as Go muster indexes it.
    Counted,
    /// The prefix is not indexed at all.
    Ignored,
}

/// Everything that decides how a snapshot is indexed and ranked.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RankingConfig {
    /// How text becomes terms.
    pub analyzer: Analyzer,
    /// The BM25F parameters.
    pub params: Bm25fParams,
    /// How the server prefix of exposed names is indexed.
    pub prefix: PrefixTokens,
    /// The semantic ranker fused with BM25F; `None` (the default): BM25F alone.
    pub semantic: Option<SemanticRanking>,
}

impl RankingConfig {
    /// Go muster's ranking, as far as an index built once can reproduce it: its tokeniser, its
    /// parameters, the prefix counted in the name, only the description's first line indexed.
    /// With the whole catalogue as the candidate set (so that Go's per-query statistics are the
    /// snapshot's), it ranks as Go muster does.
    pub fn muster_compatible() -> Self {
        Self {
            analyzer: Analyzer::muster_compatible(),
            params: Bm25fParams::muster_compatible(),
            prefix: PrefixTokens::Counted,
            semantic: None,
        }
    }

    /// With other BM25F parameters.
    pub fn with_params(mut self, params: Bm25fParams) -> Self {
        self.params = params;
        self
    }

    /// With another analyzer.
    pub fn with_analyzer(mut self, analyzer: Analyzer) -> Self {
        self.analyzer = analyzer;
        self
    }

    /// With another prefix policy.
    pub fn with_prefix(mut self, prefix: PrefixTokens) -> Self {
        self.prefix = prefix;
        self
    }

    /// With a semantic ranker fused with BM25F: tool vectors are computed when the index is
    /// built, a query vector when a query is analysed.
    pub fn with_semantic(mut self, semantic: SemanticRanking) -> Self {
        self.semantic = Some(semantic);
        self
    }
}

/// One query term after analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerm {
    /// The term (lowercased, folded).
    pub text: String,
    /// Its id in the index, when any document has it.
    pub term: Option<TermId>,
    /// What kind of word it is.
    pub class: TermClass,
    /// `q(t)`: 1, or the ubiquitous-verb factor.
    pub weight: f64,
}

/// An analysed query: its distinct terms, in the order they first occur, and its unit vector
/// when the index has a semantic ranker and the model knows a word of the query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    terms: Vec<QueryTerm>,
    vector: Option<Vec<f32>>,
}

impl Query {
    /// The terms ranked on (function words already dropped, unless the query had nothing else).
    pub fn terms(&self) -> &[QueryTerm] {
        &self.terms
    }

    /// The query's unit vector, for the semantic ranker.
    pub fn vector(&self) -> Option<&[f32]> {
        self.vector.as_deref()
    }

    /// Whether nothing can match: no term of the query occurs anywhere in the index, and it has
    /// no vector to compare.
    pub fn matches_nothing(&self) -> bool {
        self.vector.is_none() && self.terms.iter().all(|t| t.term.is_none())
    }
}

/// One ranked candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Its position in the candidate slice.
    pub position: usize,
    /// Its document.
    pub doc: DocId,
    /// Its score (unrounded; see [`super::display_score`]): BM25F, or with a semantic ranker
    /// the fused score.
    pub score: f64,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: DocId,
    tf: [u16; Field::COUNT],
}

#[derive(Debug, Clone, Copy)]
struct DocFields {
    length: [u32; Field::COUNT],
    /// `length_norm` of each field against the snapshot's average length.
    norm: [f64; Field::COUNT],
}

/// The corpus statistics of a whole snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotStatistics {
    document_count: u64,
    document_frequency: Vec<u32>,
    average_length: [f64; Field::COUNT],
}

impl CorpusStatistics for SnapshotStatistics {
    fn document_count(&self) -> u64 {
        self.document_count
    }

    fn document_frequency(&self, term: TermId) -> u64 {
        self.document_frequency.get(term.index()).map_or(0, |&df| u64::from(df))
    }

    fn average_field_length(&self, field: Field) -> f64 {
        self.average_length[field.index()]
    }
}

/// The BM25F index of one catalogue snapshot: per document and field the term frequencies and
/// lengths, per field the average length, per term the document frequency. Built once (by
/// [`crate::CatalogBuilder::build`]), read by every query; a query ranks a candidate set against
/// these statistics and never re-reads the tools' text.
#[derive(Default)]
pub struct SearchIndex {
    config: RankingConfig,
    terms: HashMap<Box<str>, TermId>,
    term_text: Vec<Box<str>>,
    postings: Vec<Vec<Posting>>,
    docs: Vec<DocFields>,
    /// The entries, held so that an address in `by_address` stays theirs while the index lives.
    entries: Vec<Arc<ToolEntry>>,
    by_name: HashMap<Box<str>, DocId>,
    by_address: HashMap<usize, DocId, BuildHasherDefault<AddressHasher>>,
    stats: SnapshotStatistics,
    /// Each document's vector, when the configuration has a semantic ranker.
    vectors: Option<ToolVectors>,
}

impl SearchIndex {
    /// Indexes `entries` (document ids follow their order) with the default configuration.
    pub fn build<'a>(entries: impl IntoIterator<Item = &'a Arc<ToolEntry>>) -> Self {
        Self::build_with(entries, RankingConfig::default())
    }

    /// Indexes `entries` with `config`.
    pub fn build_with<'a>(entries: impl IntoIterator<Item = &'a Arc<ToolEntry>>, config: RankingConfig) -> Self {
        let mut index = Self {
            config,
            ..Self::default()
        };
        let mut occurrences: Vec<(TermId, Field)> = Vec::new();
        let mut length_sum = [0u64; Field::COUNT];
        for entry in entries {
            let doc = DocId(u32::try_from(index.docs.len()).expect("a catalogue holds fewer than 2^32 tools"));
            occurrences.clear();
            let length = index.analyze(entry, &mut occurrences);
            occurrences.sort_unstable_by_key(|&(t, f)| (t, f.index()));
            let mut i = 0;
            while i < occurrences.len() {
                let term = occurrences[i].0;
                let mut tf = [0u16; Field::COUNT];
                while i < occurrences.len() && occurrences[i].0 == term {
                    let slot = &mut tf[occurrences[i].1.index()];
                    *slot = slot.saturating_add(1);
                    i += 1;
                }
                index.postings[term.index()].push(Posting { doc, tf });
            }
            for (sum, len) in length_sum.iter_mut().zip(length) {
                *sum += u64::from(len);
            }
            index.docs.push(DocFields {
                length,
                norm: [1.0; Field::COUNT],
            });
            index.entries.push(Arc::clone(entry));
            index.by_name.entry(entry.name().into()).or_insert(doc);
            index.by_address.insert(address(entry), doc);
        }
        let n = index.docs.len();
        index.stats = SnapshotStatistics {
            document_count: n as u64,
            document_frequency: index.postings.iter().map(|p| p.len() as u32).collect(),
            average_length: length_sum.map(|s| if n == 0 { 0.0 } else { s as f64 / n as f64 }),
        };
        for doc in &mut index.docs {
            for field in Field::ALL {
                let i = field.index();
                let avg = index.stats.average_length[i];
                doc.norm[i] = length_norm(doc.length[i], avg, index.config.params.fields[i].b);
            }
        }
        if let Some(semantic) = &index.config.semantic {
            index.vectors = Some(ToolVectors::build(semantic, &index.entries));
        }
        index
    }

    /// Analyses one entry into (term, field) occurrences; returns the field lengths.
    fn analyze(&mut self, entry: &ToolEntry, out: &mut Vec<(TermId, Field)>) -> [u32; Field::COUNT] {
        let mut length = [0u32; Field::COUNT];
        let params = self.config.params;
        let (prefix, own_name) = split_prefix(entry);
        let (first_line, rest) = split_description(entry.description());
        let prefix = if self.config.prefix == PrefixTokens::Ignored {
            ""
        } else {
            prefix
        };
        // (field, text, whether its terms count in the field's length)
        let texts = [
            (Field::Name, prefix, self.config.prefix == PrefixTokens::Counted),
            (Field::Name, own_name, true),
            (Field::FirstLine, first_line, true),
            (Field::Rest, rest, true),
        ];
        for (field, text, counted) in texts {
            self.index_text(field, text, counted, out, &mut length);
        }
        // Checked here too (`index_text` checks every field): with the field off, the schema is
        // not read at all.
        if params.field(Field::Parameters).weight > 0.0 {
            entry.tool.input_schema().for_each_parameter(|name, description| {
                self.index_text(Field::Parameters, name, true, out, &mut length);
                self.index_text(
                    Field::Parameters,
                    description.unwrap_or_default(),
                    true,
                    out,
                    &mut length,
                );
            });
        }
        length
    }

    /// Adds `text`'s terms to `out` as occurrences in `field` (to its length when `counted`).
    fn index_text(
        &mut self,
        field: Field,
        text: &str,
        counted: bool,
        out: &mut Vec<(TermId, Field)>,
        length: &mut [u32; Field::COUNT],
    ) {
        if self.config.params.field(field).weight <= 0.0 || text.is_empty() {
            return;
        }
        let analyzer = &self.config.analyzer;
        let terms = &mut self.terms;
        let term_text = &mut self.term_text;
        let postings = &mut self.postings;
        analyzer.for_each_term(text, |t| {
            let id = match terms.get(t) {
                Some(&id) => id,
                None => {
                    let id = TermId(u32::try_from(term_text.len()).expect("fewer than 2^32 distinct terms"));
                    terms.insert(t.into(), id);
                    term_text.push(t.into());
                    postings.push(Vec::new());
                    id
                }
            };
            out.push((id, field));
            if counted {
                length[field.index()] += 1;
            }
        });
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &RankingConfig {
        &self.config
    }

    /// The snapshot's corpus statistics.
    pub fn statistics(&self) -> &SnapshotStatistics {
        &self.stats
    }

    /// The tools' vectors, when the index has a semantic ranker.
    pub fn vectors(&self) -> Option<&ToolVectors> {
        self.vectors.as_ref()
    }

    /// How many documents (tools) the index holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// How many distinct terms the index holds.
    pub fn term_count(&self) -> usize {
        self.term_text.len()
    }

    /// The id of `term` (an analysed term), when a document has it.
    pub fn term_id(&self, term: &str) -> Option<TermId> {
        self.terms.get(term).copied()
    }

    /// The text of a term id.
    pub fn term_text(&self, term: TermId) -> &str {
        &self.term_text[term.index()]
    }

    /// The document of `entry`: the entry this index was built from (found by identity: the
    /// index holds its entries, so an address cannot be reused while it lives), else the document
    /// of the same name.
    pub fn doc_id(&self, entry: &ToolEntry) -> Option<DocId> {
        match self.by_address.get(&address(entry)) {
            Some(&doc) => Some(doc),
            None => self.by_name.get(entry.name()).copied(),
        }
    }

    /// The document of each candidate, as [`Self::doc_id`] finds it. Candidates usually come in
    /// snapshot order (a whole catalogue, or a view's subset of it), so each is first compared,
    /// by address, with the entry after the previous candidate's: a whole catalogue then costs
    /// no hash lookup at all, and a subset one per gap.
    pub(crate) fn doc_ids<C: AsRef<ToolEntry>>(&self, candidates: &[C]) -> Vec<Option<DocId>> {
        let mut expected = 0usize;
        candidates
            .iter()
            .map(|candidate| {
                let entry = candidate.as_ref();
                let doc = match self.entries.get(expected) {
                    Some(next) if std::ptr::eq(next.as_ref(), entry) => Some(DocId(expected as u32)),
                    _ => self.doc_id(entry),
                };
                if let Some(doc) = doc {
                    expected = doc.index() + 1;
                }
                doc
            })
            .collect()
    }

    /// The entry of `doc`.
    pub fn entry(&self, doc: DocId) -> Option<&Arc<ToolEntry>> {
        self.entries.get(doc.index())
    }

    /// Analyses `text` into a query: its distinct terms in order; function words dropped unless
    /// the query has no other word; ubiquitous verbs down-weighted; with a semantic ranker, the
    /// text's vector.
    pub fn query(&self, text: &str) -> Query {
        let analyzed = self.config.analyzer.query_terms(text);
        let only_function_words = analyzed.iter().all(|(_, c)| *c == TermClass::FunctionWord);
        let mut terms: Vec<QueryTerm> = Vec::with_capacity(analyzed.len());
        for (term, class) in analyzed {
            if class == TermClass::FunctionWord && !only_function_words {
                continue;
            }
            if terms.iter().any(|t| t.text == term) {
                continue;
            }
            let weight = match class {
                TermClass::UbiquitousVerb => self.config.params.ubiquitous_verb_weight,
                TermClass::Content | TermClass::FunctionWord => 1.0,
            };
            terms.push(QueryTerm {
                term: self.term_id(&term),
                text: term,
                class,
                weight,
            });
        }
        let vector = self.config.semantic.as_ref().and_then(|semantic| {
            let mut vector = vec![0.0; semantic.model.dimensions()];
            semantic.model.embed_into(text, &mut vector).then_some(vector)
        });
        Query { terms, vector }
    }

    /// Ranks `candidates` (tools of this snapshot) for `query`: best first, ties in candidate
    /// order, candidates scoring zero dropped. A candidate this index does not hold scores zero.
    pub fn rank<C: AsRef<ToolEntry>>(&self, query: &Query, candidates: &[C]) -> Vec<Hit> {
        self.rank_top(query, candidates, usize::MAX)
    }

    /// Like [`Self::rank`], but only the best `top` hits are put in order: they come first, best
    /// first; every other hit follows in an unspecified order, so the count of matches stays
    /// exact while a page of a broad match over a large catalogue skips a full sort.
    pub fn rank_top<C: AsRef<ToolEntry>>(&self, query: &Query, candidates: &[C], top: usize) -> Vec<Hit> {
        if query.matches_nothing() || candidates.is_empty() {
            return Vec::new();
        }
        let docs = self.doc_ids(candidates);
        self.rank_docs_top(query, &docs, top)
    }

    /// Ranks candidates given as documents (`None` for one the index does not hold); a hit's
    /// `position` indexes `candidates`. Best first, ties in candidate order.
    pub fn rank_docs(&self, query: &Query, candidates: &[Option<DocId>]) -> Vec<Hit> {
        self.rank_docs_top(query, candidates, usize::MAX)
    }

    /// [`Self::rank_docs`] with only the best `top` hits in order (see [`Self::rank_top`]).
    pub fn rank_docs_top(&self, query: &Query, candidates: &[Option<DocId>], top: usize) -> Vec<Hit> {
        if query.matches_nothing() || candidates.is_empty() {
            return Vec::new();
        }
        if let Some((fused, _)) = self.fused(query, candidates, top) {
            return fused
                .into_iter()
                .filter_map(|f| {
                    candidates[f.position].map(|doc| Hit {
                        position: f.position,
                        doc,
                        score: f.score,
                    })
                })
                .collect();
        }
        let scores = self.lexical_scores(query, candidates);
        let mut hits: Vec<Hit> = scores
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s > 0.0)
            .filter_map(|(position, &score)| candidates[position].map(|doc| Hit { position, doc, score }))
            .collect();
        best_first(&mut hits, top);
        hits
    }

    /// The fused ranking of `candidates` (the best `top` first and in order), with each
    /// candidate's BM25F score and similarity, when the index has a semantic ranker and the query
    /// a vector.
    #[allow(clippy::type_complexity)]
    fn fused(
        &self,
        query: &Query,
        candidates: &[Option<DocId>],
        top: usize,
    ) -> Option<(Vec<Fused>, (Vec<f64>, Vec<f32>))> {
        let (semantic, vectors, vector) = (self.config.semantic.as_ref()?, self.vectors.as_ref()?, query.vector()?);
        let lexical = self.lexical_scores(query, candidates);
        let vector = QuantizedVector::new(vector);
        let similarity: Vec<f32> = candidates
            .iter()
            .map(|doc| doc.map_or(0.0, |d| vectors.similarity(d.index(), &vector)))
            .collect();
        let fused = fuse(&lexical, &similarity, semantic.fusion, semantic.depth, top);
        Some((fused, (lexical, similarity)))
    }

    /// The BM25F score of each candidate (0 for no match, or a document the index does not hold).
    fn lexical_scores(&self, query: &Query, candidates: &[Option<DocId>]) -> Vec<f64> {
        const ABSENT: u32 = u32::MAX;
        let mut slot = vec![ABSENT; self.docs.len()];
        for (position, doc) in candidates.iter().enumerate() {
            if let Some(doc) = doc {
                slot[doc.index()] = position as u32;
            }
        }
        let mut scores = vec![0.0f64; candidates.len()];
        for qt in &query.terms {
            let Some(term) = qt.term else { continue };
            let weight = TermWeight::new(&self.stats, term, qt.weight, &self.config.params);
            for posting in &self.postings[term.index()] {
                let position = slot[posting.doc.index()];
                if position != ABSENT {
                    scores[position as usize] += weight.score(self.weighted_tf(posting));
                }
            }
        }
        scores
    }

    /// `wtf`: the weighted, length-normalised term frequency over the fields.
    fn weighted_tf(&self, posting: &Posting) -> f64 {
        let doc = &self.docs[posting.doc.index()];
        let mut wtf = 0.0;
        for (i, field) in self.config.params.fields.iter().enumerate() {
            if posting.tf[i] > 0 {
                wtf += weighted_field_tf(field.weight, u32::from(posting.tf[i]), doc.norm[i]);
            }
        }
        wtf
    }

    /// Why `doc` scores what it does for `query` among `candidates` (the set it was ranked in:
    /// fused ranks depend on it): [`Self::explain`], and with a semantic ranker its
    /// [`HybridExplanation`] (similarity, both ranks, both parts of the fused score).
    pub fn explain_among<C: AsRef<ToolEntry>>(&self, query: &Query, doc: DocId, candidates: &[C]) -> Explanation {
        let mut explanation = self.explain(query, doc);
        let docs = self.doc_ids(candidates);
        let Some(position) = docs.iter().position(|&d| d == Some(doc)) else {
            return explanation;
        };
        if let (Some((fused, (lexical, similarity))), Some(semantic)) =
            (self.fused(query, &docs, 0), &self.config.semantic)
        {
            let found = fused.iter().find(|f| f.position == position);
            explanation.hybrid = Some(HybridExplanation {
                similarity: similarity[position],
                lexical_rank: rank_of(&lexical, position, usize::MAX),
                semantic_rank: rank_of(&similarity, position, semantic.depth),
                lexical_part: found.map_or(0.0, |f| f.lexical_part),
                semantic_part: found.map_or(0.0, |f| f.semantic_part),
                score: found.map_or(0.0, |f| f.score),
            });
        }
        explanation
    }

    /// Why `doc` scores what it does for `query` by BM25F: per query term, the fields it matched
    /// with their tf, length, weight and normalised tf, and the term's idf and contribution. With
    /// a semantic ranker, [`Self::explain_among`] adds the fused parts.
    pub fn explain(&self, query: &Query, doc: DocId) -> Explanation {
        let mut terms = Vec::new();
        let mut score = 0.0;
        let fields = self.docs.get(doc.index());
        for qt in &query.terms {
            let Some(term) = qt.term else { continue };
            let Some(fields) = fields else { continue };
            let postings = &self.postings[term.index()];
            let Ok(found) = postings.binary_search_by_key(&doc, |p| p.doc) else {
                continue;
            };
            let posting = &postings[found];
            let weight = TermWeight::new(&self.stats, term, qt.weight, &self.config.params);
            let wtf = self.weighted_tf(posting);
            let contribution = weight.score(wtf);
            score += contribution;
            terms.push(TermExplanation {
                term: qt.text.clone(),
                class: qt.class,
                query_weight: qt.weight,
                document_frequency: self.stats.document_frequency(term),
                idf: weight.idf,
                fields: Field::ALL
                    .into_iter()
                    .filter(|f| posting.tf[f.index()] > 0)
                    .map(|f| {
                        let i = f.index();
                        let params = self.config.params.field(f);
                        FieldExplanation {
                            field: f,
                            tf: u32::from(posting.tf[i]),
                            length: fields.length[i],
                            average_length: self.stats.average_length[i],
                            weight: params.weight,
                            b: params.b,
                            weighted_tf: weighted_field_tf(params.weight, u32::from(posting.tf[i]), fields.norm[i]),
                        }
                    })
                    .collect(),
                weighted_tf: wtf,
                contribution,
            });
        }
        Explanation {
            doc,
            name: self.entry(doc).map(|e| e.name().to_owned()).unwrap_or_default(),
            score,
            terms,
            hybrid: None,
        }
    }
}

impl fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.docs.len())
            .field("terms", &self.term_text.len())
            .field("average_length", &self.stats.average_length)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Puts the best `top` hits first, in order: score descending, then candidate position (distinct,
/// so the order is total and the unstable sort deterministic).
fn best_first(hits: &mut [Hit], top: usize) {
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.position.cmp(&b.position));
    if top == 0 {
        return;
    }
    if top < hits.len() {
        hits.select_nth_unstable_by(top - 1, order);
        hits[..top].sort_unstable_by(order);
    } else {
        hits.sort_unstable_by(order);
    }
}

/// The exposed name split into the server prefix (`x_<server>_`) and the tool's own name; a core
/// or workflow tool, or a name not ending in the server's own name for it, is all own name.
fn split_prefix(entry: &ToolEntry) -> (&str, &str) {
    let name = entry.name();
    match entry.server_tool.as_deref() {
        Some(own) if name.len() > own.len() && name.ends_with(own) => name.split_at(name.len() - own.len()),
        _ => ("", name),
    }
}

/// The description split into its first non-empty line (trimmed) and the rest.
pub(crate) fn split_description(description: &str) -> (&str, &str) {
    let text = description.trim_start();
    match text.split_once('\n') {
        Some((first, rest)) => (first.trim(), rest),
        None => (text.trim(), ""),
    }
}

fn address(entry: &ToolEntry) -> usize {
    std::ptr::from_ref(entry).addr()
}

/// Hashes the addresses of entries (one `usize`): a multiply-xorshift, enough for pointers.
#[derive(Debug, Default, Clone, Copy)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        let h = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}
