//! Collecting from the workers: the acknowledgements that end an epoch's transmission, and the
//! updates that arrive before the deadline. Deadlines are judged on the transport's clock (an
//! emulated cluster's clock on shaped in-process links, so stragglers are decided by emulated
//! time, the same in every run).

use std::time::Duration;

use ubershuffle_learners::{Model, Update, UpdateBody};
use ubershuffle_transport::Transport;

use super::Master;
use super::epoch::EpochHeader;
use super::membership::lost_worker;
use crate::RuntimeError;
use crate::phases::{Phase, Stopwatch};
use crate::protocol::{EpochAck, MasterMessage, TAG_RECEIVED, TAG_UPDATE, UpdateOutcome, UpdateReport};

/// Seconds as a duration (0 for what cannot be one: the value comes from a peer).
fn duration_of(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO)
}

/// Per worker, the newest attempt (epoch, attempt) it acknowledged and the newest it reported
/// an update for. An honest worker sends one of each per attempt it runs, in order (the
/// acknowledgements of syncs, epoch 0, aside), so an older or repeated one is a flood.
#[derive(Clone, Debug, Default)]
pub(super) struct Seen {
    acks: Vec<(u32, u32)>,
    updates: Vec<(u32, u32)>,
}

/// Notes that worker `w` sent a message of attempt `at`; whether it is newer than its last.
fn fresh(seen: &mut Vec<(u32, u32)>, w: usize, at: (u32, u32)) -> bool {
    if seen.len() <= w {
        seen.resize(w + 1, (0, 0));
    }
    let newer = at > seen[w];
    if newer {
        seen[w] = at;
    }
    newer
}

/// The longest part of a worker's own failure message the master logs.
const MESSAGE_LOGGED: usize = 200;

/// Whether every value of `update` is finite.
fn is_finite(update: &Update) -> bool {
    match &update.body {
        UpdateBody::Dense(values) => values.iter().all(|v| v.is_finite()),
        UpdateBody::Rows { rows, .. } => rows.iter().all(|(_, r)| r.iter().all(|v| v.is_finite())),
    }
}

impl<T: Transport> Master<'_, T> {
    /// Takes worker `w` out of the epoch and the run for what it sent (`why`), and tells it to
    /// stop: whatever a worker sends wrong costs that worker, never the run.
    fn drop_insider(&mut self, w: usize, why: &str, waiting: &mut Vec<usize>, dropped: &mut Vec<usize>) {
        self.members.note_loss(&format!("worker {w} sent {why}"), false);
        tracing::warn!(worker = w, why, "worker dropped for what it sent");
        waiting.retain(|&x| x != w);
        dropped.push(w);
        self.lose(w);
        let _ = self.send(w, &MasterMessage::Stop);
    }

    /// Worker `w`'s acknowledgement checked against the attempt: whether it is this attempt's
    /// (not a late one of an abandoned attempt or a sync), or why the worker is dropped: it
    /// does not parse, or it is of an attempt not begun, or older than one the worker sent.
    fn checked_ack(&mut self, h: &EpochHeader<'_>, w: usize, bytes: &[u8]) -> Result<bool, &'static str> {
        let ack = EpochAck::from_bytes(bytes).map_err(|_| "a malformed acknowledgement")?;
        let at = (ack.epoch, ack.attempt);
        if at > (h.epoch, h.attempt) {
            return Err("an acknowledgement of an attempt not begun");
        }
        if at != (0, 0) && !fresh(&mut self.seen.acks, w, at) {
            return Err("a repeated acknowledgement");
        }
        Ok(at == (h.epoch, h.attempt))
    }

    /// Worker `w`'s report checked against the attempt: `None` for a late one of an earlier
    /// attempt; its update (weighed by the batch the master assigned, not by the count the
    /// worker reports) with its decoding and training times; or why the worker is dropped: a
    /// malformed report, a failure, an update for another attempt, of another point count than
    /// its batch, with a value that is not finite, or one the learner refuses.
    fn checked_update(
        &mut self,
        h: &EpochHeader<'_>,
        w: usize,
        bytes: &[u8],
    ) -> Result<Option<(Update, Duration, Duration)>, String> {
        let report =
            UpdateReport::from_bytes(bytes).map_err(|e| format!("a malformed update report ({e})"))?;
        let at = (report.epoch, report.attempt);
        if at > (h.epoch, h.attempt) {
            return Err(format!("an update of epoch {} attempt {}, not yet begun", at.0, at.1));
        }
        if !fresh(&mut self.seen.updates, w, at) {
            return Err("a repeated update report".into());
        }
        if at < (h.epoch, h.attempt) {
            return Ok(None);
        }
        let (update, decode, train) = match report.outcome {
            UpdateOutcome::Done { update, decode_seconds, train_seconds, .. } => {
                (update, decode_seconds, train_seconds)
            }
            UpdateOutcome::Failed(message) => {
                let shown: String =
                    message.chars().take(MESSAGE_LOGGED).filter(|c| !c.is_control()).collect();
                return Err(format!("a failure report: {shown}"));
            }
        };
        let mut update = Update::from_bytes(&update).map_err(|e| format!("a malformed update ({e})"))?;
        let batch = h
            .workers
            .iter()
            .position(|&x| x == w)
            .map(|k| h.inst.assignment(k).len() as u64)
            .ok_or_else(|| "an update it was not asked for".to_string())?;
        if update.points != batch {
            return Err(format!("an update of {} points for a batch of {batch}", update.points));
        }
        if !is_finite(&update) {
            return Err("an update with a value that is not finite".into());
        }
        // The learner's own aggregation of it alone checks its shape.
        let model = Model::new(self.state.model.clone());
        self.learner
            .aggregate(&model, std::slice::from_ref(&update))
            .map_err(|e| format!("an update the learner refuses ({e})"))?;
        update.points = batch;
        Ok(Some((update, duration_of(decode), duration_of(train))))
    }

    /// Waits until every worker of `waiting` holds its packets. A worker lost now is dropped
    /// from the epoch (its update will not come) and from the run.
    ///
    /// Each wait lasts twice the transport's timeout: after a broadcast that a stalled (not
    /// departed) worker broke, a survivor may sit in the pseudo-broadcast ring for one timeout
    /// before it gives up and takes the restarted epoch's order. Workers still silent after
    /// that are stalled: every one of them is dropped (a timeout names no single culprit) and
    /// told to stop.
    pub(super) fn await_acks(
        &mut self,
        h: &EpochHeader<'_>,
        waiting: &mut Vec<usize>,
        dropped: &mut Vec<usize>,
    ) -> Result<(), RuntimeError> {
        let patience = self.t.timeout().saturating_mul(2);
        let mut pending = waiting.clone();
        // One bound for the whole wait, renewed by each acknowledgement that counts: stale or
        // repeated ones cannot keep the master waiting.
        let mut until = self.t.now() + patience;
        while !pending.is_empty() {
            let ranks: Vec<usize> = pending.iter().map(|w| w + 1).collect();
            let bound = until.saturating_duration_since(self.t.now());
            match self.t.recv_any_within(&ranks, TAG_RECEIVED, bound) {
                Ok((rank, bytes)) => match self.checked_ack(h, rank - 1, &bytes) {
                    Ok(true) => {
                        pending.retain(|&w| w + 1 != rank);
                        until = self.t.now() + patience;
                    }
                    Ok(false) => {}
                    Err(why) => {
                        pending.retain(|&w| w + 1 != rank);
                        self.drop_insider(rank - 1, why, waiting, dropped);
                    }
                },
                Err(e) if e.is_timeout() => {
                    self.members.note_loss(&e, true);
                    for w in std::mem::take(&mut pending) {
                        waiting.retain(|&x| x != w);
                        dropped.push(w);
                        self.lose(w);
                        // Best effort: a stalled worker that wakes up should leave, not wait.
                        let _ = self.send(w, &MasterMessage::Stop);
                    }
                }
                Err(e) => match lost_worker(&e) {
                    Some(w) if pending.contains(&w) => {
                        self.members.note_loss(&e, false);
                        pending.retain(|&x| x != w);
                        waiting.retain(|&x| x != w);
                        dropped.push(w);
                        self.lose(w);
                    }
                    _ => return Err(e.into()),
                },
            }
        }
        Ok(())
    }

    /// After an abandoned attempt, waits until every live worker has left it: each answers a
    /// [`MasterMessage::Sync`] once it is back to waiting for the master's word (a survivor
    /// caught in the abandoned broadcast gives up within one timeout). Returns the workers that
    /// do not answer within twice the timeout, now lost.
    pub(super) fn await_quiet(&mut self) -> Vec<usize> {
        let patience = self.t.timeout().saturating_mul(2);
        let mut lost = Vec::new();
        let mut pending = Vec::new();
        for w in self.members.live() {
            match self.send(w, &MasterMessage::Sync) {
                Ok(_) => pending.push(w),
                Err(e) => {
                    self.members.note_loss(&e, false);
                    lost.push(w);
                }
            }
        }
        // One bound for the whole wait: acknowledgements that do not count cannot prolong it.
        let until = self.t.now() + patience;
        while !pending.is_empty() {
            let ranks: Vec<usize> = pending.iter().map(|w| w + 1).collect();
            let bound = until.saturating_duration_since(self.t.now());
            match self.t.recv_any_within(&ranks, TAG_RECEIVED, bound) {
                Ok((rank, bytes)) => match EpochAck::from_bytes(&bytes) {
                    Ok(EpochAck { epoch: 0, attempt: 0 }) => pending.retain(|&w| w + 1 != rank),
                    // Acknowledgements of the abandoned attempt's packets are passed over.
                    Ok(ack) if fresh(&mut self.seen.acks, rank - 1, (ack.epoch, ack.attempt)) => {}
                    _ => {
                        self.members
                            .note_loss(&format!("worker {} sent a bad acknowledgement", rank - 1), false);
                        pending.retain(|&w| w + 1 != rank);
                        lost.push(rank - 1);
                    }
                },
                Err(e) => {
                    self.members.note_loss(&e, e.is_timeout());
                    let gone = lost_worker(&e).filter(|w| pending.contains(w));
                    for w in gone.map_or_else(|| std::mem::take(&mut pending), |w| vec![w]) {
                        pending.retain(|&x| x != w);
                        lost.push(w);
                    }
                }
            }
        }
        for &w in &lost {
            self.lose(w);
        }
        lost
    }

    /// Collects the updates of `waiting` until the deadline (on the transport's clock): the
    /// workers heard from (increasing) and their updates; on return `waiting` holds the
    /// stragglers. The wait is a lap of [`Phase::Waiting`], of which
    /// the worker whose update came last lends its decoding and training time to
    /// [`Phase::Decode`] and [`Phase::Train`] (up to the whole wait), so that the master's
    /// phases show what its wait was spent on.
    pub(super) fn collect_updates(
        &mut self,
        h: &EpochHeader<'_>,
        waiting: &mut Vec<usize>,
        dropped: &mut Vec<usize>,
        watch: &mut Stopwatch,
    ) -> Result<(Vec<usize>, Vec<Update>), RuntimeError> {
        let started = self.t.now();
        let until = self.config.deadline.map(|d| started + d);
        // Without news for a timeout the rest straggle; only an update that counts is news.
        let mut quiet_until = started + self.t.timeout();
        let mut updates = Vec::new();
        // The last update's worker's decoding and training.
        let mut last = (Duration::ZERO, Duration::ZERO);
        let result = loop {
            if waiting.is_empty() {
                break Ok(());
            }
            let quiet = quiet_until.saturating_duration_since(self.t.now());
            let bound = match until {
                Some(until) => until.saturating_duration_since(self.t.now()).min(quiet),
                None => quiet,
            };
            if bound.is_zero() {
                break Ok(());
            }
            let ranks: Vec<usize> = waiting.iter().map(|w| w + 1).collect();
            match self.t.recv_any_within(&ranks, TAG_UPDATE, bound) {
                Ok((rank, bytes)) => match self.checked_update(h, rank - 1, &bytes) {
                    Ok(None) => {} // a straggler's update from an earlier epoch
                    Ok(Some((update, decode, train))) => {
                        quiet_until = self.t.now() + self.t.timeout();
                        waiting.retain(|&w| w + 1 != rank);
                        updates.push((rank, update));
                        last = (decode, train);
                    }
                    Err(why) => self.drop_insider(rank - 1, &why, waiting, dropped),
                },
                // Past the deadline (or, without one, a worker that stalls): the rest straggle.
                Err(e) if e.is_timeout() => break Ok(()),
                Err(e) => match lost_worker(&e) {
                    Some(w) if waiting.contains(&w) => {
                        self.members.note_loss(&e, false);
                        waiting.retain(|&x| x != w);
                        dropped.push(w);
                        self.lose(w);
                    }
                    _ => break Err(e.into()),
                },
            }
        };
        watch.lap_idle(&self.t, Phase::Waiting);
        let wait = self.t.now().saturating_duration_since(started);
        let decode = watch.timer.reassign(Phase::Waiting, Phase::Decode, last.0.min(wait));
        watch.timer.reassign(Phase::Waiting, Phase::Train, last.1.min(wait - decode));
        // Aggregate in worker order, not arrival order, so that sums are the same every run.
        updates.sort_by_key(|(rank, _)| *rank);
        result.map(|()| updates.into_iter().map(|(rank, u)| (rank - 1, u)).unzip())
    }
}
