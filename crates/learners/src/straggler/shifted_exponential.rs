//! Shifted exponential compute times with a deadline (the standard model of coded computing:
//! a fixed minimum time plus an exponential tail).

use ubershuffle_core::rng::{SeededRng, uniform_unit};

use super::{IterationOutcome, StragglerModel, check_workers};
use crate::LearnerError;

/// A draw of `shift + Exp(rate)` (inverse-CDF on the project's uniform draws).
pub fn shifted_exponential(rng: &mut SeededRng, shift: f64, rate: f64) -> f64 {
    let u = 1.0 - uniform_unit(rng); // in (0, 1]
    shift - u.ln() / rate
}

/// Worker `w` computes for `shift[w] + Exp(rate[w])` each iteration, independently; it is late
/// when that exceeds the deadline, which happens with probability
/// `exp(-rate (deadline - shift))` (or 1 if the shift alone misses the deadline).
#[derive(Clone, Debug, PartialEq)]
pub struct ShiftedExponential {
    shifts: Vec<f64>,
    rates: Vec<f64>,
    deadline: f64,
}

impl ShiftedExponential {
    /// Every worker with the same `shift` and `rate`.
    pub fn new(workers: usize, shift: f64, rate: f64, deadline: f64) -> Result<Self, LearnerError> {
        let n = check_workers(workers)?;
        Self::per_worker(vec![shift; n], vec![rate; n], deadline)
    }

    /// Worker `w` with `shifts[w]` and `rates[w]` (heterogeneous hardware).
    pub fn per_worker(shifts: Vec<f64>, rates: Vec<f64>, deadline: f64) -> Result<Self, LearnerError> {
        check_workers(shifts.len())?;
        if shifts.len() != rates.len() {
            return Err(LearnerError::InvalidParameter(format!(
                "{} shifts but {} rates",
                shifts.len(),
                rates.len()
            )));
        }
        if shifts.iter().any(|s| !(*s >= 0.0 && s.is_finite()))
            || rates.iter().any(|r| !(*r > 0.0 && r.is_finite()))
        {
            return Err(LearnerError::InvalidParameter("shifts must be >= 0 and rates > 0".into()));
        }
        if !(deadline > 0.0 && deadline.is_finite()) {
            return Err(LearnerError::InvalidParameter(format!(
                "the deadline must be positive, got {deadline}"
            )));
        }
        Ok(ShiftedExponential { shifts, rates, deadline })
    }

    /// Worker `w`'s probability of missing the deadline.
    pub fn late_probability(&self, w: usize) -> f64 {
        let slack = self.deadline - self.shifts[w];
        if slack <= 0.0 { 1.0 } else { (-self.rates[w] * slack).exp() }
    }
}

impl StragglerModel for ShiftedExponential {
    fn name(&self) -> &'static str {
        "shifted-exponential"
    }

    fn workers(&self) -> usize {
        self.shifts.len()
    }

    fn next_iteration(&mut self, rng: &mut SeededRng) -> IterationOutcome {
        let compute_times =
            self.shifts.iter().zip(&self.rates).map(|(&s, &r)| shifted_exponential(rng, s, r)).collect();
        IterationOutcome { compute_times, deadline: self.deadline }
    }
}
