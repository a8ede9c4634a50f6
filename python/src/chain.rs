//! The epoch chain the sampler follows: each epoch's assignment comes from the previous one
//! under the exchange policy (or a pliable scheme's choice), and each cache carries over.
//!
//! INTERIM: this mirrors the contract of `ubershuffle_core::epoch_chain` (ChainParams, draw,
//! commit, state) until that lands on main; then this module becomes a thin adapter over it.

use serde::{Deserialize, Serialize};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{ShuffleInstance, balanced_assignment, seeded};

/// What a chain is drawn from.
#[derive(Clone, Debug)]
pub struct ChainParams {
    /// Workers (ranks).
    pub workers: usize,
    /// Points.
    pub points: usize,
    /// Points each cache holds; `None`: each cache is the worker's batch.
    pub cache_capacity: Option<usize>,
    /// How the assignment moves on.
    pub policy: ExchangePolicy,
    /// The seed.
    pub seed: u64,
}

/// What a resume needs: completed epochs, the batches and the caches held now.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChainState {
    /// Epochs committed.
    pub completed: u64,
    /// The batches the workers hold now.
    pub batches: Vec<Vec<u32>>,
    /// The caches the workers hold now (each holds its batch).
    pub caches: Vec<Vec<u32>>,
}

/// The next epoch, drawn but not committed.
pub struct DrawnEpoch {
    /// Caches now, and the policy's new assignment.
    pub instance: ShuffleInstance,
    /// Points put into the exchange.
    pub points_exchanged: usize,
    /// Points whose worker changed.
    pub points_moved: usize,
}

/// Epochs as a chain of assignments and caches.
#[derive(Clone, Debug)]
pub struct EpochChain {
    params: ChainParams,
    state: ChainState,
}

/// The stream of the seed an epoch's exchange is drawn from.
const EXCHANGE_STREAM: u64 = 0x4558_0000_0000_0000;

impl EpochChain {
    /// The chain at its initial partition (uniformly random, balanced, from the seed).
    pub fn new(params: ChainParams) -> Result<Self, String> {
        let ChainParams { workers, points, cache_capacity, seed, .. } = params;
        if workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if u32::try_from(points).is_err() {
            return Err(format!("{points} points is more than this build supports (ids are 32-bit)"));
        }
        if workers > points {
            return Err(format!(
                "more workers ({workers}) than points ({points}): every worker needs a batch"
            ));
        }
        if let Some(c) = cache_capacity
            && c < points.div_ceil(workers)
        {
            return Err(format!(
                "cache capacity {c} is below the batch size {}: a worker must be able to cache its own batch",
                points.div_ceil(workers)
            ));
        }
        let batches = balanced_assignment(&mut seeded(seed), workers, points);
        let caches = batches.clone();
        Ok(EpochChain { params, state: ChainState { completed: 0, batches, caches } })
    }

    /// The chain at a saved state.
    pub fn with_state(params: ChainParams, state: ChainState) -> Result<Self, String> {
        if state.batches.len() != params.workers || state.caches.len() != params.workers {
            return Err("the saved chain does not match the number of workers".into());
        }
        let total: usize = state.batches.iter().map(Vec::len).sum();
        if total != params.points {
            return Err("the saved chain does not match the number of points".into());
        }
        Ok(EpochChain { params, state })
    }

    /// The state (what a resume needs).
    pub fn state(&self) -> &ChainState {
        &self.state
    }

    /// Draws the next epoch (pure: the chain does not move).
    pub fn draw(&self) -> DrawnEpoch {
        let epoch = self.state.completed + 1;
        let mut rng = seeded_stream(self.params.seed, EXCHANGE_STREAM + epoch);
        let next = self.params.policy.exchange(&self.state.batches, &mut rng);
        let fraction = self.params.policy.fraction();
        let points_exchanged = self
            .state
            .batches
            .iter()
            .map(|b| ((fraction * b.len() as f64).round() as usize).min(b.len()))
            .sum();
        let points_moved =
            self.state.batches.iter().zip(&next).map(|(old, new)| difference(new, old).len()).sum();
        let instance =
            ShuffleInstance::new(self.params.workers, self.params.points, self.state.caches.clone(), next)
                .unwrap_or_else(|e| unreachable!("an exchange keeps a valid partition: {e}"));
        DrawnEpoch { instance, points_exchanged, points_moved }
    }

    /// Moves on to `chosen` (the drawn instance, or a pliable scheme's choice): the batches
    /// become its assignment; each cache keeps the new batch plus the highest-ranked points of
    /// its old cache up to the capacity.
    pub fn commit(&mut self, chosen: &ShuffleInstance) {
        let epoch = self.state.completed + 1;
        let batches: Vec<Vec<u32>> = (0..chosen.workers()).map(|w| chosen.assignment(w).to_vec()).collect();
        let caches = match self.params.cache_capacity {
            None => batches.clone(),
            Some(capacity) => batches
                .iter()
                .zip(&self.state.caches)
                .enumerate()
                .map(|(w, (batch, old))| next_cache(old, batch, capacity, self.params.seed, epoch, w))
                .collect(),
        };
        self.state = ChainState { completed: epoch, batches, caches };
    }
}

/// The next cache: the batch plus the `capacity - |batch|` points of the old cache not in the
/// batch that rank lowest under a hash of `(seed, epoch, worker, point)`.
pub fn next_cache(
    old: &[u32],
    batch: &[u32],
    capacity: usize,
    seed: u64,
    epoch: u64,
    worker: usize,
) -> Vec<u32> {
    let mut rest = difference(old, batch);
    let room = capacity.saturating_sub(batch.len()).min(rest.len());
    let key = |p: u32| mix(seed ^ mix(epoch ^ mix(worker as u64 ^ mix(u64::from(p)))));
    if room < rest.len() {
        rest.select_nth_unstable_by_key(room, |&p| key(p));
        rest.truncate(room);
    }
    let mut cache: Vec<u32> = batch.iter().copied().chain(rest).collect();
    cache.sort_unstable();
    cache
}

/// SplitMix64's finaliser.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `a \ b` for sorted lists.
pub fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j >= b.len() || b[j] != x {
            out.push(x);
        }
    }
    out
}
