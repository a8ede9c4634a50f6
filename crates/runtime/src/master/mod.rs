//! The master's side of the epoch loop, one job per file: setting up and resuming a run
//! ([`setup`]), which workers are alive ([`membership`]), the epoch pipeline (assign, plan,
//! verify, route, encode, send: [`epoch`]) and collecting acknowledgements and updates
//! ([`collect`]). Every epoch's time is split into phases by one [`crate::PhaseTimer`] on the
//! transport's clock.

mod assigned;
mod attempt_result;
mod collect;
mod disputes;
mod epoch;
mod membership;
mod setup;

use std::sync::Arc;

use crate::run_data::RunData;
use ubershuffle_codes::{Segmentation, default_segment_bytes};
use ubershuffle_core::ShufflePlanner;
use ubershuffle_core::epoch_chain::{EpochChain, check_scheme};
use ubershuffle_core::pliable::OwnerFrequencies;
use ubershuffle_core::rng::{SeededRng, seeded_stream};
use ubershuffle_learners::{Learner, Model, StragglerModel};
use ubershuffle_transport::Transport;

use crate::assignment::owner_frequencies;
use crate::checkpoint::ResumePoint;
use crate::cluster_job::ClusterJob;
use crate::cost_model::Prices;
use crate::fingerprint::RunFingerprint;
use crate::protocol::{MasterMessage, TAG_MASTER};
use crate::{CheckedRunConfig, Checkpoint, ConfigError, EpochMetrics, RuntimeError};
use membership::Membership;

/// The stream of the run's seed the straggler model draws from (the epoch chain's streams are
/// its own: [`ubershuffle_core::epoch_chain`]).
const STREAM_STRAGGLERS: u64 = 2;

/// What a finished run measured.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunReport {
    /// Every epoch, in order (those before a resume come from the checkpoint).
    pub epochs: Vec<EpochMetrics>,
    /// Held-out loss of the starting model.
    pub initial_loss: f64,
    /// The final model.
    pub model: Model,
    /// Workers lost during the run (0-based), in the order they were lost.
    pub lost_workers: Vec<usize>,
}

/// Where a run stands: what a checkpoint keeps but membership.
struct RunState {
    fingerprint: RunFingerprint,
    chain: EpochChain,
    model: Vec<f64>,
    metrics: Vec<EpochMetrics>,
}

impl RunState {
    /// The checkpoint of this state with the workers' liveness `alive`.
    fn checkpoint(&self, alive: &[bool]) -> Checkpoint {
        Checkpoint {
            fingerprint: self.fingerprint.clone(),
            model: self.model.clone(),
            chain: self.chain.state().clone(),
            alive: alive.to_vec(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The master of a run.
pub struct Master<'a, T: Transport> {
    t: T,
    config: &'a CheckedRunConfig,
    planner: &'a dyn ShufflePlanner,
    stragglers: &'a mut dyn StragglerModel,
    straggler_rng: SeededRng,
    data: &'a RunData,
    /// The training records' segments, the points every epoch is planned and coded on (records
    /// of one size are one segment each: the plans of the records themselves).
    segmentation: Arc<Segmentation>,
    /// Whether the chain keeps every worker's place ([`Master::keeping_every_place`]).
    keep_places: bool,
    learner: Box<dyn Learner>,
    /// What a checkpoint keeps but membership: the chain of batches and caches, the model, the
    /// metrics.
    state: RunState,
    members: Membership,
    /// The cost model's prices of this run's computing, charged to the transport's clock.
    prices: Option<Prices>,
    /// Every point's worker counts over the epochs, for the chi-square against uniform.
    owner_counts: Option<OwnerFrequencies>,
    /// The job told to workers that join while the run goes on; `None`: nobody is admitted.
    newcomer_job: Option<ClusterJob>,
    /// The newest attempt each worker acknowledged and reported on.
    seen: collect::Seen,
    /// Reports of altered relays standing against workers.
    disputes: disputes::Disputes,
}

impl<'a, T: Transport> Master<'a, T> {
    /// A master over transport `t` (rank 0 of `config.workers + 1` ranks), starting afresh
    /// ([`Master::resuming`] continues a checkpointed run).
    pub fn new(
        mut t: T,
        config: &'a CheckedRunConfig,
        planner: &'a dyn ShufflePlanner,
        stragglers: &'a mut dyn StragglerModel,
        data: &'a RunData,
    ) -> Result<Self, RuntimeError> {
        let points = data.train.len();
        if points != config.points() {
            return Err(ConfigError::DataSize { checked: config.points(), actual: points }.into());
        }
        if t.rank() != 0 || t.size() != config.workers + 1 {
            let (expected, rank, size) = (config.workers + 1, t.rank(), t.size());
            return Err(ConfigError::MasterRank { expected, rank, size }.into());
        }
        if stragglers.workers() != config.workers {
            return Err(
                ConfigError::StragglerWorkers { model: stragglers.workers(), run: config.workers }.into()
            );
        }
        check_scheme(planner, config.policy, config.candidates)?;
        let learner = config.learner.build()?;
        // From here on, what each worker may send before it is read follows from the job.
        let workers: Vec<usize> = (1..t.size()).collect();
        t.limit_inbox(&workers, crate::inbox::at_master(learner.parameter_count()));
        let expected = learner.record_width();
        let train = match data.train.fixed() {
            Some(train) => Some(("training", train)),
            None if expected != 0 => return Err(ConfigError::SizedRecords { expected }.into()),
            None => None,
        };
        for (which, records) in train.into_iter().chain([("held-out", &data.held_out)]) {
            if records.width() != expected && !records.is_empty() {
                let width = records.width();
                return Err(ConfigError::RecordWidth { which, width, expected }.into());
            }
        }
        let index = data.train.index()?;
        let segmentation = Arc::new(Segmentation::new(index.clone(), default_segment_bytes(&index))?);
        let fingerprint = RunFingerprint::of(config, planner.name(), data);
        let state = setup::fresh_state(config, fingerprint, learner.as_ref())?;
        let straggler_rng = seeded_stream(config.seed, STREAM_STRAGGLERS);
        Ok(Master {
            t,
            config,
            planner,
            stragglers,
            straggler_rng,
            data,
            segmentation,
            keep_places: false,
            learner,
            members: Membership::of(vec![true; config.workers]),
            state,
            prices: None,
            owner_counts: owner_frequencies(points, config.workers),
            newcomer_job: None,
            seen: collect::Seen::default(),
            disputes: disputes::Disputes::default(),
        })
    }

    /// Continues the run of `point` (a checkpoint matched to this run by
    /// [`ResumePoint::check`], which a [`RunSpec`](crate::RunSpec) front end gets from
    /// [`CheckedSpec::prepare`](crate::spec::CheckedSpec::prepare)): its model, chain and
    /// metrics, every worker live again. The straggler model is replayed up to the resume
    /// point, so its state is what it was.
    pub fn resuming(mut self, point: ResumePoint) -> Result<Self, RuntimeError> {
        if point.checkpoint().fingerprint != self.state.fingerprint {
            let diff = self.state.fingerprint.difference(&point.checkpoint().fingerprint).unwrap_or_default();
            let path = self.config.checkpoint.as_ref().map_or_else(String::new, |p| p.display().to_string());
            return Err(RuntimeError::Checkpoint {
                path,
                reason: format!("it belongs to another run ({diff})"),
            });
        }
        self.state = setup::resumed_state(self.config, point, self.keep_places)?;
        for _ in 0..self.state.chain.completed_epochs() {
            self.stragglers.next_iteration(&mut self.straggler_rng);
        }
        Ok(self)
    }

    /// Admits workers that join while the run goes on (over TCP: a lost worker's process
    /// started again, or a spare) into the places of lost workers at the next epoch boundary;
    /// each is first sent `job` (what the others got before the run), then its job and cache
    /// as at a resume. Without it nobody joins a running run.
    pub fn admitting(mut self, job: ClusterJob) -> Self {
        self.newcomer_job = Some(job);
        self
    }

    /// Keeps every worker's place in the chain (the data plane's choice): every epoch is drawn
    /// over all workers, lost or not, from the epoch's first stream, exactly as the Python
    /// sampler draws it; a lost worker's batch is not delivered (its records go untrained
    /// until a process takes its place) and its cache stays the chain's, which a process taking
    /// its place receives. Without it (every learner's run) the survivors take the lost
    /// workers' batches over, and a returning worker gets a new share.
    pub fn keeping_every_place(mut self) -> Self {
        self.keep_places = true;
        self
    }

    /// Charges the master's computing to its transport's clock at `prices` (an emulated
    /// cluster in charged mode; other clocks measure computing themselves and ignore charges).
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = Some(prices);
        self
    }

    /// Runs the remaining epochs; `on_epoch` sees each epoch's metrics as it completes.
    pub fn run(mut self, on_epoch: &mut dyn FnMut(&EpochMetrics)) -> Result<RunReport, RuntimeError> {
        let initial_loss = self.loss(&self.learner.initial_model(self.config.seed))?;
        let result = self.start_workers().and_then(|()| {
            while self.state.chain.completed_epochs() < self.config.epochs {
                self.admit_returning()?;
                let metrics = self.run_epoch()?;
                on_epoch(&metrics);
                self.state.metrics.push(metrics);
                if let Some(path) = &self.config.checkpoint {
                    self.state.checkpoint(self.members.alive()).save(path)?;
                }
            }
            Ok(())
        });
        self.stop_workers();
        result?;
        let lost_workers = self.state.metrics.iter().flat_map(|m| m.lost_workers.iter().copied()).collect();
        Ok(RunReport {
            epochs: self.state.metrics.clone(),
            initial_loss,
            model: Model::new(self.state.model.clone()),
            lost_workers,
        })
    }

    fn loss(&self, model: &Model) -> Result<f64, RuntimeError> {
        let views = ubershuffle_learners::data::record_views(&self.data.held_out);
        Ok(self.learner.loss(model, &views)?)
    }

    /// Sends `message` to `worker`; returns its length.
    fn send(&mut self, worker: usize, message: &MasterMessage) -> Result<u64, RuntimeError> {
        let bytes = message.to_bytes()?;
        self.t.send(worker + 1, TAG_MASTER, &bytes)?;
        Ok(bytes.len() as u64)
    }

    /// Takes worker `w` out of the run; its cache is forgotten (unless the chain keeps every
    /// place).
    fn lose(&mut self, w: usize) {
        self.members.lose(w);
        if !self.keep_places {
            self.state.chain.forget(w);
        }
    }

    fn stop_workers(&mut self) {
        for w in self.members.live() {
            let _ = self.send(w, &MasterMessage::Stop);
        }
    }
}
