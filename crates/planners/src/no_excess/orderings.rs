//! The worker ordering that points the most weight forward: the maximiser of Attia-Tandon's
//! Theorem 2 bound, and (as its complement) the lightest feedback arc set, which bounds how
//! many cycles a cycle packing can hold.
//!
//! Exact by a dynamic programme over subsets (`O(2^K K)` time and memory, instead of the `K!`
//! orderings) for `K <= EXACT_ORDERING_MAX_WORKERS`; beyond that a local search by moving one
//! worker at a time to its best place, which still gives a valid (possibly weaker) bound.

/// The most workers for which [`best_ordering`] searches every ordering (via the subset DP).
pub const EXACT_ORDERING_MAX_WORKERS: usize = 16;

/// A worker ordering `σ` and the weight it points forward, `sum_{a<b} w[σ_a][σ_b]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerOrdering {
    /// The workers in order.
    pub order: Vec<usize>,
    /// `sum_{a<b} w[order[a]][order[b]]`.
    pub forward: usize,
    /// Whether this ordering is proven best (the subset DP ran), not just locally best.
    pub exact: bool,
}

/// The ordering of `k` workers maximising the forward weight of the `k x k` row-major weights
/// `w` (diagonal ignored). For a shuffle matrix this is Attia-Tandon's Theorem 2 bound
/// maximised over orderings, eq. (21).
pub fn best_ordering(w: &[usize], k: usize) -> WorkerOrdering {
    debug_assert_eq!(w.len(), k * k);
    if k <= EXACT_ORDERING_MAX_WORKERS {
        let mut dp = SubsetDp::new(k);
        let total: usize = (0..k)
            .flat_map(|i| (0..k).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| w[i * k + j])
            .sum();
        let (backward, order) = dp.min_backward(w, true);
        WorkerOrdering { order, forward: total - backward, exact: true }
    } else {
        local_search_ordering(w, k)
    }
}

/// Buffers for the subset DP, reusable across calls with the same `k` (the cycle search calls
/// it at every node).
pub(crate) struct SubsetDp {
    k: usize,
    /// `out[v << k | T] = sum_{u in T} w[v][u]`.
    out: Vec<usize>,
    /// `best[T]`: least backward weight among edges inside `T` when `T` takes the first places.
    best: Vec<usize>,
    /// The worker placed last in the best ordering of `T`.
    last: Vec<u8>,
}

impl SubsetDp {
    pub(crate) fn new(k: usize) -> Self {
        assert!(k <= EXACT_ORDERING_MAX_WORKERS, "the subset DP is for at most 16 workers");
        let subsets = 1usize << k;
        SubsetDp { k, out: vec![0; k * subsets], best: vec![0; subsets], last: vec![0; subsets] }
    }

    /// The least weight pointing backward over all orderings (a lightest feedback arc set),
    /// and, when `want_order`, an ordering achieving it.
    pub(crate) fn min_backward(&mut self, w: &[usize], want_order: bool) -> (usize, Vec<usize>) {
        let k = self.k;
        let subsets = 1usize << k;
        for v in 0..k {
            let row = &mut self.out[v * subsets..(v + 1) * subsets];
            for t in 1..subsets {
                let low = t.trailing_zeros() as usize;
                row[t] = row[t & (t - 1)] + if low == v { 0 } else { w[v * k + low] };
            }
        }
        self.best.fill(usize::MAX);
        self.best[0] = 0;
        for t in 0..subsets {
            let here = self.best[t];
            if here == usize::MAX {
                continue;
            }
            let mut rest = (subsets - 1) & !t;
            while rest != 0 {
                let v = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let next = t | 1 << v;
                let cost = here + self.out[v * subsets + t];
                if cost < self.best[next] {
                    self.best[next] = cost;
                    self.last[next] = v as u8;
                }
            }
        }
        let mut order = Vec::new();
        if want_order {
            let mut t = subsets - 1;
            while t != 0 {
                let v = usize::from(self.last[t]);
                order.push(v);
                t &= !(1 << v);
            }
            order.reverse();
        }
        (self.best[subsets - 1], order)
    }
}

/// Moves one worker at a time to the place that points the most weight forward, until no
/// move helps (at most 64 passes).
fn local_search_ordering(w: &[usize], k: usize) -> WorkerOrdering {
    let mut order: Vec<usize> = (0..k).collect();
    for _ in 0..64 {
        let mut improved = false;
        for v in 0..k {
            let at = order.iter().position(|&x| x == v).unwrap_or(0);
            order.remove(at);
            // Contribution of v placed first: every edge v -> u points forward.
            let mut gain: i128 = order.iter().map(|&u| w[v * k + u] as i128).sum();
            let (mut best_gain, mut best_at) = (gain, 0);
            let mut current_gain = None;
            for (p, &u) in order.iter().enumerate() {
                if p == at {
                    current_gain = Some(gain);
                }
                gain += w[u * k + v] as i128 - w[v * k + u] as i128;
                if gain > best_gain {
                    (best_gain, best_at) = (gain, p + 1);
                }
            }
            let current_gain = current_gain.unwrap_or(gain);
            if best_gain > current_gain {
                improved = true;
                order.insert(best_at, v);
            } else {
                order.insert(at, v);
            }
        }
        if !improved {
            break;
        }
    }
    let forward = forward_weight(w, k, &order);
    WorkerOrdering { order, forward, exact: false }
}

/// `sum_{a<b} w[order[a]][order[b]]`.
pub(crate) fn forward_weight(w: &[usize], k: usize, order: &[usize]) -> usize {
    (0..order.len())
        .flat_map(|a| (a + 1..order.len()).map(move |b| (a, b)))
        .map(|(a, b)| w[order[a] * k + order[b]])
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{seeded, uniform_below};

    fn brute_force(w: &[usize], k: usize) -> usize {
        fn permute(order: &mut Vec<usize>, at: usize, w: &[usize], k: usize, best: &mut usize) {
            if at == order.len() {
                *best = (*best).max(forward_weight(w, k, order));
                return;
            }
            for i in at..order.len() {
                order.swap(at, i);
                permute(order, at + 1, w, k, best);
                order.swap(at, i);
            }
        }
        let mut best = 0;
        permute(&mut (0..k).collect(), 0, w, k, &mut best);
        best
    }

    #[test]
    fn subset_dp_matches_every_ordering() {
        let mut rng = seeded(4);
        for k in 1..=6 {
            for _ in 0..30 {
                let w: Vec<usize> = (0..k * k).map(|_| uniform_below(&mut rng, 5) as usize).collect();
                let best = best_ordering(&w, k);
                assert_eq!(best.forward, brute_force(&w, k), "{w:?}");
                assert_eq!(forward_weight(&w, k, &best.order), best.forward);
                let mut sorted = best.order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..k).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn local_search_gives_a_real_ordering_not_above_the_optimum() {
        let mut rng = seeded(5);
        for _ in 0..20 {
            let k = 7;
            let w: Vec<usize> = (0..k * k).map(|_| uniform_below(&mut rng, 9) as usize).collect();
            let local = local_search_ordering(&w, k);
            assert_eq!(forward_weight(&w, k, &local.order), local.forward);
            assert!(local.forward <= best_ordering(&w, k).forward);
            assert!(!local.exact);
        }
    }
}
