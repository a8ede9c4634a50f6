//! [`EpochMetrics`]: what one epoch cost, phase by phase, and the loss it reached.

use serde::{Deserialize, Serialize};

/// One epoch's measurements. Master-side times are seconds on the master's transport clock (the
/// emulated clock on shaped in-process links, real time otherwise); worker-side times (decode,
/// compute) are the slowest reporting worker's CPU time, so that emulated nodes sharing a few
/// cores are charged what a node of their own would spend.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Attempts it took (more than one after a worker failure).
    pub attempts: usize,
    /// Workers alive when the epoch (its last attempt) started.
    pub workers: usize,
    /// Transmissions of the plan.
    pub transmissions: usize,
    /// What uncoded shuffling would have sent.
    pub uncoded_transmissions: usize,
    /// Transmissions sent in broadcasts.
    pub broadcast_packets: usize,
    /// Transmission copies sent point to point.
    pub unicast_packets: usize,
    /// Payload bytes the master sent (a broadcast counted once).
    pub payload_bytes: u64,
    /// Bytes of orders (batch, plan headers, and the model when it is not broadcast) the
    /// master sent.
    pub control_bytes: u64,
    /// Bytes of the model broadcast (0 when the model travels in the orders).
    #[serde(default)]
    pub model_bytes: u64,
    /// Planning.
    pub plan_seconds: f64,
    /// Checks, not counted as shuffle time: verifying the plan by peeling at every worker, and
    /// the checksum of each worker's new records.
    pub verify_seconds: f64,
    /// Working out who needs which packet.
    pub route_seconds: f64,
    /// XOR-encoding the packets.
    pub encode_seconds: f64,
    /// From the first order sent to the last worker holding all its packets, less the master's
    /// encoding and the model broadcast in that span (counted on their own).
    pub transmit_seconds: f64,
    /// Broadcasting the model to the workers (not part of the shuffle; 0 when the model
    /// travels in the orders, after a worker was lost).
    #[serde(default)]
    pub model_seconds: f64,
    /// Decoding (and checking the new records) at the slowest worker, once all its packets
    /// have arrived, in that worker's CPU time.
    pub decode_seconds: f64,
    /// Local training at the slowest worker whose update arrived, in that worker's CPU time.
    pub compute_seconds: f64,
    /// The whole epoch at the master, from assignment to the aggregated model.
    pub epoch_seconds: f64,
    /// Updates aggregated.
    pub updates: usize,
    /// Live workers whose update missed the deadline.
    pub stragglers: usize,
    /// Workers lost during the epoch (0-based); the first epoch of a run also lists those lost
    /// while receiving their starting caches.
    pub lost_workers: Vec<usize>,
    /// Held-out loss after the epoch.
    pub loss: f64,
}

impl EpochMetrics {
    /// The shuffle's cost: planning (with routing), encoding, moving and decoding, as the
    /// UberShuffle paper's Table 1 counts it ("including all the extra computational overheads").
    /// The parts do not overlap: transmit leaves out the encoding done between sends, and
    /// workers decode once their last packet is in. Verifying (a check) and the model
    /// broadcast (not data) are left out.
    pub fn shuffle_seconds(&self) -> f64 {
        self.plan_seconds
            + self.route_seconds
            + self.encode_seconds
            + self.transmit_seconds
            + self.decode_seconds
    }

    /// The CSV header of [`EpochMetrics::csv_row`].
    pub const CSV_HEADER: &'static str = "epoch,attempts,workers,transmissions,uncoded_transmissions,broadcast_packets,\
unicast_packets,payload_bytes,control_bytes,model_bytes,plan_seconds,verify_seconds,route_seconds,encode_seconds,\
transmit_seconds,model_seconds,decode_seconds,compute_seconds,shuffle_seconds,epoch_seconds,updates,stragglers,lost_workers,loss";

    /// The epoch as one CSV line.
    pub fn csv_row(&self) -> String {
        let lost: Vec<String> = self.lost_workers.iter().map(usize::to_string).collect();
        format!(
            "{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{},{},{},{}",
            self.epoch,
            self.attempts,
            self.workers,
            self.transmissions,
            self.uncoded_transmissions,
            self.broadcast_packets,
            self.unicast_packets,
            self.payload_bytes,
            self.control_bytes,
            self.model_bytes,
            self.plan_seconds,
            self.verify_seconds,
            self.route_seconds,
            self.encode_seconds,
            self.transmit_seconds,
            self.model_seconds,
            self.decode_seconds,
            self.compute_seconds,
            self.shuffle_seconds(),
            self.epoch_seconds,
            self.updates,
            self.stragglers,
            lost.join(" "),
            self.loss
        )
    }
}

/// Every epoch of a run as CSV text.
pub fn metrics_csv(epochs: &[EpochMetrics]) -> String {
    let mut out = String::from(EpochMetrics::CSV_HEADER);
    out.push('\n');
    for e in epochs {
        out.push_str(&e.csv_row());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_cell_per_column() {
        let m = EpochMetrics { epoch: 2, lost_workers: vec![1, 3], loss: 0.5, ..Default::default() };
        let header_cells = EpochMetrics::CSV_HEADER.split(',').count();
        assert_eq!(m.csv_row().split(',').count(), header_cells);
        assert!(metrics_csv(&[m]).lines().nth(1).unwrap_or("").contains("1 3"));
    }
}
