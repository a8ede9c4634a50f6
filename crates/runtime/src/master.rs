//! The master's side of the epoch loop: assign, plan, verify, route, encode, send; wait until
//! every worker holds its packets; collect the updates that arrive before the deadline;
//! aggregate; measure; checkpoint.

use std::time::Instant;

use ubershuffle_codes::{Encoder, Records};
use ubershuffle_core::pliable::OwnerFrequencies;
use ubershuffle_core::rng::{SeededRng, seeded_stream, shuffle};
use ubershuffle_core::{Plan, ShuffleInstance, ShufflePlanner, balanced_assignment, cache_around};
use ubershuffle_learners::{IterationOutcome, Learner, Model, StragglerModel, Update};
use ubershuffle_transport::{Transport, TransportError};

use crate::assignment::{EpochPlan, check_planner, owner_frequencies, plan_epoch, record_owners};
use crate::cache_policy::next_cache;
use crate::protocol::{
    EpochAck, EpochOrder, JobSpec, MasterMessage, TAG_MASTER, TAG_RECEIVED, TAG_UPDATE, UpdateOutcome,
    UpdateReport, data_chunk_bytes, records_checksum,
};
use crate::routing::{Routes, route};
use crate::{CheckedRunConfig, Checkpoint, ConfigError, EpochMetrics, RunConfig, RuntimeError};

/// Streams of the run's seed, one per purpose, so that each reproduces on its own.
const STREAM_START: u64 = 1;
const STREAM_GIVEN_START: u64 = 3;
const STREAM_STRAGGLERS: u64 = 2;
const STREAM_EPOCH: u64 = 1 << 32;
const STREAM_PLANNER: u64 = 2 << 32;

/// The training and held-out records the master holds.
#[derive(Clone, Debug)]
pub struct RunData {
    /// The data set being shuffled: record `i` is data point `i`.
    pub train: Records,
    /// Records the loss is measured on.
    pub held_out: Records,
}

/// What a finished run measured.
#[derive(Clone, Debug)]
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

/// The master of a run.
pub struct Master<'a, T: Transport> {
    t: T,
    config: &'a CheckedRunConfig,
    planner: &'a dyn ShufflePlanner,
    stragglers: &'a mut dyn StragglerModel,
    straggler_rng: SeededRng,
    data: &'a RunData,
    learner: Box<dyn Learner>,
    state: Checkpoint,
    /// Workers lost before the next epoch started (while receiving their starting caches);
    /// the next epoch's metrics list them.
    lost_before_epoch: Vec<usize>,
    /// The error behind the last loss, and whether it was a timeout (for the message when no
    /// worker is left).
    last_loss: Option<(String, bool)>,
    /// Every point's worker counts over the epochs, for the chi-square against uniform.
    owner_counts: Option<OwnerFrequencies>,
}

/// How an attempt at an epoch ended.
enum Attempt {
    Done(Box<EpochMetrics>),
    /// A worker was lost while packets were on their way: restart the epoch without it.
    LostWorker(usize),
}

/// The worker (0-based) a transport failure names, if it names one.
fn lost_worker(e: &TransportError) -> Option<usize> {
    e.peer().filter(|&p| p > 0).map(|p| p - 1)
}

/// A lost worker named by an error from sending, or the error itself.
fn lost_or_fatal(e: RuntimeError) -> Result<Attempt, RuntimeError> {
    match &e {
        RuntimeError::Transport(t) => match lost_worker(t) {
            Some(w) => Ok(Attempt::LostWorker(w)),
            None => Err(e),
        },
        _ => Err(e),
    }
}

/// The starting state: a random balanced partition as the previous epoch's batches, and caches
/// around them as in the UberShuffle paper's model (the batch plus random other points).
fn fresh_state(config: &RunConfig, points: usize, learner: &dyn Learner, fingerprint: String) -> Checkpoint {
    let mut rng = seeded_stream(config.seed, STREAM_START);
    let batches = balanced_assignment(&mut rng, config.workers, points);
    let caches = batches.iter().map(|b| cache_around(&mut rng, b, points, config.cache_capacity)).collect();
    Checkpoint {
        fingerprint,
        completed_epochs: 0,
        model: learner.initial_model(config.seed).params,
        batches,
        caches,
        alive: vec![true; config.workers],
        point_to_point_only: false,
        metrics: Vec::new(),
    }
}

/// The records `ids` of `records`, back to back.
fn gather(records: &Records, ids: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * records.width());
    for &id in ids {
        if let Some(r) = records.get(id) {
            out.extend_from_slice(r);
        }
    }
    out
}

fn seconds_since<T: Transport>(t: &T, start: Instant) -> f64 {
    t.now().saturating_duration_since(start).as_secs_f64()
}

impl<'a, T: Transport> Master<'a, T> {
    /// A master over transport `t` (rank 0 of `config.workers + 1` ranks). With
    /// `config.resume`, the state comes from the checkpoint, which must be of this run.
    pub fn new(
        t: T,
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
        check_planner(config, planner)?;
        let learner = config.learner.build()?;
        for (which, records) in [("training", &data.train), ("held-out", &data.held_out)] {
            if records.width() != learner.record_width() {
                let (width, expected) = (records.width(), learner.record_width());
                return Err(ConfigError::RecordWidth { which, width, expected }.into());
            }
        }
        let fingerprint = config.fingerprint(planner.name(), points);
        let state = match (&config.checkpoint, config.resume) {
            (Some(path), true) => {
                let saved = Checkpoint::load(path)?;
                if saved.fingerprint != fingerprint {
                    return Err(RuntimeError::Checkpoint {
                        path: path.display().to_string(),
                        reason: format!(
                            "it belongs to another run ({}; this run: {fingerprint})",
                            saved.fingerprint
                        ),
                    });
                }
                let parameters = learner.parameter_count();
                saved.check_shape(config.workers, points, parameters).map_err(|reason| {
                    RuntimeError::Checkpoint { path: path.display().to_string(), reason }
                })?;
                saved
            }
            _ => fresh_state(config, points, learner.as_ref(), fingerprint),
        };
        // Replay the straggler model up to the resume point, so its state is what it was.
        let mut straggler_rng = seeded_stream(config.seed, STREAM_STRAGGLERS);
        for _ in 0..state.completed_epochs {
            stragglers.next_iteration(&mut straggler_rng);
        }
        Ok(Master {
            t,
            config,
            planner,
            stragglers,
            straggler_rng,
            data,
            learner,
            state,
            lost_before_epoch: Vec::new(),
            last_loss: None,
            owner_counts: owner_frequencies(points, config.workers),
        })
    }

    /// Starts a fresh run from the given partition instead of a random one: `batches[i]` is
    /// worker `i`'s batch "of the previous epoch" (for instance, blocks of the data in storage
    /// order, which the local policy then keeps), and each cache is that batch plus random other
    /// points, as usual. The batches must partition the points `0..q`, one per worker, each
    /// within the cache capacity. A resumed run keeps its checkpointed state and ignores this.
    pub fn with_start(mut self, batches: Vec<Vec<u32>>) -> Result<Self, RuntimeError> {
        if self.state.completed_epochs > 0 {
            return Ok(self);
        }
        let points = self.data.train.len();
        let fail = |m: String| Err(ConfigError::StartingPartition(m).into());
        if batches.len() != self.config.workers {
            return fail(format!("{} batches for {} workers", batches.len(), self.config.workers));
        }
        let mut seen = vec![false; points];
        for b in &batches {
            if b.len() > self.config.cache_capacity {
                return fail(format!(
                    "a batch of {} exceeds the cache ({})",
                    b.len(),
                    self.config.cache_capacity
                ));
            }
            for &p in b {
                match seen.get_mut(p as usize) {
                    Some(s) if !*s => *s = true,
                    Some(_) => return fail(format!("point {p} is in two batches")),
                    None => return fail(format!("point {p} is not one of the {points} points")),
                }
            }
        }
        if let Some(p) = seen.iter().position(|s| !s) {
            return fail(format!("point {p} is in no batch"));
        }
        let mut rng = seeded_stream(self.config.seed, STREAM_GIVEN_START);
        let mut batches = batches;
        for b in &mut batches {
            b.sort_unstable();
        }
        self.state.caches =
            batches.iter().map(|b| cache_around(&mut rng, b, points, self.config.cache_capacity)).collect();
        self.state.batches = batches;
        Ok(self)
    }

    /// Runs the remaining epochs; `on_epoch` sees each epoch's metrics as it completes.
    pub fn run(mut self, on_epoch: &mut dyn FnMut(&EpochMetrics)) -> Result<RunReport, RuntimeError> {
        let initial_loss = self.loss(&self.learner.initial_model(self.config.seed))?;
        let result = self.start_workers().and_then(|()| {
            for epoch in self.state.completed_epochs + 1..=self.config.epochs {
                let metrics = self.run_epoch(epoch)?;
                on_epoch(&metrics);
                self.state.metrics.push(metrics);
                self.state.completed_epochs = epoch;
                if let Some(path) = &self.config.checkpoint {
                    self.state.save(path)?;
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

    fn live(&self) -> Vec<usize> {
        (0..self.config.workers).filter(|&w| self.state.alive[w]).collect()
    }

    fn loss(&self, model: &Model) -> Result<f64, RuntimeError> {
        let views = ubershuffle_learners::data::record_views(&self.data.held_out);
        Ok(self.learner.loss(model, &views)?)
    }

    fn send(&mut self, worker: usize, message: &MasterMessage) -> Result<u64, RuntimeError> {
        let bytes = message.to_bytes()?;
        self.t.send(worker + 1, TAG_MASTER, &bytes)?;
        Ok(bytes.len() as u64)
    }

    /// Keeps what made a worker lost, for the message should none be left.
    fn note_loss(&mut self, e: &dyn std::fmt::Display, timed_out: bool) {
        self.last_loss = Some((e.to_string(), timed_out));
    }

    fn no_workers_left(&self, lost: String) -> RuntimeError {
        let (cause, timed_out) =
            self.last_loss.clone().unwrap_or_else(|| ("a worker left the run".to_string(), false));
        RuntimeError::NoWorkersLeft { lost, cause, timed_out }
    }

    fn lose(&mut self, worker: usize) {
        self.state.alive[worker] = false;
        self.state.caches[worker].clear();
        self.state.point_to_point_only = true;
    }

    /// Tells every worker who it is and sends its starting cache (not part of any epoch; after
    /// a resume, the checkpointed cache).
    fn start_workers(&mut self) -> Result<(), RuntimeError> {
        let width = self.data.train.width();
        let per_message = (self.config.chunk_bytes / width).max(1);
        for w in self.live() {
            let job = JobSpec {
                worker: w as u32,
                workers: self.config.workers as u32,
                points: self.data.train.len() as u32,
                record_width: width as u32,
                cache_capacity: self.config.cache_capacity as u32,
                seed: self.config.seed,
                learner: self.config.learner,
            };
            let cache = self.state.caches[w].clone();
            let sent = self.send(w, &MasterMessage::Job(job)).and_then(|_| {
                for ids in cache.chunks(per_message) {
                    let bytes = gather(&self.data.train, ids);
                    self.send(w, &MasterMessage::Records { ids: ids.to_vec(), bytes })?;
                }
                Ok(())
            });
            if let Err(e) = sent {
                self.note_loss(&e, matches!(&e, RuntimeError::Transport(t) if t.is_timeout()));
                match lost_or_fatal(e)? {
                    Attempt::LostWorker(lost) => {
                        self.lose(lost);
                        self.lost_before_epoch.push(lost);
                    }
                    Attempt::Done(_) => {}
                }
            }
        }
        self.await_caches();
        if self.live().is_empty() {
            return Err(self.no_workers_left("every worker, before the first epoch".into()));
        }
        Ok(())
    }

    /// Waits until every live worker holds its starting cache (on shaped links those bytes
    /// are still on their way when the last send returns; the first epoch must not pay for
    /// them). A worker that does not answer is lost.
    fn await_caches(&mut self) {
        let mut pending = Vec::new();
        for w in self.live() {
            match self.send(w, &MasterMessage::Sync) {
                Ok(_) => pending.push(w),
                Err(_) => self.lose(w),
            }
        }
        while !pending.is_empty() {
            let ranks: Vec<usize> = pending.iter().map(|w| w + 1).collect();
            match self.t.recv_any(&ranks, TAG_RECEIVED) {
                Ok((rank, _)) => pending.retain(|&w| w + 1 != rank),
                Err(e) => {
                    self.note_loss(&e, e.is_timeout());
                    // The named worker is lost; a timeout names none, so every silent one is.
                    let gone = lost_worker(&e).filter(|w| pending.contains(w));
                    for w in gone.map_or_else(|| std::mem::take(&mut pending), |w| vec![w]) {
                        pending.retain(|&x| x != w);
                        self.lose(w);
                    }
                }
            }
        }
    }

    fn stop_workers(&mut self) {
        for w in self.live() {
            let _ = self.send(w, &MasterMessage::Stop);
        }
    }

    /// Runs one epoch, restarting it (with the survivors, point to point) when a worker is lost
    /// while packets are on their way.
    fn run_epoch(&mut self, epoch: usize) -> Result<EpochMetrics, RuntimeError> {
        let started = self.t.now();
        let outcome = self.stragglers.next_iteration(&mut self.straggler_rng);
        let mut lost = std::mem::take(&mut self.lost_before_epoch);
        let mut attempt = 0;
        loop {
            match self.attempt(epoch, attempt, &outcome)? {
                Attempt::Done(mut metrics) => {
                    lost.append(&mut metrics.lost_workers);
                    metrics.lost_workers = lost;
                    metrics.attempts = attempt as usize + 1;
                    metrics.epoch_seconds = seconds_since(&self.t, started);
                    return Ok(*metrics);
                }
                Attempt::LostWorker(w) => {
                    self.lose(w);
                    lost.push(w);
                    if self.live().is_empty() {
                        let names: Vec<String> = lost.iter().map(usize::to_string).collect();
                        return Err(self.no_workers_left(names.join(", ")));
                    }
                }
            }
            attempt += 1;
        }
    }

    /// Deals the batches of lost workers to the survivors, smallest batches first, so that
    /// the batches stay balanced.
    fn adopt_orphans(&mut self, live: &[usize], rng: &mut SeededRng) {
        let mut orphans: Vec<u32> = Vec::new();
        for w in 0..self.config.workers {
            if !self.state.alive[w] {
                orphans.append(&mut self.state.batches[w]);
            }
        }
        if orphans.is_empty() || live.is_empty() {
            return;
        }
        shuffle(rng, &mut orphans);
        let mut order = live.to_vec();
        for p in orphans {
            order.sort_by_key(|&w| self.state.batches[w].len());
            if let Some(&smallest) = order.first() {
                self.state.batches[smallest].push(p);
            }
        }
        for &w in live {
            self.state.batches[w].sort_unstable();
        }
    }

    fn attempt(
        &mut self,
        epoch: usize,
        attempt: u32,
        outcome: &IterationOutcome,
    ) -> Result<Attempt, RuntimeError> {
        let (seed, points) = (self.config.seed, self.data.train.len());
        let stream = (epoch as u64) << 8 | u64::from(attempt);
        let mut rng = seeded_stream(seed, STREAM_EPOCH + stream);
        let live = self.live();
        if live.is_empty() {
            let lost: Vec<String> = (0..self.config.workers).map(|w| w.to_string()).collect();
            return Err(self.no_workers_left(lost.join(", ")));
        }
        self.adopt_orphans(&live, &mut rng);
        let current: Vec<Vec<u32>> = live.iter().map(|&w| self.state.batches[w].clone()).collect();
        let next = self.config.policy.exchange(&current, &mut rng);
        let caches = live.iter().map(|&w| self.state.caches[w].clone()).collect();
        let inst = ShuffleInstance::new(live.len(), points, caches, next)?;

        let mut m = EpochMetrics {
            epoch,
            workers: live.len(),
            uncoded_transmissions: inst.uncoded_transmissions(),
            ..Default::default()
        };
        let t0 = self.t.now();
        // A pliable planner chooses the assignment too (the policy's is its first candidate).
        let mut planner_rng = seeded_stream(seed, STREAM_PLANNER + stream);
        let chosen = plan_epoch(self.config, self.planner, inst, &current, &mut rng, &mut planner_rng)?;
        m.plan_seconds = seconds_since(&self.t, t0);
        let t0 = self.t.now();
        chosen.verify()?;
        m.verify_seconds = seconds_since(&self.t, t0);
        let stats = chosen.randomness(&current);
        m.owner_entropy_bits = stats.owner_entropy_bits.unwrap_or(0.0);
        m.stay_fraction = stats.stay_fraction.unwrap_or(0.0);
        m.cached_fraction = stats.cached_fraction;
        m.owner_chi_square_per_df = record_owners(&mut self.owner_counts, &chosen.owners(), &live);
        let EpochPlan { inst, plan, .. } = chosen;
        m.uncoded_transmissions = inst.uncoded_transmissions();
        m.transmissions = plan.len();
        let t0 = self.t.now();
        let routes = route(&inst, &plan, self.state.point_to_point_only)?;
        m.route_seconds = seconds_since(&self.t, t0);
        m.broadcast_packets = routes.broadcast.len();
        m.unicast_packets = routes.unicast.iter().map(Vec::len).sum();

        // Each worker's check on what it decodes: like verifying, a check, not shuffle work.
        let t0 = self.t.now();
        let checksums: Vec<u32> = (0..live.len())
            .map(|k| {
                records_checksum(
                    inst.needs(k).into_iter().filter_map(|p| self.data.train.get(p).map(|r| (p, r))),
                )
            })
            .collect();
        m.verify_seconds += seconds_since(&self.t, t0);

        let sending = self.t.now();
        let header = EpochHeader {
            epoch: epoch as u32,
            attempt,
            inst: &inst,
            plan: &plan,
            routes: &routes,
            checksums: &checksums,
        };
        if let Err(e) = self.distribute(&header, &live, outcome, &mut m) {
            self.note_loss(&e, matches!(&e, RuntimeError::Transport(t) if t.is_timeout()));
            return lost_or_fatal(e);
        }
        let mut waiting: Vec<usize> = live.clone();
        self.await_acks(&header, &mut waiting, &mut m)?;
        // The master encodes between sends and broadcasts the model in this span; both are
        // counted on their own, so that the phases add up to the epoch's shuffle.
        m.transmit_seconds = (seconds_since(&self.t, sending) - m.encode_seconds - m.model_seconds).max(0.0);

        let updates = self.collect_updates(&header, &mut waiting, &mut m)?;
        m.stragglers = waiting.len();
        m.updates = updates.len();
        let model = self.learner.aggregate(&Model::new(self.state.model.clone()), &updates)?;
        m.loss = self.loss(&model)?;
        self.state.model = model.params;
        for (k, &w) in live.iter().enumerate() {
            if self.state.alive[w] {
                let kept = next_cache(
                    &inst.cache(k).to_vec(),
                    &inst.assignment(k).to_vec(),
                    self.config.cache_capacity,
                    seed,
                    epoch as u32,
                    w as u32,
                );
                self.state.caches[w] = kept;
            }
            self.state.batches[w] = inst.assignment(k).to_vec();
        }
        Ok(Attempt::Done(Box::new(m)))
    }

    /// Sends the orders, the broadcasts and the point-to-point packets of one attempt.
    fn distribute(
        &mut self,
        h: &EpochHeader<'_>,
        live: &[usize],
        outcome: &IterationOutcome,
        m: &mut EpochMetrics,
    ) -> Result<(), RuntimeError> {
        let width = self.data.train.width();
        let per_chunk = (self.config.chunk_bytes / width).max(1);
        let broadcasts = h.routes.broadcast.len().div_ceil(per_chunk);
        let model = Model::new(self.state.model.clone()).to_bytes();
        // One broadcast of the model before the orders, instead of a copy in each, unless
        // broadcasts are off.
        let model_by_broadcast = !self.state.point_to_point_only && live.len() > 1;
        if model_by_broadcast {
            let started = self.t.now();
            for &w in live {
                m.control_bytes += self.send(w, &MasterMessage::ModelFollows)?;
            }
            let mut buf = model.clone();
            m.model_bytes = buf.len() as u64;
            self.t.broadcast(0, &mut buf)?;
            m.model_seconds = seconds_since(&self.t, started);
        }
        for (k, &w) in live.iter().enumerate() {
            let seqs = &h.routes.needs[k];
            let mut sub_plan = Plan::with_capacity(seqs.len(), 0);
            for &s in seqs {
                sub_plan.push(h.plan.transmission(s as usize));
            }
            let late = self.config.deadline.filter(|_| outcome.is_late(w));
            let order = EpochOrder {
                epoch: h.epoch,
                attempt: h.attempt,
                model: if model_by_broadcast { Vec::new() } else { model.clone() },
                batch: h.inst.assignment(k).to_vec(),
                plan: sub_plan,
                seqs: seqs.clone(),
                broadcasts: broadcasts as u32,
                unicasts: h.routes.unicast[k].len().div_ceil(per_chunk) as u32,
                checksum: h.checksums[k],
                // A straggler holds its update past the deadline (the model's verdict, played out).
                hold_seconds: late.map_or(0.0, |d| d.as_secs_f64() * 1.25 + 0.01),
            };
            m.control_bytes += self.send(w, &MasterMessage::Order(order))?;
        }
        let encoder = Encoder::new(h.plan, &self.data.train)?;
        for seqs in h.routes.broadcast.chunks(per_chunk) {
            let mut buf = encode(&encoder, h, seqs, false, m);
            self.t.broadcast(0, &mut buf)?;
        }
        for (k, &w) in live.iter().enumerate() {
            for seqs in h.routes.unicast[k].chunks(per_chunk) {
                let bytes = encode(&encoder, h, seqs, true, m);
                self.t.send(w + 1, TAG_MASTER, &bytes)?;
            }
        }
        Ok(())
    }

    /// Waits until every worker of `waiting` holds its packets. A worker lost now is dropped
    /// from the epoch (its update will not come) and from the run.
    ///
    /// Each wait lasts twice the transport's timeout: after a broadcast that a stalled (not
    /// departed) worker broke, a survivor may sit in the pseudo-broadcast ring for one timeout
    /// before it gives up and takes the restarted epoch's order. Workers still silent after
    /// that are stalled: every one of them is dropped (a timeout names no single culprit) and
    /// told to stop.
    fn await_acks(
        &mut self,
        h: &EpochHeader<'_>,
        waiting: &mut Vec<usize>,
        m: &mut EpochMetrics,
    ) -> Result<(), RuntimeError> {
        let timeout = self.t.timeout();
        self.t.set_timeout(timeout.saturating_mul(2));
        let result = self.await_acks_within(h, waiting, m);
        self.t.set_timeout(timeout);
        result
    }

    fn await_acks_within(
        &mut self,
        h: &EpochHeader<'_>,
        waiting: &mut Vec<usize>,
        m: &mut EpochMetrics,
    ) -> Result<(), RuntimeError> {
        let mut pending = waiting.clone();
        while !pending.is_empty() {
            let ranks: Vec<usize> = pending.iter().map(|w| w + 1).collect();
            match self.t.recv_any(&ranks, TAG_RECEIVED) {
                Ok((rank, bytes)) => {
                    let ack = EpochAck::from_bytes(&bytes)?;
                    if (ack.epoch, ack.attempt) == (h.epoch, h.attempt) {
                        pending.retain(|&w| w + 1 != rank);
                    }
                }
                Err(e) if e.is_timeout() => {
                    self.note_loss(&e, e.is_timeout());
                    for w in std::mem::take(&mut pending) {
                        waiting.retain(|&x| x != w);
                        m.lost_workers.push(w);
                        self.lose(w);
                        // Best effort: a stalled worker that wakes up should leave, not wait.
                        let _ = self.send(w, &MasterMessage::Stop);
                    }
                }
                Err(e) => match lost_worker(&e) {
                    Some(w) if pending.contains(&w) => {
                        self.note_loss(&e, false);
                        pending.retain(|&x| x != w);
                        waiting.retain(|&x| x != w);
                        m.lost_workers.push(w);
                        self.lose(w);
                    }
                    _ => return Err(e.into()),
                },
            }
        }
        Ok(())
    }

    /// Collects the updates of `waiting` until the deadline; on return `waiting` holds the
    /// stragglers.
    fn collect_updates(
        &mut self,
        h: &EpochHeader<'_>,
        waiting: &mut Vec<usize>,
        m: &mut EpochMetrics,
    ) -> Result<Vec<Update>, RuntimeError> {
        let timeout = self.t.timeout();
        let until = self.config.deadline.map(|d| Instant::now() + d);
        let mut updates = Vec::new();
        let result = loop {
            if waiting.is_empty() {
                break Ok(());
            }
            if let Some(until) = until {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break Ok(());
                }
                self.t.set_timeout(left.min(timeout));
            }
            let ranks: Vec<usize> = waiting.iter().map(|w| w + 1).collect();
            match self.t.recv_any(&ranks, TAG_UPDATE) {
                Ok((rank, bytes)) => {
                    let report = UpdateReport::from_bytes(&bytes)?;
                    if (report.epoch, report.attempt) != (h.epoch, h.attempt) {
                        continue; // a straggler's update from an earlier epoch
                    }
                    waiting.retain(|&w| w + 1 != rank);
                    match report.outcome {
                        UpdateOutcome::Done { update, decode_seconds, compute_seconds, .. } => {
                            updates.push((rank, Update::from_bytes(&update)?));
                            m.decode_seconds = m.decode_seconds.max(decode_seconds);
                            m.compute_seconds = m.compute_seconds.max(compute_seconds);
                        }
                        UpdateOutcome::Failed(message) => {
                            break Err(RuntimeError::WorkerFailed { worker: rank - 1, message });
                        }
                    }
                }
                // Past the deadline (or, without one, a worker that stalls): the rest straggle.
                Err(e) if e.is_timeout() => break Ok(()),
                Err(e) => match lost_worker(&e) {
                    Some(w) if waiting.contains(&w) => {
                        self.note_loss(&e, false);
                        waiting.retain(|&x| x != w);
                        m.lost_workers.push(w);
                        self.lose(w);
                    }
                    _ => break Err(e.into()),
                },
            }
        };
        self.t.set_timeout(timeout);
        // Aggregate in worker order, not arrival order, so that sums are the same every run.
        updates.sort_by_key(|(rank, _)| *rank);
        result.map(|()| updates.into_iter().map(|(_, u)| u).collect())
    }
}

/// The data chunk of `seqs`, XOR-encoded straight into its message (a broadcast buffer, or a
/// point-to-point [`crate::protocol::MasterMessage::Data`]).
fn encode(
    encoder: &Encoder<'_>,
    h: &EpochHeader<'_>,
    seqs: &[u32],
    point_to_point: bool,
    m: &mut EpochMetrics,
) -> Vec<u8> {
    let width = encoder.width();
    let started = Instant::now();
    let bytes = data_chunk_bytes(h.epoch, h.attempt, seqs, width, point_to_point, |k, out| {
        encoder.encode_into(seqs[k] as usize, out);
    });
    m.encode_seconds += started.elapsed().as_secs_f64();
    m.payload_bytes += (seqs.len() * width) as u64;
    bytes
}

/// What every message of one attempt refers to.
struct EpochHeader<'p> {
    epoch: u32,
    attempt: u32,
    inst: &'p ShuffleInstance,
    plan: &'p Plan,
    routes: &'p Routes,
    /// Each worker's checksum of its new records.
    checksums: &'p [u32],
}
