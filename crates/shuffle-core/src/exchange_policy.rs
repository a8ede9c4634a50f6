//! Local, partial-local and global exchange of partitioned data, after Nguyen et al., "Why
//! globally re-shuffle? Revisiting data shuffling in large scale deep learning".
//!
//! The data set is partitioned among the workers; before each epoch every worker gives up a
//! fraction `Q` of its points to a common exchange and gets as many back. `Q = 0` is local
//! shuffling (each worker keeps its partition and only reorders it, which changes nothing
//! here), `Q = 1` is a global reshuffle. An epoch under a policy is an ordinary
//! [`crate::ShuffleInstance`] (caches = the current batches, plus any excess storage; assignment = the
//! exchanged batches), so any [`crate::ShufflePlanner`] can plan it: the exchange itself can be
//! coded. The epochs of a run under a policy are the [`crate::epoch_chain::EpochChain`]'s.

#[cfg(test)]
use crate::balanced_assignment;
use crate::rng::{SeededRng, partial_shuffle, shuffle};

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

/// Which policy, without its fraction: what a command line or a configuration names
/// (`local`, `partial-local`, `global` in serde's forms too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// [`ExchangePolicy::Local`].
    Local,
    /// [`ExchangePolicy::PartialLocal`].
    PartialLocal,
    /// [`ExchangePolicy::Global`]: the default.
    #[default]
    Global,
}

impl ExchangePolicy {
    /// The policy called `name` (`local`, `partial-local`, `global`); `fraction` is required
    /// by partial-local and refused by the others.
    pub fn new(name: &str, fraction: Option<f64>) -> Result<Self, PolicyError> {
        let kind = match name {
            "local" => PolicyKind::Local,
            "global" => PolicyKind::Global,
            "partial-local" => PolicyKind::PartialLocal,
            other => return Err(PolicyError::Unknown(other.to_string())),
        };
        Self::of(kind, fraction)
    }

    /// The policy of `kind`; `fraction` is required by partial-local and refused by the others.
    pub fn of(kind: PolicyKind, fraction: Option<f64>) -> Result<Self, PolicyError> {
        let policy = match kind {
            PolicyKind::Local => ExchangePolicy::Local,
            PolicyKind::Global => ExchangePolicy::Global,
            PolicyKind::PartialLocal => {
                let fraction = fraction.ok_or(PolicyError::MissingFraction)?;
                if !(0.0..=1.0).contains(&fraction) {
                    return Err(PolicyError::FractionOutOfRange(fraction));
                }
                return Ok(ExchangePolicy::PartialLocal { fraction });
            }
        };
        match fraction {
            Some(_) => {
                Err(PolicyError::UnexpectedFraction { policy: policy.name(), fixed: policy.fraction() })
            }
            None => Ok(policy),
        }
    }

    /// The policy's kind, without its fraction.
    pub fn kind(&self) -> PolicyKind {
        match self {
            ExchangePolicy::Local => PolicyKind::Local,
            ExchangePolicy::PartialLocal { .. } => PolicyKind::PartialLocal,
            ExchangePolicy::Global => PolicyKind::Global,
        }
    }

    /// The fraction [`ExchangePolicy::of`] takes to give this policy back: partial-local's,
    /// `None` for the others.
    pub fn given_fraction(&self) -> Option<f64> {
        match *self {
            ExchangePolicy::PartialLocal { fraction } => Some(fraction),
            ExchangePolicy::Local | ExchangePolicy::Global => None,
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
    /// as many as it gave (batch sizes never change). Batches come back sorted.
    ///
    /// Under partial-local no point is dealt back to the worker that gave it (whenever the
    /// givers allow it: no worker gives more than all the others together), as the paper has
    /// it: a worker exchanges the fraction `Q` of its points with the others, so it holds at
    /// most `(1 + Q) N / M` and a fraction `Q` of every epoch's points comes from other workers.
    /// (Before, the pool was dealt uniformly, a point came back to its giver one time in `M`
    /// and only `Q (M - 1) / M` came from other workers.) Under global a point may come back,
    /// so the result is a uniformly random assignment with the same batch sizes, i.e. a global
    /// reshuffle.
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
        if let ExchangePolicy::PartialLocal { .. } = self {
            let givers: Vec<usize> =
                gave.iter().enumerate().flat_map(|(w, &n)| std::iter::repeat_n(w, n)).collect();
            for (point, receiver) in pool.into_iter().zip(deal_to_others(&givers, rng)) {
                kept[receiver].push(point);
            }
            for batch in &mut kept {
                batch.sort_unstable();
            }
            return kept;
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

/// The receiver of each pooled point, given each point's giver: every worker receives as many
/// points as it gave, uniformly dealt, then every point dealt back to its giver swapped with
/// another whose swap sends neither back (the first such from a random place). A point stays
/// with its giver only where no swap exists: one worker gave more than all the others.
fn deal_to_others(givers: &[usize], rng: &mut SeededRng) -> Vec<usize> {
    let mut receivers = givers.to_vec();
    shuffle(rng, &mut receivers);
    let n = receivers.len();
    for k in 0..n {
        if receivers[k] != givers[k] {
            continue;
        }
        let start = crate::rng::uniform_below(rng, n as u64) as usize;
        let swap =
            (0..n).map(|d| (start + d) % n).find(|&j| receivers[j] != givers[k] && receivers[k] != givers[j]);
        if let Some(j) = swap {
            receivers.swap(k, j);
        }
    }
    receivers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;

    #[test]
    fn an_exchange_keeps_batch_sizes_and_moves_at_most_the_fraction() {
        let batches = balanced_assignment(&mut seeded(1), 5, 500);
        let next = ExchangePolicy::PartialLocal { fraction: 0.3 }.exchange(&batches, &mut seeded(2));
        for (old, new) in batches.iter().zip(&next) {
            assert_eq!(old.len(), new.len());
            assert!(new.windows(2).all(|w| w[0] < w[1]));
            assert!(crate::instance::sorted_difference(new, old).len() <= 30);
        }
        assert_eq!(ExchangePolicy::Local.exchange(&batches, &mut seeded(2)), batches);
    }

    #[test]
    fn partial_local_deals_every_exchanged_point_to_another_worker() {
        for (workers, points, fraction) in [(4, 1500, 0.3), (2, 100, 0.5), (5, 503, 1.0), (3, 30, 0.1)] {
            let batches = balanced_assignment(&mut seeded(3), workers, points);
            for seed in 0..5 {
                let policy = ExchangePolicy::PartialLocal { fraction };
                let next = policy.exchange(&batches, &mut seeded(seed));
                for (old, new) in batches.iter().zip(&next) {
                    assert_eq!(old.len(), new.len());
                    // Exactly the fraction came from the other workers; nothing came back.
                    let moved = crate::instance::sorted_difference(new, old).len();
                    assert_eq!(
                        moved,
                        (fraction * old.len() as f64).round() as usize,
                        "{workers} workers, seed {seed}"
                    );
                }
                let mut all: Vec<u32> = next.concat();
                all.sort_unstable();
                assert_eq!(all, (0..points as u32).collect::<Vec<_>>());
                assert_eq!(next, policy.exchange(&batches, &mut seeded(seed)), "deterministic under a seed");
            }
        }
    }

    #[test]
    fn a_worker_that_gave_more_than_all_the_others_keeps_the_rest() {
        let givers = [0, 0, 0, 0, 1];
        let receivers = deal_to_others(&givers, &mut seeded(1));
        let mut sorted = receivers.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, givers);
        // Worker 1's point goes to 0 and one of 0's to 1; the other three stay with 0.
        assert_eq!(receivers.iter().zip(&givers).filter(|(r, g)| r != g).count(), 2);
    }

    #[test]
    fn bad_policies_are_refused() {
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
    }
}
