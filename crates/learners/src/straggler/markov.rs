//! A two-state Markov straggler model (good and bad states, as in Yang, Pedarsani and
//! Avestimehr's timely coded computing): a straggler tends to stay one.

use ubershuffle_core::rng::{SeededRng, uniform_unit};

use super::{IterationOutcome, StragglerModel, check_probability, check_workers};
use crate::LearnerError;

/// Each worker is in a good (on time) or bad (late) state; from good it turns bad with
/// probability `p_fall`, from bad it recovers with probability `p_recover`, independently per
/// worker and iteration. The first iteration's states are drawn from the stationary
/// distribution (late with probability `p_fall / (p_fall + p_recover)`).
#[derive(Clone, Debug, PartialEq)]
pub struct TwoStateMarkov {
    p_fall: f64,
    p_recover: f64,
    workers: usize,
    late: Option<Vec<bool>>,
}

impl TwoStateMarkov {
    /// `workers` workers with the two transition probabilities (not both zero).
    pub fn new(workers: usize, p_fall: f64, p_recover: f64) -> Result<Self, LearnerError> {
        let p_fall = check_probability("p_fall", p_fall)?;
        let p_recover = check_probability("p_recover", p_recover)?;
        if p_fall + p_recover == 0.0 {
            return Err(LearnerError::InvalidParameter("p_fall and p_recover cannot both be 0".into()));
        }
        Ok(TwoStateMarkov { p_fall, p_recover, workers: check_workers(workers)?, late: None })
    }

    /// The long-run fraction of iterations a worker is late.
    pub fn stationary_late(&self) -> f64 {
        self.p_fall / (self.p_fall + self.p_recover)
    }
}

impl StragglerModel for TwoStateMarkov {
    fn name(&self) -> &'static str {
        "markov"
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn next_iteration(&mut self, rng: &mut SeededRng) -> IterationOutcome {
        let next: Vec<bool> = match &self.late {
            None => (0..self.workers).map(|_| uniform_unit(rng) < self.stationary_late()).collect(),
            Some(late) => {
                late.iter()
                    .map(|&l| {
                        if l { uniform_unit(rng) >= self.p_recover } else { uniform_unit(rng) < self.p_fall }
                    })
                    .collect()
            }
        };
        let outcome = IterationOutcome::from_late(&next);
        self.late = Some(next);
        outcome
    }
}
