//! How a lexical (BM25F) ranking and a semantic (cosine similarity) ranking of the same
//! candidates become one: reciprocal rank fusion, or a weighted sum of normalised scores.
//!
//! Which candidates are in the fused ranking: every lexical match (BM25F score above zero), and
//! the `depth` candidates most similar to the query (similarity above zero). The rest stay out,
//! so a query still has a finite, meaningful count of matches.
//!
//! ```
//! use muster_catalog::rank::{Fusion, fuse};
//!
//! // Candidate 0 matches the query's words; candidate 2 only its meaning.
//! let lexical = [3.2, 0.0, 0.0];
//! let semantic = [0.41, 0.05, 0.77];
//! let fused = fuse(&lexical, &semantic, Fusion::default(), 2);
//! let order: Vec<usize> = fused.iter().map(|f| f.position).collect();
//! assert_eq!(order, [0, 2]);
//! assert_eq!(fused[1].lexical_rank, None);
//! assert_eq!(fused[1].semantic_rank, Some(1));
//! ```

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Fusion {
    /// Reciprocal rank fusion: `Σ w · reciprocal_rank(rank, k)` over the rankings a candidate
    /// is in. Only ranks count, so neither scale (BM25F's unbounded scores, a model's cosines)
    /// has to be calibrated against the other.
    ReciprocalRank {
        /// The rank offset `k`: larger flattens the difference between neighbouring ranks.
        k: f64,
        /// The lexical ranking's weight.
        lexical_weight: f64,
        /// The semantic ranking's weight.
        semantic_weight: f64,
    },
    /// `(1 − α) · bm25f / max bm25f + α · similarity / max similarity`, the maxima over the
    /// candidates in the fused ranking.
    WeightedSum {
        /// `α`, the semantic share, 0 to 1.
        semantic_weight: f64,
    },
}

impl Default for Fusion {
    /// Reciprocal rank fusion with the customary `k` = 60 and equal weights.
    fn default() -> Self {
        Fusion::ReciprocalRank {
            k: 60.0,
            lexical_weight: 1.0,
            semantic_weight: 1.0,
        }
    }
}

/// One candidate of a fused ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused {
    /// Its position in the candidate slices.
    pub position: usize,
    /// Its fused score.
    pub score: f64,
    /// Its rank (1 = best) among the lexical matches, when it is one.
    pub lexical_rank: Option<usize>,
    /// Its rank among the `depth` most similar candidates, when it is one of them.
    pub semantic_rank: Option<usize>,
    /// What the lexical side adds to the score.
    pub lexical_part: f64,
    /// What the semantic side adds to the score.
    pub semantic_part: f64,
}

/// `(k + 1) / (k + rank)`: 1 at rank 1, falling off as `1 / rank` once rank outgrows `k`.
pub fn reciprocal_rank(rank: usize, k: f64) -> f64 {
    (k + 1.0) / (k + rank as f64)
}

/// Fuses `lexical` (BM25F score per candidate, 0 for no match) and `semantic` (cosine similarity
/// per candidate) by `fusion`, the semantic side limited to the `depth` most similar candidates.
/// Best first; ties by position, so the order is deterministic.
pub fn fuse(lexical: &[f64], semantic: &[f32], fusion: Fusion, depth: usize) -> Vec<Fused> {
    debug_assert_eq!(lexical.len(), semantic.len(), "one score of each kind per candidate");
    let lexical_ranks = ranks(lexical.iter().copied(), lexical.len(), lexical.len());
    let semantic_ranks = ranks(semantic.iter().map(|&s| f64::from(s)), semantic.len(), depth);
    let max_lexical = lexical.iter().copied().fold(0.0, f64::max);
    let max_semantic = (0..semantic.len())
        .filter(|&p| semantic_ranks[p].is_some())
        .map(|p| f64::from(semantic[p]))
        .fold(0.0, f64::max);
    let mut fused: Vec<Fused> = (0..lexical.len())
        .filter(|&p| lexical_ranks[p].is_some() || semantic_ranks[p].is_some())
        .map(|position| {
            let (lexical_rank, semantic_rank) = (lexical_ranks[position], semantic_ranks[position]);
            let (lexical_part, semantic_part) = match fusion {
                Fusion::ReciprocalRank {
                    k,
                    lexical_weight,
                    semantic_weight,
                } => (
                    lexical_rank.map_or(0.0, |r| lexical_weight * reciprocal_rank(r, k)),
                    semantic_rank.map_or(0.0, |r| semantic_weight * reciprocal_rank(r, k)),
                ),
                Fusion::WeightedSum { semantic_weight } => (
                    (1.0 - semantic_weight) * share(lexical[position], max_lexical),
                    semantic_rank.map_or(0.0, |_| semantic_weight * share(f64::from(semantic[position]), max_semantic)),
                ),
            };
            Fused {
                position,
                score: lexical_part + semantic_part,
                lexical_rank,
                semantic_rank,
                lexical_part,
                semantic_part,
            }
        })
        .collect();
    fused.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.position.cmp(&b.position)));
    fused
}

/// `value / max`, 0 when `max` is 0.
fn share(value: f64, max: f64) -> f64 {
    if max > 0.0 { value / max } else { 0.0 }
}

/// The 1-based rank of each of the best `depth` positive scores (ties by position); `None` for
/// the rest.
fn ranks(scores: impl Iterator<Item = f64>, n: usize, depth: usize) -> Vec<Option<usize>> {
    let mut positive: Vec<(usize, f64)> = scores.enumerate().filter(|&(_, s)| s > 0.0).collect();
    let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if depth == 0 {
        positive.clear();
    } else if depth < positive.len() {
        positive.select_nth_unstable_by(depth - 1, order);
        positive.truncate(depth);
    }
    positive.sort_unstable_by(order);
    let mut out = vec![None; n];
    for (rank, (position, _)) in positive.into_iter().enumerate() {
        out[position] = Some(rank + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RRF: Fusion = Fusion::ReciprocalRank {
        k: 60.0,
        lexical_weight: 1.0,
        semantic_weight: 1.0,
    };

    #[test]
    fn a_candidate_both_rankers_like_beats_one_only_the_lexical_ranker_likes() {
        let fused = fuse(&[2.0, 1.9], &[0.0, 0.8], RRF, 10);
        assert_eq!(fused[0].position, 1);
        assert_eq!((fused[0].lexical_rank, fused[0].semantic_rank), (Some(2), Some(1)));
        assert_eq!((fused[1].lexical_rank, fused[1].semantic_rank), (Some(1), None));
    }

    #[test]
    fn semantic_candidates_beyond_the_depth_stay_out() {
        let fused = fuse(&[0.0, 0.0, 0.0], &[0.9, 0.8, 0.7], RRF, 2);
        let order: Vec<usize> = fused.iter().map(|f| f.position).collect();
        assert_eq!(order, [0, 1]);
    }

    #[test]
    fn candidates_with_no_similarity_and_no_match_stay_out() {
        assert!(fuse(&[0.0, 0.0], &[0.0, -0.3], RRF, 10).is_empty());
    }

    #[test]
    fn the_first_rank_of_each_side_is_worth_its_weight() {
        let fusion = Fusion::ReciprocalRank {
            k: 60.0,
            lexical_weight: 1.0,
            semantic_weight: 0.5,
        };
        let fused = fuse(&[5.0, 0.0], &[0.0, 0.9], fusion, 10);
        assert_eq!((fused[0].score, fused[1].score), (1.0, 0.5));
    }

    #[test]
    fn the_weighted_sum_normalises_each_side_by_its_best() {
        let fused = fuse(&[4.0, 2.0], &[0.2, 0.4], Fusion::WeightedSum { semantic_weight: 0.5 }, 10);
        // 0: 0.5·1 + 0.5·0.5 = 0.75; 1: 0.5·0.5 + 0.5·1 = 0.75: a tie, kept in position order.
        assert_eq!(fused.iter().map(|f| f.position).collect::<Vec<_>>(), [0, 1]);
        assert!((fused[0].score - 0.75).abs() < 1e-9 && (fused[1].score - 0.75).abs() < 1e-9);
        assert!((fused[0].lexical_part - 0.5).abs() < 1e-9);
    }

    #[test]
    fn ties_are_broken_by_candidate_order() {
        let fused = fuse(&[1.0, 1.0, 1.0], &[0.0; 3], RRF, 10);
        assert_eq!(fused.iter().map(|f| f.position).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn reciprocal_rank_is_one_at_the_top() {
        assert_eq!(reciprocal_rank(1, 60.0), 1.0);
        assert!((reciprocal_rank(61, 60.0) - 61.0 / 121.0).abs() < 1e-12);
    }
}
