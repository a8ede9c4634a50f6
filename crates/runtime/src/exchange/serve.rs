//! [`serve`]: the master of the data plane over TCP: it admits the workers, tells them the
//! job, and runs the epoch loop with [`super::RecordsLearner`], so each epoch delivers every
//! worker the records of its new batch by the planned (coded) delivery.

use std::path::PathBuf;
use std::time::Duration;

use ubershuffle_codes::Records;
use ubershuffle_core::PlannerOptions;
use ubershuffle_core::epoch_chain::{ChainError, ChainParams};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::straggler::NoStragglers;
use ubershuffle_planners::{UnknownScheme, planner_by_name};
use ubershuffle_transport::TransportError;
use ubershuffle_transport::tcp::MasterListener;

use crate::cluster_job::ClusterJob;
use crate::{
    EpochMetrics, LearnerSpec, Master, ResumePoint, RunConfig, RunData, RunFingerprint, RunReport,
    RuntimeError,
};

/// How a data-plane master serves: the run's chain (workers, cache ratio, policy, seed: the
/// same as `ubershuffle.CodedShuffleSampler`'s for the same values), its scheme and epochs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Workers (ranks 1..=workers).
    pub workers: usize,
    /// Cache ratio: each worker caches `floor(alpha * points)` records.
    pub alpha: f64,
    /// How batches change between epochs.
    pub policy: ExchangePolicy,
    /// The delivery scheme (a built-in planner's name).
    pub scheme: String,
    /// Seed of the chain and the planner.
    pub seed: u64,
    /// Epochs to deliver (epochs 1..=epochs; epoch 0's batches are in the starting caches).
    pub epochs: usize,
    /// The timeout of every wait once running; a worker silent for longer is lost.
    pub timeout: Duration,
    /// How long the workers have to join.
    pub join_timeout: Duration,
    /// Checkpoint after every epoch here; with `resume`, continue from it.
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint.
    pub resume: bool,
}

impl ServeOptions {
    /// `workers` workers caching `alpha` of the data, global reshuffling by `coded`
    /// delivery (the planner `auto`), seed 0, one epoch, 10 s timeout, 60 s to join.
    pub fn new(workers: usize, alpha: f64) -> Self {
        ServeOptions {
            workers,
            alpha,
            policy: ExchangePolicy::Global,
            scheme: "auto".into(),
            seed: 0,
            epochs: 1,
            timeout: Duration::from_secs(10),
            join_timeout: Duration::from_secs(60),
            checkpoint: None,
            resume: false,
        }
    }

    /// The run's configuration for `points` records of `width` bytes.
    fn config(&self, points: usize, width: usize) -> Result<RunConfig, ServeError> {
        let chain = ChainParams::new(self.workers, points, self.policy, self.seed).with_alpha(self.alpha)?;
        let capacity = chain.cache_capacity.unwrap_or(points.div_ceil(self.workers.max(1)));
        let mut config = RunConfig::new(self.workers, capacity, LearnerSpec::Records { width })
            .with_epochs(self.epochs)
            .with_seed(self.seed)
            .with_policy(self.policy);
        if let Some(path) = &self.checkpoint {
            config = config.with_checkpoint(path);
        }
        Ok(config)
    }
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The scheme is not a built-in planner.
    #[error(transparent)]
    Scheme(#[from] UnknownScheme),
    /// The chain's settings do not fit the data.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// Setting up the cluster failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The run failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// Admits `options.workers` workers on `listener` (which must have been bound with the same
/// timeouts), then delivers `records` over `options.epochs` epochs; `on_epoch` sees each
/// epoch's metrics (the master's bytes, transmissions coded and uncoded, phases).
pub fn serve(
    listener: MasterListener,
    records: Records,
    options: &ServeOptions,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<RunReport, ServeError> {
    let config =
        options.config(records.len(), records.width())?.check(records.len()).map_err(RuntimeError::from)?;
    let planner = planner_by_name(&options.scheme, &PlannerOptions::default())?;
    let mut stragglers = NoStragglers::new(options.workers).map_err(RuntimeError::from)?;
    let held_out = Records::from_bytes(records.width(), Vec::new()).map_err(RuntimeError::from)?;
    let data = RunData { train: records, held_out };
    // A checkpoint of another run is refused before anyone is admitted.
    let resume = match config.checkpoint.as_ref().filter(|_| options.resume) {
        Some(path) => {
            Some(ResumePoint::load(path, &RunFingerprint::of(&config, planner.name(), &data), &config)?)
        }
        None => None,
    };
    let mut t = listener.accept_workers(options.workers, |refused| {
        tracing::warn!(from = %refused.from, reason = %refused.reason, "refused a connection");
    })?;
    let job = ClusterJob::EpochLoop { timeout: options.timeout, exit_at_epoch: None };
    for rank in t.connected() {
        // A worker gone already is found lost when the run starts.
        if let Err(e) = job.send(&mut t, rank) {
            tracing::warn!(rank, error = %e, "sending the job");
        }
    }
    let mut master = Master::new(t, &config, planner.as_ref(), &mut stragglers, &data)?.admitting(job);
    if let Some(point) = resume {
        master = master.resuming(point)?;
    }
    Ok(master.run(on_epoch)?)
}
