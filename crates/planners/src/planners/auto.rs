//! `auto`: a portfolio that runs the schemes that fit an instance and keeps the best plan.

use super::{
    BuiltinPlanner, CliqueCoverPlanner, CodedPlanner, CyclePackingPlanner, UberShuffleOptPlanner,
    UberShufflePlanner, UncodedPlanner, WorstCasePlanner,
};
use crate::{Plan, PlanError, Planned, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner, Tried};

/// The portfolio: runs each member on the instance (one that does not fit refuses at once, as
/// [`ShufflePlanner::fits`] says) and keeps
/// the plan with the fewest transmissions (ties to the member listed first), naming the winner
/// ([`ShufflePlanner::plan_explained`]).
///
/// Members, in order: `clique-cover`, `ubershuffle-opt`, `cycle-packing` (no excess storage
/// only), then as fallbacks the schemes they dominate when those did not plan: `ubershuffle`
/// and `coded` (`ubershuffle-opt` never sends more than either), `worst-case` (`cycle-packing`
/// never sends more) and `uncoded`, which always fits. So `auto` never sends more than any
/// member that fits, and above 128 workers it is `clique-cover` (or `coded`, should that ever
/// send less).
///
/// Then two local searches polish the best plan, each on a fifth of the budget, and keep a
/// plan only if it sends fewer packets (the winner is then named `<member> + local search`):
/// iterated greedy repacking of its packets (`carpool::repack`) and lowering of its carpool
/// tables by augmenting paths, with one row raised where that frees two, and a bounded number
/// of sideways moves (`carpool::lower_tables`, up to 128 workers; raising up to 14). They
/// take turns, each starting from what the other left, for as long as a round saves a packet
/// and their shares last; where both are stuck, a tabu search for one packet fewer
/// (`carpool::tabu_repack`, plans of up to 4096 parts, a fifth of the budget too) walks out of
/// their local optimum.
///
/// Each member gets the whole `--time-budget` (so `auto` sends no more than `ubershuffle-opt`
/// run alone), and `auto`'s time is the sum of its members' and the polish. Each member draws from a copy of
/// `auto`'s generator, so it plans exactly as it would alone with the same seed, and the plan
/// is deterministic under the seed.
pub struct AutoPlanner {
    members: Vec<Member>,
    budget: u64,
}

/// The share of the budget (one part in this many) each local search gets.
const POLISH_SHARE: u64 = 5;

/// Appended to the winner's name when a local search improved its plan.
const POLISHED: &str = " + local search";

/// A member of the portfolio.
struct Member {
    planner: Box<dyn ShufflePlanner>,
    /// Members whose plan makes this one redundant.
    dominated_by: &'static [&'static str],
}

impl BuiltinPlanner for AutoPlanner {
    const NAME: &'static str = "auto";
    const DESCRIPTION: &'static str = "ours: runs every scheme that fits the instance within --time-budget and keeps the fewest transmissions";

    fn build(options: &PlannerOptions) -> Self {
        fn member<P: BuiltinPlanner>(
            options: &PlannerOptions,
            dominated_by: &'static [&'static str],
        ) -> Member {
            Member { planner: Box::new(P::build(options)), dominated_by }
        }
        AutoPlanner {
            budget: crate::work_units(options.time_budget),
            members: vec![
                member::<CliqueCoverPlanner>(options, &[]),
                member::<UberShuffleOptPlanner>(options, &[]),
                member::<CyclePackingPlanner>(options, &[]),
                member::<UberShufflePlanner>(options, &[UberShuffleOptPlanner::NAME]),
                member::<CodedPlanner>(options, &[UberShuffleOptPlanner::NAME, UberShufflePlanner::NAME]),
                member::<WorstCasePlanner>(options, &[CyclePackingPlanner::NAME]),
                member::<UncodedPlanner>(options, &[]),
            ],
        }
    }
}

impl ShufflePlanner for AutoPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        Ok(self.plan_explained(inst, rng)?.plan)
    }

    fn plan_explained(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Planned, PlanError> {
        let mut best: Option<(Plan, &str)> = None;
        let mut tried: Vec<Tried> = Vec::new();
        let mut planned: Vec<&str> = Vec::new();
        for member in &self.members {
            // A copy of the caller's generator: each member makes the plan it would make alone
            // with the same seed, so `auto` never sends more than any of them.
            let mut member_rng = rng.clone();
            let name = member.planner.name();
            if member.dominated_by.iter().any(|d| planned.contains(d)) {
                continue;
            }
            // A member refuses at once what it cannot plan within its limits (`plan` checks
            // what `fits` checks).
            let result = member.planner.plan(inst, &mut member_rng);
            match result {
                Ok(plan) => {
                    tried.push(Tried::sent(name, plan.len()));
                    planned.push(name);
                    if best.as_ref().is_none_or(|(b, _)| plan.len() < b.len()) {
                        best = Some((plan, name));
                    }
                }
                Err(e) => tried.push(Tried::skipped(name, &e)),
            }
        }
        let Some((mut plan, member)) = best else {
            return Err(PlanError::Failed {
                planner: Self::NAME.to_string(),
                reason: "no member of the portfolio planned the instance".to_string(),
            });
        };
        let mut made_by = member.to_string();
        // The local searches, each on a share of the budget; each keeps a plan only if smaller.
        // The local searches, each on a share of the budget over all rounds; a round repacks
        // and then lowers, and the next round starts from what it left, while rounds improve.
        let share = self.budget / POLISH_SHARE;
        let mut polish_rng = rng.clone();
        let (mut repack_work, mut lower_work, mut tabu_work) = (0, 0, 0);
        let mut polished = false;
        loop {
            let repacked = crate::carpool::repack(inst, &plan, &mut polish_rng, &mut repack_work, share);
            let lowered = crate::carpool::lower_tables(
                inst,
                repacked.as_ref().unwrap_or(&plan),
                &mut lower_work,
                share,
            );
            // Both stuck: the tabu search walks out of their local optimum (small plans only).
            let improved = lowered
                .or(repacked)
                .or_else(|| crate::carpool::tabu_repack(inst, &plan, &mut polish_rng, &mut tabu_work, share));
            match improved {
                Some(better) => {
                    plan = better;
                    polished = true;
                }
                None => break,
            }
        }
        if polished {
            made_by = format!("{member}{POLISHED}");
            tried.push(Tried::sent(&made_by, plan.len()));
        }
        Ok(Planned::new(plan, made_by, tried))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, seeded, verify};

    #[test]
    fn keeps_the_best_member_and_names_it() {
        let inst =
            GeneratorParams { workers: 6, points: 600, alpha: 0.5, seed: 3 }.check().unwrap().generate();
        let auto = AutoPlanner::build(&PlannerOptions::default());
        let planned = auto.plan_explained(&inst, &mut seeded(1)).unwrap();
        assert!(verify(&inst, &planned.plan).unwrap().is_valid());
        let counts: Vec<usize> = planned.tried.iter().filter_map(|t| t.outcome.clone().ok()).collect();
        assert_eq!(planned.plan.len(), *counts.iter().min().unwrap());
        let winner = planned.tried.iter().find(|t| t.scheme == planned.made_by).unwrap();
        assert_eq!(winner.outcome, Ok(planned.plan.len()));
        // cycle-packing does not apply (excess storage): it is listed with its reason.
        let cycles = planned.tried.iter().find(|t| t.scheme == CyclePackingPlanner::NAME).unwrap();
        assert!(cycles.outcome.as_ref().unwrap_err().contains("does not apply"));
        assert_eq!(auto.plan(&inst, &mut seeded(1)).unwrap(), planned.plan);
    }

    #[test]
    fn beyond_128_workers_the_table_schemes_say_why() {
        let inst =
            GeneratorParams { workers: 200, points: 4000, alpha: 0.05, seed: 1 }.check().unwrap().generate();
        let planned =
            AutoPlanner::build(&PlannerOptions::default()).plan_explained(&inst, &mut seeded(1)).unwrap();
        assert!(verify(&inst, &planned.plan).unwrap().is_valid());
        assert_eq!(planned.made_by, CliqueCoverPlanner::NAME);
        let opt = planned.tried.iter().find(|t| t.scheme == UberShuffleOptPlanner::NAME).unwrap();
        assert!(opt.outcome.as_ref().unwrap_err().contains("at most 128 workers"));
    }
}
