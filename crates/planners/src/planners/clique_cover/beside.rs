//! Running `clique-cover`'s two packers: the receiver sets always, and the request-by-request
//! greedy where it may win (few workers, or a budget that starves the receiver sets), on a
//! second core beside the receiver sets when there is one, else after them. The plans do not
//! depend on which: each packer counts its own work and draws from its own generator.

use std::sync::{Condvar, Mutex, PoisonError};

use crate::packing::{PackingParams, pack_requests};
use crate::receiver_packing::{ReceiverPacking, pack_by_receivers};
use crate::requests::Requests;
use crate::{Plan, SeededRng};

/// What the two packers are given.
pub(super) struct Packers<'a> {
    /// The requests to pack.
    pub requests: &'a Requests,
    /// The receiver sets' effort and budget.
    pub by_receivers: ReceiverPacking,
    /// The request-by-request greedy's effort and budget.
    pub greedy: PackingParams,
    /// Whether the greedy runs whether or not the receiver sets starve.
    pub greedy_always: bool,
}

/// The receiver sets' plan, and the greedy's where it ran. The receiver sets draw from `rng`,
/// the greedy from `greedy_rng`. With `beside`, the greedy runs on a thread of its own from the
/// moment it is known to be needed (at once where `greedy_always`, else when the receiver sets
/// first starve); otherwise after the receiver sets.
pub(super) fn pack_both(
    packers: &Packers<'_>,
    rng: &mut SeededRng,
    mut greedy_rng: SeededRng,
    beside: bool,
) -> (Plan, Option<Plan>) {
    // One copy of the cachers for both: a row of ceil(n / 64) words per request.
    let rows = packers.requests.cacher_rows();
    let greedy =
        |greedy_rng: &mut SeededRng| pack_requests(packers.requests, &rows, &packers.greedy, greedy_rng);
    if !beside {
        let (by_receivers, starved) =
            pack_by_receivers(packers.requests, &rows, &packers.by_receivers, rng, &|| {});
        let greedy = (packers.greedy_always || starved).then(|| greedy(&mut greedy_rng));
        return (by_receivers, greedy);
    }
    let decision = Decision::default();
    if packers.greedy_always {
        decision.decide(true);
    }
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| decision.wait().then(|| greedy(&mut greedy_rng)));
        let by_receivers = {
            // However the receiver sets end, the helper learns whether to run.
            let undecided = DecideOnDrop(&decision);
            let (plan, starved) =
                pack_by_receivers(packers.requests, &rows, &packers.by_receivers, rng, &|| {
                    decision.decide(true)
                });
            decision.decide(starved);
            drop(undecided);
            plan
        };
        let greedy = helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (by_receivers, greedy)
    })
}

/// Whether there is a second core for the greedy.
pub(super) fn second_core() -> bool {
    std::thread::available_parallelism().is_ok_and(|cores| cores.get() >= 2)
}

/// A yes or no decided once (later decisions are ignored), and awaited by another thread.
#[derive(Default)]
struct Decision {
    value: Mutex<Option<bool>>,
    decided: Condvar,
}

impl Decision {
    fn decide(&self, yes: bool) {
        let mut value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        if value.is_none() {
            *value = Some(yes);
            self.decided.notify_all();
        }
    }

    fn wait(&self) -> bool {
        let mut value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(yes) = *value {
                return yes;
            }
            value = self.decided.wait(value).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Decides no when dropped undecided (the receiver sets panicked), so that the helper ends.
struct DecideOnDrop<'a>(&'a Decision);

impl Drop for DecideOnDrop<'_> {
    fn drop(&mut self) {
        self.0.decide(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packing::MAX_EVALS_PER_STEP;
    use crate::{GeneratorParams, seeded, verify};

    fn both(workers: usize, budget: u64, beside: bool) -> (Plan, Option<Plan>) {
        let inst = GeneratorParams { workers, points: 2000, alpha: 0.3, seed: 2 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let packers = Packers {
            requests: &requests,
            by_receivers: ReceiverPacking { evals_per_step: MAX_EVALS_PER_STEP, trials: 4, budget },
            greedy: PackingParams { evals_per_step: MAX_EVALS_PER_STEP, budget },
            greedy_always: workers <= 64,
        };
        let mut rng = seeded(3);
        let greedy_rng = rng.clone();
        let plans = pack_both(&packers, &mut rng, greedy_rng, beside);
        for plan in std::iter::once(&plans.0).chain(&plans.1) {
            assert!(verify(&inst, plan).unwrap().is_valid());
        }
        plans
    }

    #[test]
    fn the_greedy_runs_where_it_may_win_and_its_plan_does_not_depend_on_the_thread() {
        // Few workers: always; many: only when a budget of nothing starves the receiver sets.
        for (workers, budget, runs) in [(30, u64::MAX, true), (80, 0, true), (80, u64::MAX, false)] {
            let after = both(workers, budget, false);
            assert_eq!(after.1.is_some(), runs, "{workers} workers, budget {budget}");
            assert_eq!(both(workers, budget, true), after, "{workers} workers, budget {budget}");
        }
    }
}
