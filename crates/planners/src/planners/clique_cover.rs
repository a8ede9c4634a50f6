//! `clique-cover`: packs requests straight into XOR packets over the side information, with no
//! encoding tables, so that it keeps its gain at cluster scale.

mod beside;

use super::BuiltinPlanner;
use crate::packing::{MAX_EVALS_PER_STEP, PackingParams};
use crate::receiver_packing::{MAX_TRIALS, ReceiverPacking};
use crate::requests::Requests;
use crate::{Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner, work_units};
use beside::{Packers, pack_both, second_core};

/// Up to this many workers `clique-cover` also runs the request-by-request greedy of
/// `src/packing.rs` and keeps the smaller plan: with few workers the receiver sets' packets are
/// no larger and it sometimes sends a few more (Table 1's n = 20 instance: 24601 against
/// 24425; n = 10 and 20, q = 1e6 in the full scale run).
const BOTH_UP_TO_WORKERS: usize = 64;

/// Our planner for many workers: a greedy clique cover of the side-information graph.
///
/// A *request* is a needed pair (point `p`, receiver `w`). A packet may XOR requests of
/// distinct receivers when every receiver caches every other request's point: each then
/// removes the others and keeps its own. Such a set is a clique of the graph joining two
/// requests when each receiver caches the other's point, and a plan is a cover of the
/// requests by cliques. Lee et al.'s tables are the special cliques whose points all have the
/// same cachers; at `n = 100` workers almost every point's cachers are unique, the tables hold
/// one point each and send what uncoded sends, while cliques of 5 to 8 requests abound.
///
/// The planner grows one packet at a time (`src/receiver_packing/` has the details):
/// 1. *Seed*: the open request whose point has the fewest cachers (ties in a seeded random
///    order): it fits the fewest packets, so it is served while partners are plentiful. Only
///    its cachers may join its packet.
/// 2. *Grow by receivers*: a packet is a set of receivers, each with its *options* (its open
///    requests cached by every other receiver of the packet, a bitset over its range of
///    requests); a worker may join while its own options and every member's options among
///    what it caches are non-empty, and the packet takes the worker that keeps the largest
///    product of option counts. The request each receiver sends is chosen only when no worker
///    can join (its option cached by the fewest workers), so a later receiver need cache one of
///    a member's options, not one point chosen early: packets grow about one receiver larger
///    than when each request is fixed as it joins.
/// 3. *Trials*: the packet is grown again from other first joiners (up to 64; the best not
///    tried yet, on the matrices below the richest in options) while the budget allows, and
///    the largest is kept.
/// 4. *Passes by a size floor* (from 500 000 requests, with 1500 work units a request, where
///    the matrices below apply; elsewhere one pass): where the first 1024 packets' median
///    size is at least 3, the first pass then keeps only packets that reach that median (a
///    seed that misses waits) until few seeds reach it, and a second pass packs what is left:
///    large cliques are taken while they are plentiful, not spent on whatever a seed reaches.
///
/// With the same size and budget, where the first seed has at most 160 candidates with at most
/// 256 options each (sparse side information, as at n = 1000, alpha = 0.1), a packet is grown
/// on a matrix of the seed's candidates built for it (on builder threads when there are several
/// cores), otherwise on bitsets over the workers' request ranges; the plan and the work counted
/// are the same with or without the threads.
///
/// Up to 64 workers, and wherever the budget was so tight that the receiver sets examined
/// fewer than 8 workers a step for a packet past the first 1 % of their pass (n = 1000,
/// q = 1e6 at 10 s throughout; a squeeze of the first packets alone, whose work projected over
/// the whole pass overruns the budget until cheaper packets follow, does not count), it also
/// runs the request-by-request greedy of `src/packing.rs` (each candidate request fixed as it
/// joins, the packer `clique-cover` had before) with the same budget and seed, and keeps the
/// smaller plan, so it never sends more than that greedy. Where there is a second core the
/// greedy runs on it beside the receiver sets (from the start up to 64 workers, else from the
/// moment they first starve), so that the plan takes about as long as the longer of the two,
/// not their sum; the plan is the same either way.
///
/// Bitset indexing makes each step a few words per receiver range; the cost is polynomial in
/// every parameter. Work is counted in units ([`crate::WORK_PER_SECOND`] to a second of
/// `--time-budget`); the trials, then the workers examined per step, shrink when the budget is
/// tight, and an instance whose cheapest packing would not fit the budget is refused at once
/// with [`PlanError::OverBudget`]. Deterministic under the seed.
///
/// Reach: any number of workers (measured up to 1000) and any `q` that fits in memory:
/// the side information takes `n U / 4` bytes (225 MB at `n = 1000`, `q = 1e6`, `a = 0.1`).
/// Measured sizes and times: the `scale` experiment (`results/README.md`, `results/full/`).
#[derive(Clone, Copy, Debug)]
pub struct CliqueCoverPlanner {
    budget: u64,
}

impl CliqueCoverPlanner {
    /// The planner with a budget in work units.
    pub fn with_work_budget(budget: u64) -> Self {
        CliqueCoverPlanner { budget }
    }
}

impl BuiltinPlanner for CliqueCoverPlanner {
    const NAME: &'static str = "clique-cover";
    const DESCRIPTION: &'static str = "ours, for many workers: greedy clique cover of the requests (each packet serves distinct receivers caching each other's points), bitset-indexed, within --time-budget";

    fn build(options: &PlannerOptions) -> Self {
        CliqueCoverPlanner { budget: work_units(options.time_budget) }
    }
}

impl ShufflePlanner for CliqueCoverPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn fits(&self, inst: &ShuffleInstance) -> Result<(), PlanError> {
        let least = PackingParams::least_work(inst);
        if least > self.budget {
            return Err(PlanError::OverBudget {
                planner: Self::NAME.to_string(),
                reach: format!(
                    "even its cheapest packing of {} requests among {} workers takes about {least} work units",
                    inst.uncoded_transmissions(),
                    inst.workers()
                ),
                budget: self.budget,
                suggestion: "uncoded",
            });
        }
        Ok(())
    }

    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        self.fits(inst)?;
        let requests = Requests::of(inst);
        let within = PackingParams::within(self.budget, inst);
        let packers = Packers {
            requests: &requests,
            by_receivers: ReceiverPacking {
                evals_per_step: MAX_EVALS_PER_STEP,
                trials: MAX_TRIALS,
                budget: within.budget,
            },
            greedy: within,
            greedy_always: inst.workers() <= BOTH_UP_TO_WORKERS,
        };
        // The request-by-request greedy draws from a copy of the generator, so that it makes
        // the plan it made alone.
        let greedy_rng = rng.clone();
        let (by_receivers, greedy) = pack_both(&packers, rng, greedy_rng, second_core());
        Ok(match greedy {
            Some(greedy) if greedy.len() < by_receivers.len() => greedy,
            _ => by_receivers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::UberShufflePlanner;
    use crate::{GeneratorParams, seeded, verify};

    fn planner() -> CliqueCoverPlanner {
        CliqueCoverPlanner::build(&PlannerOptions::default())
    }

    #[test]
    fn paper_example_sends_three() {
        let inst = ShuffleInstance::paper_example();
        let plan = planner().plan(&inst, &mut seeded(0)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert_eq!(plan.len(), 3);
    }

    #[test]
    fn beats_the_tables_where_cachers_are_unique() {
        let inst =
            GeneratorParams { workers: 30, points: 6_000, alpha: 0.3, seed: 2 }.check().unwrap().generate();
        let plan = planner().plan(&inst, &mut seeded(1)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        let greedy = UberShufflePlanner::default().plan(&inst, &mut seeded(1)).unwrap();
        assert!(plan.len() < greedy.len(), "clique-cover {} vs ubershuffle {}", plan.len(), greedy.len());
        assert!(
            plan.len() * 3 < inst.uncoded_transmissions(),
            "{} of {}",
            plan.len(),
            inst.uncoded_transmissions()
        );
    }

    #[test]
    fn same_seed_same_plan_and_a_tiny_budget_is_refused_at_once() {
        let inst =
            GeneratorParams { workers: 150, points: 3000, alpha: 0.1, seed: 4 }.check().unwrap().generate();
        let a = planner().plan(&inst, &mut seeded(3)).unwrap();
        assert_eq!(a, planner().plan(&inst, &mut seeded(3)).unwrap());
        assert!(verify(&inst, &a).unwrap().is_valid());
        assert!(a.len() < inst.uncoded_transmissions());
        let err = CliqueCoverPlanner::with_work_budget(10).plan(&inst, &mut seeded(3)).unwrap_err();
        assert!(matches!(err, PlanError::OverBudget { .. }), "{err}");
        assert!(err.to_string().contains("try --scheme uncoded"), "{err}");
    }
}
