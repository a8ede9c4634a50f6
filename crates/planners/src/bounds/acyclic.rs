//! The index-coding bound of an acyclic induced subgraph of the side-information graph.
//!
//! The needed points form an index-coding problem: vertex `(p, w)` for every point `p` worker
//! `w` needs, and an edge from `(p, w)` to `(p', w')` when `w` caches `p'`. For any vertex set
//! inducing an acyclic subgraph, every scheme (linear or not) sends at least as many
//! point-sized transmissions as the set has vertices (Bar-Yossef, Birk, Jayram, Kol, "Index
//! coding with side information", the MAIS bound): peel the acyclic set in topological order,
//! each receiver decoding its point from the transmissions and points it already knows.
//!
//! Here every point is needed by one worker only, and the best acyclic sets have a simple
//! form: order workers `w_1, w_2, ...` and take every point `w_k` needs that none of
//! `w_1..w_{k-1}` caches. (In an acyclic set ordered so that no owner of an earlier vertex
//! caches a later one, moving each worker's points up to its first appearance only removes
//! constraints, and adding a point a worker needs never adds one.) So the bound is
//!
//! `max over orders of sum_k |D_{w_k} \ (C_{w_1} ∪ ... ∪ C_{w_k})|`,
//!
//! computed exactly by dynamic programming over worker subsets for up to
//! [`EXACT_MAX_WORKERS`] workers, and by a greedy order (next the worker with the most needed
//! points no chosen worker caches) above that. With one worker first it is at least the
//! max-need bound.

use super::LowerBound;
use crate::requests::Requests;
use crate::{ShuffleInstance, bits};

/// The most workers for which the exact order is found (the dynamic program keeps
/// `n 2^(n-1)` four-byte counts; its time at n = 20 is the `lower bound` row of
/// `results/speed.csv`, `cargo xtask experiments speed`).
pub const EXACT_MAX_WORKERS: usize = 20;

/// The bound's kind when the order is optimal.
const EXACT: &str = "acyclic-subgraph";
/// The bound's kind when the order is greedy.
const GREEDY: &str = "acyclic-subgraph-greedy";

/// The acyclic-subgraph bound of `inst`: exact over worker orders for at most
/// [`EXACT_MAX_WORKERS`] workers, from a greedy order above (any number of workers: about
/// `n U / 64` word operations, a second at `n = 1000`, `q = 1e6`).
pub fn acyclic_subgraph_bound(inst: &ShuffleInstance) -> Option<LowerBound> {
    if inst.workers() <= EXACT_MAX_WORKERS {
        Some(LowerBound { value: exact_order_bound(inst), kind: EXACT })
    } else {
        Some(LowerBound { value: greedy_order_bound(inst), kind: GREEDY })
    }
}

/// The needed points of every worker, each as the mask of workers caching it (at most 64
/// workers).
fn cacher_masks(inst: &ShuffleInstance) -> Vec<Vec<u64>> {
    debug_assert!(inst.workers() <= 64);
    let requests = Requests::of(inst);
    let rows = requests.cacher_rows();
    (0..inst.workers()).map(|w| requests.of_receiver(w).map(|r| rows.of(r)[0]).collect()).collect()
}

/// `sum_k |needs(w_k) \ (C_{w_1} ∪ ... ∪ C_{w_{k-1}})|` for the greedy order (next the worker
/// with the most needed points no chosen worker caches, ties to the lowest id); also used to
/// check the exact one. Keeps the requests no chosen worker caches as a bitset and removes
/// each chosen worker's cache from it.
pub(crate) fn greedy_order_bound(inst: &ShuffleInstance) -> usize {
    let requests = Requests::of(inst);
    let n = inst.workers();
    let mut open = vec![u64::MAX; requests.row_words()];
    let mut chosen = vec![false; n];
    let mut total = 0;
    let mut counts: Vec<usize> = (0..n).map(|w| requests.of_receiver(w).len()).collect();
    for _ in 0..n {
        let Some(w) = (0..n).filter(|&w| !chosen[w]).max_by_key(|&w| (counts[w], std::cmp::Reverse(w)))
        else {
            break;
        };
        total += counts[w];
        chosen[w] = true;
        for (o, c) in open.iter_mut().zip(requests.cached_by(w)) {
            *o &= !c;
        }
        for (u, count) in counts.iter_mut().enumerate() {
            if !chosen[u] {
                *count = bits::count_range(&open, requests.of_receiver(u));
            }
        }
    }
    total
}

/// The bound over all worker orders, by dynamic programming over the set `S` of workers
/// placed first: `f(S) = max_{w ∈ S} f(S \ {w}) + #(points w needs cached by nobody in S)`.
fn exact_order_bound(inst: &ShuffleInstance) -> usize {
    let n = inst.workers();
    let needs = cacher_masks(inst);
    if n == 1 {
        return needs[0].len();
    }
    let half = 1usize << (n - 1);
    // within[w][m]: points w needs whose cachers lie inside the set m of the other workers
    // (bit w squeezed out of m), by a subset-sum transform.
    let squeeze = |mask: usize, w: usize| (mask & ((1 << w) - 1)) | ((mask >> (w + 1)) << w);
    let within: Vec<Vec<u32>> = needs
        .iter()
        .enumerate()
        .map(|(w, list)| {
            let mut counts = vec![0u32; half];
            for &cachers in list {
                counts[squeeze(cachers as usize, w)] += 1;
            }
            for bit in 0..n - 1 {
                for m in 0..half {
                    if m >> bit & 1 == 1 {
                        counts[m] += counts[m ^ (1 << bit)];
                    }
                }
            }
            counts
        })
        .collect();
    let full = (1usize << n) - 1;
    let mut best = vec![0u32; 1 << n];
    for set in 0..full {
        let here = best[set];
        let outside = full & !set;
        let mut rest = outside;
        while rest != 0 {
            let w = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            // Points w needs cached by nobody in `set`: cachers inside the complement of set.
            let gain = within[w][squeeze(outside, w)];
            let next = &mut best[set | 1 << w];
            *next = (*next).max(here + gain);
        }
    }
    best[full] as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;
    use crate::bounds::max_need_bound;
    use crate::{ShuffleInstance, arbitrary_instance};

    /// The bound by brute force over all orders (tiny n).
    fn brute_force(inst: &ShuffleInstance) -> usize {
        fn go(inst: &ShuffleInstance, needs: &[Vec<u64>], chosen: u64, sum: usize) -> usize {
            let mut best = sum;
            for w in (0..inst.workers()).filter(|&w| chosen >> w & 1 == 0) {
                let gain = needs[w].iter().filter(|&&c| c & chosen == 0).count();
                best = best.max(go(inst, needs, chosen | 1 << w, sum + gain));
            }
            best
        }
        go(inst, &cacher_masks(inst), 0, 0)
    }

    #[test]
    fn paper_example_bound_is_three() {
        // Worker 2 needs 3 points; adding workers 0 or 1 adds nothing not cached by worker 2.
        let inst = ShuffleInstance::paper_example();
        assert_eq!(acyclic_subgraph_bound(&inst).unwrap().value, 3);
    }

    #[test]
    fn exact_matches_brute_force_and_beats_greedy_and_max_need() {
        for seed in 0..20 {
            let inst = if seed % 2 == 0 {
                GeneratorParams { workers: 5, points: 40, alpha: 0.3 + 0.03 * seed as f64, seed }
                    .check()
                    .unwrap()
                    .generate()
            } else {
                arbitrary_instance(6, 30, 0.1 * (seed % 7) as f64, seed)
            };
            let exact = exact_order_bound(&inst);
            assert_eq!(exact, brute_force(&inst), "seed {seed}");
            assert!(exact >= greedy_order_bound(&inst));
            assert!(exact >= max_need_bound(&inst).value);
        }
        // Nothing cached: every needed point counts.
        let bare = arbitrary_instance(5, 30, 0.0, 1);
        assert_eq!(exact_order_bound(&bare), bare.uncoded_transmissions());
    }
}
