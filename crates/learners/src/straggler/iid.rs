//! No stragglers, and i.i.d. stragglers.

use ubershuffle_core::rng::{SeededRng, uniform_unit};

use super::{IterationOutcome, StragglerModel, check_probability, check_workers};
use crate::LearnerError;

/// Every worker is always on time.
#[derive(Clone, Debug, PartialEq)]
pub struct NoStragglers {
    workers: usize,
}

impl NoStragglers {
    /// `workers` workers, never late.
    pub fn new(workers: usize) -> Result<Self, LearnerError> {
        Ok(NoStragglers { workers: check_workers(workers)? })
    }
}

impl StragglerModel for NoStragglers {
    fn name(&self) -> &'static str {
        "none"
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn next_iteration(&mut self, _rng: &mut SeededRng) -> IterationOutcome {
        IterationOutcome::from_late(&vec![false; self.workers])
    }
}

/// Each worker is late with probability `p`, independently across workers and iterations
/// (the usual assumption of the gradient-coding literature).
#[derive(Clone, Debug, PartialEq)]
pub struct IidStragglers {
    workers: usize,
    p: f64,
}

impl IidStragglers {
    /// `workers` workers, each late with probability `p`.
    pub fn new(workers: usize, p: f64) -> Result<Self, LearnerError> {
        Ok(IidStragglers {
            workers: check_workers(workers)?,
            p: check_probability("the straggle probability", p)?,
        })
    }
}

impl StragglerModel for IidStragglers {
    fn name(&self) -> &'static str {
        "iid"
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn next_iteration(&mut self, rng: &mut SeededRng) -> IterationOutcome {
        let late: Vec<bool> = (0..self.workers).map(|_| uniform_unit(rng) < self.p).collect();
        IterationOutcome::from_late(&late)
    }
}
