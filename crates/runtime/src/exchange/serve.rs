//! [`serve`]: the master of the data plane over TCP: it admits the workers, tells them the
//! job, and runs the epoch loop with [`super::RecordsLearner`], so each epoch delivers every
//! worker the records of its new batch by the planned (coded) delivery. Records of any size
//! are planned and coded on their segments; the chain keeps every worker's place, so a lost
//! worker's batch waits for a process to take its place and every other batch stays the
//! Python sampler's ([`crate::Master::keeping_every_place`]).

use std::path::PathBuf;
use std::time::Duration;

use ubershuffle_codes::Records;

use crate::run_data::ShuffledRecords;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_transport::TransportError;
use ubershuffle_transport::tcp::MasterListener;

use crate::cluster_job::ClusterJob;
use crate::spec::{CheckedSpec, GivenData, PrepareError, PreparedRun, RunSpec, SpecError};
use crate::{EpochMetrics, LearnerSpec, Master, RunData, RunReport, RuntimeError};

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

    /// The run as a [`RunSpec`] (its learner and data are the records served).
    fn spec(&self) -> RunSpec {
        RunSpec {
            workers: self.workers,
            alpha: Some(self.alpha),
            policy: self.policy.kind(),
            fraction: self.policy.given_fraction(),
            scheme: Some(self.scheme.clone()),
            seed: self.seed,
            epochs: self.epochs,
            checkpoint: self.checkpoint.clone(),
            resume: self.resume,
            ..RunSpec::default()
        }
    }
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A setting does not fit the records (named as [`RunSpec`]'s keys, which are the
    /// options' names).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The run's parts could not be built (the scheme, a checkpoint of another run).
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// Setting up the cluster failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The run failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// A data-plane run checked and built from its records and options by [`Serving::prepare`],
/// ready to [`serve`].
pub struct Serving {
    checked: CheckedSpec,
    run: PreparedRun,
    timeout: std::time::Duration,
}

impl Serving {
    /// Checks `options` against `records` and builds the run's parts: a setting that does not
    /// fit the records, an unknown scheme or a checkpoint of another run is refused here,
    /// before anyone is admitted.
    pub fn prepare(
        records: impl Into<ShuffledRecords>,
        options: &ServeOptions,
    ) -> Result<Serving, ServeError> {
        let records = records.into();
        // Records of any size: a learner of width 0, which reads none.
        let width = records.fixed().map_or(0, Records::width);
        let held_out = Records::from_bytes(width.max(1), Vec::new()).map_err(RuntimeError::from)?;
        let learner = LearnerSpec::Records { width };
        let given = GivenData::new(RunData { train: records, held_out });
        let checked = options.spec().check_given(learner, given)?;
        let run = checked.prepare()?;
        Ok(Serving { checked, run, timeout: options.timeout })
    }

    /// The records served.
    pub fn records(&self) -> usize {
        self.run.data.train.len()
    }

    /// Bytes per record, when they are all of one size.
    pub fn record_bytes(&self) -> Option<usize> {
        self.run.data.train.fixed().map(Records::width)
    }

    /// The bytes of all records.
    pub fn total_bytes(&self) -> u64 {
        self.run.data.train.index().map_or(0, |i| i.total_bytes())
    }
}

/// Admits the prepared run's workers on `listener` (which must have been bound with the
/// options' timeouts), then delivers its records over its epochs; `on_epoch` sees each epoch's
/// metrics (the master's bytes, transmissions coded and uncoded, phases).
pub fn serve(
    listener: MasterListener,
    serving: Serving,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<RunReport, ServeError> {
    let Serving { checked, run, timeout } = serving;
    let PreparedRun { planner, mut stragglers, data, resume, .. } = run;
    let workers = checked.config.workers;
    let mut t = listener.accept_workers(workers, |refused| {
        tracing::warn!(from = %refused.from, reason = %refused.reason, "refused a connection");
    })?;
    let job = ClusterJob::EpochLoop { timeout, exit_at_epoch: None };
    for rank in t.connected() {
        // A worker gone already is found lost when the run starts.
        if let Err(e) = job.send(&mut t, rank) {
            tracing::warn!(rank, error = %e, "sending the job");
        }
    }
    let mut master = Master::new(t, &checked.config, planner.as_ref(), stragglers.as_mut(), &data)?
        .keeping_every_place()
        .admitting(job);
    if let Some(point) = resume {
        master = master.resuming(point)?;
    }
    Ok(master.run(on_epoch)?)
}
