//! Each epoch's assignment and plan: a fixed-assignment planner plans the policy's assignment;
//! a pliable planner ([`ubershuffle_core::pliable`]) chooses the assignment within the run's
//! candidates (the policy's, fully random, assignment is every point's first candidate) and
//! plans that. Either way the master then sends every worker the batch that was chosen, and
//! the workers decode and check it as usual. Also the randomness statistics of every epoch.

use ubershuffle_core::pliable::{OwnerFrequencies, PliableRequest, RandomnessStats, verify_choice};
use ubershuffle_core::rng::SeededRng;
use ubershuffle_core::{Plan, ShuffleInstance, ShufflePlanner, verify};

use crate::{CheckedRunConfig, ConfigError, RuntimeError};

/// The most `q n` counts a run keeps for the chi-square over epochs (16 bits each: 128 MiB).
const MAX_FREQUENCY_CELLS: usize = 1 << 26;

/// One epoch's assignment and plan, and what checks them.
pub(crate) struct EpochPlan {
    /// The caches and the assignment the workers get.
    pub inst: ShuffleInstance,
    /// The transmissions.
    pub plan: Plan,
    /// For a pliable planner, the request it chose within.
    request: Option<PliableRequest>,
}

/// Refuses a configuration a pliable planner cannot run with, or candidates without one.
pub(crate) fn check_planner(
    config: &CheckedRunConfig,
    planner: &dyn ShufflePlanner,
) -> Result<(), ConfigError> {
    let scheme = planner.name().to_string();
    match (planner.as_pliable(), config.candidates) {
        (None, Some(_)) => Err(ConfigError::CandidatesNeedPliable { scheme }),
        (Some(_), _) if config.policy.name() != "global" => {
            Err(ConfigError::PliablePolicy { scheme, policy: config.policy.name().to_string() })
        }
        _ => Ok(()),
    }
}

/// Plans one epoch: `inst` holds the caches and the policy's assignment; `previous` the live
/// workers' batches before it. Candidates are drawn from `rng`, the plan from `planner_rng`.
pub(crate) fn plan_epoch(
    config: &CheckedRunConfig,
    planner: &dyn ShufflePlanner,
    inst: ShuffleInstance,
    previous: &[Vec<u32>],
    rng: &mut SeededRng,
    planner_rng: &mut SeededRng,
) -> Result<EpochPlan, RuntimeError> {
    match planner.as_pliable() {
        None => {
            let plan = planner.plan(&inst, planner_rng)?;
            Ok(EpochPlan { inst, plan, request: None })
        }
        Some(pliable) => {
            let request = PliableRequest::new(inst, config.candidates.unwrap_or_default(), rng)?
                .with_previous_batches(previous)?;
            let planned = pliable.plan_pliable(&request, planner_rng)?;
            Ok(EpochPlan { inst: planned.instance, plan: planned.plan, request: Some(request) })
        }
    }
}

impl EpochPlan {
    /// Verifies the plan by peeling at every worker, and for a pliable planner that the chosen
    /// assignment keeps the constraint with full batches.
    pub(crate) fn verify(&self) -> Result<(), RuntimeError> {
        match &self.request {
            None => verify(&self.inst, &self.plan)?.ensure_valid()?,
            Some(request) => verify_choice(request, &self.inst, &self.plan)?.ensure_valid()?,
        }
        Ok(())
    }

    /// The owner of every point (a live worker's index).
    pub(crate) fn owners(&self) -> Vec<u32> {
        (0..self.inst.points() as u32).map(|p| self.inst.owner(p) as u32).collect()
    }

    /// How random the assignment is, against the `previous` batches (live indices); `owners`
    /// is [`EpochPlan::owners`].
    pub(crate) fn randomness(&self, previous: &[Vec<u32>], owners: &[u32]) -> RandomnessStats {
        let mut before = vec![u32::MAX; self.inst.points()];
        for (k, batch) in previous.iter().enumerate() {
            for &p in batch {
                if let Some(slot) = before.get_mut(p as usize) {
                    *slot = k as u32;
                }
            }
        }
        let inst = &self.inst;
        RandomnessStats::measure(inst.workers(), owners, Some(&before), |p, w| inst.cache(w).contains(p))
    }
}

/// The point-to-worker counts of a run, when small enough to keep.
pub(crate) fn owner_frequencies(points: usize, workers: usize) -> Option<OwnerFrequencies> {
    (points.saturating_mul(workers) <= MAX_FREQUENCY_CELLS).then(|| OwnerFrequencies::new(points, workers))
}

/// Records an epoch's owners (live indices mapped to worker ids) and returns the chi-square
/// per degree of freedom so far.
pub(crate) fn record_owners(
    frequencies: &mut Option<OwnerFrequencies>,
    owners: &[u32],
    live: &[usize],
) -> Option<f64> {
    let f = frequencies.as_mut()?;
    let ids: Vec<u32> =
        owners.iter().map(|&k| live.get(k as usize).map_or(u32::MAX, |&w| w as u32)).collect();
    f.record(&ids);
    let chi = f.chi_square_per_df();
    chi.is_finite().then_some(chi)
}
