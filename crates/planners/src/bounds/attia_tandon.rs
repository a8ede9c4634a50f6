//! Attia-Tandon's Theorem 2: with no excess storage, for every ordering `σ` of the workers,
//! `R >= sum_{a<b} S[σ_a][σ_b]` (eq. (21)); maximised over orderings here.

use super::LowerBound;
use crate::ShuffleInstance;
use crate::no_excess::{ShuffleMatrix, WorkerOrdering, best_ordering};

/// The bound's name when the ordering is proven best (the subset DP, up to 16 workers).
pub const THEOREM2_KIND: &str = "attia-tandon-thm2";

/// The bound's name beyond 16 workers, where the ordering comes from a local search (still a
/// valid bound, perhaps not the largest).
pub const THEOREM2_LOCAL_KIND: &str = "attia-tandon-thm2-local";

/// Attia-Tandon Theorem 2 (eq. (21)) on a shuffle matrix, maximised over worker orderings:
/// the ordering and the weight it points forward, which no scheme can beat.
///
/// ```
/// use ubershuffle_planners::{bounds::theorem2_ordering, no_excess::ShuffleMatrix};
/// let s: ShuffleMatrix = "2,1,2;2,1,2;1,3,1".parse()?;
/// assert_eq!(theorem2_ordering(&s).forward, 6); // Example 1: the scheme's 6 is optimal
/// # Ok::<(), ubershuffle_planners::no_excess::ShuffleMatrixError>(())
/// ```
pub fn theorem2_ordering(s: &ShuffleMatrix) -> WorkerOrdering {
    let k = s.workers();
    let weights: Vec<usize> = (0..k * k).map(|e| s.get(e / k, e % k)).collect();
    best_ordering(&weights, k)
}

/// Theorem 2's bound for a no-excess instance; `None` for any other instance (the caches must
/// be the previous batches).
pub fn attia_tandon_bound(inst: &ShuffleInstance) -> Option<LowerBound> {
    let s = ShuffleMatrix::from_instance(inst).ok()?;
    let best = theorem2_ordering(&s);
    Some(LowerBound {
        value: best.forward,
        kind: if best.exact { THEOREM2_KIND } else { THEOREM2_LOCAL_KIND },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::best_lower_bound;

    #[test]
    fn example_1_bound_wins_over_max_need() {
        let inst = ShuffleMatrix::parse("2,1,2;2,1,2;1,3,1").unwrap().to_instance();
        assert_eq!(best_lower_bound(&inst), LowerBound { value: 6, kind: THEOREM2_KIND });
        assert_eq!(attia_tandon_bound(&crate::ShuffleInstance::paper_example()), None);
    }

    #[test]
    fn cyclic_shuffle_bound_is_the_worst_case() {
        // Eq. (49)-(50): the cyclic shuffle needs (K-1) N/K.
        let s = ShuffleMatrix::parse("0,3,0;0,0,3;3,0,0").unwrap();
        assert_eq!(theorem2_ordering(&s).forward, 6);
        assert_eq!(s.worst_case_transmissions(), Some(6));
    }
}
