//! What `cargo xtask netns-train` and its report share: the arms, the setting, the ranks' JSON
//! logs (`python/benchmarks/netns_train_rank.py`), the finished jobs, and what the report needs
//! of the run's flags. Every field a newer script logs is optional here, so that older logs
//! still parse.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

pub use crate::netns::topology::{MAIN_MBIT, MAIN_RANKS};

/// One arm of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arm {
    /// Store mode, uncoded, each rank caching only its batch.
    A,
    /// Store mode, coded (`auto`), alpha 0.5.
    B,
    /// Store mode, uncoded, alpha 0.5.
    C,
    /// Peer mode, partial-local.
    D,
    /// Peer mode, local.
    E,
    /// The data set replicated on every rank (DistributedSampler).
    F,
}

impl Arm {
    /// Every arm, in order.
    pub const ALL: [Arm; 6] = [Arm::A, Arm::B, Arm::C, Arm::D, Arm::E, Arm::F];
    /// The short form's arms: every store arm (uncoded ones are checked against the kernel's
    /// counters, the coded one against its plan) and one peer arm; e accounts as d does, and f
    /// moves nothing on the plane.
    pub const SHORT: [Arm; 4] = [Arm::A, Arm::B, Arm::C, Arm::D];

    /// The arm named by letter `c` (either case).
    pub fn from_letter(c: char) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.letter() == c.to_ascii_lowercase())
    }

    /// The arm's letter.
    pub fn letter(self) -> char {
        match self {
            Arm::A => 'a',
            Arm::B => 'b',
            Arm::C => 'c',
            Arm::D => 'd',
            Arm::E => 'e',
            Arm::F => 'f',
        }
    }

    /// Whether a store rank serves the records (a world of one more rank).
    pub fn has_store(self) -> bool {
        matches!(self, Arm::A | Arm::B | Arm::C)
    }

    /// What the arm is, in a few words.
    pub fn describe(self, fraction: f64) -> String {
        match self {
            Arm::A => "store, uncoded, cache = batch".into(),
            Arm::B => "store, coded (auto), alpha 0.5".into(),
            Arm::C => "store, uncoded, alpha 0.5".into(),
            Arm::D => format!("peer, partial-local Q {fraction}"),
            Arm::E => "peer, local".into(),
            Arm::F => "replicated, DistributedSampler".into(),
        }
    }

    /// How the arm's bytes travel on the plane, in one clause.
    pub fn travel(self) -> &'static str {
        match self {
            Arm::A | Arm::C => "the store unicasts each rank the records it lacks",
            Arm::B => {
                "the store unicasts each packet that one rank decodes and sends a packet that several \
ranks decode in pieces, one to each of them, which relay their pieces to each other"
            }
            Arm::D => {
                "each rank receives the records it lacks straight from a rank that holds them (peer to peer)"
            }
            Arm::E => "nothing moves after the first epoch: each rank keeps its share",
            Arm::F => "nothing moves: every rank holds every record",
        }
    }
}

/// The name of a run's files and results/README.md section: `netns-train`, then `-idle` when
/// the ranks sleep instead of training, `-{ranks}ranks` and `-{mbit}mbit` when they differ
/// from the main run's.
pub fn run_name(ranks: usize, mbit: f64, idle: bool) -> String {
    let mut name = String::from("netns-train");
    if idle {
        name.push_str("-idle");
    }
    if ranks != MAIN_RANKS {
        name.push_str(&format!("-{ranks}ranks"));
    }
    if mbit != MAIN_MBIT {
        // f64's Display prints 1000.0 as `1000`.
        name.push_str(&format!("-{mbit}mbit"));
    }
    name
}

/// What the report needs of the run's flags besides the [`Setting`].
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// The CSV to write.
    pub out: PathBuf,
    /// Whether results/README.md's section is written too (the default out only).
    pub readme: bool,
    /// The short form (bytes checked, small records).
    pub short: bool,
}

/// The setting every arm shares (for the report).
#[derive(Clone, Debug)]
pub struct Setting {
    /// Training ranks.
    pub ranks: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// The qdisc's name.
    pub qdisc: &'static str,
    /// MTU of every link.
    pub mtu: u32,
    /// JPEG side and grain.
    pub side: u32,
    /// Grain of the JPEGs.
    pub grain: f64,
    /// Training records and their bytes.
    pub records: u64,
    /// Bytes of every training record together.
    pub bytes: u64,
    /// Epochs per job.
    pub epochs: usize,
    /// Q of arm d.
    pub fraction: f64,
    /// Seconds each rank sleeps per epoch instead of training (0: it trains).
    pub sleep_train: f64,
}

impl Setting {
    /// Whether the ranks slept instead of training (`--sleep-train`).
    pub fn idle(&self) -> bool {
        self.sleep_train > 0.0
    }

    /// The run's name ([`run_name`]).
    pub fn name(&self) -> String {
        run_name(self.ranks, self.mbit, self.idle())
    }

    /// Whether this is the main run: training, on the default ranks and rate.
    pub fn is_main(&self) -> bool {
        !self.idle() && self.ranks == MAIN_RANKS && self.mbit == MAIN_MBIT
    }
}

/// A training rank's log of one epoch (`netns_train_rank.py`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EpochLog {
    /// The epoch.
    pub epoch: usize,
    /// Host clock at the epoch's start (after the barrier) and end (after evaluation).
    pub t_start: f64,
    /// Host clock at the epoch's end.
    pub t_end: f64,
    /// The interface's (tx, rx) counters at the epoch's start.
    pub counters_start: (u64, u64),
    /// The interface's (tx, rx) packet counters at the epoch's start (newer logs).
    pub packets_start: Option<(u64, u64)>,
    /// What `set_epoch` waited.
    pub exposed_seconds: f64,
    /// From `set_epoch` to the end of the training loop.
    pub epoch_seconds: f64,
    /// The delivery of this epoch's records (in the background of the epoch before).
    pub transfer_seconds: f64,
    /// Plane payload bytes sent and received for this epoch's delivery.
    pub bytes_sent: u64,
    /// Plane payload bytes received.
    pub bytes_received: u64,
    /// Bytes of the records (their own sizes) this rank lacked and received for this epoch's
    /// delivery (newer logs).
    pub record_bytes_received: Option<u64>,
    /// Of the plane payload received, the rounds' (a store's step: without the plan's part).
    pub round_bytes_received: Option<u64>,
    /// Padding bytes of the coded packets.
    pub padding_bytes: u64,
    /// Packets and coded packets this rank needed.
    pub packets: u64,
    /// Coded packets among them.
    pub coded_packets: u64,
    /// Bytes this rank holds during the epoch.
    pub held_bytes: u64,
    /// Training loss (mean over the rank's samples).
    pub train_loss: f64,
    /// Held-out loss and accuracy (the first training rank only).
    pub held_out_loss: Option<f64>,
    /// Held-out accuracy.
    pub held_out_accuracy: Option<f64>,
    /// The rank process's CPU seconds over the epoch's window: training and plane, or the
    /// plane's alone with `--sleep-train` (newer logs).
    pub cpu_seconds: Option<f64>,
    /// Store mode: from the request to the store's answer (its planning, its wait for every
    /// rank's request).
    pub answer_wait_seconds: Option<f64>,
    /// Store mode: receiving from the store.
    pub scatter_seconds: Option<f64>,
    /// Store mode: the relay among the ranks.
    pub relay_seconds: Option<f64>,
    /// Store mode: decoding (the receiver's set-up, rounds and finish).
    pub decode_seconds: Option<f64>,
    /// Store mode: every wait on the plane's group during the delivery.
    pub gloo_wait_seconds: Option<f64>,
}

/// What the store served for one epoch (`ShuffleGroup.serve`'s figures).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Served {
    /// The epoch delivered.
    pub epoch: usize,
    /// `step` or `catch-up`.
    pub kind: String,
    /// Plane bytes the store sent.
    pub bytes_sent: u64,
    /// How the engine sent the epoch (its logs): `whole` (an uncoded plan: the records
    /// themselves) or `coded` (packets); the plan's parts travel in messages of their own,
    /// outside `bytes_sent`. Older logs: empty.
    pub sent: String,
    /// Packets of the plan (segments).
    pub packets: u64,
    /// Coded packets of the plan.
    pub coded_packets: u64,
    /// Padding and data bytes of the packets.
    pub padding_bytes: u64,
    /// Data bytes of the packets.
    pub data_bytes: u64,
    /// Bytes per segment.
    pub segment_bytes: u64,
    /// Bytes of the parts of the plan the store sent the training ranks (newest logs).
    pub part_bytes: Option<u64>,
    /// Per round, per training place: the store's payload bytes to that place (newer logs).
    pub round_store_bytes: Vec<Vec<u64>>,
    /// Per round, the places' relay: `[i][j]` the bytes place `i` sends place `j` (newer logs;
    /// empty when nothing is relayed, missing rounds relay nothing).
    pub round_relay_bytes: Vec<Vec<Vec<u64>>>,
    /// Packets of the plan that one rank decodes (sent to it alone).
    pub unicast_packets: u64,
    /// Packets that several ranks decode (sent in pieces, one to each of them).
    pub multicast_packets: u64,
    /// Packets that no rank needs (not sent).
    pub unneeded_packets: u64,
    /// Bytes of the unicast packets.
    pub unicast_bytes: u64,
    /// Bytes of the multicast packets.
    pub multicast_bytes: u64,
    /// The store process's CPU seconds during the delivery (newer logs).
    pub cpu_seconds: Option<f64>,
    /// The store's seconds for the delivery.
    pub transfer_seconds: f64,
    /// Waiting for every rank's request (before the delivery).
    pub request_wait_seconds: Option<f64>,
    /// What the delivery waited for its plan (made ahead, or then).
    pub plan_seconds: Option<f64>,
    /// The planner's own time when it planned ahead (0 when it planned then).
    pub plan_ahead_seconds: Option<f64>,
    /// Encoding the packets.
    pub encode_seconds: Option<f64>,
    /// Sending to the ranks.
    pub scatter_seconds: Option<f64>,
    /// Every wait on the plane's group during the delivery.
    pub gloo_wait_seconds: Option<f64>,
}

impl Served {
    /// Whether the log says how the delivery's bytes travelled, round by round.
    pub fn has_rounds(&self) -> bool {
        !self.round_store_bytes.is_empty()
    }
}

/// One rank's log (`OUT/rank-R.json`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RankLog {
    /// The rank in the job's world.
    pub rank: usize,
    /// `store` or `trainer`.
    pub role: String,
    /// The training rank's place (the sampler's rank).
    pub place: usize,
    /// Host clock after the job's first barrier.
    pub t0: f64,
    /// Interface counters at the process's start and end.
    pub start_counters: (u64, u64),
    /// Interface counters at the end.
    pub end_counters: (u64, u64),
    /// Packet counters at the end (newer logs).
    pub end_packets: Option<(u64, u64)>,
    /// TCP segments its namespace had retransmitted (`/proc/net/snmp`'s `RetransSegs`) at the
    /// process's start and end (newer logs).
    pub start_retrans: Option<u64>,
    /// The same at the end.
    pub end_retrans: Option<u64>,
    /// The training rank's epochs.
    pub epochs: Vec<EpochLog>,
    /// The store's deliveries.
    pub served: Vec<Served>,
    /// The store's counter samples `(time, tx, rx)`.
    pub samples: Vec<(f64, u64, u64)>,
    /// Per epoch after the first, per place: bytes the chain brings each rank (first rank).
    pub chain_bytes: Vec<Vec<u64>>,
    /// The delivery drained at close (the epoch after the last).
    pub drained: BTreeMap<String, f64>,
    /// Bytes the store holds.
    pub held_bytes: u64,
}

impl RankLog {
    /// TCP segments this rank's namespace retransmitted during the job (0 for older logs).
    pub fn retransmitted(&self) -> u64 {
        self.end_retrans.zip(self.start_retrans).map_or(0, |(end, start)| end.saturating_sub(start))
    }

    /// A byte count of the drained delivery (`key`), if the log has a sensible one.
    pub fn drained_bytes(&self, key: &str) -> Option<u64> {
        self.drained.get(key).filter(|v| v.is_finite() && **v >= 0.0).map(|v| v.round() as u64)
    }
}

/// One finished job: the arm, its place in the run, and every rank's log by rank.
pub struct Job {
    /// The arm.
    pub arm: Arm,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// Every rank's log, by rank.
    pub ranks: Vec<RankLog>,
}

impl Job {
    /// The store's log (store arms).
    pub fn store(&self) -> Option<&RankLog> {
        self.ranks.iter().find(|r| r.role == "store")
    }

    /// The training ranks' logs, by place.
    pub fn trainers(&self) -> Vec<&RankLog> {
        let mut t: Vec<&RankLog> = self.ranks.iter().filter(|r| r.role == "trainer").collect();
        t.sort_by_key(|r| r.place);
        t
    }

    /// The store's step delivery of `epoch` (store arms).
    pub fn step(&self, epoch: usize) -> Option<&Served> {
        self.store().and_then(|s| s.served.iter().find(|f| f.epoch == epoch && f.kind == "step"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_say_how_the_run_differs_from_the_main_one() {
        assert_eq!(run_name(4, 100.0, false), "netns-train");
        assert_eq!(run_name(4, 100.0, true), "netns-train-idle");
        assert_eq!(run_name(8, 100.0, true), "netns-train-idle-8ranks");
        assert_eq!(run_name(4, 1000.0, true), "netns-train-idle-1000mbit");
        assert_eq!(run_name(2, 2.5, false), "netns-train-2ranks-2.5mbit");
    }

    #[test]
    fn old_logs_parse_without_the_newer_fields() {
        let log: RankLog = serde_json::from_str(
            r#"{"role": "store", "served": [{"epoch": 1, "kind": "step", "bytes_sent": 5}]}"#,
        )
        .unwrap();
        let served = &log.served[0];
        assert!(!served.has_rounds() && served.cpu_seconds.is_none() && served.unicast_packets == 0);
        let log: RankLog = serde_json::from_str(
            r#"{"role": "trainer", "epochs": [{"bytes_received": 7, "record_bytes_received": 7}],
"drained": {"bytes_received": 3.0, "bad": -1.0}}"#,
        )
        .unwrap();
        assert_eq!(log.epochs[0].record_bytes_received, Some(7));
        assert_eq!((log.drained_bytes("bytes_received"), log.drained_bytes("bad")), (Some(3), None));
    }
}
