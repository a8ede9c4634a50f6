//! [`RunConfig`]: what a run does, checked once before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;

use crate::LearnerSpec;
use crate::config_error::ConfigError;

/// A run of the epoch loop: build with [`RunConfig::new`] and the `with_` methods, then
/// [`check`](RunConfig::check) it against the data.
///
/// ```
/// use std::time::Duration;
/// use ubershuffle_runtime::{LearnerSpec, RunConfig};
/// let learner = LearnerSpec::LinearRegression { features: 4, step_size: 0.01, local_passes: 1 };
/// let config = RunConfig::new(4, 200, learner).with_epochs(5).with_seed(7).with_deadline(Duration::from_millis(50));
/// assert!(config.clone().check(400).is_ok());
/// assert_eq!(
///     config.check(10).unwrap_err().to_string(),
///     "the cache holds 200 points; it must hold a batch (3 = q/n) and at most all 10"
/// );
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunConfig {
    /// Workers at the start.
    pub workers: usize,
    /// Points each worker may cache (`s = floor(alpha q)`); at least the batch size.
    pub cache_capacity: usize,
    /// Epochs to run.
    pub epochs: usize,
    /// Seed of every random choice (start caches, assignments, planner tie-breaks, stragglers,
    /// the cache policy, local SGD orders).
    pub seed: u64,
    /// How batches change between epochs (global reshuffle, partial-local, local).
    pub policy: ExchangePolicy,
    /// What the workers train.
    pub learner: LearnerSpec,
    /// How long the master waits for updates once every worker holds its packets; later
    /// updates are dropped (their workers are stragglers). `None`: wait for every live worker.
    pub deadline: Option<Duration>,
    /// Largest payload of one data message (broadcast or point to point), in bytes.
    pub chunk_bytes: usize,
    /// Write a checkpoint here after every epoch (a run resumes from one with
    /// [`Master::resuming`](crate::Master::resuming)).
    pub checkpoint: Option<PathBuf>,
    /// For a pliable planner, which chooses each epoch's assignment as well as its code: the
    /// randomness constraint (`None`: [`Randomness::DEFAULT`]). The policy's assignment is
    /// then the fully random one, every point's first candidate. Refused with other planners.
    pub candidates: Option<Randomness>,
    /// The search budget the planner was built with ([`PlannerOptions::time_budget`], counted
    /// in work units, so plans repeat exactly). The loop does not read it; it decides the
    /// plans, so it enters the run's [`RunFingerprint`](crate::RunFingerprint).
    pub plan_budget: Duration,
}

impl RunConfig {
    /// The largest payload of one data message unless set otherwise: 1 MiB.
    pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

    /// A run of `workers` workers caching `cache_capacity` points each and training `learner`:
    /// one epoch, seed 0, global reshuffling, no deadline (wait for every live worker), data
    /// messages of at most [`RunConfig::DEFAULT_CHUNK_BYTES`], no checkpoint, the planners'
    /// default search budget.
    pub fn new(workers: usize, cache_capacity: usize, learner: LearnerSpec) -> Self {
        RunConfig {
            workers,
            cache_capacity,
            epochs: 1,
            seed: 0,
            policy: ExchangePolicy::Global,
            learner,
            deadline: None,
            chunk_bytes: Self::DEFAULT_CHUNK_BYTES,
            checkpoint: None,
            candidates: None,
            plan_budget: PlannerOptions::default().time_budget,
        }
    }

    /// Runs `epochs` epochs.
    pub fn with_epochs(mut self, epochs: usize) -> Self {
        self.epochs = epochs;
        self
    }

    /// Draws every random choice from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Changes batches between epochs by `policy`.
    pub fn with_policy(mut self, policy: ExchangePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Waits at most `deadline` for updates once every worker holds its packets.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sends data in messages of at most `bytes` bytes.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// Writes a checkpoint to `path` after every epoch.
    pub fn with_checkpoint(mut self, path: impl Into<PathBuf>) -> Self {
        self.checkpoint = Some(path.into());
        self
    }

    /// Lets a pliable planner choose each epoch's assignment within `candidates`.
    pub fn with_candidates(mut self, candidates: Randomness) -> Self {
        self.candidates = Some(candidates);
        self
    }

    /// Records that the planner searches within `budget` (see [`RunConfig::plan_budget`]).
    pub fn with_plan_budget(mut self, budget: Duration) -> Self {
        self.plan_budget = budget;
        self
    }

    /// Checks the configuration against the size of its data (`points` training records):
    /// the one place a run's settings are validated. A [`Master`](crate::Master) takes only the
    /// checked configuration.
    pub fn check(self, points: usize) -> Result<CheckedRunConfig, ConfigError> {
        if self.workers == 0 || self.workers > points {
            return Err(ConfigError::WorkersForPoints { workers: self.workers, points });
        }
        let batch = points.div_ceil(self.workers);
        if self.cache_capacity < batch || self.cache_capacity > points {
            return Err(ConfigError::CacheSize { cache: self.cache_capacity, batch, points });
        }
        if self.epochs == 0 {
            return Err(ConfigError::NoEpochs);
        }
        if self.chunk_bytes == 0 {
            return Err(ConfigError::ZeroChunk);
        }
        Ok(CheckedRunConfig { config: self, points })
    }
}

/// A [`RunConfig`] that passed [`RunConfig::check`] for a data set of [`points`] records.
///
/// [`points`]: CheckedRunConfig::points
#[derive(Clone, Debug)]
pub struct CheckedRunConfig {
    config: RunConfig,
    points: usize,
}

impl CheckedRunConfig {
    /// The number of training records the configuration was checked for.
    pub fn points(&self) -> usize {
        self.points
    }

    /// The settings of the run's [`EpochChain`](ubershuffle_core::epoch_chain::EpochChain):
    /// the same chain `ubershuffle plan --policy ... --epochs` steps, so a run sends what the
    /// planner predicts.
    pub fn chain_params(&self) -> ChainParams {
        ChainParams::new(self.workers, self.points, self.policy, self.seed)
            .with_cache_capacity(self.cache_capacity)
    }

    /// The configuration itself.
    pub fn into_inner(self) -> RunConfig {
        self.config
    }
}

impl std::ops::Deref for CheckedRunConfig {
    type Target = RunConfig;

    fn deref(&self) -> &RunConfig {
        &self.config
    }
}
