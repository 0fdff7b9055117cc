//! Text analysis: how a name, a description or a query becomes index terms.
//!
//! Tokens are the maximal runs of alphanumeric characters, split further at camelCase boundaries
//! (`runJarAgent` → `run jar agent`, `HTTPServer` → `http server`), lowercased, then folded
//! (plural and a few inflectional suffixes, see [`fold`]). So snake_case, kebab-case, dotted and
//! slashed names split at `_`, `-`, `.` and `/`, and `policies` meets `policy`. The same analysis
//! runs over documents and queries, so whatever a folding rule does, it does to both sides.

use std::{borrow::Cow, collections::HashSet};

use super::words::{FUNCTION_WORDS, UBIQUITOUS_VERBS};

/// How tokens are normalised after lowercasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Folding {
    /// Light English folding: plurals and third-person `-s`, `-ing` / `-ed`, a final `-e`, a
    /// final `-y` after a consonant (see [`fold`]).
    #[default]
    English,
    /// Tokens are kept as they are (lowercased), as Go muster does.
    None,
}

/// What a query term is to the ranker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermClass {
    /// An ordinary word: full weight.
    Content,
    /// A ubiquitous verb (list, get, show, ...): counts, down-weighted.
    UbiquitousVerb,
    /// A function word (the, how, of, ...): dropped unless the query has nothing else.
    FunctionWord,
}

/// Splits and normalises text into terms. One analyzer serves an index and every query against it.
#[derive(Debug, Clone)]
pub struct Analyzer {
    folding: Folding,
    split_acronyms: bool,
    function_words: HashSet<&'static str>,
    ubiquitous_verbs: HashSet<String>,
    verb_list: &'static [&'static str],
}

impl Default for Analyzer {
    /// The ranking analyzer: camelCase and acronym splitting, English folding, the general
    /// function-word list and the ubiquitous-verb list of this module.
    fn default() -> Self {
        Self {
            folding: Folding::English,
            split_acronyms: true,
            function_words: FUNCTION_WORDS.iter().copied().collect(),
            ubiquitous_verbs: fold_all(UBIQUITOUS_VERBS, Folding::English),
            verb_list: UBIQUITOUS_VERBS,
        }
    }
}

impl Analyzer {
    /// Go muster's tokeniser: lowercase alphanumeric runs split at a lower→Upper boundary, no
    /// folding, no function words, and `list` / `get` as the only ubiquitous verbs.
    pub fn muster_compatible() -> Self {
        Self {
            folding: Folding::None,
            split_acronyms: false,
            function_words: HashSet::new(),
            ubiquitous_verbs: fold_all(&["list", "get"], Folding::None),
            verb_list: &["list", "get"],
        }
    }

    /// The same analyzer with another folding.
    pub fn with_folding(mut self, folding: Folding) -> Self {
        self.folding = folding;
        self.ubiquitous_verbs = fold_all(self.verb_list, folding);
        self
    }

    /// The same analyzer with (or without) the function-word list.
    pub fn with_function_words(mut self, drop_function_words: bool) -> Self {
        self.function_words = if drop_function_words {
            FUNCTION_WORDS.iter().copied().collect()
        } else {
            HashSet::new()
        };
        self
    }

    /// The same analyzer with another ubiquitous-verb list.
    pub fn with_ubiquitous_verbs(mut self, verbs: &'static [&'static str]) -> Self {
        self.verb_list = verbs;
        self.ubiquitous_verbs = fold_all(verbs, self.folding);
        self
    }

    /// The same analyzer with (or without) acronym and digit→capital splitting.
    pub fn with_acronym_splitting(mut self, split: bool) -> Self {
        self.split_acronyms = split;
        self
    }

    /// The folding in use.
    pub fn folding(&self) -> Folding {
        self.folding
    }

    /// Calls `emit` with every term of `text`, in order.
    pub fn for_each_term(&self, text: &str, mut emit: impl FnMut(&str)) {
        let mut lower = String::new();
        for_each_token(text, self.split_acronyms, |token| {
            lowercase_into(token, &mut lower);
            match self.folding {
                Folding::English => emit(&fold(&lower)),
                Folding::None => emit(&lower),
            }
        });
    }

    /// Every term of `text`, in order.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_term(text, |t| out.push(t.to_owned()));
        out
    }

    /// The terms of a query, each with its class. Function words are recognised on the word as
    /// written (lowercased), before folding; ubiquitous verbs on the folded term, so `lists` and
    /// `listing` are the verb `list`.
    pub fn query_terms(&self, text: &str) -> Vec<(String, TermClass)> {
        let mut out = Vec::new();
        let mut lower = String::new();
        for_each_token(text, self.split_acronyms, |token| {
            lowercase_into(token, &mut lower);
            let term = match self.folding {
                Folding::English => fold(&lower).into_owned(),
                Folding::None => lower.clone(),
            };
            let class = if self.function_words.contains(lower.as_str()) {
                TermClass::FunctionWord
            } else if self.ubiquitous_verbs.contains(&term) {
                TermClass::UbiquitousVerb
            } else {
                TermClass::Content
            };
            out.push((term, class));
        });
        out
    }
}

/// `token` lowercased into `out` (replacing its content).
fn lowercase_into(token: &str, out: &mut String) {
    out.clear();
    if token.is_ascii() {
        out.push_str(token);
        out.make_ascii_lowercase();
    } else {
        out.extend(token.chars().flat_map(char::to_lowercase));
    }
}

fn fold_all(words: &[&str], folding: Folding) -> HashSet<String> {
    words
        .iter()
        .map(|w| match folding {
            Folding::English => fold(w).into_owned(),
            Folding::None => (*w).to_owned(),
        })
        .collect()
}

/// Calls `emit` with each token of `text` as written: maximal alphanumeric runs, split where a
/// lowercase letter meets an uppercase one (`runJar`) and, with `split_acronyms`, where a digit
/// meets one (`ec2Instance`) and before the last capital of an acronym followed by a lowercase
/// letter (`HTTPServer` → `HTTP`, `Server`).
pub(crate) fn for_each_token<'t>(text: &'t str, split_acronyms: bool, mut emit: impl FnMut(&'t str)) {
    let mut start: Option<usize> = None;
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                emit(&text[s..i]);
            }
            prev = None;
            continue;
        }
        match start {
            None => start = Some(i),
            Some(s) => {
                let p = prev.unwrap_or(' ');
                let boundary = c.is_uppercase()
                    && (p.is_lowercase()
                        || (split_acronyms && p.is_ascii_digit())
                        || (split_acronyms
                            && p.is_uppercase()
                            && chars.peek().is_some_and(|&(_, n)| n.is_lowercase())));
                if boundary && s < i {
                    emit(&text[s..i]);
                    start = Some(i);
                }
            }
        }
        prev = Some(c);
    }
    if let Some(s) = start {
        emit(&text[s..]);
    }
}

/// Light English folding of a lowercase token, applied alike to documents and queries.
///
/// Only ASCII-alphabetic tokens of three letters or more are folded; anything with a digit or a
/// non-ASCII letter is kept as it is, and so are a few words the rules would merge with another
/// (`news` is not `new`). In order:
/// 1. plurals and third-person `-s`: `-sses` → `-ss`, `-ies` → `-i` (read `-y`, see 3), `-es`
///    after `s`, `x`, `z`, `ch`, `sh` → the stem, else a final `s` goes unless the word ends in `ss`
///    (or, from five letters on, in `us` or `is`): `pods` → `pod`, `policies` → `polici`,
///    `processes` → `process`, `apis` → `api`, `ids` → `id`; `status` and `redis` stay;
/// 2. `-ing` and `-ed` when a stem of three letters or more with a vowel is left, undoubling a
///    final double consonant of a four-letter-or-longer stem (but not `ll`, `ss`, `zz`):
///    `deployed` → `deploy`, `running` → `run`, `installed` → `install`; `string` and `speed`
///    stay (no vowel in `str`; `-eed` is kept);
/// 3. a final `-e` goes (from four letters on) and a final `-y` after a consonant becomes `i`, so
///    that what steps 1 and 2 leave meets the base word: `cache`/`caches`/`caching` → `cach`,
///    `policy`/`policies` → `polici`, `schedule`/`scheduled`/`scheduling` → `schedul`.
///
/// It is deliberately weaker than a full stemmer (no `-ation`, `-ment`, `-ly`, `-er`): it merges
/// the inflected forms of one word and nothing else, so a term in an `explain` still reads as the
/// word it came from.
pub fn fold(token: &str) -> Cow<'_, str> {
    if token.len() < 3 || !token.bytes().all(|b| b.is_ascii_lowercase()) || FOLD_EXCEPTIONS.contains(&token) {
        return Cow::Borrowed(token);
    }
    let w = strip_plural(token);
    let w = strip_inflection(w);
    normalize_ending(w)
}

/// Words the rules would wrongly fold into another word.
const FOLD_EXCEPTIONS: &[&str] = &[
    "alias", "atlas", "bias", "canvas", "its", "has", "his", "lens", "news", "plus", "series", "species", "this",
    "thus", "was", "yes",
];

fn strip_plural(w: &str) -> &str {
    let n = w.len();
    if w.ends_with("sses") {
        return &w[..n - 2];
    }
    if n >= 5 && w.ends_with("ies") {
        return &w[..n - 2];
    }
    if let Some(stem) = w.strip_suffix("es")
        && stem.len() >= 2
        && (stem.ends_with(['s', 'x', 'z']) || stem.ends_with("ch") || stem.ends_with("sh"))
    {
        return stem;
    }
    let keeps_s = w.ends_with("ss") || (n >= 5 && (w.ends_with("us") || w.ends_with("is")));
    if w.ends_with('s') && !keeps_s {
        return &w[..n - 1];
    }
    w
}

fn strip_inflection(w: &str) -> &str {
    if w.ends_with("eed") {
        return w;
    }
    for suffix in ["ing", "ed"] {
        if let Some(stem) = w.strip_suffix(suffix)
            && stem.len() >= 3
            && stem.bytes().any(|b| is_vowel(b) || b == b'y')
        {
            let b = stem.as_bytes();
            let n = b.len();
            if n >= 4 && b[n - 1] == b[n - 2] && !is_vowel(b[n - 1]) && !matches!(b[n - 1], b'l' | b's' | b'z') {
                return &stem[..n - 1];
            }
            return stem;
        }
    }
    w
}

fn normalize_ending(w: &str) -> Cow<'_, str> {
    let b = w.as_bytes();
    let n = b.len();
    if n > 3 && b[n - 1] == b'e' {
        return Cow::Borrowed(&w[..n - 1]);
    }
    if n > 2 && b[n - 1] == b'y' && !is_vowel(b[n - 2]) {
        let mut s = String::with_capacity(n);
        s.push_str(&w[..n - 1]);
        s.push('i');
        return Cow::Owned(s);
    }
    Cow::Borrowed(w)
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}
