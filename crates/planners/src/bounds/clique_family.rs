//! How few packets the *clique family* can send: plans whose every packet is an XOR of requests
//! (a needed point and its receiver) of distinct receivers, each caching every other request's
//! point, so that each receiver decodes its part alone (`clique-cover`'s plans, and the carpool
//! planners'). Such a plan is a partition of the requests into cliques of the graph joining two
//! requests when each receiver caches the other's point.
//!
//! Two figures, apart from the general bounds of this module's siblings (which hold for every
//! scheme, so for this family too):
//! - a *bound* valid for the family: a request of point `p` lies in no clique larger than
//!   `1 + c(p)`, `c(p)` the workers caching `p` that need something (every other receiver of
//!   its packet caches `p`), so a partition has at least `sum over requests of 1 / (1 + c(p))`
//!   packets (each packet of `k` requests adds `k` terms of at most `1 / k`); the figure is the
//!   largest of that sum, the largest need of one receiver (a packet serves a receiver once) and
//!   the general bound;
//! - an *estimate* from expected clique counts, not a bound: with `R` requests per receiver and
//!   `a` the share of the other workers caching a needed point (both averaged over the
//!   instance), a request whose point `c` workers cache lies in about
//!   `E(k) = C(c, k-1) (R a^(k-1))^(k-1)` cliques of `k` (choose the other `k - 1` receivers
//!   among its cachers; each has about `R a^(k-1)` requests cached by the other `k - 1`
//!   receivers). Taking the largest `k` with `E(k) >= 1` as its largest clique, the estimate is
//!   `sum over requests of 1 / k`: what the family would send if every request were served in
//!   a clique of the largest size that random caches make likely. It is optimistic (a partition
//!   cannot put every request in one of the largest cliques) and is no bound: a planner may
//!   beat it.

use super::LowerBound;
use crate::ShuffleInstance;

/// The clique family's figures for one instance (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CliqueFamily {
    /// A lower bound on the packets of every plan of the clique family.
    pub bound: usize,
    /// An estimate (not a bound) of the fewest packets of the clique family, from expected
    /// clique counts under random caches; never below `bound`.
    pub estimate: usize,
}

/// The clique family's bound and estimate for `inst`, given `general`, a bound on every scheme
/// for it ([`super::best_lower_bound`]): one pass over every cache to count each point's
/// cachers, then one over the requests (about a second at 1000 workers and 1e8 cached points).
///
/// ```
/// use ubershuffle_planners::bounds::{best_lower_bound, clique_family};
/// use ubershuffle_core::GeneratorParams;
/// let inst = GeneratorParams { workers: 40, points: 4000, alpha: 0.3, seed: 1 }.check()?.generate();
/// let general = best_lower_bound(&inst);
/// let family = clique_family(&inst, &general);
/// assert!(family.bound >= general.value);
/// assert!(family.estimate >= family.bound && family.estimate <= inst.uncoded_transmissions());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn clique_family(inst: &ShuffleInstance, general: &LowerBound) -> CliqueFamily {
    let n = inst.workers();
    let needs = inst.need_counts();
    let receivers = needs.iter().filter(|&&c| c > 0).count();
    let requests: usize = needs.iter().sum();
    let max_need = needs.iter().copied().max().unwrap_or(0);
    // Cachers of each point among the workers that need something.
    let mut cachers = vec![0u32; inst.points()];
    for (u, &need) in needs.iter().enumerate() {
        if need > 0 {
            for p in inst.cache(u) {
                cachers[p as usize] += 1;
            }
        }
    }
    // Requests by the cachers of their point.
    let mut by_cachers = vec![0usize; n + 1];
    for w in 0..n {
        for p in inst.needs(w) {
            by_cachers[(cachers[p as usize] as usize).min(n)] += 1;
        }
    }
    let sum_over = |size: &dyn Fn(usize) -> f64| -> usize {
        let total: f64 = by_cachers.iter().enumerate().map(|(c, &count)| count as f64 / size(c)).sum();
        // Rounding: the sum of fractions, less a hair of floating error, rounded up.
        (total - 1e-9).ceil().max(0.0) as usize
    };
    let bound = sum_over(&|c| (c + 1) as f64).max(max_need).max(general.value);
    let estimate = if requests == 0 || n < 2 {
        bound
    } else {
        let per_receiver = requests as f64 / receivers as f64;
        let cached: usize = by_cachers.iter().enumerate().map(|(c, &count)| c * count).sum();
        let share = cached as f64 / (requests as f64 * (n - 1) as f64);
        let largest: Vec<f64> =
            (0..=n).map(|c| likely_largest_clique(c, per_receiver, share) as f64).collect();
        sum_over(&|c| largest[c]).max(bound)
    };
    CliqueFamily { bound, estimate }
}

/// The largest `k` with `E(k) = C(c, k-1) (r a^(k-1))^(k-1) >= 1` (see the module
/// documentation), at least 1.
fn likely_largest_clique(c: usize, r: f64, a: f64) -> usize {
    if a <= 0.0 || r <= 0.0 {
        return 1;
    }
    let (ln_r, ln_a) = (r.ln(), a.ln());
    let mut ln_choose = 0.0; // ln C(c, k - 1)
    let mut largest = 1;
    for k in 2..=c + 1 {
        let m = (k - 1) as f64;
        ln_choose += ((c + 2 - k) as f64).ln() - m.ln();
        if ln_choose + m * (ln_r + m * ln_a) >= 0.0 {
            largest = k;
        }
    }
    largest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, ShufflePlanner, planners::CliqueCoverPlanner, seeded};

    #[test]
    fn the_bound_holds_for_clique_cover_and_the_estimate_is_about_the_expected_clique() {
        let inst =
            GeneratorParams { workers: 60, points: 6000, alpha: 0.3, seed: 2 }.check().unwrap().generate();
        let family = clique_family(&inst, &crate::bounds::best_lower_bound(&inst));
        let plan = CliqueCoverPlanner::with_work_budget(u64::MAX).plan(&inst, &mut seeded(1)).unwrap();
        assert!(family.bound <= plan.len(), "{family:?} vs {}", plan.len());
        assert!(family.bound <= family.estimate && family.estimate < inst.uncoded_transmissions());
        // n = 100, q = 1e6, alpha = 0.3: 7000 requests a receiver, 30 cachers: cliques of 9.
        assert_eq!(likely_largest_clique(30, 7000.0, 0.3), 9);
        // n = 1000, q = 1e6, alpha = 0.1: 900 requests a receiver, 100 cachers: cliques of 5.
        assert_eq!(likely_largest_clique(100, 900.0, 0.1), 5);
        assert_eq!(likely_largest_clique(0, 900.0, 0.1), 1);
    }

    #[test]
    fn the_paper_example_bound_is_its_largest_need() {
        let inst = ShuffleInstance::paper_example();
        let family = clique_family(&inst, &crate::bounds::best_lower_bound(&inst));
        assert!(family.bound >= 3 && family.bound <= family.estimate);
    }
}
