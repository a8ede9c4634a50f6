//! What `cargo xtask netns-gradients` and its report share: the arms and planes, the setting,
//! the ranks' JSON logs (`python/benchmarks/netns_gradients_rank.py`) and the finished jobs.

use serde::Deserialize;

pub use crate::netns::topology::{MAIN_MBIT, MAIN_RANKS};
/// The arms: peer partial-local, peer global, store coded.
pub const ARMS: [char; 3] = ['p', 'g', 's'];

/// What an arm is, in a few words.
pub fn describe(arm: char, fraction: f64) -> String {
    match arm {
        'p' => format!("peer, partial-local Q {fraction}"),
        'g' => "peer, global".into(),
        _ => "store, coded (auto), alpha 0.5".into(),
    }
}

/// Where the plane stands while an epoch trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Plane {
    /// The next epoch's delivery done before the epoch starts: the all-reduce alone.
    Idle,
    /// The delivery in flight during the epoch, not yielding.
    Flight,
    /// The delivery in flight, yielding to the all-reduces.
    Yield,
}

impl Plane {
    /// Every plane, in order.
    pub const ALL: [Plane; 3] = [Plane::Idle, Plane::Flight, Plane::Yield];

    /// The plane's name (the flag's value).
    pub fn name(self) -> &'static str {
        match self {
            Plane::Idle => "idle",
            Plane::Flight => "flight",
            Plane::Yield => "yield",
        }
    }
}

/// The name of a run's files and results/README.md section: `netns-gradients`, then
/// `-{ranks}ranks` and `-{mbit}mbit` when they differ from the main run's.
pub fn run_name(ranks: usize, mbit: f64) -> String {
    crate::netns::goal::run_name("netns-gradients", ranks, mbit)
}

/// The run's setting, as the report states it.
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
    /// JPEG side in pixels.
    pub side: u32,
    /// Grain of the JPEGs.
    pub grain: f64,
    /// Training records.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Epochs per job.
    pub epochs: usize,
    /// Records per step and rank.
    pub batch: usize,
    /// Seconds of compute per step.
    pub compute: f64,
    /// MB of gradient per step.
    pub gradient_mb: f64,
    /// Q of arm p.
    pub fraction: f64,
}

impl Setting {
    /// The run's name ([`run_name`]).
    pub fn name(&self) -> String {
        run_name(self.ranks, self.mbit)
    }

    /// Whether this is the main run (the default ranks and rate).
    pub fn is_main(&self) -> bool {
        self.ranks == MAIN_RANKS && self.mbit == MAIN_MBIT
    }

    /// The ring all-reduce's lower bound per step: each rank sends and receives
    /// `2 (n - 1) / n` of the gradient (reduce-scatter, then all-gather) at the port's rate.
    pub fn allreduce_limit_s(&self, gradient_bytes: u64) -> f64 {
        let n = self.ranks as f64;
        2.0 * (n - 1.0) / n * gradient_bytes as f64 / (self.mbit * 1e6 / 8.0)
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
    /// Bytes of the gradient all-reduced per step.
    pub gradient_bytes: u64,
    /// The training rank's epochs.
    pub epochs: Vec<EpochLog>,
}

/// One epoch of a training rank.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EpochLog {
    /// The epoch.
    pub epoch: usize,
    /// What `set_epoch` waited (the data time exposed to training).
    pub exposed_seconds: f64,
    /// From `set_epoch`'s call to the epoch's last step's end.
    pub epoch_seconds: f64,
    /// The steps alone (the epoch without `set_epoch` and the idle plane's wait).
    pub train_seconds: f64,
    /// Every step's time.
    pub step_seconds: Vec<f64>,
    /// Every step's all-reduce time (the plane's hook).
    pub allreduce_step_seconds: Vec<f64>,
    /// Whether the next epoch's delivery was in flight when the step's all-reduce began.
    pub allreduce_step_during_delivery: Vec<bool>,
    /// What the delivery waited at the gate.
    pub yield_seconds: f64,
    /// The next epoch's delivery time (in the background of this epoch).
    pub delivery_seconds: f64,
    /// Bytes of records this rank read in the epoch.
    pub read_bytes: u64,
    /// Records this rank read in the epoch.
    pub records_read: usize,
    /// SHA-256 (hex) of the records read, in the order read: each its id, size and bytes as
    /// the plane gave them (`sg[i]`).
    pub digest: Option<String>,
    /// The same digest over the same records read from the source's files after the job.
    pub source_digest: Option<String>,
    /// The plane's counts of the next epoch's delivery (in the background of this epoch).
    pub delivery_received: Option<Received>,
    /// How often that delivery waited for the all-reduces (`yields` of the plane's figures).
    pub yields: Option<u64>,
}

/// What a delivery brought a rank, by the plane's own figures (`None`: not in them).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Received {
    /// Records it received.
    pub records_received: Option<u64>,
    /// Their bytes.
    pub record_bytes_received: Option<u64>,
    /// Payload bytes on the plane's group.
    pub bytes_received: Option<u64>,
}

/// One finished job: its arm, plane and repeat, and every rank's log by rank.
pub struct Job {
    /// The arm's letter.
    pub arm: char,
    /// The plane.
    pub plane: Plane,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// Every rank's log.
    pub ranks: Vec<RankLog>,
}
