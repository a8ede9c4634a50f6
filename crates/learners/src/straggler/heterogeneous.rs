//! The heterogeneous slow/active straggler model of Johri, Yardi and Bodas (Section II).

use ubershuffle_core::rng::{SeededRng, uniform_unit};

use super::{IterationOutcome, StragglerModel, check_probability, check_workers};
use crate::LearnerError;

/// The three probabilities of the heterogeneous model.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct HeterogeneousParams {
    /// `p_hat`: a worker is slow with this probability, independently, for the whole run.
    pub p_slow: f64,
    /// `p_ss`: a slow worker straggles in an iteration with this probability.
    pub p_slow_straggle: f64,
    /// `p_as`: an active worker straggles in an iteration with this probability.
    pub p_active_straggle: f64,
}

impl HeterogeneousParams {
    /// `p_hat` (slow), `p_ss` (a slow worker straggles), `p_as` (an active one straggles);
    /// [`HeterogeneousParams::check`] validates them.
    pub const fn new(p_slow: f64, p_slow_straggle: f64, p_active_straggle: f64) -> Self {
        HeterogeneousParams { p_slow, p_slow_straggle, p_active_straggle }
    }

    /// Checks that all three are probabilities.
    pub fn check(self) -> Result<Self, LearnerError> {
        check_probability("p_slow", self.p_slow)?;
        check_probability("p_slow_straggle", self.p_slow_straggle)?;
        check_probability("p_active_straggle", self.p_active_straggle)?;
        Ok(self)
    }

    /// A worker's straggle probability in one iteration averaged over its class:
    /// `p_hat p_ss + (1 - p_hat) p_as`.
    pub fn marginal_straggle(self) -> f64 {
        self.p_slow * self.p_slow_straggle + (1.0 - self.p_slow) * self.p_active_straggle
    }
}

/// Workers are slow or active for the whole run; each iteration a slow worker straggles with
/// probability `p_ss` and an active one with `p_as`, independently of everything else.
#[derive(Clone, Debug, PartialEq)]
pub struct HeterogeneousStragglers {
    params: HeterogeneousParams,
    slow: Vec<bool>,
}

impl HeterogeneousStragglers {
    /// Draws each of `workers` workers' class (slow with probability `p_slow`) from `rng`.
    pub fn draw(
        workers: usize,
        params: HeterogeneousParams,
        rng: &mut SeededRng,
    ) -> Result<Self, LearnerError> {
        let params = params.check()?;
        let slow = (0..check_workers(workers)?).map(|_| uniform_unit(rng) < params.p_slow).collect();
        Ok(HeterogeneousStragglers { params, slow })
    }

    /// The `(n, m)`-heterogeneous model: exactly the workers in `slow_workers` are slow
    /// (`p_slow` is then unused).
    pub fn with_slow_workers(
        workers: usize,
        slow_workers: &[usize],
        params: HeterogeneousParams,
    ) -> Result<Self, LearnerError> {
        let params = params.check()?;
        let mut slow = vec![false; check_workers(workers)?];
        for &w in slow_workers {
            *slow.get_mut(w).ok_or_else(|| {
                LearnerError::InvalidParameter(format!(
                    "slow worker {w} is out of range for {workers} workers"
                ))
            })? = true;
        }
        Ok(HeterogeneousStragglers { params, slow })
    }

    /// Which workers are slow.
    pub fn slow(&self) -> &[bool] {
        &self.slow
    }

    /// Worker `w`'s probability of straggling in an iteration.
    pub fn straggle_probability(&self, w: usize) -> f64 {
        if self.slow[w] { self.params.p_slow_straggle } else { self.params.p_active_straggle }
    }
}

impl StragglerModel for HeterogeneousStragglers {
    fn name(&self) -> &'static str {
        "heterogeneous"
    }

    fn workers(&self) -> usize {
        self.slow.len()
    }

    fn next_iteration(&mut self, rng: &mut SeededRng) -> IterationOutcome {
        let late: Vec<bool> =
            (0..self.slow.len()).map(|w| uniform_unit(rng) < self.straggle_probability(w)).collect();
        IterationOutcome::from_late(&late)
    }
}
