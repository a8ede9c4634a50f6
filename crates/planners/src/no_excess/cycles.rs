//! Packing the shuffle into directed cycles among workers, for the `cycle-packing` planner.
//!
//! The off-diagonal entries of a shuffle matrix form a multigraph on the workers (`S[i][j]`
//! parallel edges `i -> j`, one per point) in which every worker sends as many points as it
//! receives (eq. (14)), so it splits into directed cycles. A cycle of length `L` moves `L`
//! points with `L - 1` XORs (see the planner), so a split into `C` cycles costs
//! `sum_{i != j} S[i][j] - C` transmissions: the more cycles, the cheaper.
//!
//! How the cycles are chosen:
//! 1. Every 2-cycle first: `min(S[i][j], S[j][i])` copies of `i <-> j` (the pairwise phase of
//!    Attia-Tandon, eq. (26)). This loses nothing: if `i -> j` and `j -> i` lie on different
//!    cycles, swapping them for the 2-cycle and the closed walk left over gives at least as many
//!    cycles.
//! 2. What is left has no 2-cycle. For `K <= EXACT_SEARCH_MAX_WORKERS` every simple cycle is
//!    listed (shortest first) and a branch and bound chooses how many copies of each to take,
//!    bounded by the lightest feedback arc set (every cycle crosses it) and by a third of the
//!    edges left. Its first dive is the greedy below; it stops after
//!    `EXACT_SEARCH_NODE_LIMIT` nodes (a count, not a clock, so the result does not depend on
//!    the machine) and then keeps the best packing found.
//! 3. Otherwise, and to finish whatever a stopped search left: greedily take as many copies as
//!    fit of a shortest cycle, again and again (shortest first, not longest first: every cycle
//!    saves one transmission whatever its length, so short cycles leave more edges for others;
//!    the `worst-case` experiment measures both with [`greedy_packing`], and longest first lands
//!    close to eq. (43)).
//!
//! Any split into cycles after step 1 holds at least `max_k sum_j Ω[k][j]` cycles (each cycle
//! through `k` uses one of `k`'s outgoing leftovers), so the packing never costs more than
//! eq. (43). It never costs less than Theorem 2's bound: every cycle crosses every feedback arc
//! set, and the lightest one is what the best ordering points backward.

use crate::no_excess::ShuffleMatrix;
use crate::no_excess::orderings::{EXACT_ORDERING_MAX_WORKERS, SubsetDp};

/// The most workers for which the cycle packing lists every cycle and searches exactly.
pub const EXACT_SEARCH_MAX_WORKERS: usize = 10;

/// Nodes the exact search may visit before it settles for the best packing found.
pub const EXACT_SEARCH_NODE_LIMIT: u64 = 20_000;

/// A directed cycle among workers, taken `copies` times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCycle {
    /// The workers around the cycle: `workers[0]` sends to `workers[1]`, ..., and the last
    /// sends to `workers[0]`. The lowest id comes first.
    pub workers: Vec<usize>,
    /// How many copies; each moves one point along every edge of the cycle.
    pub copies: usize,
}

/// A split of a shuffle into directed cycles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CyclePacking {
    /// The cycles, 2-cycles first.
    pub cycles: Vec<WorkerCycle>,
    /// Points that change worker, `sum_{i != j} S[i][j]` (what uncoded sends).
    pub points_moved: usize,
    /// The most cycles any split can hold: the 2-cycles plus the lightest feedback arc set of
    /// the rest (`None` beyond 16 workers). `points_moved - cycle_bound` is Theorem 2's bound.
    pub cycle_bound: Option<usize>,
    /// Whether no split holds more cycles: the search finished, or the bound is met.
    pub proven_optimal: bool,
}

impl CyclePacking {
    /// The number of cycles, copies counted.
    pub fn cycle_count(&self) -> usize {
        self.cycles.iter().map(|c| c.copies).sum()
    }

    /// The transmissions of the cycle-packing scheme: `points_moved - cycle_count`.
    pub fn transmissions(&self) -> usize {
        self.points_moved - self.cycle_count()
    }
}

/// Splits the shuffle of `s` into as many directed cycles as the search finds (see the module
/// documentation). Deterministic.
///
/// ```
/// use ubershuffle_planners::no_excess::{ShuffleMatrix, pack_cycles};
/// // Two disjoint 3-cycles among six workers: eq. (43) sends 5, two cycles of 2 XORs send 4.
/// let s: ShuffleMatrix = "0,1,0,0,0,0;0,0,1,0,0,0;1,0,0,0,0,0;0,0,0,0,1,0;0,0,0,0,0,1;0,0,0,1,0,0".parse()?;
/// let packing = pack_cycles(&s);
/// assert_eq!((packing.transmissions(), s.achievable_transmissions()), (4, 5));
/// assert!(packing.proven_optimal);
/// # Ok::<(), ubershuffle_planners::no_excess::ShuffleMatrixError>(())
/// ```
pub fn pack_cycles(s: &ShuffleMatrix) -> CyclePacking {
    let mut packing = PartialPacking::of(s);
    let k = s.workers();
    let mut finished = false;
    if k <= EXACT_SEARCH_MAX_WORKERS {
        let (found, complete) = branch_and_bound(&mut packing.weights, k, packing.fas.unwrap_or(usize::MAX));
        packing.cycles.extend(found);
        finished = complete;
    }
    packing.finish(finished)
}

/// In which order [`greedy_packing`] takes cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreedyOrder {
    /// Shortest cycles first (the first dive of [`pack_cycles`]' search).
    ShortestFirst,
    /// Longest cycles first.
    LongestFirst,
}

/// A plain greedy split, for comparison with [`pack_cycles`]: the 2-cycles, then every simple
/// cycle listed in `order` and taken as many times as fits. `None` beyond
/// `EXACT_SEARCH_MAX_WORKERS` workers (listing every cycle would take too long).
pub fn greedy_packing(s: &ShuffleMatrix, order: GreedyOrder) -> Option<CyclePacking> {
    let k = s.workers();
    if k > EXACT_SEARCH_MAX_WORKERS {
        return None;
    }
    let mut packing = PartialPacking::of(s);
    let mut listed = simple_cycles(&packing.weights, k);
    if order == GreedyOrder::LongestFirst {
        listed.reverse();
    }
    for workers in listed {
        let e = edges(&workers, k);
        let copies = e.iter().map(|&x| packing.weights[x]).min().unwrap_or(0);
        if copies > 0 {
            e.iter().for_each(|&x| packing.weights[x] -= copies);
            packing.cycles.push(WorkerCycle { workers, copies });
        }
    }
    Some(packing.finish(false))
}

/// A packing under way: the 2-cycles are taken, `weights` holds what is left.
struct PartialPacking {
    weights: Vec<usize>,
    points_moved: usize,
    cycles: Vec<WorkerCycle>,
    two_cycles: usize,
    k: usize,
    /// The lightest feedback arc set of what the 2-cycles leave (up to 16 workers).
    fas: Option<usize>,
}

impl PartialPacking {
    fn of(s: &ShuffleMatrix) -> PartialPacking {
        let k = s.workers();
        let mut weights: Vec<usize> =
            (0..k * k).map(|e| if e / k == e % k { 0 } else { s.get(e / k, e % k) }).collect();
        let points_moved = weights.iter().sum();
        let cycles = take_two_cycles(&mut weights, k);
        let two_cycles = cycles.iter().map(|c| c.copies).sum();
        let fas = (k <= EXACT_ORDERING_MAX_WORKERS).then(|| SubsetDp::new(k).min_backward(&weights, false).0);
        PartialPacking { weights, points_moved, cycles, two_cycles, k, fas }
    }

    /// Splits whatever is left greedily and wraps up; `finished` when a search proved optimality.
    fn finish(mut self, finished: bool) -> CyclePacking {
        self.cycles.extend(greedy_shortest_cycles(&mut self.weights, self.k));
        debug_assert!(self.weights.iter().all(|&x| x == 0), "a balanced multigraph splits into cycles");
        let packed = self.cycles.iter().map(|c| c.copies).sum::<usize>() - self.two_cycles;
        CyclePacking {
            cycles: self.cycles,
            points_moved: self.points_moved,
            cycle_bound: self.fas.map(|f| f + self.two_cycles),
            proven_optimal: finished || self.fas == Some(packed),
        }
    }
}

fn take_two_cycles(w: &mut [usize], k: usize) -> Vec<WorkerCycle> {
    let mut cycles = Vec::new();
    for i in 0..k {
        for j in i + 1..k {
            let copies = w[i * k + j].min(w[j * k + i]);
            if copies > 0 {
                w[i * k + j] -= copies;
                w[j * k + i] -= copies;
                cycles.push(WorkerCycle { workers: vec![i, j], copies });
            }
        }
    }
    cycles
}

/// The edges `(from * k + to)` around a cycle.
fn edges(cycle: &[usize], k: usize) -> Vec<usize> {
    (0..cycle.len()).map(|t| cycle[t] * k + cycle[(t + 1) % cycle.len()]).collect()
}

/// Every simple cycle of length at least 3 on the edges with positive weight, lowest worker
/// first, shortest cycles first.
fn simple_cycles(w: &[usize], k: usize) -> Vec<Vec<usize>> {
    fn extend(w: &[usize], k: usize, path: &mut Vec<usize>, on_path: &mut [bool], out: &mut Vec<Vec<usize>>) {
        let (start, last) = (path[0], path[path.len() - 1]);
        for next in start..k {
            if w[last * k + next] == 0 {
                continue;
            }
            if next == start {
                if path.len() >= 3 {
                    out.push(path.clone());
                }
            } else if !on_path[next] {
                on_path[next] = true;
                path.push(next);
                extend(w, k, path, on_path, out);
                path.pop();
                on_path[next] = false;
            }
        }
    }
    let mut out = Vec::new();
    let mut on_path = vec![false; k];
    for start in 0..k {
        on_path[start] = true;
        extend(w, k, &mut vec![start], &mut on_path, &mut out);
        on_path[start] = false;
    }
    out.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    out
}

/// Chooses copies of every simple cycle to maximise their number (see the module doc), takes
/// them out of `w`, and says whether the search was complete.
fn branch_and_bound(w: &mut [usize], k: usize, root_bound: usize) -> (Vec<WorkerCycle>, bool) {
    let cycles: Vec<Vec<usize>> = simple_cycles(w, k);
    let cycle_edges: Vec<Vec<usize>> = cycles.iter().map(|c| edges(c, k)).collect();
    let m = cycles.len();
    let capacity = |res: &[usize], c: usize| cycle_edges[c].iter().map(|&e| res[e]).min().unwrap_or(0);
    let mut dp = SubsetDp::new(k);
    let mut res = w.to_vec();
    let mut copies = vec![0usize; m];
    let (mut best, mut best_copies) = (0usize, vec![0usize; m]);
    let mut count = 0usize;
    let mut stack: Vec<usize> = Vec::new();
    let mut pos = 0usize;
    let mut nodes = 0u64;
    let mut complete = true;
    'search: loop {
        let mut next = pos;
        while next < m && capacity(&res, next) == 0 {
            next += 1;
        }
        if next == m {
            if count > best {
                best = count;
                best_copies.copy_from_slice(&copies);
                if best >= root_bound {
                    break 'search; // meets the bound: nothing can beat it
                }
            }
        } else {
            nodes += 1;
            if nodes > EXACT_SEARCH_NODE_LIMIT {
                complete = false;
                break 'search;
            }
            let left: usize = res.iter().sum();
            let bound = (left / 3).min(dp.min_backward(&res, false).0);
            if count + bound > best {
                let c = capacity(&res, next);
                for &e in &cycle_edges[next] {
                    res[e] -= c;
                }
                copies[next] = c;
                count += c;
                stack.push(next);
                pos = next + 1;
                continue 'search;
            }
        }
        // Backtrack: take one copy fewer of the deepest cycle that still has one.
        loop {
            let Some(&top) = stack.last() else { break 'search };
            if copies[top] > 0 {
                copies[top] -= 1;
                count -= 1;
                for &e in &cycle_edges[top] {
                    res[e] += 1;
                }
                pos = top + 1;
                continue 'search;
            }
            stack.pop();
        }
    }
    let mut found = Vec::new();
    for (c, &n) in best_copies.iter().enumerate().filter(|&(_, &n)| n > 0) {
        for &e in &cycle_edges[c] {
            w[e] -= n;
        }
        found.push(WorkerCycle { workers: cycles[c].clone(), copies: n });
    }
    (found, complete)
}

/// Repeatedly takes as many copies as fit of a shortest cycle on the edges left, until none
/// is left. Ties go to the cycle through the lowest worker.
fn greedy_shortest_cycles(w: &mut [usize], k: usize) -> Vec<WorkerCycle> {
    let mut found = Vec::new();
    while let Some(cycle) = shortest_cycle(w, k) {
        let e = edges(&cycle, k);
        let copies = e.iter().map(|&x| w[x]).min().unwrap_or(0);
        for &x in &e {
            w[x] -= copies;
        }
        let low = cycle.iter().enumerate().min_by_key(|&(_, &v)| v).map_or(0, |(at, _)| at);
        let mut workers = cycle;
        workers.rotate_left(low);
        found.push(WorkerCycle { workers, copies });
    }
    found
}

/// A shortest cycle on the edges with positive weight, by breadth-first search from every
/// worker; stops early at length 3 (2-cycles are taken out before).
fn shortest_cycle(w: &[usize], k: usize) -> Option<Vec<usize>> {
    let mut best: Option<Vec<usize>> = None;
    let mut parent = vec![usize::MAX; k];
    let mut queue = Vec::with_capacity(k);
    for start in 0..k {
        parent.fill(usize::MAX);
        parent[start] = start;
        queue.clear();
        queue.push(start);
        let mut head = 0;
        let mut dist = vec![0usize; k];
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            if best.as_ref().is_some_and(|b| dist[u] + 1 >= b.len()) {
                break;
            }
            if u != start && w[u * k + start] > 0 {
                let mut cycle = vec![u];
                let mut v = u;
                while v != start {
                    v = parent[v];
                    cycle.push(v);
                }
                cycle.reverse();
                best = Some(cycle);
                break;
            }
            for v in 0..k {
                if w[u * k + v] > 0 && parent[v] == usize::MAX {
                    parent[v] = u;
                    dist[v] = dist[u] + 1;
                    queue.push(v);
                }
            }
        }
        if best.as_ref().is_some_and(|b| b.len() <= 3) {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::no_excess::random_permutation_sum;
    use crate::rng::seeded;

    /// The most cycles any split holds, by trying every split (tiny matrices only).
    fn brute_force_most_cycles(w: &mut [usize], k: usize) -> usize {
        let Some(start) = w.iter().position(|&x| x > 0) else { return 0 };
        // Some cycle uses the edge `start`; try every simple cycle through it.
        let mut best = 0;
        for cycle in simple_cycles_with_two(w, k) {
            let e = edges(&cycle, k);
            if !e.contains(&start) {
                continue;
            }
            for &x in &e {
                w[x] -= 1;
            }
            best = best.max(1 + brute_force_most_cycles(w, k));
            for &x in &e {
                w[x] += 1;
            }
        }
        best
    }

    fn simple_cycles_with_two(w: &[usize], k: usize) -> Vec<Vec<usize>> {
        let mut all = simple_cycles(w, k);
        for i in 0..k {
            for j in i + 1..k {
                if w[i * k + j] > 0 && w[j * k + i] > 0 {
                    all.push(vec![i, j]);
                }
            }
        }
        all
    }

    fn check_split(s: &ShuffleMatrix, packing: &CyclePacking) {
        let k = s.workers();
        let mut used = vec![0usize; k * k];
        for c in &packing.cycles {
            for e in edges(&c.workers, k) {
                used[e] += c.copies;
            }
        }
        for (e, &got) in used.iter().enumerate() {
            let want = if e / k == e % k { 0 } else { s.get(e / k, e % k) };
            assert_eq!(got, want, "edge {e} of {s}");
        }
    }

    #[test]
    fn search_finds_the_most_cycles_on_small_matrices() {
        let mut rng = seeded(8);
        for k in 3..=5 {
            for batch in 1..=3 {
                for _ in 0..12 {
                    let s = random_permutation_sum(k, batch, &mut rng);
                    let packing = pack_cycles(&s);
                    check_split(&s, &packing);
                    let mut w: Vec<usize> =
                        (0..k * k).map(|e| if e / k == e % k { 0 } else { s.get(e / k, e % k) }).collect();
                    assert_eq!(packing.cycle_count(), brute_force_most_cycles(&mut w, k), "{s}");
                    assert!(packing.proven_optimal);
                    assert!(packing.cycle_count() <= packing.cycle_bound.unwrap());
                }
            }
        }
    }

    #[test]
    fn greedy_splits_large_shuffles_completely() {
        let mut rng = seeded(9);
        for k in [9, 12, 20] {
            let s = random_permutation_sum(k, 4, &mut rng);
            let packing = pack_cycles(&s);
            check_split(&s, &packing);
            assert!(packing.transmissions() <= s.achievable_transmissions());
        }
    }

    #[test]
    fn plain_greedy_splits_are_complete_and_never_beat_the_search() {
        let mut rng = seeded(10);
        for _ in 0..30 {
            let s = random_permutation_sum(7, 3, &mut rng);
            let best = pack_cycles(&s);
            for order in [GreedyOrder::ShortestFirst, GreedyOrder::LongestFirst] {
                let greedy = greedy_packing(&s, order).unwrap();
                check_split(&s, &greedy);
                assert!(greedy.cycle_count() <= best.cycle_count());
                assert!(greedy.transmissions() <= s.achievable_transmissions());
            }
        }
        assert_eq!(greedy_packing(&random_permutation_sum(11, 1, &mut rng), GreedyOrder::LongestFirst), None);
    }

    #[test]
    fn one_long_cycle_is_one_cycle() {
        let s = ShuffleMatrix::parse("0,2,0,0;0,0,2,0;0,0,0,2;2,0,0,0").unwrap();
        let packing = pack_cycles(&s);
        assert_eq!(packing.cycles, vec![WorkerCycle { workers: vec![0, 1, 2, 3], copies: 2 }]);
        assert_eq!(packing.transmissions(), 6);
    }
}
