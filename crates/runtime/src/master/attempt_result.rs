//! What each phase of an epoch attempt gives ([`Planned`], [`Traffic`], [`AttemptResult`]),
//! and the [`EpochMetrics`] built once from them when the attempt completes the epoch.

use ubershuffle_core::pliable::RandomnessStats;

use crate::EpochMetrics;
use crate::phases::{Phase, Stopwatch};
use crate::segment_epoch::SegmentEpoch;

/// The planned phase: the epoch drawn and planned, and how random its assignment is.
pub(super) struct Planned {
    /// The epoch: instance, plan (over the records' segments), who made it.
    pub(super) chosen: SegmentEpoch,
    /// The workers that receive it (alive when the attempt started).
    pub(super) receivers: usize,
    /// The assignment's randomness, measured on the assignment.
    pub(super) randomness: RandomnessStats,
    /// Every point's owner counts over the run so far, as a chi-square per degree of freedom.
    pub(super) owner_chi_square_per_df: Option<f64>,
}

/// What the sent phase put on the wire, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Traffic {
    /// Control messages (orders, group announcements, model notices).
    pub(super) control: u64,
    /// The model's broadcast.
    pub(super) model: u64,
    /// Packet payloads sent by broadcast (each counted once).
    pub(super) broadcast: u64,
    /// Packet payloads sent point to point.
    pub(super) unicast: u64,
    /// Whole data messages (payloads and their headers).
    pub(super) data: u64,
    /// Data messages (broadcast chunks and point-to-point ones).
    pub(super) data_messages: usize,
    /// Point-to-point data messages.
    pub(super) unicast_messages: usize,
}

/// A completed attempt: each phase's result.
pub(super) struct AttemptResult {
    /// The planned phase.
    pub(super) planned: Planned,
    /// The routed phase: packets by broadcast, and copies point to point.
    pub(super) broadcast_packets: usize,
    /// Point-to-point copies.
    pub(super) unicast_packets: usize,
    /// The sent phase.
    pub(super) traffic: Traffic,
    /// The collected phase: the workers whose updates came (increasing).
    pub(super) updated_workers: Vec<usize>,
    /// Workers whose updates missed the deadline.
    pub(super) stragglers: usize,
    /// Workers dropped while collecting, for what they sent or a loss.
    pub(super) dropped: Vec<usize>,
    /// The aggregated phase: the new model's held-out loss.
    pub(super) loss: f64,
}

impl AttemptResult {
    /// The epoch's metrics, built once: this attempt's phases, the epoch's timings over all its
    /// attempts (`watch`), how many attempts it took, and who was lost and who rejoined.
    pub(super) fn into_metrics(
        self,
        watch: &Stopwatch,
        attempts: usize,
        lost_workers: Vec<usize>,
        rejoined_workers: Vec<usize>,
    ) -> EpochMetrics {
        let seconds = |p| watch.timer.spent(p).as_secs_f64();
        let AttemptResult {
            planned,
            broadcast_packets,
            unicast_packets,
            traffic,
            updated_workers,
            stragglers,
            dropped: _,
            loss,
        } = self;
        let (chosen, stats) = (&planned.chosen, &planned.randomness);
        EpochMetrics {
            epoch: chosen.epoch,
            attempts,
            workers: planned.receivers,
            transmissions: chosen.plan.len(),
            uncoded_transmissions: chosen.segments.uncoded_transmissions(),
            padding_bytes: chosen.padding_bytes,
            broadcast_packets,
            unicast_packets,
            payload_bytes: traffic.broadcast + traffic.unicast,
            broadcast_bytes: traffic.broadcast,
            unicast_bytes: traffic.unicast,
            control_bytes: traffic.control,
            model_bytes: traffic.model,
            data_bytes: traffic.data,
            data_messages: traffic.data_messages,
            unicast_messages: traffic.unicast_messages,
            plan_seconds: seconds(Phase::Plan),
            verify_seconds: seconds(Phase::Verify),
            route_seconds: seconds(Phase::Route),
            encode_seconds: seconds(Phase::Encode),
            transmit_seconds: seconds(Phase::Transmit),
            model_seconds: seconds(Phase::ModelBroadcast),
            decode_seconds: seconds(Phase::Decode),
            train_seconds: seconds(Phase::Train),
            waiting_seconds: seconds(Phase::Waiting),
            aggregate_seconds: seconds(Phase::Aggregate),
            epoch_seconds: watch.timer.total().as_secs_f64(),
            updates: updated_workers.len(),
            stragglers,
            updated_workers,
            lost_workers,
            rejoined_workers,
            loss,
            owner_entropy_bits: stats.owner_entropy_bits.unwrap_or(0.0),
            stay_fraction: stats.stay_fraction.unwrap_or(0.0),
            cached_fraction: stats.cached_fraction,
            owner_chi_square_per_df: planned.owner_chi_square_per_df,
        }
    }
}
