//! [`RunConfig`]: what a run does, checked once before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use ubershuffle_core::exchange_policy::ExchangePolicy;

use crate::{LearnerSpec, RuntimeError};

/// A run of the epoch loop.
#[derive(Clone, Debug)]
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
    /// Write a checkpoint here after every epoch.
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint instead of starting afresh.
    pub resume: bool,
}

impl RunConfig {
    /// A one-line description of the parts of the configuration a checkpoint must agree with.
    pub fn fingerprint(&self, planner: &str, points: usize) -> String {
        format!(
            "workers={} points={} cache={} seed={} policy={}:{} learner={:?} planner={}",
            self.workers,
            points,
            self.cache_capacity,
            self.seed,
            self.policy.name(),
            self.policy.fraction(),
            self.learner,
            planner
        )
    }

    /// Checks the configuration against the data.
    pub fn check(&self, points: usize) -> Result<(), RuntimeError> {
        let fail = |m: String| Err(RuntimeError::Config(m));
        if self.workers == 0 || self.workers > points {
            return fail(format!("{} workers for {} points", self.workers, points));
        }
        let batch = points.div_ceil(self.workers);
        if self.cache_capacity < batch || self.cache_capacity > points {
            return fail(format!(
                "the cache holds {} points; it must hold a batch ({batch}) and at most all {points}",
                self.cache_capacity
            ));
        }
        if self.epochs == 0 {
            return fail("at least one epoch".into());
        }
        if self.chunk_bytes == 0 {
            return fail("data messages need a positive size".into());
        }
        if self.resume && self.checkpoint.is_none() {
            return fail("resuming needs a checkpoint file".into());
        }
        Ok(())
    }
}
