//! My scheme: every point a worker needs, in a packet of its own.

use ubershuffle_plugin_api::shuffle_core::{
    Part, Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner,
};

/// The scheme (what `uncoded` does, as a plugin).
pub struct MyScheme;

impl ShufflePlanner for MyScheme {
    fn name(&self) -> &str {
        "my-scheme"
    }

    fn description(&self) -> &str {
        "every needed point in a packet of its own"
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let mut plan = Plan::with_capacity(0, 0);
        for worker in 0..inst.workers() {
            for point in inst.needs(worker) {
                plan.push(&[Part::new(point, worker)]);
            }
        }
        Ok(plan)
    }
}

ubershuffle_plugin_api::export_planners!(MyScheme); // the one-line export; several: export_planners!(A, B)
