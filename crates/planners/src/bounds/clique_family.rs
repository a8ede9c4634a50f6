//! How few packets the *clique family* can send: plans whose every packet is an XOR of requests
//! (a needed point and its receiver) of distinct receivers, each caching every other request's
//! point, so that each receiver decodes its part alone (`clique-cover`'s plans, and the carpool
//! planners'). Such a plan is a partition of the requests into cliques of the graph joining two
//! requests when each receiver caches the other's point.
//!
//! Two figures, apart from the general bounds of this module's siblings (which hold for every
//! scheme, so for this family too):
//! - a *bound* valid for the family: a partition of the requests into cliques has at least
//!   `sum over requests r of 1 / w(r)` packets when no clique through `r` has more than `w(r)`
//!   requests (each packet of `k` requests adds `k` terms of at most `1 / k`). `w(r)` comes from
//!   the search for the largest cliques ([`super::largest_cliques`], [`CliqueBoundKind::Search`])
//!   where it finishes within its budget, and is never above `1 + c(p)`, `c(p)` the workers
//!   caching `r`'s point `p` that need something (every other receiver of its packet caches
//!   `p`: [`CliqueBoundKind::Cachers`], all there is without the search). The figure is the
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
use super::largest_cliques::{
    CliqueSizes, MAX_CANDIDATES, largest_cliques, probe_work, probed_receivers, too_wide,
};
use crate::ShuffleInstance;
use crate::requests::Requests;

/// Work units of the largest-clique search that one core counts in about a second (measured
/// at n = 100, q = 1e5, alpha = 0.3 on the machines this was written on): a unit is one test of
/// an option's mask, so the bound depends only on the instance and the budget.
pub const SEARCH_WORK_PER_SECOND: u64 = 400_000_000;

/// The search budget `ubershuffle plan` gives the bound by default: about a second of one core.
pub const DEFAULT_SEARCH_WORK: u64 = SEARCH_WORK_PER_SECOND;

/// What the clique family's bound rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CliqueBoundKind {
    /// Each request's cachers: a request of point `p` lies in no clique larger than `1 + c(p)`.
    Cachers,
    /// The largest-clique search at this threshold `k` ran to its end: every clique of at
    /// least `k` requests was found, and every other request lies in none larger than `k - 1`.
    Search {
        /// The threshold.
        threshold: usize,
    },
}

impl CliqueBoundKind {
    /// Its name in JSON and CSV: `cachers` or `search`.
    pub fn name(self) -> &'static str {
        match self {
            CliqueBoundKind::Cachers => "cachers",
            CliqueBoundKind::Search { .. } => "search",
        }
    }

    /// The search's threshold, 0 without a search.
    pub fn threshold(self) -> usize {
        match self {
            CliqueBoundKind::Cachers => 0,
            CliqueBoundKind::Search { threshold } => threshold,
        }
    }
}

/// The clique family's figures for one instance (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CliqueFamily {
    /// A lower bound on the packets of every plan of the clique family.
    pub bound: usize,
    /// What the bound rests on.
    pub bound_kind: CliqueBoundKind,
    /// Work units the largest-clique search spent, including thresholds that did not finish.
    pub search_work: u64,
    /// An estimate (not a bound) of the fewest packets of the clique family, from expected
    /// clique counts under random caches; never below `bound`.
    pub estimate: usize,
}

/// The clique family's bound and estimate for `inst`, given `general`, a bound on every scheme
/// for it ([`super::best_lower_bound`]), searching for the largest cliques within `search_work`
/// work units (0: no search; [`SEARCH_WORK_PER_SECOND`] is about a second of one core).
/// Counting cachers takes one pass over every cache (about a second at 1000 workers and 1e8
/// cached points); the search's thresholds go down from above the largest clique the estimate
/// expects while they finish within the budget, and the lowest that finished gives the bound.
///
/// ```
/// use ubershuffle_planners::bounds::{DEFAULT_SEARCH_WORK, best_lower_bound, clique_family};
/// use ubershuffle_core::GeneratorParams;
/// let inst = GeneratorParams { workers: 40, points: 4000, alpha: 0.3, seed: 1 }.check()?.generate();
/// let general = best_lower_bound(&inst);
/// let family = clique_family(&inst, &general, DEFAULT_SEARCH_WORK);
/// assert!(family.bound >= general.value);
/// assert_eq!(family.bound_kind.name(), "search");
/// assert!(family.estimate >= family.bound && family.estimate <= inst.uncoded_transmissions());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn clique_family(inst: &ShuffleInstance, general: &LowerBound, search_work: u64) -> CliqueFamily {
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
    let floor = max_need.max(general.value);
    let cachers_bound = sum_of_shares(by_cachers.iter().enumerate().map(|(c, &count)| (count, c + 1)));
    let likely = if requests == 0 || n < 2 {
        vec![1; n + 1]
    } else {
        let per_receiver = requests as f64 / receivers as f64;
        let cached: usize = by_cachers.iter().enumerate().map(|(c, &count)| c * count).sum();
        let share = cached as f64 / (requests as f64 * (n - 1) as f64);
        (0..=n).map(|c| likely_largest_clique(c, per_receiver, share)).collect::<Vec<_>>()
    };
    let (searched, search_work) = search_largest(inst, &by_cachers, &likely, search_work);
    let (bound, bound_kind) = match &searched {
        Some(sizes) => {
            let at_most = sized_requests(inst, sizes, &cachers);
            (sum_of_shares(at_most.into_iter()), CliqueBoundKind::Search { threshold: sizes.threshold })
        }
        None => (cachers_bound, CliqueBoundKind::Cachers),
    };
    let bound = bound.max(cachers_bound).max(floor);
    let estimate =
        sum_of_shares(by_cachers.iter().enumerate().map(|(c, &count)| (count, likely[c]))).max(bound);
    CliqueFamily { bound, bound_kind, search_work, estimate }
}

/// `sum of count / size` over `(count, size)` pairs, rounded up (less a hair of floating
/// error): a partition into cliques where a request lies in none larger than `size` has at
/// least this many packets (each packet of `k` requests adds `k` terms of at most `1 / k`).
fn sum_of_shares(pairs: impl Iterator<Item = (usize, usize)>) -> usize {
    let total: f64 = pairs.map(|(count, size)| count as f64 / size.max(1) as f64).sum();
    (total - 1e-9).ceil().max(0.0) as usize
}

/// The lowest threshold the search goes down to: a request in no clique of 3 counts as one
/// in a clique of 2 (finding the requests in none at all would cost as much as all the rest).
const LOWEST_THRESHOLD: usize = 3;

/// A probe of a threshold's cost searches from one receiver in this many, or in fewer where
/// that would be under [`PROBED_RECEIVERS`] (the cost falls steeply with the receiver's number,
/// so a sparse probe of few workers misjudges it).
const PROBE_EVERY: usize = 16;

/// The receivers a probe wants at least, where the workers allow one in two.
const PROBED_RECEIVERS: usize = 10;

/// Workers up to which the thresholds run in turn without probes.
const UNPROBED_WORKERS: usize = 16;

/// The factor (a ratio) a probe's estimate is taken with: the receivers it skips may cost more
/// than the ones it samples.
const MARGIN: (u64, u64) = (5, 4);

/// The largest-clique search within `budget`, at the lowest threshold it can afford, from just
/// above the largest clique the estimate expects (`likely`, by cachers) down to
/// [`LOWEST_THRESHOLD`]. Above [`UNPROBED_WORKERS`] workers, probes from one receiver in a few
/// ([`PROBE_EVERY`] at most; the middle of each run, as the cost falls with the receiver's number)
/// estimate each threshold's cost, going down while it fits what is left with a
/// [`MARGIN`] for it and for the next threshold up; the search runs at the lowest threshold that
/// fits, keeping enough for the next one up should it not finish. With fewer workers the
/// thresholds run in turn from the top while they finish. Returns the sizes of the lowest
/// threshold that finished, if one did, and the work spent (probes included).
fn search_largest(
    inst: &ShuffleInstance,
    by_cachers: &[usize],
    likely: &[usize],
    budget: u64,
) -> (Option<CliqueSizes>, u64) {
    let requests: usize = by_cachers.iter().sum();
    let most_cachers = by_cachers.iter().rposition(|&count| count > 0).unwrap_or(0);
    let cached: usize = by_cachers.iter().enumerate().map(|(c, &count)| c * count).sum();
    // With more cachers than a mask holds on average, the first receivers' anchors have too
    // (and the request index would be built for nothing).
    if budget == 0 || most_cachers == 0 || cached > MAX_CANDIDATES * requests {
        return (None, 0);
    }
    let expected = likely.iter().take(most_cachers + 1).copied().max().unwrap_or(1);
    // A request of a point with `c` cachers lies in no clique larger than `c + 1`.
    let top = (expected + 2).min(most_cachers + 2).max(LOWEST_THRESHOLD);
    let requests = Requests::of(inst);
    let rows = requests.cacher_rows();
    if too_wide(&requests, &rows) {
        return (None, 0);
    }
    let (threads, n) = (threads(), inst.workers());
    let mut spent = 0u64;
    // A search that does not finish has spent its cap.
    let run = |threshold: usize, cap: u64, spent: &mut u64| {
        let searched = largest_cliques(&requests, &rows, threshold, cap, threads);
        *spent += searched.as_ref().map_or(cap, |sizes| sizes.work);
        searched.ok()
    };
    if n <= UNPROBED_WORKERS {
        let mut best = None;
        for threshold in (LOWEST_THRESHOLD..=top).rev() {
            match run(threshold, budget - spent, &mut spent) {
                Some(sizes) => best = Some(sizes),
                None => break,
            }
        }
        return (best, spent.min(budget));
    }
    // (threshold, its estimated cost with the margin), from the top down.
    let mut affordable: Vec<(usize, u64)> = Vec::new();
    let every = (n / PROBED_RECEIVERS).clamp(2, PROBE_EVERY);
    let probed = probed_receivers(n, every).max(1) as u64;
    for threshold in (LOWEST_THRESHOLD..=top).rev() {
        let reserve = affordable.last().map_or(0, |&(_, up)| up);
        // A probe past this share of what is left already says the threshold does not fit.
        let cap = (budget - spent).saturating_sub(reserve).saturating_mul(probed) / n as u64;
        let Ok(work) = probe_work(&requests, &rows, threshold, cap, threads, every) else {
            spent += cap;
            break;
        };
        spent += work;
        let cost = (work.saturating_mul(n as u64) / probed).saturating_mul(MARGIN.0) / MARGIN.1;
        if cost.saturating_add(reserve) > budget - spent {
            break;
        }
        affordable.push((threshold, cost));
    }
    let Some(&(lowest, _)) = affordable.last() else { return (None, spent) };
    let reserve = affordable.iter().rev().nth(1).map_or(0, |&(_, up)| up);
    if let Some(sizes) = run(lowest, budget - spent - reserve, &mut spent) {
        return (Some(sizes), spent);
    }
    let searched = if lowest < top { run(lowest + 1, budget - spent, &mut spent) } else { None };
    (searched, spent.min(budget))
}

/// Threads for the search: the cores of this machine.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// `(count, size)` pairs: how many requests lie in no clique larger than `size`, by the search
/// and by their cachers.
fn sized_requests(inst: &ShuffleInstance, sizes: &CliqueSizes, cachers: &[u32]) -> Vec<(usize, usize)> {
    let mut count = vec![0usize; inst.workers() + 2];
    let mut r = 0;
    for w in 0..inst.workers() {
        for p in inst.needs(w) {
            let size = sizes.at_most(r).min(1 + cachers[p as usize] as usize).min(inst.workers());
            count[size] += 1;
            r += 1;
        }
    }
    count.into_iter().enumerate().map(|(size, c)| (c, size)).collect()
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
    use crate::bits;
    use crate::{GeneratorParams, ShufflePlanner, planners::CliqueCoverPlanner, seeded};

    #[test]
    fn the_bound_holds_for_clique_cover_and_the_estimate_is_about_the_expected_clique() {
        let inst =
            GeneratorParams { workers: 60, points: 6000, alpha: 0.3, seed: 2 }.check().unwrap().generate();
        let family = clique_family(&inst, &crate::bounds::best_lower_bound(&inst), DEFAULT_SEARCH_WORK);
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
    fn the_searched_bound_is_the_sum_over_requests_of_one_over_their_largest_clique() {
        for (n, q, alpha, seed) in [(8, 400, 0.6, 1), (12, 240, 0.6, 2), (20, 200, 0.5, 3), (24, 240, 0.6, 4)]
        {
            let inst = GeneratorParams { workers: n, points: q, alpha, seed }.check().unwrap().generate();
            let general = LowerBound { value: 0, kind: "none" };
            let family = clique_family(&inst, &general, u64::MAX);
            assert_eq!(family.bound_kind, CliqueBoundKind::Search { threshold: LOWEST_THRESHOLD });
            let requests = Requests::of(&inst);
            let rows = requests.cacher_rows();
            // Below the lowest threshold a request counts as in a clique of 2, if its point has
            // a cacher.
            let sum: f64 = super::super::largest_cliques::brute_force(&inst)
                .into_iter()
                .enumerate()
                .map(|(r, omega)| 1.0 / omega.max(2.min(1 + bits::count(rows.of(r)))) as f64)
                .sum();
            let cachers = clique_family(&inst, &general, 0);
            assert_eq!(family.bound, (sum - 1e-9).ceil() as usize, "n = {n}");
            assert!(family.bound >= cachers.bound && cachers.bound_kind == CliqueBoundKind::Cachers);
        }
    }

    #[test]
    fn the_searched_bound_holds_for_every_clique_family_planner() {
        let options =
            crate::PlannerOptions::default().with_time_budget(std::time::Duration::from_millis(100));
        let schemes = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt", "clique-cover"];
        for (n, q, alpha, seed) in
            [(10, 1000, 0.4, 1), (20, 2000, 0.3, 2), (40, 2000, 0.5, 3), (70, 2100, 0.2, 4)]
        {
            let inst = GeneratorParams { workers: n, points: q, alpha, seed }.check().unwrap().generate();
            let general = crate::bounds::best_lower_bound(&inst);
            let family = clique_family(&inst, &general, DEFAULT_SEARCH_WORK / 8);
            assert!(matches!(family.bound_kind, CliqueBoundKind::Search { .. }), "n = {n}");
            assert!(family.bound >= general.value && family.bound <= family.estimate);
            for scheme in schemes {
                let planner = crate::planner_by_name(scheme, &options).unwrap();
                let Ok(plan) = planner.plan(&inst, &mut seeded(seed)) else { continue };
                crate::check_plan(&inst, &plan).unwrap();
                assert!(family.bound <= plan.len(), "{scheme} at n = {n}: {} < {}", plan.len(), family.bound);
            }
        }
    }

    #[test]
    fn the_paper_example_bound_is_its_largest_need() {
        let inst = ShuffleInstance::paper_example();
        let family = clique_family(&inst, &crate::bounds::best_lower_bound(&inst), DEFAULT_SEARCH_WORK);
        assert!(family.bound >= 3 && family.bound <= family.estimate);
    }
}
