//! A straightforward port of Go muster's ranker (`internal/metatools/ranking.go` as
//! `muster-facts.md` §3 describes it), kept as the yardstick the `rankbench` example and the
//! benches measure [`super::SearchIndex`] against. Not used by the gateway.
//!
//! Per query it tokenises every candidate's exposed name and the first line of its description,
//! computes the statistics over the candidates (N, df, average lengths), and scores: name weight
//! 3, first line weight 1, k1 1.5, b 0.75, `list`/`get` contributions × 0.25, no stemming, zero
//! scores dropped, a stable sort by descending score (ties keep candidate order).

use std::collections::HashMap;

use muster_core::ToolEntry;

const NAME_WEIGHT: f64 = 3.0;
const DESC_WEIGHT: f64 = 1.0;
const K1: f64 = 1.5;
const B: f64 = 0.75;
const STOP_VERB_WEIGHT: f64 = 0.25;
const STOP_VERBS: [&str; 2] = ["list", "get"];

/// Go's tokeniser: lowercase alphanumeric runs, split where a lowercase letter meets an
/// uppercase one.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

struct Doc {
    name_tf: HashMap<String, usize>,
    name_len: usize,
    desc_tf: HashMap<String, usize>,
    desc_len: usize,
}

fn term_frequencies(tokens: &[String]) -> HashMap<String, usize> {
    let mut tf = HashMap::new();
    for t in tokens {
        *tf.entry(t.clone()).or_insert(0) += 1;
    }
    tf
}

fn first_line(description: &str) -> &str {
    let text = description.trim();
    text.split('\n').next().unwrap_or_default().trim()
}

/// Ranks `candidates` for `query` as Go muster does: (position in `candidates`, score), best
/// first; candidates scoring zero are dropped.
pub fn rank<C: AsRef<ToolEntry>>(candidates: &[C], query: &str) -> Vec<(usize, f64)> {
    let mut terms: Vec<String> = Vec::new();
    for t in tokenize(query) {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    if terms.is_empty() || candidates.is_empty() {
        return Vec::new();
    }
    let docs: Vec<Doc> = candidates
        .iter()
        .map(|c| {
            let entry = c.as_ref();
            let name = tokenize(entry.name());
            let desc = tokenize(first_line(entry.description()));
            Doc {
                name_tf: term_frequencies(&name),
                name_len: name.len(),
                desc_tf: term_frequencies(&desc),
                desc_len: desc.len(),
            }
        })
        .collect();
    let n = docs.len() as f64;
    let avg_name = docs.iter().map(|d| d.name_len).sum::<usize>() as f64 / n;
    let avg_desc = docs.iter().map(|d| d.desc_len).sum::<usize>() as f64 / n;
    let idf: Vec<f64> = terms
        .iter()
        .map(|t| {
            let df = docs
                .iter()
                .filter(|d| d.name_tf.contains_key(t) || d.desc_tf.contains_key(t))
                .count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let norm_tf = |f: usize, len: usize, avg: f64| {
        if f == 0 {
            0.0
        } else {
            f as f64 / (1.0 - B + B * len as f64 / avg)
        }
    };
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut score = 0.0;
            for (t, idf) in terms.iter().zip(&idf) {
                let name_tf = d.name_tf.get(t).copied().unwrap_or(0);
                let desc_tf = d.desc_tf.get(t).copied().unwrap_or(0);
                if name_tf == 0 && desc_tf == 0 {
                    continue;
                }
                let wtf = NAME_WEIGHT * norm_tf(name_tf, d.name_len, avg_name)
                    + DESC_WEIGHT * norm_tf(desc_tf, d.desc_len, avg_desc);
                let mut contribution = idf * (wtf * (K1 + 1.0) / (wtf + K1));
                if STOP_VERBS.contains(&t.as_str()) {
                    contribution *= STOP_VERB_WEIGHT;
                }
                score += contribution;
            }
            (i, score)
        })
        .filter(|&(_, s)| s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored
}
