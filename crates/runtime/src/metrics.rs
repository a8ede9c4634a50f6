//! [`EpochMetrics`]: what one epoch cost, phase by phase, and the loss it reached.

use serde::{Deserialize, Serialize};

/// One epoch's measurements. Times are seconds on the master's transport clock (its emulated
/// clock on an emulated cluster, real time otherwise), split into phases that partition the
/// epoch: plan, verify, route, model, encode, transmit, decode, train, waiting and aggregate add
/// up to `epoch_seconds`. Decode and train are the part of the master's wait for updates during
/// which the worker whose update came last was decoding and training (on that worker's clock).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// Bytes of the transmissions beyond their records' data: records of uneven size travel
    /// in fixed-size segments, and a packet is as long as its longest part's segment (0 for
    /// records of one size, which are one segment each).
    #[serde(default)]
    pub padding_bytes: u64,
    /// Transmissions sent in broadcasts (each counted once, however many receive it).
    pub broadcast_packets: usize,
    /// Transmission copies sent point to point. With `broadcast_packets`, what went on the
    /// wire: a plan whose packets all travel point to point shows 0 broadcasts here.
    pub unicast_packets: usize,
    /// Payload bytes the master sent (a broadcast counted once): `broadcast_bytes` plus
    /// `unicast_bytes`.
    pub payload_bytes: u64,
    /// Payload bytes of the broadcast packets (counted once).
    #[serde(default)]
    pub broadcast_bytes: u64,
    /// Payload bytes of the point-to-point packets.
    #[serde(default)]
    pub unicast_bytes: u64,
    /// Bytes of the data messages the master handed its transport (broadcast buffers counted
    /// once): `payload_bytes` plus each message's header,
    /// [`crate::protocol::data_chunk_framing`].
    #[serde(default)]
    pub data_bytes: u64,
    /// Data messages the master sent (broadcast buffers and point-to-point chunks).
    #[serde(default)]
    pub data_messages: usize,
    /// Of those, the point-to-point chunks.
    #[serde(default)]
    pub unicast_messages: usize,
    /// Bytes of orders (batch, plan headers, and the model when it is not broadcast) the
    /// master sent.
    pub control_bytes: u64,
    /// Bytes of the model broadcast (0 when the model travels in the orders).
    #[serde(default)]
    pub model_bytes: u64,
    /// Drawing the assignment and planning it.
    pub plan_seconds: f64,
    /// Checks, not counted as shuffle time: verifying the plan, and the checksum of each
    /// worker's new records.
    pub verify_seconds: f64,
    /// Working out who needs which packet, and writing the orders.
    pub route_seconds: f64,
    /// XOR-encoding the packets.
    pub encode_seconds: f64,
    /// Sending the orders and packets until the last worker holds all of its packets (the
    /// master's encoding and the model broadcast in that span are counted on their own).
    pub transmit_seconds: f64,
    /// Broadcasting the model to the workers (not part of the shuffle; 0 when the model
    /// travels in the orders, after a worker was lost).
    #[serde(default)]
    pub model_seconds: f64,
    /// The master's wait for updates while the last worker to reply decoded (and checked) its
    /// new records once all its packets had arrived.
    pub decode_seconds: f64,
    /// The master's wait for updates while that worker trained.
    #[serde(alias = "compute_seconds")]
    pub train_seconds: f64,
    /// The rest of the master's wait for updates: the update on the wire, a straggler's hold,
    /// the deadline.
    #[serde(default)]
    pub waiting_seconds: f64,
    /// Aggregating the updates, the held-out loss and the next caches.
    #[serde(default)]
    pub aggregate_seconds: f64,
    /// The whole epoch at the master, from assignment to the aggregated model: the sum of the
    /// phases above.
    pub epoch_seconds: f64,
    /// Updates aggregated.
    pub updates: usize,
    /// Live workers whose update missed the deadline.
    pub stragglers: usize,
    /// The workers (0-based, increasing) whose updates were aggregated.
    #[serde(default)]
    pub updated_workers: Vec<usize>,
    /// Workers lost during the epoch (0-based); the first epoch of a run also lists those lost
    /// while receiving their starting caches.
    pub lost_workers: Vec<usize>,
    /// Workers taken back in before the epoch (0-based): they joined while the run went on
    /// (over TCP), and the epoch plans, codes and broadcasts over them too.
    #[serde(default)]
    pub rejoined_workers: Vec<usize>,
    /// Held-out loss after the epoch.
    pub loss: f64,
    /// How random the epoch's assignment was
    /// ([`RandomnessStats`](ubershuffle_core::pliable::RandomnessStats)): the entropy in
    /// bits of each point's new owner given its previous one (uniform shuffling: about
    /// `log2 n`).
    #[serde(default)]
    pub owner_entropy_bits: f64,
    /// Points that stayed with their previous worker, as a fraction (uniform: `1/n`).
    #[serde(default)]
    pub stay_fraction: f64,
    /// Points given to a worker that cached them, as a fraction (uniform: about alpha).
    #[serde(default)]
    pub cached_fraction: f64,
    /// The chi-square of every point's worker counts over the run's epochs so far against
    /// uniform assignment, per degree of freedom (about 1 under uniform shuffling; counted
    /// from the first epoch this process ran, and only while `q n <= 2^26`).
    #[serde(default)]
    pub owner_chi_square_per_df: Option<f64>,
}

impl EpochMetrics {
    /// The shuffle's cost: planning (with routing), encoding, moving and decoding, as the
    /// UberShuffle paper's Table 1 counts it ("including all the extra computational overheads").
    /// The parts do not overlap. Verifying (a check) and the model broadcast (not data) are
    /// left out.
    pub fn shuffle_seconds(&self) -> f64 {
        self.plan_seconds
            + self.route_seconds
            + self.encode_seconds
            + self.transmit_seconds
            + self.decode_seconds
    }

    /// Packets that went on the wire: broadcasts (each once) plus point-to-point copies. When
    /// the plan's packets all travel point to point this is the uncoded count or more, whatever
    /// the plan's length.
    pub fn packets_sent(&self) -> usize {
        self.broadcast_packets + self.unicast_packets
    }

    /// Every phase's seconds, in epoch order (they add up to `epoch_seconds`).
    pub fn phases(&self) -> [(&'static str, f64); 10] {
        [
            ("plan", self.plan_seconds),
            ("verify", self.verify_seconds),
            ("route", self.route_seconds),
            ("model", self.model_seconds),
            ("encode", self.encode_seconds),
            ("transmit", self.transmit_seconds),
            ("decode", self.decode_seconds),
            ("train", self.train_seconds),
            ("waiting", self.waiting_seconds),
            ("aggregate", self.aggregate_seconds),
        ]
    }
}

/// One epoch as a flat CSV record: [`EpochMetrics`] with the shuffle time added and the lost
/// workers joined by spaces.
#[derive(Serialize)]
struct EpochCsvRecord {
    epoch: usize,
    attempts: usize,
    workers: usize,
    transmissions: usize,
    uncoded_transmissions: usize,
    broadcast_packets: usize,
    unicast_packets: usize,
    payload_bytes: u64,
    broadcast_bytes: u64,
    unicast_bytes: u64,
    control_bytes: u64,
    model_bytes: u64,
    plan_seconds: f64,
    verify_seconds: f64,
    route_seconds: f64,
    encode_seconds: f64,
    transmit_seconds: f64,
    model_seconds: f64,
    decode_seconds: f64,
    train_seconds: f64,
    waiting_seconds: f64,
    aggregate_seconds: f64,
    shuffle_seconds: f64,
    epoch_seconds: f64,
    updates: usize,
    stragglers: usize,
    lost_workers: String,
    loss: f64,
    owner_entropy_bits: f64,
    stay_fraction: f64,
    cached_fraction: f64,
    owner_chi_square_per_df: Option<f64>,
    rejoined_workers: String,
}

impl From<&EpochMetrics> for EpochCsvRecord {
    fn from(m: &EpochMetrics) -> Self {
        let lost: Vec<String> = m.lost_workers.iter().map(usize::to_string).collect();
        EpochCsvRecord {
            epoch: m.epoch,
            attempts: m.attempts,
            workers: m.workers,
            transmissions: m.transmissions,
            uncoded_transmissions: m.uncoded_transmissions,
            broadcast_packets: m.broadcast_packets,
            unicast_packets: m.unicast_packets,
            payload_bytes: m.payload_bytes,
            broadcast_bytes: m.broadcast_bytes,
            unicast_bytes: m.unicast_bytes,
            control_bytes: m.control_bytes,
            model_bytes: m.model_bytes,
            plan_seconds: m.plan_seconds,
            verify_seconds: m.verify_seconds,
            route_seconds: m.route_seconds,
            encode_seconds: m.encode_seconds,
            transmit_seconds: m.transmit_seconds,
            model_seconds: m.model_seconds,
            decode_seconds: m.decode_seconds,
            train_seconds: m.train_seconds,
            waiting_seconds: m.waiting_seconds,
            aggregate_seconds: m.aggregate_seconds,
            shuffle_seconds: m.shuffle_seconds(),
            epoch_seconds: m.epoch_seconds,
            updates: m.updates,
            stragglers: m.stragglers,
            lost_workers: lost.join(" "),
            loss: m.loss,
            owner_entropy_bits: m.owner_entropy_bits,
            stay_fraction: m.stay_fraction,
            cached_fraction: m.cached_fraction,
            owner_chi_square_per_df: m.owner_chi_square_per_df,
            rejoined_workers: m.rejoined_workers.iter().map(usize::to_string).collect::<Vec<_>>().join(" "),
        }
    }
}

/// Every epoch of a run as CSV text (written with the `csv` crate).
pub fn metrics_csv(epochs: &[EpochMetrics]) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for e in epochs {
        writer.serialize(EpochCsvRecord::from(e))?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_cell_per_column() {
        let m = EpochMetrics {
            epoch: 2,
            lost_workers: vec![1, 3],
            rejoined_workers: vec![0, 2],
            loss: 0.5,
            ..Default::default()
        };
        let text = metrics_csv(&[m]).unwrap_or_default();
        let mut lines = text.lines();
        let header_cells = lines.next().unwrap_or("").split(',').count();
        let row = lines.next().unwrap_or("");
        assert_eq!(header_cells, 33);
        assert_eq!(row.split(',').count(), header_cells);
        assert!(row.contains(",1 3,"), "{row}");
        assert!(row.ends_with(",0 2"), "{row}");
    }
}
