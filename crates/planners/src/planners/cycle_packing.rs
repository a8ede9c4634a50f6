//! Our cycle-packing scheme for no excess storage: split the shuffle into directed cycles
//! among workers and send each cycle of length `L` as `L - 1` chained XORs.

use super::BuiltinPlanner;
use crate::no_excess::pack_cycles;
use crate::planners::worst_case::no_excess_blocks;
use crate::{Part, Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner};

/// Splits what must move into as many directed cycles among workers as
/// [`crate::no_excess::pack_cycles`] finds (exact search up to 10 workers, greedy shortest
/// cycles beyond), then sends every copy of a cycle `v_0 -> v_1 -> ... -> v_{L-1} -> v_0`,
/// with `e_t` a point `v_t` caches and `v_{t+1}` needs, as the `L - 1` XORs
/// `e_0 + e_1, e_1 + e_2, ..., e_{L-2} + e_{L-1}`. Worker `v_{t+1}` removes its cached `e_{t+1}`
/// from `e_t + e_{t+1}`; worker `v_0` walks the chain from its cached `e_0` to `e_{L-1}`.
///
/// It sends `sum_{i != j} S[i][j]` minus the number of cycles, never more than Attia-Tandon's
/// eq. (43) (whose two phases are one particular split) and never less than Theorem 2's bound.
/// It is strictly better when the shuffle holds more disjoint cycles than one worker's
/// leftovers, e.g. two disjoint 3-cycles among 6 workers: 4 transmissions against 5.
/// Parts are tagged with the worker that needs the point. Other instances get
/// [`PlanError::Unsupported`]; more than 128 workers (where the greedy's
/// breadth-first searches over `K^2` edges grow slow), [`PlanError::TooManyWorkers`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CyclePackingPlanner;

/// The most workers cycle packing takes.
pub const MAX_WORKERS: usize = 128;

impl BuiltinPlanner for CyclePackingPlanner {
    const NAME: &'static str = "cycle-packing";
    const DESCRIPTION: &'static str =
        "ours, no excess storage only: most directed cycles of the shuffle, L-1 XORs per cycle of L";

    fn build(_options: &PlannerOptions) -> Self {
        Self
    }
}

impl ShufflePlanner for CyclePackingPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let mut blocks = no_excess_blocks(inst, Self::NAME, MAX_WORKERS)?;
        let packing = pack_cycles(&blocks.matrix());
        let mut plan = Plan::with_capacity(packing.transmissions(), 2 * packing.transmissions());
        let mut points = Vec::new();
        for cycle in &packing.cycles {
            let len = cycle.workers.len();
            for _ in 0..cycle.copies {
                points.clear();
                for t in 0..len {
                    let (from, to) = (cycle.workers[t], cycle.workers[(t + 1) % len]);
                    let Some(p) = blocks.take(from, to) else {
                        return Err(PlanError::Failed {
                            planner: Self::NAME.to_string(),
                            reason: format!("the packing uses more points from {from} to {to} than exist"),
                        });
                    };
                    points.push(Part::new(p, to));
                }
                for pair in points.windows(2) {
                    plan.push(pair);
                }
            }
        }
        Ok(plan)
    }
}
