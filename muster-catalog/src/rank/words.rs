//! The two general English word lists of the ranker. Neither was derived from a benchmark's
//! queries: the first is the usual English stop-word list, the second the verbs nearly every tool
//! description and request uses.

/// Function words: articles, pronouns, prepositions, conjunctions, auxiliaries and modals, question
/// words, and the pieces a contraction splits into (`what's` → `what`, `s`). Dropped from a query
/// unless it has no other word, matched on the lowercased word before folding. Directional
/// particles (up, down, off, out, over) are not in it: `scale down`, `log out` need them.
#[rustfmt::skip]
pub(crate) const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "d", "did",
    "do", "does", "doing", "during", "each", "either", "else", "etc", "ever", "every", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "ll", "m", "may", "me", "might", "more",
    "most", "must", "my", "myself", "no", "nor", "not", "now", "o", "of", "on", "once", "only", "or", "other",
    "our", "ours", "ourselves", "own", "please", "re", "s", "same", "shall", "she", "should", "so", "some", "such",
    "t", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "until", "us", "ve", "very", "was", "we", "were", "what", "when", "where",
    "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "without", "would", "y",
    "yet", "you", "your", "yours", "yourself", "yourselves",
];

/// Ubiquitous verbs: the verbs of reading and of asking that nearly every tool description or
/// request carries (`list`, `get`, `show me`, `I want`, `help me find`). Their contribution counts
/// a quarter, so the noun of a request drives the ranking. Verbs that tell tools apart (create,
/// delete, update, run, send, ...) are not in it. Matched on the folded term.
#[rustfmt::skip]
pub(crate) const UBIQUITOUS_VERBS: &[&str] = &[
    "display", "fetch", "find", "get", "give", "help", "know", "let", "like", "list", "look", "need", "obtain",
    "provide", "retrieve", "return", "see", "show", "tell", "use", "want",
];
