//! A WordPiece tokenizer of BERT's kind, read from a Hugging Face `tokenizer.json`: what a
//! static embedding model distilled from a BERT-family sentence transformer needs to turn text
//! into the ids of its token vectors.
//!
//! The steps are BERT's: control characters dropped and whitespace normalised, CJK ideographs
//! made words of their own, lowercased and accents stripped (when the normaliser says so), split
//! at whitespace and at every punctuation character, then each word matched greedily against the
//! vocabulary, longest prefix first, with continuation pieces carrying `##`. A word that cannot be
//! covered, or that is longer than `max_input_chars_per_word`, is one unknown token.
//!
//! ```
//! use muster_catalog::rank::semantic::WordPiece;
//!
//! let vocabulary = ["[UNK]", "post", "message", "##s", "slack"];
//! let tokenizer = WordPiece::new(vocabulary.iter().map(|t| t.to_string()), "[UNK]").expect("has [UNK]");
//! let ids: Vec<u32> = tokenizer.token_ids("Post messages to Slack!").collect();
//! let tokens: Vec<&str> = ids.iter().map(|&id| tokenizer.token(id)).collect();
//! // "to" is not in the vocabulary, and neither is "!": each is one unknown token.
//! assert_eq!(tokens, ["post", "message", "##s", "[UNK]", "slack", "[UNK]"]);
//! ```

use std::collections::HashMap;

use serde::Deserialize;
use unicode_normalization::UnicodeNormalization;

/// A WordPiece vocabulary with BERT's normalisation and pre-tokenisation.
#[derive(Debug, Clone)]
pub struct WordPiece {
    ids: HashMap<String, u32>,
    tokens: Vec<String>,
    unknown: u32,
    prefix: String,
    max_chars: usize,
    lowercase: bool,
    strip_accents: bool,
}

/// What of a `tokenizer.json` this reader understands (the rest is ignored).
#[derive(Debug, Deserialize)]
pub(super) struct TokenizerFile {
    #[serde(default)]
    normalizer: Option<Normalizer>,
    model: TokenizerModel,
}

#[derive(Debug, Deserialize)]
struct Normalizer {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    lowercase: bool,
    /// `null` means "as lowercase".
    #[serde(default)]
    strip_accents: Option<bool>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct TokenizerModel {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    max_input_chars_per_word: Option<usize>,
    #[serde(default)]
    vocab: HashMap<String, u32>,
}

/// Why a `tokenizer.json` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerProblem {
    /// The model is not WordPiece (the type it is).
    #[error("the tokenizer is {0}, not WordPiece")]
    NotWordPiece(String),
    /// The unknown token is not in the vocabulary.
    #[error("the unknown token is not in the vocabulary")]
    NoUnknownToken,
    /// Token ids are not `0..n`.
    #[error("the token ids are not 0..n")]
    SparseIds,
}

impl TokenizerFile {
    /// The tokenizer this file describes.
    pub(super) fn into_word_piece(self) -> Result<WordPiece, TokenizerProblem> {
        if self.model.kind != "WordPiece" {
            return Err(TokenizerProblem::NotWordPiece(self.model.kind));
        }
        let n = self.model.vocab.len();
        let mut tokens = vec![None; n];
        for (token, id) in self.model.vocab {
            match tokens.get_mut(id as usize) {
                Some(slot @ None) => *slot = Some(token),
                _ => return Err(TokenizerProblem::SparseIds),
            }
        }
        let tokens: Vec<String> = tokens
            .into_iter()
            .collect::<Option<_>>()
            .ok_or(TokenizerProblem::SparseIds)?;
        let unknown = self.model.unk_token.as_deref().unwrap_or("[UNK]");
        let mut word_piece = WordPiece::new(tokens, unknown).ok_or(TokenizerProblem::NoUnknownToken)?;
        if let Some(prefix) = self.model.continuing_subword_prefix {
            word_piece.prefix = prefix;
        }
        if let Some(max) = self.model.max_input_chars_per_word {
            word_piece.max_chars = max;
        }
        match self.normalizer {
            Some(n) if n.kind == "BertNormalizer" => {
                word_piece.lowercase = n.lowercase;
                word_piece.strip_accents = n.strip_accents.unwrap_or(n.lowercase);
            }
            // Another normaliser (or none): keep the text's case, as a cased model expects.
            _ => {
                word_piece.lowercase = false;
                word_piece.strip_accents = false;
            }
        }
        Ok(word_piece)
    }
}

impl WordPiece {
    /// A lowercasing, accent-stripping tokenizer over `tokens` (a token's id is its position),
    /// with `##` continuations; `None` when `unknown` is not one of the tokens.
    pub fn new(tokens: impl IntoIterator<Item = String>, unknown: &str) -> Option<Self> {
        let tokens: Vec<String> = tokens.into_iter().collect();
        let ids: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(id, t)| {
                (
                    t.clone(),
                    u32::try_from(id).expect("a vocabulary of fewer than 2^32 tokens"),
                )
            })
            .collect();
        let unknown = *ids.get(unknown)?;
        Some(Self {
            ids,
            tokens,
            unknown,
            prefix: "##".to_owned(),
            max_chars: 100,
            lowercase: true,
            strip_accents: true,
        })
    }

    /// How many tokens the vocabulary holds.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the vocabulary is empty (never: it holds at least the unknown token).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of the unknown token.
    pub fn unknown(&self) -> u32 {
        self.unknown
    }

    /// The text of token `id`.
    pub fn token(&self, id: u32) -> &str {
        &self.tokens[id as usize]
    }

    /// The token ids of `text`, in order (unknown words as [`Self::unknown`]).
    pub fn token_ids<'a>(&'a self, text: &str) -> impl Iterator<Item = u32> + 'a {
        let normalised = self.normalise(text);
        let mut ids = Vec::new();
        for word in split_words(&normalised) {
            self.push_word(word, &mut ids);
        }
        ids.into_iter()
    }

    /// BERT's normaliser: control characters out, whitespace to spaces, spaces around CJK
    /// ideographs, then lowercase and strip accents as configured.
    fn normalise(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
                continue;
            }
            if c.is_whitespace() {
                out.push(' ');
            } else if is_cjk(c) {
                out.push(' ');
                out.push(c);
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        if self.lowercase {
            out = out.to_lowercase();
        }
        if self.strip_accents {
            out = out.nfd().filter(|&c| !is_combining_mark(c)).collect();
        }
        out
    }

    /// Greedy longest-match-first: the word's pieces, or one unknown token.
    fn push_word(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > self.max_chars {
            ids.push(self.unknown);
            return;
        }
        let start_len = ids.len();
        let mut start = 0;
        let mut piece = String::with_capacity(word.len() + self.prefix.len());
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                piece.clear();
                if start > 0 {
                    piece.push_str(&self.prefix);
                }
                piece.push_str(&word[start..end]);
                if let Some(&id) = self.ids.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end = word[..end].char_indices().next_back().map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(start_len);
                    ids.push(self.unknown);
                    return;
                }
            }
        }
    }
}

/// BERT's pre-tokeniser: split at whitespace, and make every punctuation character a word.
fn split_words(text: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c == ' ' || is_punctuation(c) {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
            if c != ' ' {
                words.push(&text[i..i + c.len_utf8()]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words.into_iter()
}

/// BERT counts all ASCII non-alphanumerics (`$`, `^`, `` ` `` too) and Unicode punctuation.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace() && !is_combining_mark(c))
}

/// A combining mark (Unicode category M), as accent stripping drops after NFD.
fn is_combining_mark(c: char) -> bool {
    unicode_normalization::char::is_combining_mark(c)
}

/// The CJK Unified Ideographs blocks, as BERT lists them.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPiece {
        let vocabulary = [
            "[UNK]", "[CLS]", "get", "weather", "fore", "##cast", "##s", "cafe", "-", "!", "日",
        ];
        WordPiece::new(vocabulary.iter().map(|t| (*t).to_owned()), "[UNK]").expect("has [UNK]")
    }

    fn tokens(t: &WordPiece, text: &str) -> Vec<String> {
        t.token_ids(text).map(|id| t.token(id).to_owned()).collect()
    }

    #[test]
    fn words_split_into_the_longest_pieces_first() {
        assert_eq!(tokens(&tokenizer(), "Forecasts"), ["fore", "##cast", "##s"]);
    }

    #[test]
    fn punctuation_is_a_word_of_its_own() {
        assert_eq!(tokens(&tokenizer(), "get-weather!"), ["get", "-", "weather", "!"]);
    }

    #[test]
    fn a_word_that_cannot_be_covered_is_one_unknown_token() {
        assert_eq!(tokens(&tokenizer(), "getx weather"), ["[UNK]", "weather"]);
    }

    #[test]
    fn accents_are_stripped_and_case_folded() {
        assert_eq!(tokens(&tokenizer(), "CAFÉ"), ["cafe"]);
    }

    #[test]
    fn ideographs_are_words_of_their_own() {
        assert_eq!(tokens(&tokenizer(), "日日"), ["日", "日"]);
    }

    #[test]
    fn an_overlong_word_is_unknown() {
        let long = "get".repeat(40);
        assert_eq!(tokens(&tokenizer(), &long), ["[UNK]"]);
    }

    #[test]
    fn a_tokenizer_file_that_is_not_word_piece_is_refused() {
        let file: TokenizerFile =
            serde_json::from_str(r#"{"model": {"type": "Unigram", "vocab": {}}}"#).expect("parses");
        assert_eq!(
            file.into_word_piece().err(),
            Some(TokenizerProblem::NotWordPiece("Unigram".into()))
        );
    }

    #[test]
    fn a_tokenizer_file_reads_its_normaliser_and_prefix() {
        let json = r###"{
            "normalizer": {"type": "BertNormalizer", "lowercase": false, "strip_accents": null},
            "model": {"type": "WordPiece", "unk_token": "<unk>", "continuing_subword_prefix": "++",
                      "vocab": {"<unk>": 0, "Get": 1, "++s": 2}}
        }"###;
        let file: TokenizerFile = serde_json::from_str(json).expect("parses");
        let t = file.into_word_piece().expect("word piece");
        assert_eq!(tokens(&t, "Gets get"), ["Get", "++s", "<unk>"]);
    }
}
