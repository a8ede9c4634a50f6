//! One source of epoch assignments: the chain of caches and batches a run goes through, epoch
//! after epoch, drawn from one seed.
//!
//! `ubershuffle plan --policy ... --epochs E`, the runtime's master, the experiments and the
//! Python sampler all step the same [`EpochChain`], so for the same settings and seed the
//! planner's prediction is exactly what a run sends. An epoch is drawn ([`EpochChain::draw`]:
//! the live workers' caches and the policy's next assignment, from the seed's stream of that
//! epoch and attempt), planned ([`DrawnEpoch::plan`]: a pliable planner also chooses the
//! assignment), and committed ([`EpochChain::commit`]: each worker keeps its new batch and
//! refills its cache by [`next_cache`]).
//!
//! With any [`ShufflePlanner`] (the `ubershuffle-planners` crate has the schemes; here, unicasts):
//!
//! ```
//! use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
//! use ubershuffle_core::exchange_policy::ExchangePolicy;
//! use ubershuffle_core::{Part, Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner};
//!
//! struct Unicasts;
//! impl ShufflePlanner for Unicasts {
//!     fn name(&self) -> &str { "unicasts" }
//!     fn description(&self) -> &str { "every needed point on its own" }
//!     fn plan(&self, inst: &ShuffleInstance, _: &mut SeededRng) -> Result<Plan, PlanError> {
//!         let mut plan = Plan::with_capacity(0, 0);
//!         for w in 0..inst.workers() {
//!             inst.needs(w).into_iter().for_each(|p| plan.push(&[Part::new(p, w)]));
//!         }
//!         Ok(plan)
//!     }
//! }
//!
//! let params = ChainParams::new(4, 400, ExchangePolicy::PartialLocal { fraction: 0.3 }, 7)
//!     .with_cache_capacity(200);
//! let mut chain = EpochChain::new(params)?;
//! let planner = Unicasts;
//! for _ in 0..3 {
//!     let drawn = chain.draw(&chain.all_workers(), 0)?;
//!     let planned = drawn.plan(&planner, None)?;
//!     planned.verify()?;
//!     chain.commit(&planned);
//! }
//! assert_eq!(chain.completed_epochs(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assigned;

use serde::{Deserialize, Serialize};

use crate::exchange_policy::ExchangePolicy;
use crate::pliable::{PliableError, PliableRequest, Randomness, RandomnessStats, verify_choice};
use crate::rng::{SeededRng, seeded_stream, shuffle, uniform_below};
use crate::{
    GeneratorError, GeneratorParams, InstanceError, Plan, PlanError, Planned, ShuffleInstance,
    ShufflePlanner, Tried, VerifyError, balanced_assignment, cache_around, cache_size_for, verify,
};

/// Streams of the seed, one per purpose, so that each reproduces on its own (the runtime's
/// straggler draws use stream 2).
const STREAM_START: u64 = 1;
const STREAM_GIVEN_START: u64 = 3;
const STREAM_EPOCH: u64 = 1 << 32;
const STREAM_PLANNER: u64 = 2 << 32;
const STREAM_READMIT: u64 = 3 << 32;

/// Why a chain cannot start, go on, or plan an epoch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// The workers, points or cache size are not a valid instance model.
    #[error(transparent)]
    Generator(#[from] GeneratorError),
    /// The share of the points outside a batch to cache besides it is not in `[0, 1]`.
    #[error("extra_cache must lie in [0, 1], got {extra_cache}")]
    ExtraCacheOutOfRange {
        /// The share given.
        extra_cache: f64,
    },
    /// A starting partition or a saved state does not fit the chain's settings.
    #[error("the starting state does not fit: {0}")]
    State(String),
    /// `draw` was asked for an epoch over no worker, or over a worker that does not exist.
    #[error("an epoch needs at least one live worker among 0..{workers}, got {live:?}")]
    Live {
        /// The chain's workers.
        workers: usize,
        /// The live workers asked for.
        live: Vec<usize>,
    },
    /// The drawn caches and assignment are not an instance (a bug, or a state edited by hand).
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// Candidates were given to a scheme that does not choose assignments.
    #[error("candidates apply to the pliable schemes (pliable-greedy, pliable-hierarchical), not {scheme}")]
    CandidatesNeedPliable {
        /// The scheme.
        scheme: String,
    },
    /// A pliable scheme with a policy other than global.
    #[error(
        "the pliable scheme {scheme} chooses the next assignment itself, from fully random candidates: it needs the global policy, not {policy}"
    )]
    PliablePolicy {
        /// The scheme.
        scheme: String,
        /// The policy asked for.
        policy: &'static str,
    },
    /// The planner failed.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The pliable request or choice is not valid.
    #[error(transparent)]
    Pliable(#[from] PliableError),
    /// The plan does not decode at every worker.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// How a chain's first epoch (its starting partition) is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChainStart {
    /// A uniformly random balanced partition, drawn from the seed (the UberShuffle paper's
    /// model; the default).
    #[default]
    Random,
    /// The points in id order cut into contiguous blocks: worker `w` starts with the `w`-th
    /// block, the first `q mod n` blocks one point larger ([`contiguous_blocks`]). A data set
    /// stored in shards is then read shard by shard in the first epoch; the policy mixes from
    /// the second epoch on.
    Blocks,
}

impl ChainStart {
    /// Every start, with its name.
    pub const ALL: [ChainStart; 2] = [ChainStart::Random, ChainStart::Blocks];

    /// The start's name (`"random"`, `"blocks"`).
    pub fn name(self) -> &'static str {
        match self {
            ChainStart::Random => "random",
            ChainStart::Blocks => "blocks",
        }
    }
}

impl std::fmt::Display for ChainStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`ChainStart`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the first epoch must be \"random\" or \"blocks\", got {0:?}")]
pub struct UnknownStart(pub String);

impl std::str::FromStr for ChainStart {
    type Err = UnknownStart;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChainStart::ALL.into_iter().find(|start| start.name() == s).ok_or_else(|| UnknownStart(s.to_string()))
    }
}

/// `0..points` in id order cut into `workers` contiguous blocks, the first `points mod workers`
/// one point larger (a balanced partition).
pub fn contiguous_blocks(workers: usize, points: usize) -> Vec<Vec<u32>> {
    let workers = workers.max(1);
    let (base, extra) = (points / workers, points % workers);
    let mut start = 0usize;
    (0..workers)
        .map(|w| {
            let len = base + usize::from(w < extra);
            let block = (start as u32..(start + len) as u32).collect();
            start += len;
            block
        })
        .collect()
}

/// What a chain is drawn from: the cluster, the data, the cache, the policy and the seed.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ChainParams {
    /// Workers `n`.
    pub workers: usize,
    /// Data points `q`.
    pub points: usize,
    /// Points a worker caches, its batch included; `None`: no excess storage (the cache is the
    /// batch).
    pub cache_capacity: Option<usize>,
    /// How much of the data moves before each epoch.
    pub policy: ExchangePolicy,
    /// The seed every draw comes from.
    pub seed: u64,
    /// How the first epoch's partition is made (random by default).
    pub start: ChainStart,
}

impl ChainParams {
    /// `workers` workers over `points` points under `policy`, with no excess storage.
    pub fn new(workers: usize, points: usize, policy: ExchangePolicy, seed: u64) -> Self {
        ChainParams { workers, points, cache_capacity: None, policy, seed, start: ChainStart::Random }
    }

    /// The same, the first epoch's partition made by `start`.
    pub fn with_start(mut self, start: ChainStart) -> Self {
        self.start = start;
        self
    }

    /// The same, each worker caching `capacity` points (its batch included).
    pub fn with_cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = Some(capacity);
        self
    }

    /// The same, each worker caching `floor(alpha q)` points (the generator's model).
    pub fn with_alpha(self, alpha: f64) -> Result<Self, ChainError> {
        let checked =
            GeneratorParams { workers: self.workers, points: self.points, alpha, seed: self.seed }.check()?;
        Ok(self.with_cache_capacity(checked.cache_size()))
    }

    /// The same, each worker caching its batch and `extra_cache` of the points outside it:
    /// `b + floor(extra_cache (q - b))` points, `b = ceil(q/n)` the largest batch. Unlike
    /// `alpha` (the cached share of all points, the batch included, so at least `1/n`), every
    /// share in `[0, 1]` holds on any number of workers: 0 caches the batch only, 1 everything.
    /// `alpha` on `n` workers is `extra_cache = (alpha - 1/n) / (1 - 1/n)` (up to rounding).
    pub fn with_extra_cache(self, extra_cache: f64) -> Result<Self, ChainError> {
        if !(0.0..=1.0).contains(&extra_cache) {
            return Err(ChainError::ExtraCacheOutOfRange { extra_cache });
        }
        GeneratorParams { workers: self.workers, points: self.points, alpha: 1.0, seed: self.seed }
            .check()?;
        let batch = self.points.div_ceil(self.workers);
        let beyond = cache_size_for(extra_cache, self.points - batch);
        Ok(self.with_cache_capacity(batch + beyond))
    }

    fn check(&self) -> Result<(), ChainError> {
        let (workers, points, seed) = (self.workers, self.points, self.seed);
        // The generator's checks of workers and points (alpha = 1 always fits).
        GeneratorParams { workers, points, alpha: 1.0, seed }.check()?;
        if let Some(capacity) = self.cache_capacity {
            let largest = points.div_ceil(workers);
            if capacity < largest || capacity > points {
                return Err(ChainError::State(format!(
                    "a cache of {capacity} points cannot hold a batch of {largest} among {points} points"
                )));
            }
        }
        Ok(())
    }
}

/// What a resume needs: the epochs completed and every worker's batch and cache after the last
/// one (a lost worker's are empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainState {
    /// Epochs completed.
    pub completed_epochs: usize,
    /// Every worker's batch.
    pub batches: Vec<Vec<u32>>,
    /// Every worker's cache (its batch included).
    pub caches: Vec<Vec<u32>>,
}

impl ChainState {
    /// Checks that the state fits `workers` workers over `points` points: one batch and cache
    /// per worker, every id a point, each batch inside its cache, no point in two batches.
    pub fn check_shape(&self, workers: usize, points: usize) -> Result<(), String> {
        if (self.batches.len(), self.caches.len()) != (workers, workers) {
            return Err(format!(
                "it has {} batches and {} caches for {workers} workers",
                self.batches.len(),
                self.caches.len()
            ));
        }
        let mut owned = vec![false; points];
        for (w, (batch, cache)) in self.batches.iter().zip(&self.caches).enumerate() {
            for &p in batch.iter().chain(cache) {
                if p as usize >= points {
                    return Err(format!("it names point {p}, but the run has {points} points"));
                }
            }
            for &p in batch {
                if std::mem::replace(&mut owned[p as usize], true) {
                    return Err(format!("point {p} is in two batches"));
                }
                if !cache.is_empty() && cache.binary_search(&p).is_err() {
                    return Err(format!("worker {w}'s batch has point {p}, which its cache lacks"));
                }
            }
        }
        Ok(())
    }
}

/// The chain of epochs of one run: its settings and where it stands.
#[derive(Clone, Debug)]
pub struct EpochChain {
    params: ChainParams,
    state: ChainState,
}

impl EpochChain {
    /// Starts from the partition `params.start` names: by default a uniformly random balanced
    /// partition (the "previous epoch's" batches), each cache the batch plus random other
    /// points (the UberShuffle paper's model); with [`ChainStart::Blocks`], contiguous blocks
    /// of ids (as [`EpochChain::starting_from`] them).
    pub fn new(params: ChainParams) -> Result<Self, ChainError> {
        params.check()?;
        if params.start == ChainStart::Blocks {
            return Self::starting_from(params, contiguous_blocks(params.workers, params.points));
        }
        let mut rng = seeded_stream(params.seed, STREAM_START);
        let batches = balanced_assignment(&mut rng, params.workers, params.points);
        let caches = starting_caches(&params, &batches, &mut rng);
        Ok(EpochChain { params, state: ChainState { completed_epochs: 0, batches, caches } })
    }

    /// Starts from the given partition instead of a random one (for instance blocks of the data
    /// in storage order, which the local policy then keeps): `batches` must partition `0..q`,
    /// one batch per worker, each within the cache.
    pub fn starting_from(params: ChainParams, batches: Vec<Vec<u32>>) -> Result<Self, ChainError> {
        params.check()?;
        let (workers, points) = (params.workers, params.points);
        if batches.len() != workers {
            return Err(ChainError::State(format!("{} batches for {workers} workers", batches.len())));
        }
        let mut batches = batches;
        let mut seen = vec![false; points];
        for b in &mut batches {
            b.sort_unstable();
            if let Some(capacity) = params.cache_capacity.filter(|&c| b.len() > c) {
                return Err(ChainError::State(format!(
                    "a batch of {} exceeds the cache ({capacity})",
                    b.len()
                )));
            }
            for &p in b.iter() {
                match seen.get_mut(p as usize) {
                    Some(s) if !*s => *s = true,
                    Some(_) => return Err(ChainError::State(format!("point {p} is in two batches"))),
                    None => {
                        return Err(ChainError::State(format!(
                            "point {p} is not one of the {points} points"
                        )));
                    }
                }
            }
        }
        if let Some(p) = seen.iter().position(|s| !s) {
            return Err(ChainError::State(format!("point {p} is in no batch")));
        }
        let mut rng = seeded_stream(params.seed, STREAM_GIVEN_START);
        let caches = starting_caches(&params, &batches, &mut rng);
        Ok(EpochChain { params, state: ChainState { completed_epochs: 0, batches, caches } })
    }

    /// Goes on from a saved state (a checkpoint's, or a sampler's), which must fit the settings.
    pub fn with_state(params: ChainParams, state: ChainState) -> Result<Self, ChainError> {
        params.check()?;
        state.check_shape(params.workers, params.points).map_err(ChainError::State)?;
        Ok(EpochChain { params, state })
    }

    /// The settings.
    pub fn params(&self) -> &ChainParams {
        &self.params
    }

    /// Where the chain stands: what a resume needs.
    pub fn state(&self) -> &ChainState {
        &self.state
    }

    /// Epochs completed.
    pub fn completed_epochs(&self) -> usize {
        self.state.completed_epochs
    }

    /// Every worker `0..n`, for an epoch with no worker lost.
    pub fn all_workers(&self) -> Vec<usize> {
        (0..self.params.workers).collect()
    }

    /// Draws the next epoch over the `live` workers (sorted ids; the instance's worker `k` is
    /// `live[k]`): the batches of workers not live are first dealt to the live ones, then the
    /// policy exchanges the batches. Attempt `a` of an epoch (after a loss) draws from a
    /// stream of its own. Nothing changes until [`EpochChain::commit`].
    pub fn draw(&self, live: &[usize], attempt: u32) -> Result<DrawnEpoch, ChainError> {
        let workers = self.params.workers;
        if live.is_empty() || live.iter().any(|&w| w >= workers) || live.windows(2).any(|p| p[0] >= p[1]) {
            return Err(ChainError::Live { workers, live: live.to_vec() });
        }
        let epoch = self.state.completed_epochs + 1;
        let stream = (epoch as u64) << 8 | u64::from(attempt);
        let mut rng = seeded_stream(self.params.seed, STREAM_EPOCH + stream);
        let previous = self.adopt_orphans(live, &mut rng);
        let next = self.params.policy.exchange(&previous, &mut rng);
        let fraction = self.params.policy.fraction();
        let points_exchanged =
            previous.iter().map(|b| ((fraction * b.len() as f64).round() as usize).min(b.len())).sum();
        let points_moved = previous
            .iter()
            .zip(&next)
            .map(|(old, new)| crate::instance::sorted_difference(new, old).len())
            .sum();
        // A worker holds what it cached, not the points it adopted from a lost worker.
        let caches = live.iter().map(|&w| self.state.caches[w].clone()).collect();
        let instance = ShuffleInstance::new(live.len(), self.params.points, caches, next)?;
        let planner_rng = seeded_stream(self.params.seed, STREAM_PLANNER + stream);
        Ok(DrawnEpoch {
            epoch,
            live: live.to_vec(),
            instance,
            previous,
            points_exchanged,
            points_moved,
            policy: self.params.policy,
            candidate_rng: rng,
            planner_rng,
        })
    }

    /// Moves on past a planned epoch: every live worker's batch is its assignment and its cache
    /// is refilled by [`next_cache`]; workers not live hold nothing (their batches were dealt).
    pub fn commit(&mut self, planned: &PlannedEpoch) {
        self.commit_assignment(planned.epoch, &planned.live, &planned.instance);
    }

    /// Moves on past a drawn epoch without planning it, the workers getting the drawn
    /// assignment: what [`EpochChain::commit`] does after any fixed-assignment scheme's plan
    /// (only a pliable scheme changes the assignment), for callers that need the assignments
    /// and not the packets (the Python sampler).
    pub fn commit_drawn(&mut self, drawn: &DrawnEpoch) {
        self.commit_assignment(drawn.epoch, &drawn.live, &drawn.instance);
    }

    /// Moves on past epoch `epoch` (the next one, drawn over `live`) done with `instance`'s
    /// caches and assignment: what [`EpochChain::commit`] does, for callers that planned the
    /// epoch's delivery on an instance derived from the drawn one (records of uneven size
    /// planned on their segments) and keep the record-level instance apart.
    pub fn commit_instance(&mut self, epoch: usize, live: &[usize], instance: &ShuffleInstance) {
        self.commit_assignment(epoch, live, instance);
    }

    /// Epoch `epoch` over `live` done with `instance`'s caches and assignment.
    fn commit_assignment(&mut self, epoch: usize, live: &[usize], instance: &ShuffleInstance) {
        let seed = self.params.seed;
        let mut batches = vec![Vec::new(); self.params.workers];
        let mut caches = vec![Vec::new(); self.params.workers];
        for (k, &w) in live.iter().enumerate() {
            let batch = instance.assignment(k).to_vec();
            let capacity = self.params.cache_capacity.unwrap_or(batch.len());
            let cache = instance.cache(k).to_vec();
            caches[w] = next_cache(&cache, &batch, capacity, seed, epoch as u32, w as u32);
            batches[w] = batch;
        }
        self.state = ChainState { completed_epochs: epoch, batches, caches };
    }

    /// Forgets worker `w`'s cache (it was lost; a returning worker starts afresh).
    pub fn forget(&mut self, w: usize) {
        if let Some(cache) = self.state.caches.get_mut(w) {
            cache.clear();
        }
    }

    /// Takes the workers `returning` back (at a resume, or at an epoch boundary when they
    /// joined while the run went on): each gets a batch of its share, points taken at random
    /// from the largest batches, and a starting cache around it; both are drawn from the seed
    /// and the epoch, so it reproduces.
    pub fn readmit(&mut self, returning: &[usize]) {
        let (workers, points) = (self.params.workers, self.params.points);
        let returning: Vec<usize> = returning.iter().copied().filter(|&w| w < workers).collect();
        if returning.is_empty() {
            return;
        }
        let batches = &mut self.state.batches;
        let mut rng = seeded_stream(self.params.seed, STREAM_READMIT + self.state.completed_epochs as u64);
        for &w in &returning {
            while batches[w].len() < points / workers {
                let largest = (0..workers).max_by_key(|&v| (batches[v].len(), std::cmp::Reverse(v)));
                let Some(donor) = largest.filter(|&v| batches[v].len() > batches[w].len() + 1) else {
                    break;
                };
                let at = uniform_below(&mut rng, batches[donor].len() as u64) as usize;
                let p = batches[donor].swap_remove(at);
                batches[w].push(p);
            }
        }
        for b in batches.iter_mut() {
            b.sort_unstable();
        }
        for &w in &returning {
            let batch = &self.state.batches[w];
            self.state.caches[w] = match self.params.cache_capacity {
                Some(size) => cache_around(&mut rng, batch, points, size),
                None => batch.clone(),
            };
        }
    }

    /// The live workers' batches before the exchange: each its own, plus the batches of the
    /// workers not live, dealt smallest batch first so that the batches stay balanced.
    fn adopt_orphans(&self, live: &[usize], rng: &mut SeededRng) -> Vec<Vec<u32>> {
        let mut batches: Vec<Vec<u32>> = live.iter().map(|&w| self.state.batches[w].clone()).collect();
        let mut orphans: Vec<u32> = (0..self.params.workers)
            .filter(|w| live.binary_search(w).is_err())
            .flat_map(|w| self.state.batches[w].iter().copied())
            .collect();
        if orphans.is_empty() {
            return batches;
        }
        shuffle(rng, &mut orphans);
        for p in orphans {
            let smallest = (0..batches.len()).min_by_key(|&k| (batches[k].len(), k));
            if let Some(k) = smallest {
                batches[k].push(p);
            }
        }
        for b in &mut batches {
            b.sort_unstable();
        }
        batches
    }
}

/// The starting caches: each batch plus random other points, or the batch alone.
fn starting_caches(params: &ChainParams, batches: &[Vec<u32>], rng: &mut SeededRng) -> Vec<Vec<u32>> {
    match params.cache_capacity {
        Some(size) => batches.iter().map(|b| cache_around(rng, b, params.points, size)).collect(),
        None => batches.to_vec(),
    }
}

/// One drawn epoch, before planning: the instance over the live workers and the streams its
/// planning draws from.
#[derive(Clone, Debug)]
pub struct DrawnEpoch {
    /// The epoch, from 1.
    pub epoch: usize,
    /// The live workers (the instance's worker `k` is `live[k]`).
    pub live: Vec<usize>,
    /// Caches and the policy's new assignment.
    pub instance: ShuffleInstance,
    /// The live workers' batches before the exchange.
    pub previous: Vec<Vec<u32>>,
    /// Points put into the exchange (under global some come back to the worker that gave them;
    /// under partial-local none, where the givers allow it).
    pub points_exchanged: usize,
    /// Points whose worker changed.
    pub points_moved: usize,
    policy: ExchangePolicy,
    candidate_rng: SeededRng,
    planner_rng: SeededRng,
}

/// Refuses candidates without a pliable scheme, and a pliable scheme with a policy other than
/// global (its candidates are fully random assignments).
pub fn check_scheme(
    planner: &dyn ShufflePlanner,
    policy: ExchangePolicy,
    candidates: Option<Randomness>,
) -> Result<(), ChainError> {
    let scheme = planner.name().to_string();
    match (planner.as_pliable(), candidates) {
        (None, Some(_)) => Err(ChainError::CandidatesNeedPliable { scheme }),
        (Some(_), _) if policy != ExchangePolicy::Global => {
            Err(ChainError::PliablePolicy { scheme, policy: policy.name() })
        }
        _ => Ok(()),
    }
}

impl DrawnEpoch {
    /// Plans the epoch. A fixed-assignment planner plans the policy's assignment; a pliable one
    /// chooses the assignment within `candidates` (default: [`Randomness::default`]), the
    /// policy's being every point's first candidate.
    pub fn plan(
        mut self,
        planner: &dyn ShufflePlanner,
        candidates: Option<Randomness>,
    ) -> Result<PlannedEpoch, ChainError> {
        check_scheme(planner, self.policy, candidates)?;
        let (instance, planned, request) = match planner.as_pliable() {
            None => {
                let planned = planner.plan_explained(&self.instance, &mut self.planner_rng)?;
                (self.instance, planned, None)
            }
            Some(pliable) => {
                let randomness = candidates.unwrap_or_default();
                let request = PliableRequest::new(self.instance, randomness, &mut self.candidate_rng)?
                    .with_previous_batches(&self.previous)?;
                let chosen = pliable.plan_pliable(&request, &mut self.planner_rng)?;
                let tried = vec![Tried::sent(&chosen.made_by, chosen.plan.len())];
                let planned = Planned { plan: chosen.plan, made_by: chosen.made_by, tried };
                (chosen.instance, planned, Some(request))
            }
        };
        Ok(PlannedEpoch {
            epoch: self.epoch,
            live: self.live,
            instance,
            plan: planned.plan,
            made_by: planned.made_by,
            tried: planned.tried,
            previous: self.previous,
            points_exchanged: self.points_exchanged,
            points_moved: self.points_moved,
            request,
        })
    }
}

impl DrawnEpoch {
    /// Plans `derived`, an instance made from this epoch's (its segment-level instance over
    /// records of uneven size, say), with a fixed-assignment `planner` and this epoch's planner
    /// stream, so the same seed gives the same plan; the caller verifies it on `derived`.
    pub fn plan_derived(
        mut self,
        planner: &dyn ShufflePlanner,
        derived: &ShuffleInstance,
    ) -> Result<Planned, ChainError> {
        check_scheme(planner, self.policy, None)?;
        if planner.as_pliable().is_some() {
            return Err(ChainError::Plan(PlanError::Unsupported {
                planner: planner.name().to_string(),
                reason: "a pliable scheme chooses the assignment of the epoch itself".into(),
            }));
        }
        Ok(planner.plan_explained(derived, &mut self.planner_rng)?)
    }
}

/// One planned epoch: the assignment the workers get, its plan, and what checks them.
#[derive(Clone, Debug)]
pub struct PlannedEpoch {
    /// The epoch, from 1.
    pub epoch: usize,
    /// The live workers (the instance's worker `k` is `live[k]`).
    pub live: Vec<usize>,
    /// Caches and the assignment the workers get (a pliable planner's choice).
    pub instance: ShuffleInstance,
    /// The transmissions.
    pub plan: Plan,
    /// The scheme that made the plan (for a portfolio, the member that won).
    pub made_by: String,
    /// Every scheme tried, in order, with its count or why it was skipped.
    pub tried: Vec<Tried>,
    /// The live workers' batches before the epoch.
    pub previous: Vec<Vec<u32>>,
    /// Points the policy put into the exchange.
    pub points_exchanged: usize,
    /// Points whose worker changed under the policy's assignment (a pliable choice may move
    /// others: see [`PlannedEpoch::randomness`]).
    pub points_moved: usize,
    request: Option<PliableRequest>,
}

impl PlannedEpoch {
    /// Verifies the plan by peeling at every worker, and for a pliable planner that the chosen
    /// assignment keeps the constraint with full batches.
    pub fn verify(&self) -> Result<(), ChainError> {
        match &self.request {
            None => verify(&self.instance, &self.plan)?.ensure_valid()?,
            Some(request) => verify_choice(request, &self.instance, &self.plan)?.ensure_valid()?,
        }
        Ok(())
    }

    /// The owner of every point (a live worker's index).
    pub fn owners(&self) -> Vec<u32> {
        (0..self.instance.points() as u32).map(|p| self.instance.owner(p) as u32).collect()
    }

    /// How random the assignment is against the previous batches; `owners` is
    /// [`PlannedEpoch::owners`].
    pub fn randomness(&self, owners: &[u32]) -> RandomnessStats {
        assignment_randomness(&self.instance, &self.previous, owners)
    }
}

/// How random the assignment of `instance` is against the `previous` batches of its workers;
/// `owners` is every point's worker in `instance` ([`PlannedEpoch::randomness`], for callers
/// that keep the instance apart from a [`PlannedEpoch`]).
pub fn assignment_randomness(
    instance: &ShuffleInstance,
    previous: &[Vec<u32>],
    owners: &[u32],
) -> RandomnessStats {
    let mut before = vec![u32::MAX; instance.points()];
    for (k, batch) in previous.iter().enumerate() {
        for &p in batch {
            if let Some(slot) = before.get_mut(p as usize) {
                *slot = k as u32;
            }
        }
    }
    RandomnessStats::measure(instance.workers(), owners, Some(&before), |p, w| instance.cache(w).contains(p))
}

/// The cache a worker keeps after an epoch: its whole new `batch` (it must hold it to train),
/// plus `capacity - |batch|` of its other cached points, chosen uniformly at random by ranking
/// them with a hash of the run's seed, the epoch, the worker and the point id.
///
/// Choice (the papers leave the policy open): extra points come from the worker's previous
/// cache only, not from points it learned in passing while decoding, so the master knows every
/// cache without being told. Since every assignment is uniformly random, the extra points stay a
/// uniformly random subset of the data, as in the UberShuffle paper's model.
pub fn next_cache(
    cache: &[u32],
    batch: &[u32],
    capacity: usize,
    seed: u64,
    epoch: u32,
    worker: u32,
) -> Vec<u32> {
    let mut batch_sorted = batch.to_vec();
    batch_sorted.sort_unstable();
    let room = capacity.saturating_sub(batch_sorted.len());
    let mut others: Vec<(u64, u32)> = cache
        .iter()
        .copied()
        .filter(|p| batch_sorted.binary_search(p).is_err())
        .map(|p| (rank(seed, epoch, worker, p), p))
        .collect();
    if others.len() > room {
        others.select_nth_unstable(room);
        others.truncate(room);
    }
    let mut kept: Vec<u32> = batch_sorted;
    kept.extend(others.into_iter().map(|(_, p)| p));
    kept.sort_unstable();
    kept
}

/// SplitMix64 of the four keys: a fixed, platform-independent pseudo-random rank.
fn rank(seed: u64, epoch: u32, worker: u32, point: u32) -> u64 {
    let mut z = seed ^ (u64::from(epoch) << 40) ^ (u64::from(worker) << 20) ^ u64::from(point).rotate_left(7);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
