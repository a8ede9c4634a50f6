//! The epoch pipeline: draw the next assignment, plan, verify, route, broadcast the model,
//! send the orders, encode and send the packets; then (in [`super::collect`]) wait for the
//! packets to land and the updates to come; aggregate. A worker lost while packets are on their
//! way restarts the epoch without it: the survivors are told their new broadcast group, and the
//! restarted attempt is planned over them and broadcast again.

use std::sync::Arc;

use ubershuffle_codes::{RecordSource, SegmentEncoder};
use ubershuffle_core::epoch_chain::assignment_randomness;
use ubershuffle_core::{Plan, ShuffleInstance};
use ubershuffle_learners::straggler::straggler_hold;
use ubershuffle_learners::{IterationOutcome, Model, Received, UpdateBody};
use ubershuffle_transport::{Transport, TransportError, ring_order};

use super::Master;
use super::attempt_result::{AttemptResult, Planned, Traffic};
use super::disputes::Verdict;
use super::membership::blamed_workers;
use crate::assignment::record_owners;
use crate::cost_model::Work;
use crate::phases::{Phase, Stopwatch};
use crate::protocol::{
    EpochOrder, MasterMessage, TAG_MASTER, broadcast_name, data_chunk_bytes, records_checksum_append,
};
use crate::routing::{Routes, route};
use crate::segment_epoch::{SegmentEpoch, plan_segment_epoch_without};
use crate::{EpochMetrics, RuntimeError};

/// How an attempt at an epoch ended.
pub(super) enum Attempt {
    /// The epoch is done: every phase's result.
    Done(Box<AttemptResult>),
    /// Workers were lost (or dropped for what they sent) while packets were on their way:
    /// restart the epoch without them.
    LostWorkers(Vec<usize>),
}

/// What every message of one attempt refers to.
pub(super) struct EpochHeader<'p> {
    pub(super) epoch: u32,
    pub(super) attempt: u32,
    /// The instance's workers, in its order (the attempt's live workers, or every worker when
    /// the chain keeps every place: then only the live ones receive).
    pub(super) workers: &'p [usize],
    /// The record-level instance: every worker's cache and new batch.
    pub(super) inst: &'p ShuffleInstance,
    /// The plan, over the training records' segments.
    plan: &'p Plan,
    routes: &'p Routes,
    /// Each worker's checksum of its new records.
    checksums: &'p [u32],
}

impl EpochHeader<'_> {
    /// The instance's workers that receive this attempt, with their places in the instance.
    fn receivers<'a>(&'a self, live: &'a [usize]) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.workers.iter().copied().enumerate().filter(|(_, w)| live.contains(w))
    }
}

/// The multiply-adds of aggregating `updates`' values.
fn aggregate_work(updates: &[ubershuffle_learners::Update]) -> u64 {
    updates
        .iter()
        .map(|u| match &u.body {
            UpdateBody::Dense(values) => values.len() as u64,
            UpdateBody::Rows { width, rows } => (rows.len() * width) as u64,
        })
        .sum()
}

impl<T: Transport> Master<'_, T> {
    /// Runs one epoch, restarting it (planned and broadcast over the survivors) when a worker is lost
    /// while packets are on their way. Every attempt's time counts, phase by phase.
    pub(super) fn run_epoch(&mut self) -> Result<EpochMetrics, RuntimeError> {
        let mut watch = Stopwatch::start(&self.t, self.prices);
        let outcome = self.stragglers.next_iteration(&mut self.straggler_rng);
        let mut lost = self.members.take_lost_before_epoch();
        let mut attempt = 0;
        // Every restart drops a live worker or routes around a new dispute (each worker's
        // first accusation, at most: `disputes`), so an epoch has at most two attempts per
        // worker that began it, plus the last; past that the cap ends the run instead of
        // looping.
        let cap = 2 * self.members.live().len() as u32 + 1;
        loop {
            if attempt >= cap {
                let epoch = self.state.chain.completed_epochs() + 1;
                return Err(RuntimeError::TooManyAttempts { epoch, attempts: attempt });
            }
            match self.attempt(attempt, &outcome, &mut watch)? {
                Attempt::Done(result) => {
                    lost.extend_from_slice(&result.dropped);
                    if self.members.live().is_empty() {
                        // Every worker was lost during the epoch: it did not happen (no update
                        // came), so it is neither recorded nor checkpointed, and a resume runs it.
                        let names: Vec<String> = lost.iter().map(usize::to_string).collect();
                        return Err(self.members.no_workers_left(names.join(", ")));
                    }
                    let rejoined = self.members.take_rejoined_before_epoch();
                    let metrics = result.into_metrics(&watch, attempt as usize + 1, lost, rejoined);
                    log_epoch(&metrics);
                    return Ok(metrics);
                }
                Attempt::LostWorkers(gone) => {
                    for w in gone {
                        self.lose(w);
                        lost.push(w);
                    }
                    // No survivor may still wait in the abandoned attempt's broadcast when the
                    // next one starts (its ring peers would wait for it in vain).
                    lost.append(&mut self.await_quiet());
                    watch.lap_idle(&self.t, Phase::Transmit);
                    if self.members.live().is_empty() {
                        let names: Vec<String> = lost.iter().map(usize::to_string).collect();
                        return Err(self.members.no_workers_left(names.join(", ")));
                    }
                }
            }
            attempt += 1;
        }
    }

    /// One attempt at the epoch over the live workers: planned -> routed -> sent -> collected
    /// -> aggregated, each phase timed by `watch`.
    fn attempt(
        &mut self,
        attempt: u32,
        outcome: &IterationOutcome,
        watch: &mut Stopwatch,
    ) -> Result<Attempt, RuntimeError> {
        let live = self.members.live();
        if live.is_empty() {
            let lost: Vec<String> = (0..self.config.workers).map(|w| w.to_string()).collect();
            return Err(self.members.no_workers_left(lost.join(", ")));
        }
        let planned = self.planned(&live, attempt, watch)?;
        let (inst, plan) = (&planned.chosen.records, &planned.chosen.plan);
        let (routes, checksums) = self.routed(&planned.chosen, watch)?;
        let header = EpochHeader {
            epoch: planned.chosen.epoch as u32,
            attempt,
            workers: &planned.chosen.live,
            inst,
            plan,
            routes: &routes,
            checksums: &checksums,
        };
        let mut traffic = Traffic::default();
        if let Err(e) = self.distribute(&header, &live, outcome, &mut traffic, watch) {
            return match &e {
                RuntimeError::Transport(t) => {
                    let gone = match self.judged(t, &live, attempt) {
                        Some(Verdict::RouteAround) => {
                            self.members.note_loss(t, false);
                            watch.lap_idle(&self.t, Phase::Transmit);
                            return Ok(Attempt::LostWorkers(Vec::new()));
                        }
                        Some(Verdict::Drop(gone)) => gone,
                        None => blamed_workers(t, &live),
                    };
                    if gone.is_empty() {
                        return Err(e);
                    }
                    self.members.note_loss(t, t.is_timeout());
                    if matches!(t, TransportError::Tampered { .. } | TransportError::Protocol { .. }) {
                        // Dropped for what was reported or sent, not gone: told to leave.
                        for &w in &gone {
                            let _ = self.send(w, &MasterMessage::Stop);
                        }
                    }
                    watch.lap_idle(&self.t, Phase::Transmit);
                    Ok(Attempt::LostWorkers(gone))
                }
                _ => Err(e),
            };
        }
        let (mut waiting, mut dropped) = (live.clone(), Vec::new());
        self.await_acks(&header, &mut waiting, &mut dropped)?;
        watch.lap_idle(&self.t, Phase::Transmit);
        let (senders, updates) = self.collect_updates(&header, &mut waiting, &mut dropped, watch)?;
        let loss = self.aggregated(&planned.chosen, &senders, &updates, watch)?;
        let (broadcast_packets, unicast_packets) = (routes.broadcast.len(), routes.unicast_packets());
        Ok(Attempt::Done(Box::new(AttemptResult {
            planned,
            broadcast_packets,
            unicast_packets,
            traffic,
            updated_workers: senders,
            stragglers: waiting.len(),
            dropped,
            loss,
        })))
    }

    /// The verdict on a report that a worker of `live` relayed an altered piece to another
    /// one in `attempt` ([`super::disputes`]); `None` for any other failure.
    fn judged(&mut self, e: &TransportError, live: &[usize], attempt: u32) -> Option<Verdict> {
        let TransportError::Tampered { sender, receiver, .. } = e else { return None };
        let (accused, accuser) = (sender.checked_sub(1)?, receiver.checked_sub(1)?);
        if !live.contains(&accused) || !live.contains(&accuser) {
            return None;
        }
        // The next attempt runs over the same workers (none is dropped) with the next ring.
        let receivers: Vec<usize> = live.iter().map(|w| w + 1).collect();
        let ring = ring_order(&receivers, attempt.wrapping_add(1));
        let at = ring.iter().position(|&r| r == *sender)?;
        let separable = ring[(at + 1) % ring.len()] != *receiver;
        let verdict = self.disputes.judge(accuser, accused, separable);
        tracing::warn!(accuser, accused, ?verdict, "a relayed piece was reported altered");
        Some(verdict)
    }

    /// The planned phase: draws the epoch from the chain over the live workers (or every
    /// worker, when the chain keeps every place), plans it on the training records' segments (a
    /// pliable planner chooses the assignment too: the policy's is its first candidate),
    /// verifies it and measures how random the assignment is.
    fn planned(
        &mut self,
        live: &[usize],
        attempt: u32,
        watch: &mut Stopwatch,
    ) -> Result<Planned, RuntimeError> {
        let points = self.data.train.len();
        // The policy's assignment, or the one the learner dictates; a pliable planner chooses
        // the assignment too (the policy's is its first candidate). Workers whose places the
        // chain keeps while they are lost receive nothing.
        let drawn = self.draw(live, attempt)?;
        let absent: Vec<usize> = (0..drawn.live.len()).filter(|&k| !live.contains(&drawn.live[k])).collect();
        let candidates = self.config.candidates;
        let chosen =
            plan_segment_epoch_without(drawn, self.planner, candidates, &self.segmentation, &absent)?;
        let uncoded = chosen.segments.uncoded_transmissions() as u64;
        let cached: usize = (0..chosen.live.len()).map(|k| chosen.records.cache(k).len()).sum();
        let work = Work { requests: uncoded, drawn_points: (points + cached) as u64, ..Work::default() };
        watch.lap(&mut self.t, Phase::Plan, work);
        // Verified on the segments as it was planned (`plan_segment_epoch_without`).
        let pairs: u64 = chosen.plan.iter().map(|parts| (parts.len() * parts.len()) as u64).sum();
        watch.lap(&mut self.t, Phase::Verify, Work { verified_pairs: pairs + uncoded, ..Work::default() });
        let inst = &chosen.records;
        let owners: Vec<u32> = (0..inst.points() as u32).map(|p| inst.owner(p) as u32).collect();
        let randomness = assignment_randomness(inst, &chosen.previous, &owners);
        let owner_chi_square_per_df = record_owners(&mut self.owner_counts, &owners, &chosen.live);
        Ok(Planned { chosen, receivers: live.len(), randomness, owner_chi_square_per_df })
    }

    /// The routed phase: which packets go by broadcast and which point to point, and each
    /// worker's checksum of its new records (its check on what it decodes).
    fn routed(
        &mut self,
        chosen: &SegmentEpoch,
        watch: &mut Stopwatch,
    ) -> Result<(Routes, Vec<u32>), RuntimeError> {
        let (inst, plan) = (&chosen.segments, &chosen.plan);
        let routes = route(inst, plan)?;
        let parts: u64 = plan.iter().map(|p| p.len() as u64).sum();
        let work = Work { peeled_parts: parts * inst.workers() as u64, ..Work::default() };
        watch.lap(&mut self.t, Phase::Route, work);
        // Like verifying, a check, not shuffle work.
        let (records, train) = (&chosen.records, &self.data.train);
        let (mut checksums, mut record, mut checksummed) =
            (Vec::with_capacity(inst.workers()), Vec::new(), 0);
        for k in 0..inst.workers() {
            // A worker that receives nothing needs nothing: its checksum is of no record.
            let needs = if inst.needs(k).is_empty() { Vec::new() } else { records.needs(k).to_vec() };
            let mut crc = 0;
            for p in needs {
                record.clear();
                train.append(p, &mut record)?;
                crc = records_checksum_append(crc, p, &record);
                checksummed += record.len() as u64;
            }
            checksums.push(crc);
        }
        watch.lap(&mut self.t, Phase::Verify, Work { checksummed_bytes: checksummed, ..Work::default() });
        Ok((routes, checksums))
    }

    /// The aggregated phase: the new model from the updates, and the chain moved on (each
    /// worker's new batch and cache; a worker lost meanwhile forgets its cache, unless the
    /// chain keeps every place). Gives the new model's held-out loss.
    fn aggregated(
        &mut self,
        chosen: &SegmentEpoch,
        senders: &[usize],
        updates: &[ubershuffle_learners::Update],
        watch: &mut Stopwatch,
    ) -> Result<f64, RuntimeError> {
        let received = Received { epoch: chosen.epoch, workers: senders, updates };
        let model = self.learner.aggregate_received(&Model::new(self.state.model.clone()), &received)?;
        let loss = self.loss(&model)?;
        self.state.model = model.params;
        self.state.chain.commit_instance(chosen.epoch, &chosen.live, &chosen.records);
        if !self.keep_places {
            for &w in &chosen.live {
                if !self.members.is_alive(w) {
                    self.state.chain.forget(w);
                }
            }
        }
        let inst = &chosen.records;
        let held_out = ubershuffle_learners::data::record_views(&self.data.held_out);
        let kept: usize = (0..inst.workers()).map(|k| inst.cache(k).len() + inst.assignment(k).len()).sum();
        let work = Work {
            coordinates: aggregate_work(updates),
            loss_coordinates: self.config.learner.loss_work(&held_out),
            kept_points: kept as u64,
            ..Work::default()
        };
        watch.lap(&mut self.t, Phase::Aggregate, work);
        Ok(loss)
    }

    /// Sends the model, the orders, the broadcasts and the point-to-point packets of one
    /// attempt.
    fn distribute(
        &mut self,
        h: &EpochHeader<'_>,
        live: &[usize],
        outcome: &IterationOutcome,
        traffic: &mut Traffic,
        watch: &mut Stopwatch,
    ) -> Result<(), RuntimeError> {
        let per_chunk = self.packets_per_chunk();
        let model = Model::new(self.state.model.clone()).to_bytes();
        // The survivors of a loss learn their new broadcast group before its first broadcast.
        if let Some(group) = self.members.group_to_announce() {
            let members = MasterMessage::Members(group.iter().map(|&w| w as u32).collect());
            for &w in &group {
                traffic.control += self.send(w, &members)?;
            }
            self.members.announced(group);
        }
        let group: Vec<usize> = std::iter::once(0).chain(live.iter().map(|w| w + 1)).collect();
        // One broadcast of the model before the orders, instead of a copy in each.
        let model_by_broadcast = live.len() > 1;
        if model_by_broadcast {
            let follows = MasterMessage::ModelFollows { epoch: h.epoch, attempt: h.attempt };
            for &w in live {
                traffic.control += self.send(w, &follows)?;
            }
            let mut buf = model.clone();
            traffic.model = buf.len() as u64;
            self.t.broadcast_turned(
                0,
                &group,
                (broadcast_name(h.epoch, h.attempt, 0), h.attempt),
                &mut buf,
            )?;
            let work = Work { copied_bytes: 2 * traffic.model, ..Work::default() };
            watch.lap(&mut self.t, Phase::ModelBroadcast, work);
        }
        self.send_orders(h, live, outcome, &model, model_by_broadcast, traffic, watch)?;
        let (data, segmentation) = (self.data, Arc::clone(&self.segmentation));
        let encoder = SegmentEncoder::new(h.plan, &segmentation, data.train.source())?;
        for (k, seqs) in h.routes.broadcast.chunks(per_chunk).enumerate() {
            let mut buf = self.encode(&encoder, h, seqs, false, traffic, watch)?;
            let name = broadcast_name(h.epoch, h.attempt, k as u32 + 1);
            self.t.broadcast_turned(0, &group, (name, h.attempt), &mut buf)?;
            watch.lap_idle(&self.t, Phase::Transmit);
        }
        for (k, w) in h.receivers(live) {
            for seqs in h.routes.unicast[k].chunks(per_chunk) {
                let bytes = self.encode(&encoder, h, seqs, true, traffic, watch)?;
                self.t.send(w + 1, TAG_MASTER, &bytes)?;
                watch.lap_idle(&self.t, Phase::Transmit);
            }
        }
        Ok(())
    }

    /// Packets per data message: as many as fit in the configured chunk.
    fn packets_per_chunk(&self) -> usize {
        (self.config.chunk_bytes / self.segmentation.segment_bytes()).max(1)
    }

    /// Sends every live worker its order: its batch, the plan's transmissions it needs, how
    /// many data messages follow, its checksum, and the model unless it was broadcast.
    #[allow(clippy::too_many_arguments)]
    fn send_orders(
        &mut self,
        h: &EpochHeader<'_>,
        live: &[usize],
        outcome: &IterationOutcome,
        model: &[u8],
        model_by_broadcast: bool,
        traffic: &mut Traffic,
        watch: &mut Stopwatch,
    ) -> Result<(), RuntimeError> {
        let per_chunk = self.packets_per_chunk();
        let broadcasts = h.routes.broadcast.len().div_ceil(per_chunk);
        for (k, w) in h.receivers(live) {
            let seqs = &h.routes.needs[k];
            let mut sub_plan = Plan::with_capacity(seqs.len(), 0);
            for &s in seqs {
                sub_plan.push(h.plan.transmission(s as usize));
            }
            let late = self.config.deadline.filter(|_| outcome.is_late(w));
            let order = MasterMessage::Order(EpochOrder {
                epoch: h.epoch,
                attempt: h.attempt,
                model: if model_by_broadcast { Vec::new() } else { model.to_vec() },
                batch: h.inst.assignment(k).to_vec(),
                plan: sub_plan,
                seqs: seqs.clone(),
                broadcasts: broadcasts as u32,
                unicasts: h.routes.unicast[k].len().div_ceil(per_chunk) as u32,
                checksum: h.checksums[k],
                // A straggler holds its update past the deadline (the model's verdict, played out).
                hold_seconds: late.map_or(0.0, |d| straggler_hold(d).as_secs_f64()),
            });
            let bytes = order.to_bytes()?;
            watch.lap(
                &mut self.t,
                Phase::Route,
                Work { copied_bytes: bytes.len() as u64, ..Work::default() },
            );
            self.t.send(w + 1, TAG_MASTER, &bytes)?;
            traffic.control += bytes.len() as u64;
            watch.lap_idle(&self.t, Phase::Transmit);
        }
        Ok(())
    }

    /// The data chunk of `seqs`, XOR-encoded straight into its message (a broadcast buffer, or
    /// a point-to-point [`crate::protocol::MasterMessage::Data`]); a lap of encoding.
    fn encode<R: RecordSource + ?Sized>(
        &mut self,
        encoder: &SegmentEncoder<'_, R>,
        h: &EpochHeader<'_>,
        seqs: &[u32],
        point_to_point: bool,
        traffic: &mut Traffic,
        watch: &mut Stopwatch,
    ) -> Result<Vec<u8>, RuntimeError> {
        let width = encoder.width();
        let mut failed = None;
        let bytes = data_chunk_bytes(h.epoch, h.attempt, seqs, width, point_to_point, |k, out| {
            if let Err(e) = encoder.encode_into(seqs[k] as usize, out) {
                failed.get_or_insert(e);
            }
        });
        if let Some(e) = failed {
            return Err(e.into());
        }
        let parts: usize = seqs.iter().map(|&s| h.plan.transmission(s as usize).len()).sum();
        let payload = (seqs.len() * width) as u64;
        traffic.data += bytes.len() as u64;
        traffic.data_messages += 1;
        traffic.unicast_messages += usize::from(point_to_point);
        if point_to_point {
            traffic.unicast += payload;
        } else {
            traffic.broadcast += payload;
        }
        let work =
            Work { xored_bytes: (parts * width) as u64, copied_bytes: bytes.len() as u64, ..Work::default() };
        watch.lap(&mut self.t, Phase::Encode, work);
        Ok(bytes)
    }
}

/// The epoch's event: its counts and its phases' durations (seconds of the rank's clock).
fn log_epoch(m: &EpochMetrics) {
    tracing::info!(
        epoch = m.epoch,
        workers = m.workers,
        attempts = m.attempts,
        transmissions = m.transmissions,
        uncoded = m.uncoded_transmissions,
        updates = m.updates,
        stragglers = m.stragglers,
        loss = m.loss,
        epoch_s = m.epoch_seconds,
        "epoch done"
    );
    for (phase, seconds) in m.phases() {
        tracing::debug!(epoch = m.epoch, phase, seconds, "epoch phase");
    }
}
