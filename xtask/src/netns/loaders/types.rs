//! What `cargo xtask netns-loaders` and its report share: the arms, the setting, the ranks'
//! JSON logs (`python/benchmarks/netns_loaders_rank.py`), the object store's request log
//! (`python/benchmarks/loaders_data.py serve`) and the finished jobs.

use serde::Deserialize;

pub use crate::netns::topology::{MAIN_MBIT, MAIN_RANKS};

/// One arm of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Arm {
    /// MosaicML Streaming, `cache_limit` S.
    M,
    /// LitData, `max_cache_size` S.
    L,
    /// ShuffleGroup, peer mode, partial-local.
    P,
    /// ShuffleGroup, store mode, coded, each training rank caching S; the store reads the
    /// object store.
    S,
    /// MosaicML Streaming with half of a node's share N/M.
    #[value(name = "m-half")]
    MHalf,
    /// LitData with half of a node's share N/M.
    #[value(name = "l-half")]
    LHalf,
}

impl Arm {
    /// Every arm, in the order they run.
    pub const ALL: [Arm; 6] = [Arm::M, Arm::L, Arm::P, Arm::S, Arm::MHalf, Arm::LHalf];
    /// The short form's arms (CI): one loader and both of ours.
    pub const SHORT: [Arm; 3] = [Arm::M, Arm::P, Arm::S];

    /// The arm's name in results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arm::M => "m",
            Arm::L => "l",
            Arm::P => "p",
            Arm::S => "s",
            Arm::MHalf => "m-half",
            Arm::LHalf => "l-half",
        }
    }

    /// The rank script's `--arm`.
    pub fn script_arm(self) -> &'static str {
        match self {
            Arm::M | Arm::MHalf => "m",
            Arm::L | Arm::LHalf => "l",
            Arm::P => "p",
            Arm::S => "s",
        }
    }

    /// Whether the arm is one of ours (a failure is then this project's, not a result).
    pub fn is_ours(self) -> bool {
        matches!(self, Arm::P | Arm::S)
    }

    /// Whether the arm's cache is half of a node's share.
    pub fn is_half(self) -> bool {
        matches!(self, Arm::MHalf | Arm::LHalf)
    }

    /// Whether a store rank serves the records (a world of one more rank, in the store's
    /// namespace).
    pub fn has_store(self) -> bool {
        self == Arm::S
    }

    /// What the arm is, in a few words.
    pub fn describe(self, fraction: f64) -> String {
        match self {
            Arm::M => "MosaicML Streaming, cache_limit S".into(),
            Arm::L => "LitData, max_cache_size S".into(),
            Arm::P => format!("ShuffleGroup peer, partial-local Q {fraction}"),
            Arm::S => "ShuffleGroup store, coded, cache S".into(),
            Arm::MHalf => "MosaicML Streaming, cache_limit N/(2M)".into(),
            Arm::LHalf => "LitData, max_cache_size N/(2M)".into(),
        }
    }
}

/// The name of a run's files and results/README.md section: `netns-loaders`, then
/// `-{ranks}ranks` and `-{mbit}mbit` when they differ from the main run's.
pub fn run_name(ranks: usize, mbit: f64) -> String {
    crate::netns::goal::run_name("netns-loaders", ranks, mbit)
}

/// The run's setting, as the report states it.
#[derive(Clone, Debug, Default)]
pub struct Setting {
    /// Training ranks (nodes).
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
    /// Training records (N).
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
    /// MDS shards' bytes (arm m's data set in the object store).
    pub mds_bytes: u64,
    /// LitData chunks' bytes (arm l's).
    pub lit_bytes: u64,
    /// The MDS shard and LitData chunk size limit.
    pub chunk_bytes: u64,
    /// Epochs per job.
    pub epochs: usize,
    /// Records per step and rank.
    pub batch: usize,
    /// Seconds every step sleeps after its update.
    pub compute: f64,
    /// Q of arm p, and of the storage S = (1 + Q) N / M every arm gets.
    pub fraction: f64,
    /// Every record's bytes, by id (the upload's manifest).
    pub sizes: Vec<u64>,
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

    /// S: the bytes every node may keep, (1 + Q) N / M, what peer mode holds.
    pub fn storage_bytes(&self) -> u64 {
        ((1.0 + self.fraction) * self.bytes as f64 / self.ranks as f64).ceil() as u64
    }

    /// Half of a node's share: N / (2M).
    pub fn half_bytes(&self) -> u64 {
        self.bytes / (2 * self.ranks as u64)
    }

    /// The cache limit arm `arm` is given.
    pub fn cache_bytes(&self, arm: Arm) -> u64 {
        if arm.is_half() { self.half_bytes() } else { self.storage_bytes() }
    }

    /// Arm s's alpha: the share of the records each training rank caches, S over the data set.
    pub fn alpha(&self) -> f64 {
        (1.0 + self.fraction) / self.ranks as f64
    }

    /// The port's rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.mbit * 1e6 / 8.0
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
    /// Why the rank stopped early (an exception's first line, or a timeout).
    pub error: Option<String>,
    /// The training rank's epochs (those it finished).
    pub epochs: Vec<EpochLog>,
    /// The store's interface byte counters (tx, rx) at the start and end.
    pub start_counters: (u64, u64),
    /// The same at the end.
    pub end_counters: (u64, u64),
    /// The store's figures of every epoch it served (arm s).
    pub served: Vec<Served>,
    /// The store's own count of its object store client (arm s).
    pub object_store: Option<ClientCount>,
}

/// What the store read from its source for one epoch it served (its figures).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Served {
    /// The epoch.
    pub epoch: usize,
    /// Records it read from the source.
    pub source_records: u64,
    /// Their bytes.
    pub source_bytes: u64,
}

/// A process's count of its requests to the object store (`RecordSource.requests`,
/// `RecordSource.bytes_read`).
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClientCount {
    /// Requests made (listings, heads and reads).
    pub requests: u64,
    /// Bytes of object data read.
    pub bytes_read: u64,
}

/// One epoch of a training rank.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EpochLog {
    /// The epoch.
    pub epoch: usize,
    /// When it started and ended, on the host's clock (every namespace shares it).
    pub t_start: f64,
    /// When it ended.
    pub t_end: f64,
    /// From the epoch's start (set_epoch) to its last step's end.
    pub epoch_seconds: f64,
    /// What the training loop waited for its batches (and set_epoch).
    pub exposed_seconds: f64,
    /// The records trained on, in order.
    pub ids: Vec<u64>,
    /// The most the node's cache held during the epoch.
    pub storage_bytes: u64,
    /// The interface's (tx, rx) bytes at the epoch's start.
    pub counters_start: (u64, u64),
    /// The same at its end.
    pub counters_end: (u64, u64),
    /// Held-out accuracy after the epoch (the first training rank).
    pub held_out_accuracy: Option<f64>,
    /// Training loss over the epoch.
    pub train_loss: f64,
}

/// One line of the object store's request log.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Request {
    /// When the request came.
    pub t: f64,
    /// The client's address.
    pub client: String,
    /// GET, HEAD, PUT, ...
    pub method: String,
    /// The object's path (`/bucket/key`).
    pub path: String,
    /// The response's body bytes as sent.
    pub bytes: u64,
}

/// One arm's finished job.
#[derive(Clone, Debug)]
pub struct Job {
    /// The arm.
    pub arm: Arm,
    /// Which run of the arm (seed + repeat).
    pub repeat: usize,
    /// Every rank's log, by rank (what a rank that failed had written).
    pub ranks: Vec<RankLog>,
    /// The address of every rank, by rank (the request log's clients).
    pub addresses: Vec<String>,
    /// The object store's requests during the job.
    pub requests: Vec<Request>,
    /// When the job started (host clock).
    pub t0: f64,
    /// Why the job failed, if it did.
    pub error: Option<String>,
}
