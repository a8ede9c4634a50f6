//! Straggler models: which workers miss the master's deadline in an iteration, and their
//! compute times.
//!
//! Every model reports an [`IterationOutcome`]: a compute time per worker and the deadline;
//! a worker is late (a straggler) when its time exceeds the deadline. Models that only say
//! late or not (i.i.d., heterogeneous, Markov) use the deadline 1 with compute time
//! [`ON_TIME`] for on-time workers and [`LATE`] for late ones. All randomness comes from the
//! caller's seeded RNG, so a run reproduces.

mod heterogeneous;
mod iid;
mod markov;
mod shifted_exponential;

use ubershuffle_core::rng::SeededRng;

pub use heterogeneous::{HeterogeneousParams, HeterogeneousStragglers};
pub use iid::{IidStragglers, NoStragglers};
pub use markov::TwoStateMarkov;
pub use shifted_exponential::{ShiftedExponential, shifted_exponential};

use crate::LearnerError;

/// How long an emulated straggler holds its result back before sending it: twice the master's
/// deadline, so that it misses the deadline whatever the scheduling noise. The one rule for
/// every loop that plays a straggler model out (the epoch loop's workers, gradient coding's).
pub fn straggler_hold(deadline: std::time::Duration) -> std::time::Duration {
    deadline.saturating_mul(STRAGGLER_HOLD_FACTOR)
}

/// [`straggler_hold`]'s factor.
pub const STRAGGLER_HOLD_FACTOR: u32 = 2;

/// The compute time of an on-time worker in the late-or-not models (deadline 1).
pub const ON_TIME: f64 = 0.5;
/// The compute time of a late worker in the late-or-not models (deadline 1).
pub const LATE: f64 = 2.0;

/// One iteration of a straggler model.
#[derive(Clone, Debug, PartialEq)]
pub struct IterationOutcome {
    /// Each worker's compute time in this iteration.
    pub compute_times: Vec<f64>,
    /// The master's deadline: later results are dropped.
    pub deadline: f64,
}

impl IterationOutcome {
    /// The late-or-not outcome for `late[w]`.
    pub fn from_late(late: &[bool]) -> Self {
        IterationOutcome {
            compute_times: late.iter().map(|&l| if l { LATE } else { ON_TIME }).collect(),
            deadline: 1.0,
        }
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.compute_times.len()
    }

    /// Whether worker `w` misses the deadline.
    pub fn is_late(&self, w: usize) -> bool {
        self.compute_times.get(w).is_some_and(|&t| t > self.deadline)
    }

    /// The late workers as a bit mask, for at most 64 workers (`None` above).
    pub fn late_mask(&self) -> Option<u64> {
        (self.workers() <= 64)
            .then(|| (0..self.workers()).filter(|&w| self.is_late(w)).fold(0, |m, w| m | 1 << w))
    }

    /// How many workers are late.
    pub fn late_count(&self) -> usize {
        (0..self.workers()).filter(|&w| self.is_late(w)).count()
    }
}

/// A model of which workers straggle, iteration by iteration.
pub trait StragglerModel: Send {
    /// A short name for tables.
    fn name(&self) -> &'static str;

    /// Number of workers.
    fn workers(&self) -> usize;

    /// The next iteration's compute times (advancing any state the model keeps).
    fn next_iteration(&mut self, rng: &mut SeededRng) -> IterationOutcome;
}

/// Checks that `p` is a probability.
pub(crate) fn check_probability(name: &str, p: f64) -> Result<f64, LearnerError> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(LearnerError::InvalidParameter(format!("{name} must be a probability in [0, 1], got {p}")))
    }
}

/// Checks a worker count: at least one (the models keep one state per worker, with no limit).
pub(crate) fn check_workers(workers: usize) -> Result<usize, LearnerError> {
    if workers >= 1 {
        Ok(workers)
    } else {
        Err(LearnerError::InvalidParameter("the number of workers must be at least 1, got 0".to_string()))
    }
}
