//! Packing by receiver sets: the construction of [`crate::planners::CliqueCoverPlanner`].
//!
//! A packet is a set `W` of receivers and, for each `w` of `W`, one open request of `w` whose
//! point every other receiver of `W` caches. So the packet can be grown receiver by receiver,
//! leaving the choice of each receiver's request to the end: for every member `w` keep its
//! *options* `C_w`, its open requests cached by every other member, and for every worker `u`
//! that may still join its options `D_u`, its open requests cached by every member. A worker
//! `u` may join while `D_u` and every `C_w ∧ cached_by(u)` are non-empty; the packet grows by
//! the `u` that keeps the most combinations (the largest product of those counts), and when no
//! worker may join, each member sends its option cached by the fewest workers (the hardest to
//! place later).
//!
//! Committing to one request per receiver as it joins (what [`crate::packing`] does) asks every
//! later receiver to cache that very point; deferring the choice asks it to cache one of the
//! member's options, so packets grow about one receiver larger. The packet starts from the open
//! request with the fewest cachers (ties in a seeded random order); that request is fixed, so
//! only its cachers may join. Each packet takes several trials, each from another first joiner,
//! and keeps the largest.
//!
//! **Passes by a size floor.** A random greedy packing of a k-uniform hypergraph whose vertices
//! lie in `d` edges each leaves about `d^(-1/(k-1))` of them uncovered: taking large cliques
//! while they are plentiful, and small ones only for what is left, covers more with large ones
//! than taking at each seed whatever it reaches. So the first pass keeps the first
//! [`PROBE_PACKETS`] packets whatever their size, sets its floor to their median size, and from
//! then on keeps a packet only if it reaches the floor (a seed that misses waits for the next
//! pass; its trials stop as soon as one reaches the floor, and each tries several
//! second-to-last members before it misses, [`compact`]'s `last_two`). It stops when fewer than
//! [`STOP_RATE`] of its recent seeds reach the floor, or at [`FLOOR_PASS_SHARE`] of the budget;
//! the second pass keeps every packet. (At n = 1000, q = 1e6, alpha = 0.1 the floor is 5 and
//! the passes sent 0.218 of uncoded against 0.224 in one pass, both with an unbounded budget,
//! when this was written.)
//!
//! The matrices and the passes apply together, from [`STAGED_FROM_REQUESTS`] requests and
//! with [`STAGED_UNITS_PER_REQUEST`] work units a request, where the first seed's candidates
//! fit a matrix; elsewhere the packer makes one pass on the range bitsets. Two engines grow a
//! packet: [`compact`], on a matrix of the seed's candidates built for it (on builder threads,
//! [`builders`], when there are several cores), and [`range`], on bitsets over the workers'
//! request ranges.
//!
//! Work is counted in touches: a bitset range read or written costs [`ACCESS_TOUCHES`] (its
//! cache miss) plus one a word; [`TOUCHES_PER_UNIT`] make a work unit. The count depends on the
//! instance, the seed and the budget only, never on the threads.

mod builders;
mod compact;
mod range;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bits;
use crate::packing::seed_order;
use crate::requests::{CacherRows, Requests};
use crate::{Part, Plan, SeededRng};
use builders::{Built, Prebuilt, builders_for, with_builders};
use compact::Compact;
use range::{RangeGrower, View};

/// Touches per work unit, so that a unit takes about as long as one of the carpool planners
/// ([`crate::WORK_PER_SECOND`]; measured at n = 100, q = 1e6, a = 0.3, where ranges are 110
/// words, and at n = 1000, q = 1e6, a = 0.1, where they are 15 and the misses dominate).
const TOUCHES_PER_UNIT: u64 = 64;

/// Touches of the cache miss of reaching a range of a row.
const ACCESS_TOUCHES: u64 = 64;

/// The most trials per packet (see [`ReceiverPacking::trials`]): past this many first joiners
/// the packets hardly grow (measured at n = 200, q = 1e5, a = 0.3: 1, 4, 16 and 64 trials send
/// 0.174, 0.167, 0.161 and 0.158 of uncoded).
pub(crate) const MAX_TRIALS: usize = 64;

/// Workers examined a step below which the packing counts as starved by its budget.
pub(crate) const STARVED_EVALS: usize = 8;

/// The share of a pass's requests served before a squeeze counts as starved. The first packets,
/// grown while every request is open, cost the most, and at most instances of a million points
/// their work, projected over the whole pass, overruns the budget for a moment: at n = 500,
/// q = 1e6, alpha = 0.1 (10 s) the workers a step fall below [`STARVED_EVALS`] at 29 to 57 of
/// about 900 000 requests served and never after, and the fallback greedy this called for sent
/// 5.5 % more packets than the receiver sets.
const STARVED_FROM_SHARE: f64 = 0.01;

/// Options examined to pick each member's request at the end (the fewest cachers wins).
const PICK_SCAN: usize = 32;

/// Packets the first pass keeps whatever their size before it sets its floor (their median).
const PROBE_PACKETS: usize = 1024;

/// The smallest floor worth a pass of its own.
const MIN_FLOOR: usize = 3;

/// The floor pass stops when the share of its recent seeds that reach the floor (a moving
/// average over about [`RATE_WINDOW`] seeds) falls below this, after [`MIN_FLOOR_SEEDS`]. A
/// seed that misses costs its matrix twice (it is built again in the next pass), so a lower
/// rate buys packets at the floor with builds: at n = 1000, q = 1e6, alpha = 0.1 from 0.35
/// down to 0.2 the passes send less than 1 % fewer packets for about a sixth more time.
const STOP_RATE: f64 = 0.35;

/// Seeds the floor pass's success rate is averaged over.
const RATE_WINDOW: f64 = 2048.0;

/// Seeds the floor pass tries before it may stop on its rate.
const MIN_FLOOR_SEEDS: u64 = 4096;

/// The share of the budget left after the probe that the floor pass may spend.
const FLOOR_PASS_SHARE: f64 = 0.75;

/// Trials per packet in the pass after a floor pass, which packs the leftovers: their packets
/// are small whatever the trials, and the matrices' builds, not the trials, are its cost.
const LAST_PASS_TRIALS: usize = 8;

/// Requests from which the packer may use the matrices and the passes by a floor (the
/// instances of a million points): below, the one-pass range packer runs every trial within
/// the usual budgets (n = 200, q = 1e5 in about 2 s) and its plans stay those of the earlier
/// versions.
const STAGED_FROM_REQUESTS: usize = 500_000;

/// Work units per request the budget must give for the matrices and the passes: each seed's
/// matrix costs its build whatever the budget, and the floor pass builds some seeds' twice, so
/// below this the one pass on the range bitsets, whose trials and steps shrink with the budget,
/// does better (at n = 1000, q = 1e6, alpha = 0.1 the passes take about 1600 units a request;
/// at n = 500, alpha = 0.1 with 10 s, about 220 a request, they sent more than one pass).
const STAGED_UNITS_PER_REQUEST: u64 = 1500;

/// How the receiver-set packer searches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReceiverPacking {
    /// The most workers examined per step of a packet.
    pub evals_per_step: usize,
    /// The most trials per packet: each grows the packet again from another first joiner (the
    /// best not tried yet) and the largest packet is kept.
    pub trials: usize,
    /// Work units for the packing.
    pub budget: u64,
}

/// The effort per packet: trials and workers examined a step, shrunk (trials first) while the
/// work of a pass so far, projected over the requests left, would overrun the budget, and
/// grown back (evals first) while it would not.
struct Effort<'a> {
    evals: usize,
    trials: usize,
    most_evals: usize,
    most_trials: usize,
    /// Whether some packet, past the first [`STARVED_FROM_SHARE`] of its pass's requests,
    /// examined fewer than [`STARVED_EVALS`] workers a step.
    starved: bool,
    /// Called once, when the packing first counts as starved.
    on_starved: &'a dyn Fn(),
}

impl<'a> Effort<'a> {
    fn new(params: &ReceiverPacking, on_starved: &'a dyn Fn()) -> Self {
        let (most_evals, most_trials) = (params.evals_per_step.max(1), params.trials.max(1));
        Effort { evals: most_evals, trials: most_trials, most_evals, most_trials, starved: false, on_starved }
    }

    /// Adapts to `spent` touches for `served` requests so far in this pass, with `left`
    /// requests and `budget_left` touches to go.
    fn adapt(&mut self, spent: u64, served: usize, left: usize, budget_left: u64) {
        if served == 0 {
            return;
        }
        let projected = spent as f64 / served as f64 * left as f64;
        let budget_left = budget_left as f64;
        if projected > budget_left {
            let share = budget_left / projected;
            if self.trials > 1 {
                self.trials = ((self.trials as f64 * share) as usize).max(1);
            } else {
                self.evals = ((self.evals as f64 * share) as usize).max(1);
                let past_start = served as f64 >= STARVED_FROM_SHARE * (served + left) as f64;
                if self.evals < STARVED_EVALS && past_start && !self.starved {
                    self.starved = true;
                    (self.on_starved)();
                }
            }
        } else if self.evals < self.most_evals {
            self.evals = (self.evals * 2).min(self.most_evals);
        } else if projected * 1.5 < budget_left {
            self.trials = (self.trials + 1).min(self.most_trials);
        }
    }
}

/// One examined candidate of a best-joiner scan: with a `score` it is weighed against `best`
/// (the first of equal scores stays) and true is returned; without one it can never join, and
/// the caller drops it.
fn keep_best(score: Option<f64>, i: usize, best: &mut Option<(f64, usize)>) -> bool {
    let Some(s) = score else { return false };
    if best.is_none_or(|(b, _)| s > b) {
        *best = Some((s, i));
    }
    true
}

/// How the first pass ended.
enum FirstPass {
    /// Every request is served (no floor was set).
    Done,
    /// A floor pass (with this floor) ran and stopped; the requests left need a pass that
    /// keeps every packet.
    Floored(usize),
}

/// The packer's state across the passes.
struct Packer<'a> {
    requests: &'a Requests,
    rows: &'a CacherRows,
    open: Vec<u64>,
    /// The same open set, for the builders.
    shared_open: &'a [AtomicU64],
    /// Whether packets grow on [`Compact`] matrices, else on [`RangeGrower`]'s bitsets.
    matrices: bool,
    compact: Compact,
    range: RangeGrower,
    /// The packet grown last (its seed first), and a scratch for the next.
    chosen: Vec<usize>,
    scratch: Vec<usize>,
    touches: u64,
    served: usize,
    plan: Plan,
}

/// Packs every request of `requests` into packets (see the module documentation); the plan
/// serves each request exactly once, tagged with its receiver, and decodes in one step at every
/// receiver. The trials, then the workers examined per step, start at `params`' and shrink
/// while the work spent so far, projected over the requests left, would overrun the budget.
/// Also returns whether the budget was so tight that some packet past the first
/// [`STARVED_FROM_SHARE`] of its pass examined fewer than [`STARVED_EVALS`] workers a step, and
/// calls `on_starved` the moment that first happens (so that a caller may start a fallback
/// beside the rest of the packing).
pub(crate) fn pack_by_receivers(
    requests: &Requests,
    rows: &CacherRows,
    params: &ReceiverPacking,
    rng: &mut SeededRng,
    on_starved: &dyn Fn(),
) -> (Plan, bool) {
    let staged = requests.len() >= STAGED_FROM_REQUESTS
        && params.budget >= STAGED_UNITS_PER_REQUEST.saturating_mul(requests.len() as u64);
    let (plan, starved, _) =
        pack_with_builders(requests, rows, params, rng, staged, builders_for(requests), on_starved);
    (plan, starved)
}

/// [`pack_by_receivers`], `staged` (on the matrices and in passes by a floor where the first
/// seed's candidates fit a matrix, else on the range bitsets in one pass) and with `builders`
/// builder threads; also returns the floor of the floor pass, if one ran.
fn pack_with_builders(
    requests: &Requests,
    rows: &CacherRows,
    params: &ReceiverPacking,
    rng: &mut SeededRng,
    staged: bool,
    builders: usize,
    on_starved: &dyn Fn(),
) -> (Plan, bool, Option<usize>) {
    let order = seed_order(requests, rows, rng);
    let shared_open: Vec<AtomicU64> = (0..requests.row_words()).map(|_| AtomicU64::new(u64::MAX)).collect();
    let mut packer = Packer {
        requests,
        rows,
        open: vec![u64::MAX; requests.row_words()],
        shared_open: &shared_open,
        matrices: false,
        compact: Compact::default(),
        range: RangeGrower::default(),
        chosen: Vec::new(),
        scratch: Vec::new(),
        touches: 0,
        served: 0,
        plan: Plan::with_capacity(requests.len() / 4, requests.len()),
    };
    let budget = params.budget.saturating_mul(TOUCHES_PER_UNIT);
    let mut effort = Effort::new(params, on_starved);
    // One engine for the whole run, chosen on the first seed: the matrices where its
    // candidates have few enough options (later seeds' candidates have fewer), else the ranges.
    packer.matrices = staged
        && order.first().is_some_and(|&seed| {
            let open = &packer.open;
            packer.compact.build(requests, rows, |k| open[k], seed as usize)
        });
    let builders = if packer.matrices { builders } else { 0 };
    let floors = packer.matrices;
    let first = with_builders(requests, rows, &order, &shared_open, builders, |prebuilt| {
        packer.first_pass(&order, prebuilt, &mut effort, budget, floors)
    });
    let floor = match first {
        FirstPass::Done => None,
        FirstPass::Floored(floor) => Some(floor),
    };
    if floor.is_some() {
        effort.most_trials = effort.most_trials.min(LAST_PASS_TRIALS);
        effort.trials = effort.trials.min(effort.most_trials);
        with_builders(requests, rows, &order, &shared_open, builders, |prebuilt| {
            packer.last_pass(&order, prebuilt, &mut effort, budget);
        });
    }
    (packer.plan, effort.starved, floor)
}

impl Packer<'_> {
    /// The first pass: the probe (the first [`PROBE_PACKETS`] packets, kept whatever their
    /// size), then, when their median size reaches [`MIN_FLOOR`] and the budget is ample (the
    /// probe kept every trial, and its work per request, over the requests left, fits the
    /// budget left), the floor pass; otherwise the probe goes on to the end of the order,
    /// keeping every packet, as one pass (always without `floors`).
    fn first_pass(
        &mut self,
        order: &[u32],
        prebuilt: &Prebuilt<'_>,
        effort: &mut Effort<'_>,
        budget: u64,
        floors: bool,
    ) -> FirstPass {
        let mut sizes = Vec::with_capacity(PROBE_PACKETS);
        let mut floor = 0;
        let (mut floor_end, mut tried, mut rate) = (0u64, 0u64, 1.0f64);
        for (position, &seed) in order.iter().enumerate() {
            let built = prebuilt.take(position);
            let seed = seed as usize;
            if !bits::get(&self.open, seed) {
                continue;
            }
            if floor == 0 {
                let left = self.requests.len() - self.served;
                effort.adapt(self.touches, self.served, left, budget.saturating_sub(self.touches));
                self.grow(seed, built, prebuilt, (effort.evals, effort.trials, 0));
                if sizes.len() < PROBE_PACKETS {
                    sizes.push(self.chosen.len());
                }
                self.keep();
                if sizes.len() == PROBE_PACKETS && self.served < self.requests.len() {
                    sizes.sort_unstable();
                    let median = sizes[PROBE_PACKETS / 2];
                    // Marks the probe as decided either way.
                    sizes.push(0);
                    let projected =
                        self.touches as f64 / self.served as f64 * (self.requests.len() - self.served) as f64;
                    let ample = effort.trials == effort.most_trials
                        && projected <= budget.saturating_sub(self.touches) as f64;
                    if floors && median >= MIN_FLOOR && ample {
                        floor = median;
                        let left = budget.saturating_sub(self.touches) as f64;
                        floor_end = self.touches.saturating_add((left * FLOOR_PASS_SHARE) as u64);
                    }
                }
                continue;
            }
            self.grow(seed, built, prebuilt, (effort.evals, effort.trials, floor));
            let hit = self.chosen.len() >= floor;
            if hit {
                self.keep();
            }
            tried += 1;
            rate += (f64::from(u8::from(hit)) - rate) / RATE_WINDOW;
            if (tried >= MIN_FLOOR_SEEDS && rate < STOP_RATE) || self.touches >= floor_end {
                return FirstPass::Floored(floor);
            }
        }
        if floor == 0 { FirstPass::Done } else { FirstPass::Floored(floor) }
    }

    /// The pass after a floor pass: every open seed of the order grows a packet and keeps it.
    fn last_pass(&mut self, order: &[u32], prebuilt: &Prebuilt<'_>, effort: &mut Effort<'_>, budget: u64) {
        let (touches_before, served_before) = (self.touches, self.served);
        for (position, &seed) in order.iter().enumerate() {
            let built = prebuilt.take(position);
            let seed = seed as usize;
            if !bits::get(&self.open, seed) {
                continue;
            }
            effort.adapt(
                self.touches - touches_before,
                self.served - served_before,
                self.requests.len() - self.served,
                budget.saturating_sub(self.touches),
            );
            self.grow(seed, built, prebuilt, (effort.evals, effort.trials, 0));
            self.keep();
        }
    }

    /// Grows a packet from `seed` into `self.chosen` (the seed first), on the matrix `built`
    /// ahead (handed back to `prebuilt` after) or built now, or else on the range bitsets;
    /// `target`: see [`Compact::trial`].
    fn grow(
        &mut self,
        seed: usize,
        built: Option<Built>,
        prebuilt: &Prebuilt<'_>,
        (evals, trials, target): (usize, usize, usize),
    ) {
        let ready = self.matrices
            && match built {
                Some(Built::Ready(mut compact)) => {
                    std::mem::swap(&mut self.compact, &mut compact);
                    prebuilt.recycle(compact);
                    true
                }
                _ => {
                    let open = &self.open;
                    self.compact.build(self.requests, self.rows, |k| open[k], seed)
                }
            };
        self.chosen.clear();
        if ready {
            self.touches += self.compact.refresh(&self.open, self.rows);
            let startable = self.compact.startable();
            if target == 0 || startable + 1 >= target {
                for trial in 0..trials.min(startable) {
                    if target > 0 && self.chosen.len() >= target {
                        break;
                    }
                    let members = self.compact.trial(trial, evals, target, &mut self.touches);
                    if members + 1 > self.chosen.len() {
                        self.scratch.clear();
                        self.scratch.push(seed);
                        self.compact.pick(self.rows, &mut self.scratch, &mut self.touches);
                        std::mem::swap(&mut self.chosen, &mut self.scratch);
                    }
                }
            }
        } else {
            let view = View { requests: self.requests, rows: self.rows, open: &self.open };
            self.range.grow(&view, seed, (evals, trials, target), &mut self.chosen, &mut self.touches);
        }
        if self.chosen.is_empty() {
            self.chosen.push(seed);
        }
    }

    /// Serves the packet in `self.chosen`.
    fn keep(&mut self) {
        for &r in &self.chosen {
            bits::clear(&mut self.open, r);
            self.shared_open[r / 64].fetch_and(!(1u64 << (r % 64)), Ordering::Relaxed);
        }
        self.served += self.chosen.len();
        self.plan.push_iter(
            self.chosen.iter().map(|&r| Part::new(self.requests.point(r), self.requests.receiver(r))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packing::{MAX_EVALS_PER_STEP, PackingParams};
    use crate::{GeneratorParams, ShuffleInstance, arbitrary_instance, seeded, verify, work_units};

    /// [`pack_by_receivers`] on the requests' own cachers, telling `on_starved`.
    fn by_receivers(
        requests: &Requests,
        params: &ReceiverPacking,
        seed: u64,
        on_starved: &dyn Fn(),
    ) -> (Plan, bool) {
        pack_by_receivers(requests, &requests.cacher_rows(), params, &mut seeded(seed), on_starved)
    }

    /// [`pack_with_builders`], staged, on the requests' own cachers.
    fn staged(
        requests: &Requests,
        params: &ReceiverPacking,
        seed: u64,
        builders: usize,
    ) -> (Plan, bool, Option<usize>) {
        pack_with_builders(
            requests,
            &requests.cacher_rows(),
            params,
            &mut seeded(seed),
            true,
            builders,
            &|| {},
        )
    }

    fn pack(inst: &ShuffleInstance, seed: u64) -> Plan {
        let requests = Requests::of(inst);
        let params = ReceiverPacking { evals_per_step: 128, trials: 4, budget: u64::MAX };
        by_receivers(&requests, &params, seed, &|| {}).0
    }

    #[test]
    fn plans_verify_and_serve_every_request_once() {
        for inst in [
            ShuffleInstance::paper_example(),
            GeneratorParams { workers: 60, points: 3000, alpha: 0.3, seed: 5 }.check().unwrap().generate(),
            arbitrary_instance(7, 300, 0.4, 2),
        ] {
            let plan = pack(&inst, 1);
            assert!(verify(&inst, &plan).unwrap().is_valid());
            assert_eq!(plan.total_parts(), inst.uncoded_transmissions());
            assert_eq!(plan, pack(&inst, 1));
        }
    }

    /// Transmissions over uncoded, and packets by size (15 and more in the last).
    fn ratio_and_sizes(inst: &ShuffleInstance, plan: &Plan) -> (f64, [usize; 16]) {
        let mut sizes = [0usize; 16];
        for packet in plan.iter() {
            sizes[packet.len().min(15)] += 1;
        }
        (plan.len() as f64 / inst.uncoded_transmissions() as f64, sizes)
    }

    /// The comparison behind [`MAX_TRIALS`]: transmissions / uncoded and packet sizes for 1 to
    /// 64 trials, with an unbounded budget
    /// (`cargo test --release -p ubershuffle-core --lib trials_comparison -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement (n = 200, q = 1e5), not a check"]
    fn trials_comparison() {
        let inst = GeneratorParams { workers: 200, points: 100_000, alpha: 0.3, seed: 1 }
            .check()
            .unwrap()
            .generate();
        let requests = Requests::of(&inst);
        for trials in [1, 4, 16, 64] {
            let params = ReceiverPacking { evals_per_step: 128, trials, budget: u64::MAX };
            let (plan, _) = by_receivers(&requests, &params, 1, &|| {});
            assert!(verify(&inst, &plan).unwrap().is_valid());
            let (ratio, sizes) = ratio_and_sizes(&inst, &plan);
            println!("{trials} trials: {ratio:.4} x uncoded, packets by size {sizes:?}");
        }
    }

    /// Packet sizes by build order at a scale point, with an unbounded budget or the budget of
    /// `UBS_SECONDS`: where the packing loses (`UBS_N=100 UBS_Q=1000000 UBS_A=0.3 cargo test
    /// --release -p ubershuffle-planners --lib size_profile -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn size_profile() {
        let var = |k: &str, d: f64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        let (n, q, a) = (var("UBS_N", 100.0) as usize, var("UBS_Q", 100_000.0) as usize, var("UBS_A", 0.3));
        let inst = GeneratorParams { workers: n, points: q, alpha: a, seed: 1 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let budget = match var("UBS_SECONDS", 0.0) {
            s if s > 0.0 => {
                PackingParams::within(work_units(std::time::Duration::from_secs_f64(s)), &inst).budget
            }
            _ => u64::MAX,
        };
        let params = ReceiverPacking { evals_per_step: MAX_EVALS_PER_STEP, trials: MAX_TRIALS, budget };
        let (plan, _) = by_receivers(&requests, &params, 1, &|| {});
        assert!(verify(&inst, &plan).unwrap().is_valid());
        let (ratio, sizes) = ratio_and_sizes(&inst, &plan);
        println!("{ratio:.4} x uncoded; packets by size {sizes:?}");
        let packets: Vec<usize> = plan.iter().map(<[_]>::len).collect();
        let deciles: Vec<String> = packets
            .chunks(packets.len().div_ceil(10))
            .map(|c| format!("{:.2}", c.iter().sum::<usize>() as f64 / c.len() as f64))
            .collect();
        println!("mean packet size by tenth of the build order: {}", deciles.join(" "));
    }

    /// An instance large enough for a floor pass (more than [`PROBE_PACKETS`] packets).
    fn floored_instance() -> ShuffleInstance {
        GeneratorParams { workers: 120, points: 20_000, alpha: 0.2, seed: 3 }.check().unwrap().generate()
    }

    #[test]
    fn a_floor_pass_serves_every_request_once_and_builders_change_nothing() {
        let inst = floored_instance();
        let requests = Requests::of(&inst);
        let params = ReceiverPacking { evals_per_step: 32, trials: 8, budget: u64::MAX };
        let (alone, _, floor) = staged(&requests, &params, 4, 0);
        assert!(verify(&inst, &alone).unwrap().is_valid());
        assert_eq!(alone.total_parts(), inst.uncoded_transmissions());
        let floor = floor.expect("a floor pass");
        assert!(floor >= MIN_FLOOR);
        // The probe's packets come first, then the floor pass's, none below the floor.
        let floored = alone.iter().skip(PROBE_PACKETS).take_while(|p| p.len() >= floor).count();
        assert!(floored > 100, "{floored} packets of the floor pass");
        for builders in [1, 3] {
            assert_eq!(staged(&requests, &params, 4, builders).0, alone);
        }
    }

    #[test]
    fn a_tight_budget_gives_the_same_plan_with_or_without_builders() {
        let inst = floored_instance();
        let requests = Requests::of(&inst);
        let params = ReceiverPacking { evals_per_step: 32, trials: 8, budget: 20_000 };
        let (alone, _, _) = staged(&requests, &params, 5, 0);
        assert!(verify(&inst, &alone).unwrap().is_valid());
        assert_eq!(staged(&requests, &params, 5, 2).0, alone);
        let ample = ReceiverPacking { budget: u64::MAX, ..params };
        assert_ne!(staged(&requests, &ample, 5, 0).0, alone, "the budget binds");
    }

    #[test]
    fn a_budget_of_nothing_still_serves_everything() {
        let inst =
            GeneratorParams { workers: 40, points: 2000, alpha: 0.3, seed: 1 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let params = ReceiverPacking { evals_per_step: 128, trials: 4, budget: 0 };
        let calls = std::cell::Cell::new(0);
        let (plan, starved) = by_receivers(&requests, &params, 1, &|| calls.set(calls.get() + 1));
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert!(plan.len() < inst.uncoded_transmissions());
        assert!(starved);
        assert_eq!(calls.get(), 1, "told once that it starves");
        let ample = ReceiverPacking { budget: u64::MAX, ..params };
        let (_, starved) = by_receivers(&requests, &ample, 1, &|| calls.set(calls.get() + 1));
        assert!(!starved);
        assert_eq!(calls.get(), 1, "not told when it does not starve");
    }

    #[test]
    fn a_squeeze_of_the_first_packets_alone_is_not_starving() {
        let params = ReceiverPacking { evals_per_step: 128, trials: 1, budget: 0 };
        let calls = std::cell::Cell::new(0);
        let tell = || calls.set(calls.get() + 1);
        let mut effort = Effort::new(&params, &tell);
        // The first of 1000 requests cost far more than the budget left: the steps shrink.
        effort.adapt(1_000_000, 1, 999, 1);
        assert!(effort.evals < STARVED_EVALS);
        assert!(!effort.starved && calls.get() == 0, "1 of 1000 served is the start of the pass");
        // Past the first 1 %, the same squeeze starves, and is told once.
        effort.adapt(1_000_000, 20, 980, 1);
        effort.adapt(1_000_000, 30, 970, 1);
        assert!(effort.starved);
        assert_eq!(calls.get(), 1);
    }
}
