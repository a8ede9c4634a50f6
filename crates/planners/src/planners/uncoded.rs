//! The uncoded scheme: every needed point is sent once, on its own.

use super::BuiltinPlanner;
use crate::{Part, Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner};

/// Unicasts every point of `D_i \ C_i` to worker `i` (UberShuffle paper, Section 2.1); the
/// baseline every coded scheme is measured against. Costs `sum_i |D_i \ C_i|` transmissions.
#[derive(Clone, Copy, Debug, Default)]
pub struct UncodedPlanner;

impl BuiltinPlanner for UncodedPlanner {
    const NAME: &'static str = "uncoded";
    const DESCRIPTION: &'static str = "unicast every needed point once (the baseline)";

    fn build(_options: &PlannerOptions) -> Self {
        Self
    }
}

impl ShufflePlanner for UncodedPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let total = inst.uncoded_transmissions();
        let mut plan = Plan::with_capacity(total, total);
        for worker in 0..inst.workers() {
            for point in inst.needs(worker) {
                plan.push(&[Part::new(point, worker)]);
            }
        }
        Ok(plan)
    }
}
