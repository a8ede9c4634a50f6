//! Attia-Tandon's scheme for no excess storage: pairwise XORs, then leftover combining with an
//! ignored worker that decodes in two steps.

use super::{BuiltinPlanner, CliqueCoverPlanner};
use crate::no_excess::{MAX_MATRIX_WORKERS, ShuffleBlocks};
use crate::{Part, Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner};

/// The achievable scheme of Attia and Tandon's Theorem 1 (Section V), for instances whose
/// caches are exactly the previous batches; it sends eq. (43)'s count exactly.
///
/// - Phase 1 (eq. (26)): for every pair `i < j`, `min(S[i][j], S[j][i])` XORs of a point from
///   `i` to `j` with a point from `j` to `i`; each worker removes the one it cached.
/// - Phase 2 (leftover combining): the worker `k` with the most outgoing leftovers is ignored.
///   Every other worker `i` gets one XOR per incoming leftover: that point plus one of `i`'s
///   outgoing leftovers (equal in number, eq. (17)). Worker `k` then decodes in two or more
///   steps: its cached leftover `k -> j` opens `j`'s packet, which yields a leftover `j -> b`,
///   which opens `b`'s packet, and so on until a point for `k` comes out.
///
/// Choice where the paper is open: the paper pairs incoming and outgoing leftovers through
/// the partition `Ω[i][j] = sum_l Ω^(l)[i][j]` (eq. (31)) and the combining condition
/// (Definition 4). Any pairing works here: the pairings at the non-ignored workers chain every
/// outgoing leftover of `k` into a trail that cannot loop (each packet has one predecessor) and
/// so must end at a point for `k`, and there are as many trails as points `k` needs. The
/// planner pairs in increasing order of (sending worker, point id) and (receiving worker,
/// point id). Every part is tagged with the worker that needs the point (its owner).
///
/// Other instances get [`PlanError::Unsupported`]; more than
/// [`MAX_MATRIX_WORKERS`] workers, [`PlanError::TooManyWorkers`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WorstCasePlanner;

impl BuiltinPlanner for WorstCasePlanner {
    const NAME: &'static str = "worst-case";
    const DESCRIPTION: &'static str =
        "Attia-Tandon, no excess storage only: pairwise XORs, then leftover combining (eq. 43)";

    fn build(_options: &PlannerOptions) -> Self {
        Self
    }
}

impl ShufflePlanner for WorstCasePlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let mut blocks = no_excess_blocks(inst, Self::NAME, MAX_MATRIX_WORKERS)?;
        let s = blocks.matrix();
        let k = s.workers();
        let owner = |p: u32| inst.owner(p);
        let mut plan = Plan::with_capacity(s.achievable_transmissions(), 2 * s.achievable_transmissions());
        for i in 0..k {
            for j in i + 1..k {
                for _ in 0..s.get(i, j).min(s.get(j, i)) {
                    let (Some(a), Some(b)) = (blocks.take(i, j), blocks.take(j, i)) else {
                        return Err(failed("a block ran out in the pairwise phase"));
                    };
                    plan.push(&[Part::new(a, j), Part::new(b, i)]);
                }
            }
        }
        let ignored = s.ignored_worker();
        for i in (0..k).filter(|&i| i != ignored) {
            let incoming: Vec<u32> =
                (0..k).filter(|&a| a != i).flat_map(|a| blocks.remaining(a, i).iter().copied()).collect();
            let outgoing: Vec<u32> =
                (0..k).filter(|&b| b != i).flat_map(|b| blocks.remaining(i, b).iter().copied()).collect();
            if incoming.len() != outgoing.len() {
                return Err(failed("leftovers in and out of a worker differ, against eq. (17)"));
            }
            for (&p_in, &p_out) in incoming.iter().zip(&outgoing) {
                plan.push(&[Part::new(p_in, i), Part::new(p_out, owner(p_out))]);
            }
        }
        Ok(plan)
    }
}

/// The blocks of a no-excess instance with at most `max_workers` workers, or why not:
/// `TooManyWorkers`, or `Unsupported` naming what the instance lacks.
pub(crate) fn no_excess_blocks(
    inst: &ShuffleInstance,
    planner: &str,
    max_workers: usize,
) -> Result<ShuffleBlocks, PlanError> {
    let max = max_workers.min(MAX_MATRIX_WORKERS);
    if inst.workers() > max {
        return Err(PlanError::TooManyWorkers {
            planner: planner.to_string(),
            workers: inst.workers(),
            max,
            suggestion: CliqueCoverPlanner::NAME,
        });
    }
    ShuffleBlocks::of(inst)
        .map_err(|e| PlanError::Unsupported { planner: planner.to_string(), reason: e.to_string() })
}

fn failed(reason: &str) -> PlanError {
    PlanError::Failed { planner: WorstCasePlanner::NAME.to_string(), reason: reason.to_string() }
}
