//! Local, partial-local and global exchange of partitioned data, after Nguyen et al., "Why
//! globally re-shuffle? Revisiting data shuffling in large scale deep learning".
//!
//! The data set is partitioned among the workers; before each epoch every worker gives up a
//! fraction `Q` of its points to a common exchange and gets as many back. `Q = 0` is local
//! shuffling (each worker keeps its partition and only reorders it, which changes nothing
//! here), `Q = 1` is a global reshuffle. An epoch under a policy is an ordinary
//! [`ShuffleInstance`] (caches = the current batches, plus any excess storage; assignment = the
//! exchanged batches), so any [`crate::ShufflePlanner`] can plan it: the exchange itself can be
//! coded.

use crate::generator::cache_around;
use crate::rng::{SeededRng, partial_shuffle, seeded, shuffle};
use crate::{GeneratorError, GeneratorParams, ShuffleInstance, balanced_assignment};

/// Why a policy is not valid.
#[derive(Debug, thiserror::Error, PartialEq, Clone)]
#[non_exhaustive]
pub enum PolicyError {
    /// The name is not a policy.
    #[error("unknown policy \"{0}\": the policies are local, partial-local and global")]
    Unknown(String),
    /// partial-local was given without a fraction.
    #[error("partial-local needs the fraction Q of each worker's points to exchange, in [0, 1]")]
    MissingFraction,
    /// A fraction was given to local or global.
    #[error("{policy} exchanges a fixed fraction ({fixed}); a fraction applies only to partial-local")]
    UnexpectedFraction {
        /// The policy.
        policy: &'static str,
        /// Its own fraction.
        fixed: f64,
    },
    /// The fraction is not in `[0, 1]`.
    #[error("the fraction Q must lie in [0, 1], got {0}")]
    FractionOutOfRange(f64),
}

/// How much of the partitioned data moves between workers before each epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ExchangePolicy {
    /// No exchange: every worker keeps its partition (`Q = 0`).
    Local,
    /// Every worker exchanges the fraction `Q` of its points (`0 <= Q <= 1`).
    PartialLocal {
        /// The fraction `Q`.
        fraction: f64,
    },
    /// Every point is exchanged: a uniformly random reshuffle (`Q = 1`).
    Global,
}

impl ExchangePolicy {
    /// The policy called `name` (`local`, `partial-local`, `global`); `fraction` is required
    /// by partial-local and refused by the others.
    pub fn new(name: &str, fraction: Option<f64>) -> Result<Self, PolicyError> {
        let policy = match name {
            "local" => ExchangePolicy::Local,
            "global" => ExchangePolicy::Global,
            "partial-local" => {
                let fraction = fraction.ok_or(PolicyError::MissingFraction)?;
                if !(0.0..=1.0).contains(&fraction) {
                    return Err(PolicyError::FractionOutOfRange(fraction));
                }
                return Ok(ExchangePolicy::PartialLocal { fraction });
            }
            other => return Err(PolicyError::Unknown(other.to_string())),
        };
        match fraction {
            Some(_) => {
                Err(PolicyError::UnexpectedFraction { policy: policy.name(), fixed: policy.fraction() })
            }
            None => Ok(policy),
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            ExchangePolicy::Local => "local",
            ExchangePolicy::PartialLocal { .. } => "partial-local",
            ExchangePolicy::Global => "global",
        }
    }

    /// The fraction `Q` of each worker's points it exchanges.
    pub fn fraction(&self) -> f64 {
        match *self {
            ExchangePolicy::Local => 0.0,
            ExchangePolicy::PartialLocal { fraction } => fraction,
            ExchangePolicy::Global => 1.0,
        }
    }

    /// The next batches. Worker `i` puts `round(Q |B_i|)` of its points, drawn uniformly, into
    /// a common pool; the pool is shuffled uniformly and dealt back so that every worker gets
    /// as many as it gave (batch sizes never change). A point may come back to the worker that
    /// gave it, so with `Q = 1` the result is a uniformly random assignment with the same batch
    /// sizes, i.e. a global reshuffle. Batches come back sorted.
    pub fn exchange(&self, batches: &[Vec<u32>], rng: &mut SeededRng) -> Vec<Vec<u32>> {
        let q = self.fraction();
        let mut kept = Vec::with_capacity(batches.len());
        let mut pool = Vec::new();
        let mut gave = Vec::with_capacity(batches.len());
        for batch in batches {
            let count = ((q * batch.len() as f64).round() as usize).min(batch.len());
            let mut order = batch.clone();
            partial_shuffle(rng, &mut order, count);
            pool.extend_from_slice(&order[..count]);
            kept.push(order[count..].to_vec());
            gave.push(count);
        }
        shuffle(rng, &mut pool);
        let mut rest = pool.as_slice();
        for (batch, count) in kept.iter_mut().zip(gave) {
            let (received, tail) = rest.split_at(count);
            rest = tail;
            batch.extend_from_slice(received);
            batch.sort_unstable();
        }
        kept
    }
}

/// One epoch under a policy: the instance to plan and how much moved.
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangeEpoch {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Caches: the current batches (plus the excess storage drawn as in the generator's model);
    /// assignment: the batches after the exchange.
    pub instance: ShuffleInstance,
    /// Points put into the exchange (some come back to the worker that gave them).
    pub points_exchanged: usize,
    /// Points whose worker changed.
    pub points_moved: usize,
}

/// Epochs of partitioned training under a policy, from one seeded stream.
///
/// ```
/// use ubershuffle_core::exchange_policy::{ExchangePolicy, ExchangeRun};
/// let policy = ExchangePolicy::new("partial-local", Some(0.3))?;
/// let mut run = ExchangeRun::new(policy, 4, 400, None, 7)?;
/// let epoch = run.next_epoch();
/// assert_eq!(epoch.points_exchanged, 120);
/// assert!(epoch.points_moved <= 120);
/// assert_eq!(epoch.instance.uncoded_transmissions(), epoch.points_moved); // no excess storage
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ExchangeRun {
    policy: ExchangePolicy,
    points: usize,
    cache_size: Option<usize>,
    batches: Vec<Vec<u32>>,
    rng: SeededRng,
    epoch: usize,
}

impl ExchangeRun {
    /// Starts from a uniformly random balanced partition drawn from `seed`. With `alpha`,
    /// every epoch's caches hold `floor(alpha q)` points: the current batch plus points drawn
    /// uniformly from the rest (the generator's model); without it there is no excess storage.
    pub fn new(
        policy: ExchangePolicy,
        workers: usize,
        points: usize,
        alpha: Option<f64>,
        seed: u64,
    ) -> Result<Self, GeneratorError> {
        let cache_size = match alpha {
            Some(alpha) => Some(GeneratorParams { workers, points, alpha, seed }.check()?.cache_size()),
            None => {
                // The generator's checks of workers and points (alpha = 1 always fits).
                GeneratorParams { workers, points, alpha: 1.0, seed }.check()?;
                None
            }
        };
        let mut rng = seeded(seed);
        let batches = balanced_assignment(&mut rng, workers, points);
        Ok(ExchangeRun { policy, points, cache_size, batches, rng, epoch: 0 })
    }

    /// The policy.
    pub fn policy(&self) -> ExchangePolicy {
        self.policy
    }

    /// The batches the workers hold now.
    pub fn batches(&self) -> &[Vec<u32>] {
        &self.batches
    }

    /// Draws the next epoch's caches and exchange, and moves on to it.
    pub fn next_epoch(&mut self) -> ExchangeEpoch {
        let caches: Vec<Vec<u32>> = match self.cache_size {
            Some(size) => {
                self.batches.iter().map(|b| cache_around(&mut self.rng, b, self.points, size)).collect()
            }
            None => self.batches.clone(),
        };
        let next = self.policy.exchange(&self.batches, &mut self.rng);
        let fraction = self.policy.fraction();
        let points_exchanged =
            self.batches.iter().map(|b| ((fraction * b.len() as f64).round() as usize).min(b.len())).sum();
        let points_moved = self
            .batches
            .iter()
            .zip(&next)
            .map(|(old, new)| crate::instance::sorted_difference(new, old).len())
            .sum();
        let instance = ShuffleInstance::new(self.batches.len(), self.points, caches, next.clone())
            .unwrap_or_else(|e| unreachable!("an exchange keeps a valid partition: {e}"));
        self.batches = next;
        self.epoch += 1;
        ExchangeEpoch { epoch: self.epoch, instance, points_exchanged, points_moved }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, fraction: Option<f64>, alpha: Option<f64>) -> ExchangeRun {
        ExchangeRun::new(ExchangePolicy::new(name, fraction).unwrap(), 5, 500, alpha, 3).unwrap()
    }

    #[test]
    fn local_moves_nothing_and_global_moves_about_one_minus_one_over_n() {
        let mut local = run("local", None, None);
        let e = local.next_epoch();
        assert_eq!((e.points_exchanged, e.points_moved, e.instance.uncoded_transmissions()), (0, 0, 0));
        let mut global = run("global", None, None);
        let moved: usize = (0..20).map(|_| global.next_epoch().points_moved).sum();
        let mean = moved as f64 / 20.0;
        assert!((mean - 400.0).abs() < 20.0, "{mean}");
    }

    #[test]
    fn partial_local_exchanges_the_fraction_and_keeps_batch_sizes() {
        let mut r = run("partial-local", Some(0.3), None);
        let sizes: Vec<usize> = r.batches().iter().map(Vec::len).collect();
        let mut moved = 0;
        for epoch in 1..=20 {
            let e = r.next_epoch();
            assert_eq!(e.epoch, epoch);
            assert_eq!(e.points_exchanged, 150);
            assert!(e.points_moved <= 150);
            moved += e.points_moved;
            assert_eq!(r.batches().iter().map(Vec::len).collect::<Vec<_>>(), sizes);
        }
        // Each exchanged point lands elsewhere with probability 1 - 1/n.
        let mean = moved as f64 / 20.0;
        assert!((mean - 120.0).abs() < 10.0, "{mean}");
    }

    #[test]
    fn excess_storage_caches_the_batch_and_more() {
        let mut r = run("partial-local", Some(0.5), Some(0.4));
        let batches = r.batches().to_vec();
        let e = r.next_epoch();
        for (w, batch) in batches.iter().enumerate() {
            assert_eq!(e.instance.cache(w).len(), 200);
            assert!(batch.iter().all(|p| e.instance.cache(w).contains(*p)));
        }
        assert!(e.instance.uncoded_transmissions() < e.points_moved);
    }

    #[test]
    fn same_seed_same_epochs_and_bad_policies_are_refused() {
        let a: Vec<_> = (0..3).scan(run("global", None, None), |r, _| Some(r.next_epoch())).collect();
        let b: Vec<_> = (0..3).scan(run("global", None, None), |r, _| Some(r.next_epoch())).collect();
        assert_eq!(a, b);
        assert_eq!(ExchangePolicy::new("partial-local", None), Err(PolicyError::MissingFraction));
        assert!(ExchangePolicy::new("partial-local", Some(1.5)).unwrap_err().to_string().contains("[0, 1]"));
        assert!(ExchangePolicy::new("partial-local", Some(f64::NAN)).is_err());
        assert!(
            ExchangePolicy::new("global", Some(0.3))
                .unwrap_err()
                .to_string()
                .contains("only to partial-local")
        );
        assert!(ExchangePolicy::new("nope", None).unwrap_err().to_string().contains("unknown policy"));
        assert!(ExchangeRun::new(ExchangePolicy::Local, 5, 3, None, 0).is_err());
    }
}
