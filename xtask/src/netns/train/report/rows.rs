//! The ranks' logs of one job turned into typed rows: one per epoch ([`Row`]) and one per epoch
//! and node ([`LinkRow`]); the store arms' deliveries bounded by their ports and replayed on
//! the emulator ([`replay()`]).

use anyhow::{Context, bail};
use serde::Serialize;

use crate::netns::model::bytes_per_second;
use crate::netns::replay;
use crate::netns::rounds::Rounds;
use crate::netns::train::types::{Arm, EpochLog, Job, RankLog, Setting};

/// One arm's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The arm's letter.
    pub arm: char,
    /// Which run of the arm (0-based; `--repeats`).
    pub repeat: usize,
    /// What the arm is.
    pub setting: String,
    /// The epoch.
    pub epoch: usize,
    /// Training ranks.
    pub ranks: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// Data time exposed to training: the longest `set_epoch` wait over the ranks.
    pub exposed_s: f64,
    /// The longest epoch over the ranks (from `set_epoch` to the end of its training loop).
    pub epoch_s: f64,
    /// The delivery of this epoch's records (in the background of the epoch before), longest
    /// over the ranks.
    pub shuffle_s: f64,
    /// The emulator's time for this epoch's delivery: the store's step, its rounds replayed on
    /// the emulator's links (store arms, epochs after the first, logs with rounds).
    pub model_shuffle_s: Option<f64>,
    /// The store's plane bytes of the delivery over the rate: its uplink's bound.
    pub store_uplink_s: Option<f64>,
    /// The delivery's limit: the most plane bytes one node sends or receives in it (the
    /// store, or a training rank either way) over the rate.
    pub limit_s: Option<f64>,
    /// Bytes the store's link sent and received during the epoch (kernel counters).
    pub store_tx_bytes: u64,
    /// Bytes the store's link received.
    pub store_rx_bytes: u64,
    /// Bytes every rank's link sent during the epoch, summed (kernel counters).
    pub ranks_tx_bytes: u64,
    /// Bytes every rank's link received, summed.
    pub ranks_rx_bytes: u64,
    /// Plane payload the store sent for this epoch's delivery.
    pub plane_store_sent_bytes: u64,
    /// Plane payload every rank received for this epoch's delivery, summed.
    pub plane_received_bytes: u64,
    /// Bytes of the records the ranks lacked and received for this epoch, summed (newer logs).
    pub record_received_bytes: Option<u64>,
    /// Bytes the ranks relayed to each other in the store's delivery (logs with rounds).
    pub relay_bytes: Option<u64>,
    /// Bytes of the records entering the ranks' holdings along the chain (the plan), summed.
    pub plan_bytes: Option<u64>,
    /// Padding bytes of the store's packets.
    pub padding_bytes: u64,
    /// Packets of the store's plan and the coded ones.
    pub packets: u64,
    /// Coded packets of the store's plan.
    pub coded_packets: u64,
    /// Packets of the store's step that one rank decodes (sent to it alone).
    pub unicast_packets: u64,
    /// Packets that several ranks decode (sent in pieces, one to each).
    pub multicast_packets: u64,
    /// Packets that no rank needs (not sent).
    pub unneeded_packets: u64,
    /// Bytes of the unicast packets.
    pub unicast_bytes: u64,
    /// Bytes of the multicast packets.
    pub multicast_bytes: u64,
    /// Bytes of the plan's parts the store sent the ranks (each its packets and receivers).
    pub part_bytes: Option<u64>,
    /// The most bytes a training rank holds.
    pub storage_bytes_per_rank: u64,
    /// Held-out accuracy after the epoch.
    pub held_out_accuracy: f64,
    /// Held-out loss after the epoch.
    pub held_out_loss: f64,
    /// Training loss of the epoch (mean over ranks).
    pub train_loss: f64,
    /// Seconds from the job's first barrier to the end of the epoch's evaluation.
    pub wall_s: f64,
    /// The most CPU seconds a training rank's process took over the epoch (training and
    /// plane; the plane's alone when the ranks sleep instead of training).
    pub rank_cpu_s: Option<f64>,
    /// The store process's CPU seconds for this epoch's delivery.
    pub store_cpu_s: Option<f64>,
    /// The store's profile of this epoch's delivery (store arms, epochs after the first):
    /// waiting for every rank's request before it.
    pub store_request_wait_s: Option<f64>,
    /// What the store's delivery waited for its plan (planned ahead, or then).
    pub store_plan_s: Option<f64>,
    /// The planner's own time, when the store planned ahead while the ranks trained.
    pub store_plan_ahead_s: Option<f64>,
    /// The store's encoding.
    pub store_encode_s: Option<f64>,
    /// The store's sending to the ranks.
    pub store_scatter_s: Option<f64>,
    /// The store's waits on the plane's group.
    pub store_gloo_wait_s: Option<f64>,
    /// The training ranks' profile (the longest over the ranks): from the request to the
    /// store's answer.
    pub answer_wait_s: Option<f64>,
    /// Receiving from the store.
    pub rank_scatter_s: Option<f64>,
    /// The relay among the ranks.
    pub relay_s: Option<f64>,
    /// Decoding.
    pub decode_s: Option<f64>,
    /// Every wait on the plane's group during the delivery.
    pub rank_gloo_wait_s: Option<f64>,
}

/// One node's link in one arm's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct LinkRow {
    /// The arm's letter.
    pub arm: char,
    /// Which run of the arm.
    pub repeat: usize,
    /// The epoch.
    pub epoch: usize,
    /// `store` or `rankK` (K the training rank).
    pub node: String,
    /// Bytes the node's link sent during the epoch (kernel counters).
    pub tx_bytes: u64,
    /// Bytes it received.
    pub rx_bytes: u64,
    /// Plane payload the node sent for this epoch's delivery.
    pub plane_sent_bytes: u64,
    /// Plane payload it received.
    pub plane_received_bytes: u64,
    /// Bytes the node holds.
    pub held_bytes: u64,
}

/// A counter series `(time, tx, rx)` at time `t`, linearly between samples.
fn counters_at(samples: &[(f64, u64, u64)], t: f64) -> (u64, u64) {
    let Some(first) = samples.first() else { return (0, 0) };
    if t <= first.0 {
        return (first.1, first.2);
    }
    for w in samples.windows(2) {
        let (a, b) = (w[0], w[1]);
        if t <= b.0 {
            let f = if b.0 > a.0 { (t - a.0) / (b.0 - a.0) } else { 1.0 };
            let lerp = |x: u64, y: u64| x + ((y.saturating_sub(x)) as f64 * f).round() as u64;
            return (lerp(a.1, b.1), lerp(a.2, b.2));
        }
    }
    samples.last().map_or((0, 0), |l| (l.1, l.2))
}

/// The rounds of the store's step delivering `epoch`, when the log has them and they fit the
/// setting (the byte checks report those that do not).
pub fn step_rounds<'a>(job: &'a Job, epoch: usize, setting: &Setting) -> Option<Rounds<'a>> {
    let step = job.step(epoch).filter(|f| f.has_rounds())?;
    Rounds::new(setting.ranks, &step.round_store_bytes, &step.round_relay_bytes).ok()
}

/// The largest of the values `f` gives over `logs`, if any gives one.
fn largest(logs: &[&EpochLog], f: impl Fn(&EpochLog) -> Option<f64>) -> Option<f64> {
    logs.iter().filter_map(|l| f(l)).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

/// The rows of one job (without the emulator's column: [`replay()`]).
pub fn job_rows(job: &Job, setting: &Setting) -> anyhow::Result<(Vec<Row>, Vec<LinkRow>)> {
    let trainers = job.trainers();
    let store = job.store();
    let first = trainers.first().context("a job without training ranks")?;
    let epochs = first.epochs.len();
    if trainers.iter().any(|t| t.epochs.len() != epochs) {
        bail!("arm {}: the ranks logged different numbers of epochs", job.arm.letter());
    }
    let arm = job.arm.letter();
    let rate = bytes_per_second(setting.mbit);
    let (mut rows, mut links) = (Vec::new(), Vec::new());
    for e in 0..epochs {
        let logs: Vec<&EpochLog> = trainers.iter().map(|t| &t.epochs[e]).collect();
        let start = first.epochs[e].t_start;
        let end = first.epochs.get(e + 1).map_or(first.epochs[e].t_end, |n| n.t_start);
        let window = |t: &RankLog| {
            let from = t.epochs[e].counters_start;
            let to = t.epochs.get(e + 1).map_or(t.end_counters, |n| n.counters_start);
            (to.0.saturating_sub(from.0), to.1.saturating_sub(from.1))
        };
        let served = store.and_then(|s| s.served.iter().find(|f| f.epoch == e));
        let (store_tx, store_rx) = match store {
            Some(s) => {
                let (a, b) = (counters_at(&s.samples, start), counters_at(&s.samples, end));
                (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))
            }
            None => (0, 0),
        };
        if let Some(s) = store {
            links.push(LinkRow {
                arm,
                repeat: job.repeat,
                epoch: e,
                node: "store".into(),
                tx_bytes: store_tx,
                rx_bytes: store_rx,
                plane_sent_bytes: served.map_or(0, |f| f.bytes_sent),
                plane_received_bytes: 0,
                held_bytes: s.held_bytes,
            });
        }
        let (mut tx_sum, mut rx_sum) = (0, 0);
        for (k, t) in trainers.iter().enumerate() {
            let (tx, rx) = window(t);
            tx_sum += tx;
            rx_sum += rx;
            let l = &t.epochs[e];
            links.push(LinkRow {
                arm,
                repeat: job.repeat,
                epoch: e,
                node: format!("rank{k}"),
                tx_bytes: tx,
                rx_bytes: rx,
                plane_sent_bytes: l.bytes_sent,
                plane_received_bytes: l.bytes_received,
                held_bytes: l.held_bytes,
            });
        }
        let max = |f: fn(&EpochLog) -> f64| logs.iter().map(|l| f(l)).fold(0.0, f64::max);
        let longest = |f: fn(&EpochLog) -> Option<f64>| largest(&logs, f);
        let step = job.step(e);
        let rounds = step_rounds(job, e, setting);
        let records: Vec<u64> = logs.iter().filter_map(|l| l.record_bytes_received).collect();
        let plan_bytes = if e == 0 { None } else { first.chain_bytes.get(e - 1).map(|v| v.iter().sum()) };
        let l0 = &first.epochs[e];
        rows.push(Row {
            arm,
            repeat: job.repeat,
            setting: job.arm.describe(setting.fraction),
            epoch: e,
            ranks: setting.ranks,
            mbit: setting.mbit,
            exposed_s: max(|l| l.exposed_seconds),
            epoch_s: max(|l| l.epoch_seconds),
            shuffle_s: max(|l| l.transfer_seconds),
            model_shuffle_s: None,
            store_uplink_s: rounds.map(|r| r.store_sent() as f64 / rate),
            limit_s: rounds.map(|r| r.busiest_port() as f64 / rate),
            store_tx_bytes: store_tx,
            store_rx_bytes: store_rx,
            ranks_tx_bytes: tx_sum,
            ranks_rx_bytes: rx_sum,
            plane_store_sent_bytes: served.map_or(0, |f| f.bytes_sent),
            plane_received_bytes: logs.iter().map(|l| l.bytes_received).sum(),
            record_received_bytes: (!records.is_empty()).then(|| records.iter().sum()),
            relay_bytes: rounds.map(|r| r.relayed()),
            plan_bytes: if job.arm == Arm::F { Some(0) } else { plan_bytes },
            padding_bytes: served.map_or(0, |f| f.padding_bytes),
            packets: served.map_or(0, |f| f.packets),
            coded_packets: served.map_or(0, |f| f.coded_packets),
            unicast_packets: step.map_or(0, |f| f.unicast_packets),
            multicast_packets: step.map_or(0, |f| f.multicast_packets),
            unneeded_packets: step.map_or(0, |f| f.unneeded_packets),
            unicast_bytes: step.map_or(0, |f| f.unicast_bytes),
            multicast_bytes: step.map_or(0, |f| f.multicast_bytes),
            part_bytes: step.and_then(|f| f.part_bytes),
            storage_bytes_per_rank: logs.iter().map(|l| l.held_bytes).max().unwrap_or(0),
            held_out_accuracy: l0.held_out_accuracy.unwrap_or(f64::NAN),
            held_out_loss: l0.held_out_loss.unwrap_or(f64::NAN),
            train_loss: logs.iter().map(|l| l.train_loss).sum::<f64>() / logs.len() as f64,
            wall_s: l0.t_end - first.t0,
            rank_cpu_s: longest(|l| l.cpu_seconds),
            store_cpu_s: step.and_then(|f| f.cpu_seconds),
            store_request_wait_s: step.and_then(|f| f.request_wait_seconds),
            store_plan_s: step.and_then(|f| f.plan_seconds),
            store_plan_ahead_s: step.and_then(|f| f.plan_ahead_seconds),
            store_encode_s: step.and_then(|f| f.encode_seconds),
            store_scatter_s: step.and_then(|f| f.scatter_seconds),
            store_gloo_wait_s: step.and_then(|f| f.gloo_wait_seconds),
            answer_wait_s: longest(|l| l.answer_wait_seconds),
            rank_scatter_s: longest(|l| l.scatter_seconds),
            relay_s: longest(|l| l.relay_seconds),
            decode_s: longest(|l| l.decode_seconds),
            rank_gloo_wait_s: longest(|l| l.gloo_wait_seconds),
        });
    }
    Ok((rows, links))
}

/// Fills the emulator's column of a job's rows: each store delivery after the first epoch,
/// its rounds replayed ([`replay::plane`]).
pub fn replay(rows: &mut [Row], job: &Job, setting: &Setting) -> anyhow::Result<()> {
    if !job.arm.has_store() {
        return Ok(());
    }
    for row in rows.iter_mut().filter(|r| r.epoch > 0) {
        let Some(step) = job.step(row.epoch).filter(|_| step_rounds(job, row.epoch, setting).is_some())
        else {
            continue;
        };
        let seconds =
            replay::plane(setting.ranks, setting.mbit, &step.round_store_bytes, &step.round_relay_bytes)
                .with_context(|| {
                    format!("arm {}: replaying epoch {}'s delivery", job.arm.letter(), row.epoch)
                })?;
        row.model_shuffle_s = Some(seconds);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_interpolated_between_samples() {
        let s = [(10.0, 100, 0), (11.0, 300, 50)];
        assert_eq!(counters_at(&s, 9.0), (100, 0));
        assert_eq!(counters_at(&s, 10.5), (200, 25));
        assert_eq!(counters_at(&s, 12.0), (300, 50));
        assert_eq!(counters_at(&[], 1.0), (0, 0));
    }
}
