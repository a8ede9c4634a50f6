//! The command line: subcommands, flags and their help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;

use ubershuffle_gradient_codes::{GradientCodeKind, RoleShuffle};
use ubershuffle_learners::data::shipped::ShippedTask;

use crate::flag_values::{Bandwidth, KillSpec};
use ubershuffle_runtime::spec::StragglerSpec;
use ubershuffle_runtime::spec::defaults as D;

/// Plan, verify, run and compare coded data shuffling schemes for distributed learning.
#[derive(Debug, Parser)]
#[command(name = "ubershuffle", version, about, propagate_version = true)]
pub struct Cli {
    /// Show the libraries' events on stderr: -v workers lost, readmitted and refused and each
    /// epoch's counts; -vv also every epoch phase's duration. RUST_LOG (e.g.
    /// `RUST_LOG=ubershuffle_runtime=debug`) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan one epoch's shuffle with a scheme, verify it by peeling at every worker, and
    /// report its transmissions next to uncoded, a lower bound and Theorem 1.
    Plan(PlanArgs),
    /// Generate a seeded instance (caches and new assignment) and write it as JSON.
    Instance(InstanceArgs),
    /// List the built-in schemes, or those of a plugin library.
    Schemes(SchemesArgs),
    /// Expected decoding error of a gradient code (FRC, CRC) under heterogeneous stragglers,
    /// by the paper's theorems, exact enumeration and Monte Carlo.
    GradientCoding(GradientCodingArgs),
    /// Coded map-shuffle-reduce with stragglers (Y = A X over GF(2^31-1)): the unified and the
    /// improved scheme's loads in closed form, both executed with real MDS + repetition codes
    /// and coded multicast, and Y checked against A X.
    Msr(MsrArgs),
    /// Run the master of a TCP cluster: admit N workers with the token, broadcast seeded test
    /// payloads (pseudo-broadcast or plain), and report the time of each broadcast.
    Master(MasterArgs),
    /// Join a TCP cluster as a worker: run the job the master gives (the epoch loop of
    /// `ubershuffle run --transport tcp`, or the broadcasts of `ubershuffle master`, checking
    /// every byte).
    Worker(WorkerArgs),
    /// Train with data shuffling: the master/worker epoch loop (assign, plan, verify, encode,
    /// send, decode, train, aggregate) in-process, over TCP processes or under mpirun, with a
    /// progress bar, a summary table, --json and --out DIR.
    Run(Box<RunArgs>),
    /// Serve a data set to a training job's ranks from outside the job, epoch by epoch, by coded
    /// delivery (the data plane of `ubershuffle.Exchange`; the token from --token-file or
    /// UBERSHUFFLE_TOKEN).
    Serve(ServeArgs),
    /// Print a fresh random cluster token (256 bits from the operating system), or write it
    /// to a new file readable by its owner only (--out).
    Token(crate::token::TokenCommandArgs),
}

/// Where the instance comes from: a JSON file, or the seeded generator.
#[derive(Debug, Args)]
pub struct InstanceSource {
    /// Read the instance from this JSON file (at most 256 MiB; UBERSHUFFLE_MAX_INPUT_BYTES raises it):
    /// {"workers": n, "points": q, "cache": [[ids of C_0], ...], "assignment": [[ids of D_0], ...]}
    #[arg(long, value_name = "FILE", conflicts_with_all = ["workers", "points", "alpha"])]
    pub instance: Option<PathBuf>,
    /// Generate: number of workers n.
    #[arg(long, short = 'n', value_name = "N", requires = "points")]
    pub workers: Option<usize>,
    /// Generate: number of data points q.
    #[arg(long, short = 'q', value_name = "Q", requires = "workers")]
    pub points: Option<usize>,
    /// Generate: storage ratio alpha in (0, 1]; each worker caches floor(alpha*q) points, its
    /// previous batch plus points drawn uniformly from the rest. Without --alpha there is no
    /// excess storage: each worker caches exactly its previous batch (alpha = 1/n; n need not
    /// divide q), the model of the worst-case and cycle-packing schemes.
    #[arg(long, short = 'a', value_name = "A", requires_all = ["workers", "points"])]
    pub alpha: Option<f64>,
    /// Use the no-excess instance of this Attia-Tandon shuffle matrix S: rows separated by
    /// ';', entries by ','; `S[i][j]` counts the points worker i held that worker j needs now,
    /// and every row and column sums to N/K. Point ids are laid out block by block, row by row.
    #[arg(long, value_name = "S", conflicts_with_all = ["instance", "workers", "points", "alpha"])]
    pub shuffle_matrix: Option<String>,
    /// Seed of the ChaCha8 stream that draws the instance (and the planner's tie-breaks).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Flags of `ubershuffle plan`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  ubershuffle plan --scheme coded --workers 20 --points 100000 --alpha 0.4\n  \
                        ubershuffle plan --scheme ubershuffle-opt --workers 20 --points 1000000 --alpha 0.55 --time-budget 5\n  \
                        ubershuffle plan --scheme uncoded --instance epoch.json --json\n  \
                        ubershuffle plan --plugin target/release/libpairwise_xor.so -n 20 -q 100000 -a 0.4\n  \
                        ubershuffle plan --scheme worst-case --shuffle-matrix \"2,1,2;2,1,2;1,3,1\"\n  \
                        ubershuffle plan --scheme cycle-packing --workers 6 --points 600 --seed 3\n  \
                        ubershuffle plan --policy partial-local --fraction 0.3 --scheme coded -n 8 -q 8000 -a 0.25 --epochs 5\n  \
                        ubershuffle plan --scheme pliable-greedy --candidates 4 -n 20 -q 100000 -a 0.325 --json"
)]
pub struct PlanArgs {
    /// The scheme (see `ubershuffle schemes`) [default: coded, or with --plugin the plugin's
    /// only scheme].
    #[arg(long, value_name = "NAME")]
    pub scheme: Option<String>,
    /// Take the scheme from this plugin library (built with the plugin-api crate); --scheme
    /// names one of its schemes and may be left out when it exports only one.
    #[arg(long, value_name = "LIBRARY")]
    pub plugin: Option<PathBuf>,
    /// The instance.
    #[command(flatten)]
    pub source: InstanceSource,
    /// Budget in seconds for schemes that search. ubershuffle-opt counts it in work units
    /// calibrated to seconds on a 2-core machine, so its plan depends only on the instance,
    /// the seed and the budget, not on the machine's load.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub time_budget: f64,
    /// Budget for the clique family's bound: the search for the largest cliques through every
    /// request, in seconds of one core, counted in work units so the bound depends only on the
    /// instance and the budget (0: no search; the bound then counts each request's cachers).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub clique_search: f64,
    /// Also write the plan as JSON to this file ({"transmissions": [[[point, worker], ...], ...]}).
    #[arg(long, value_name = "FILE")]
    pub plan_out: Option<PathBuf>,
    /// Pliable schemes (pliable-greedy, pliable-hierarchical), which choose the next assignment
    /// as well as the code: each point's next owner must be one of R workers drawn uniformly at
    /// random (R = 1: fully random shuffling, today's schemes), or any worker with `all`. R
    /// bounds how far SGD's data can be steered: a point goes to a given worker with
    /// probability at most R/n (docs/pliable.md) [default: 4].
    #[arg(long, alias = "randomness", value_name = "R")]
    pub candidates: Option<ubershuffle_core::pliable::Randomness>,
    /// Pliable schemes: also write the chosen assignment (with the caches) as instance JSON to
    /// this file, which `plan --instance` reads.
    #[arg(long, value_name = "FILE")]
    pub chosen_out: Option<PathBuf>,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Plan the exchange of partitioned data under a policy.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// Flags of `ubershuffle plan` for partial-local shuffling (Nguyen et al.).
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// Plan the exchange of partitioned data under this policy instead of a fresh random
    /// assignment: local (no exchange), partial-local (each worker exchanges --fraction of its
    /// points), global (a full reshuffle). The workers start from a seeded random partition;
    /// each epoch's caches are their current batches (plus excess storage with --alpha) and its
    /// assignment the batches after the exchange, which --scheme plans. Needs --workers and
    /// --points.
    #[arg(long, value_enum, requires = "workers", conflicts_with_all = ["instance", "shuffle_matrix"])]
    pub policy: Option<PolicyKind>,
    /// partial-local (required there, refused by local and global): the fraction Q in [0, 1] of
    /// each worker's points put into the exchange every epoch (round(Q * batch) points drawn
    /// uniformly; the pool is dealt at random to the other workers, as many to each worker as it
    /// gave, so a fraction Q of every worker's points comes from the others, as in the paper).
    #[arg(long, value_name = "Q", requires = "policy")]
    pub fraction: Option<f64>,
    /// With --policy: plan this many consecutive epochs (default 1), each verified, and report
    /// the points moved and transmissions of each (JSON: per_epoch); the top-level counts,
    /// points_moved and points_exchanged are the first epoch's.
    #[arg(long, value_name = "E", requires = "policy")]
    pub epochs: Option<usize>,
}

/// Flags of `ubershuffle instance`.
#[derive(Debug, Args)]
pub struct InstanceArgs {
    /// Number of workers n.
    #[arg(long, short = 'n', value_name = "N")]
    pub workers: usize,
    /// Number of data points q.
    #[arg(long, short = 'q', value_name = "Q")]
    pub points: usize,
    /// Storage ratio alpha in (0, 1].
    #[arg(long, short = 'a', value_name = "A")]
    pub alpha: f64,
    /// Seed of the ChaCha8 stream.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Flags of `ubershuffle schemes`.
#[derive(Debug, Args)]
pub struct SchemesArgs {
    /// List the schemes of this plugin library instead of the built-in ones.
    #[arg(long, value_name = "LIBRARY")]
    pub plugin: Option<PathBuf>,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `ubershuffle gradient-coding`.
#[derive(Debug, Args)]
#[command(
    after_help = "Parameter convention: n workers and n data partitions; each worker computes s partitions \
and each partition is held by s workers (the papers' (s-1)-tolerant schemes; s = 1 is uncoded). Each worker is \
slow with probability p_slow for the whole run; in every iteration a slow worker straggles with probability \
p_slow_straggle and an active one with p_active_straggle. The error is ||B_S^T a - 1||^2 of the least-squares \
decoding a from the non-stragglers S, per iteration.\n\nExample:\n  ubershuffle gradient-coding --code crc \
--workers 8 --replication 2 --p-slow 0.3 --p-slow-straggle 0.8 --p-active-straggle 0.01 --shuffle random"
)]
pub struct GradientCodingArgs {
    /// The code: uncoded, frc (fractional repetition; s must divide n), crc (cyclic repetition,
    /// 0/1 entries) or crc-exact (Tandon et al.'s real-valued cyclic code).
    #[arg(long, default_value = "frc")]
    pub code: GradientCodeKind,
    /// Number of workers n (= number of partitions), 1 to 64 (exact enumeration up to 12).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 8)]
    pub workers: usize,
    /// Replication factor s: partitions per worker and workers per partition (1 = uncoded).
    #[arg(long, short = 's', value_name = "S", default_value_t = 2)]
    pub replication: usize,
    /// p_hat: probability that a worker is slow (for the whole run).
    #[arg(long, value_name = "P", default_value_t = 0.3)]
    pub p_slow: f64,
    /// p_ss: probability that a slow worker straggles in an iteration.
    #[arg(long, value_name = "P", default_value_t = 0.8)]
    pub p_slow_straggle: f64,
    /// p_as: probability that an active worker straggles in an iteration.
    #[arg(long, value_name = "P", default_value_t = 0.01)]
    pub p_active_straggle: f64,
    /// How worker roles (rows of B) are reassigned each iteration: none, cyclic ((w + t) mod n)
    /// or random (a fresh seeded permutation).
    #[arg(long, default_value = "random")]
    pub shuffle: RoleShuffle,
    /// Monte Carlo: independent runs (each draws its slow workers).
    #[arg(long, value_name = "R", default_value_t = 4000)]
    pub runs: usize,
    /// Monte Carlo: iterations per run (default 2n). With --run: gradient steps (default 100).
    #[arg(long, value_name = "T")]
    pub iterations: Option<usize>,
    /// Seed of the Monte Carlo runs (and of crc-exact's coefficients); with --run, of the
    /// partitioning, the roles, the slow workers and the straggler draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Executing the descent (--run) instead of computing the expected error.
    #[command(flatten)]
    pub execute: CodedRunArgs,
}

/// Flags of `ubershuffle gradient-coding --run`: gradient-coded descent executed on the
/// master/worker runtime.
#[derive(Debug, Args)]
pub struct CodedRunArgs {
    /// Execute gradient-coded descent on the master/worker runtime (threads, `ubershuffle worker`
    /// processes over TCP, or MPI ranks) instead of computing the expected error. Workers the
    /// straggler model makes late hold their coded gradient past --deadline and are dropped.
    #[arg(long)]
    pub run: bool,
    /// --run: the shipped data: diabetes-regression (least squares) or iris-virginica or
    /// diabetes-above-median (logistic).
    #[arg(long, value_parser = parse_task, default_value = "diabetes-regression")]
    pub task: ShippedTask,
    /// --run: step size on the mean gradient (default 0.3 for least squares, 4 for logistic).
    #[arg(long, value_name = "ETA")]
    pub step_size: Option<f64>,
    /// --run: the master's deadline per iteration, in seconds, once every worker holds its
    /// data.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.05)]
    pub deadline: f64,
    /// --run: exactly these workers are slow (comma-separated, from 0) instead of each with
    /// probability --p-slow.
    #[arg(long, value_name = "W,...", value_delimiter = ',')]
    pub slow_workers: Option<Vec<usize>>,
    /// --run: the fraction of the data held out (the loss printed is measured on it).
    #[arg(long, value_name = "F", default_value_t = 0.2)]
    pub held_out: f64,
    /// --run: the shuffling scheme that moves the role blocks when roles are shuffled.
    #[arg(long, value_name = "NAME", default_value = "uncoded")]
    pub scheme: String,
    /// --run: where the master and the workers run.
    #[arg(long, value_enum, default_value_t = TransportKind::Inproc)]
    pub transport: TransportKind,
    /// --run, tcp: the address to listen on (port 0 picks a free one; printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// --run, tcp: the cluster token and sealing.
    #[command(flatten)]
    pub token: crate::token::TokenArgs,
    /// --run: seconds any single wait may take before the peer is declared stalled.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// --run, tcp: seconds to wait for the workers to join.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub join_timeout: f64,
}

/// A shipped task by name.
fn parse_task(name: &str) -> Result<ShippedTask, String> {
    ShippedTask::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
        let known: Vec<&str> = ShippedTask::ALL.iter().map(|t| t.name()).collect();
        format!("unknown task '{name}' (known: {})", known.join(", "))
    })
}

/// Flags of `ubershuffle master`.
#[derive(Debug, Args)]
#[command(after_help = "Example (three shells):\n  ubershuffle token --out cluster.token\n  \
                        ubershuffle master --listen 127.0.0.1:7070 --workers 2 --token-file cluster.token --bytes 16777216\n  \
                        ubershuffle worker --connect 127.0.0.1:7070 --token-file cluster.token   # twice")]
pub struct MasterArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Number of workers to wait for.
    #[arg(long, short = 'n', value_name = "N")]
    pub workers: usize,
    /// The cluster token and sealing.
    #[command(flatten)]
    pub token: crate::token::TokenArgs,
    /// Bytes per broadcast.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 24)]
    pub bytes: u64,
    /// Number of broadcasts.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: u32,
    /// Broadcast method.
    #[arg(long, value_enum, default_value_t = BroadcastKind::PseudoBroadcast)]
    pub method: BroadcastKind,
    /// Seconds any single wait may take before the peer is declared stalled.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
    /// Seconds to wait for all workers to join.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub join_timeout: f64,
    /// Seed of the payloads.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `ubershuffle msr`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  ubershuffle msr --servers 4 --storage 1/2 --wait 3\n  \
                        ubershuffle msr --servers 6 --storage 0.5 --wait 4 --rows 20 --columns 12 --json")]
pub struct MsrArgs {
    /// K, the number of servers (1 to 64).
    #[arg(long, value_name = "K")]
    pub servers: usize,
    /// mu, the fraction of A's rows a server may store: a fraction like 1/3 or a decimal like 0.25.
    #[arg(long, value_name = "MU")]
    pub storage: String,
    /// q, how many servers the master waits for (the first q to finish the map phase).
    #[arg(long, value_name = "Q")]
    pub wait: usize,
    /// M, rows of A (default: the smallest for which both schemes' counts are whole).
    #[arg(long, value_name = "M")]
    pub rows: Option<usize>,
    /// N, columns of X (default: the smallest for which both schemes' counts are whole).
    #[arg(long, value_name = "N")]
    pub columns: Option<usize>,
    /// lambda, the rate of the shifted-exponential map times (mean mu N (1 + 1/lambda)).
    #[arg(long, value_name = "LAMBDA", default_value_t = 1.0)]
    pub rate: f64,
    /// Seed of A, X and the map times that decide who straggles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `ubershuffle worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The master's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// The cluster token and sealing.
    #[command(flatten)]
    pub token: crate::token::TokenArgs,
    /// Seconds any single wait may take before the peer is declared stalled (until the job
    /// arrives; the epoch loop then uses the master's --timeout, and gives up on a master that
    /// sends nothing for twice that).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
    /// Seconds to keep trying to reach the master and to wait for the cluster to start.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub join_timeout: f64,
}

/// Flags of `ubershuffle serve`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    ubershuffle token --out job.token                        # once: a fresh secret, mode 600\n  \
    ubershuffle serve --records data.bin --record-size 4096 --workers 4 --extra-cache 0.2 \\\n      \
    --epochs 10 --listen 0.0.0.0:7070 --token-file job.token\n  \
    ubershuffle serve --records-dir images/ --workers 4 --alpha 0.5 --epochs 10 --listen 0.0.0.0:7070\n  \
    ubershuffle serve --records blob.bin --index blob.u64 --workers 4 --alpha 0.5 --listen 0.0.0.0:7070\n\
Each training rank then calls ubershuffle.Exchange.connect(\"HOST:7070\", rank=RANK, world=WORLD_SIZE)\n\
from Python with the same token (UBERSHUFFLE_TOKEN_FILE or UBERSHUFFLE_TOKEN). The store serves\n\
the job attempt after attempt: when a rank fails, the others stop and the store waits for the\n\
restarted job; it ends once an attempt's ranks close after the last epoch.\n\
An index (--index) is records + 1 little-endian u64 offsets into --records, the first 0, the last\n\
its size (a RecordStore's index.u64 and RecordSource.from_blob's offsets have this form).")]
pub struct ServeArgs {
    /// The data set in one file: records of one size (--record-size), or laid end to end at
    /// the offsets of an index file (--index).
    #[arg(long, value_name = "FILE", required_unless_present = "records_dir")]
    pub records: Option<PathBuf>,
    /// Bytes per record of --records: record i at byte i * B.
    #[arg(long, value_name = "B", requires = "records", conflicts_with = "index")]
    pub record_size: Option<u64>,
    /// The offsets of the records of --records: records + 1 little-endian u64 numbers.
    #[arg(long, value_name = "FILE", requires = "records")]
    pub index: Option<PathBuf>,
    /// The data set as a folder, one record a file: every regular file under it (names
    /// starting with '.' skipped), sorted by path, as ubershuffle.sources.as_source sorts them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["records", "record_size", "index"])]
    pub records_dir: Option<PathBuf>,
    /// Training ranks of the job.
    #[arg(long, value_name = "N")]
    pub workers: usize,
    /// Where to listen for the training ranks (0.0.0.0:PORT: every interface).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: String,
    /// Cache ratio alpha: each rank caches floor(alpha * records) records, its batch included
    /// (the sampler's alpha).
    #[arg(long, value_name = "A", required_unless_present = "extra_cache", conflicts_with = "extra_cache")]
    pub alpha: Option<f64>,
    /// The share of the records outside a rank's batch that it also caches (the sampler's
    /// extra_cache; holds on every number of ranks).
    #[arg(long, value_name = "X")]
    pub extra_cache: Option<f64>,
    /// How batches change between epochs (the sampler's policy).
    #[arg(long, value_enum, default_value_t = PolicyKind::Global)]
    pub policy: PolicyKind,
    /// The fraction Q of each batch partial-local exchanges.
    #[arg(long, value_name = "Q")]
    pub fraction: Option<f64>,
    /// The delivery scheme (a built-in planner: `ubershuffle schemes`).
    #[arg(long, default_value = "auto")]
    pub scheme: String,
    /// Seed of the epoch chain and the planner (the sampler's seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The job's last epoch: the ranks train epochs 0..=E.
    #[arg(long, default_value_t = 1)]
    pub epochs: u64,
    /// Seconds a silent rank is waited on before it counts as dead (its training included:
    /// the engine's heartbeats keep a training rank heard).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
    /// Seconds the store waits for an attempt's ranks to join (0: for ever).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub join_timeout: f64,
    /// Keep the records the store has read here, so that a restarted store reads none again
    /// (default: a temporary store in shared memory).
    #[arg(long, value_name = "DIR")]
    pub store_dir: Option<PathBuf>,
    /// Bytes of a segment of coded delivery (0: the engine's choice for the records).
    #[arg(long, value_name = "B", default_value_t = 0)]
    pub segment_bytes: usize,
    /// The store's uplink in Gbit/s, against which the planner's search is weighed.
    #[arg(long, value_name = "G", default_value_t = 10.0)]
    pub link_gbps: f64,
    /// Print one JSON object on stdout: every attempt and the figures of every epoch served.
    #[arg(long)]
    pub json: bool,
    /// The job's token (--token-file, UBERSHUFFLE_TOKEN).
    #[command(flatten)]
    pub token: crate::token::TokenArgs,
}

/// Flags of `ubershuffle run`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  \
    ubershuffle run --scheme coded --workers 4 --epochs 5 --bandwidth 1gbit\n  \
    ubershuffle run --scheme pliable-greedy --candidates 4 --workers 8 --epochs 5\n  \
    ubershuffle run --learner matcomp --scheme uncoded --stragglers iid:0.2 --deadline 0.05 --json\n  \
    ubershuffle run --config run.toml --out runs/a          # then: --resume --epochs 20\n  \
    ubershuffle token --out cluster.token                    # once: a fresh secret, mode 600\n  \
    ubershuffle run --transport tcp --listen 127.0.0.1:7070 --token-file cluster.token --workers 2\n  \
    ubershuffle worker --connect 127.0.0.1:7070 --token-file cluster.token   # once per worker\n  \
    mpirun -np 5 ubershuffle run --transport mpi --epochs 3     # built with --features mpi\n\n\
A config file (--config) is TOML whose keys are the long flags, e.g.\n  \
    scheme = \"coded\"\n  workers = 8\n  step-size = 0.02\n  stragglers = \"iid:0.1\"\n\
Flags on the command line override it; an unknown key is an error.",
    args_override_self = true
)]
pub struct RunArgs {
    /// Read settings from this TOML file (keys: the long flags without dashes in front, e.g.
    /// `workers = 8`, `step-size = 0.02`); flags given on the command line override it. At most
    /// 256 MiB (UBERSHUFFLE_MAX_INPUT_BYTES raises it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The settings.
    #[command(flatten)]
    pub settings: RunSettings,
}

/// What the workers of `ubershuffle run` train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LearnerKind {
    /// Linear regression by parallel SGD on seeded synthetic data.
    Linreg,
    /// Low-rank matrix completion by distributed SGD on a seeded synthetic rank-r matrix.
    Matcomp,
}

/// How the master and the workers of `ubershuffle run` talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// Threads of this process.
    #[value(alias = "in-process")]
    Inproc,
    /// This process is the master; workers are `ubershuffle worker` processes.
    Tcp,
    /// Under mpirun: rank 0 is the master (needs a build with --features mpi).
    Mpi,
}

/// How batches change between epochs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// A fresh uniformly random assignment every epoch.
    Global,
    /// Each worker exchanges --fraction of its points.
    PartialLocal,
    /// No exchange.
    Local,
}

/// How a broadcast travels (in-process and TCP; MPI uses MPI_Bcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BroadcastKind {
    /// Scatter + ring (UberShuffle Section 3.1).
    PseudoBroadcast,
    /// The root sends the whole payload to every receiver.
    Plain,
}

impl BroadcastKind {
    /// The transport's method.
    pub fn method(self) -> ubershuffle_transport::BroadcastMethod {
        match self {
            BroadcastKind::PseudoBroadcast => ubershuffle_transport::BroadcastMethod::PseudoBroadcast,
            BroadcastKind::Plain => ubershuffle_transport::BroadcastMethod::Plain,
        }
    }
}

impl From<PolicyKind> for ubershuffle_core::exchange_policy::PolicyKind {
    fn from(kind: PolicyKind) -> Self {
        use ubershuffle_core::exchange_policy::PolicyKind as Core;
        match kind {
            PolicyKind::Global => Core::Global,
            PolicyKind::PartialLocal => Core::PartialLocal,
            PolicyKind::Local => Core::Local,
        }
    }
}

/// The settings of `ubershuffle run`, from flags or a TOML file (same names; flags win).
/// Defaults are written once, here; the few that depend on other settings (the learner's
/// noise and step size, alpha, the scheme under a plugin, the workers under MPI) are `None`
/// when not given and filled in by one function each in `commands::run::settings`.
#[derive(Clone, Debug, Args, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunSettings {
    /// The shuffling scheme (see `ubershuffle schemes`) [default: coded, or with --plugin the
    /// plugin's only scheme].
    #[arg(long, value_name = "NAME", help_heading = "Scheme")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// Take the scheme from this plugin library; --scheme names one of its schemes.
    #[arg(long, value_name = "LIBRARY", help_heading = "Scheme")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PathBuf>,
    /// Pliable schemes (pliable-greedy, pliable-hierarchical) choose each epoch's assignment:
    /// each point's next owner is one of R workers drawn uniformly at random (1: fully random
    /// shuffling; `all`: any worker); see docs/pliable.md [default: 4 with a pliable scheme].
    #[arg(long, alias = "randomness", value_name = "R", help_heading = "Scheme")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<ubershuffle_core::pliable::Randomness>,

    /// What the workers train.
    #[arg(long, value_enum, default_value_t = LearnerKind::Linreg, help_heading = "Learner")]
    pub learner: LearnerKind,
    /// linreg: training points q, the data shuffled (plus q/4 held-out points for the loss).
    #[arg(long, short = 'q', value_name = "Q", default_value_t = D::POINTS, help_heading = "Learner")]
    pub points: usize,
    /// linreg: input features.
    #[arg(long, value_name = "D", default_value_t = D::FEATURES, help_heading = "Learner")]
    pub features: usize,
    /// Standard deviation of the Gaussian noise on labels (linreg) or entries (matcomp)
    /// [default: 0.1 (linreg), 0.05 (matcomp)].
    #[arg(long, value_name = "SIGMA", help_heading = "Learner")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    /// SGD step size [default: 0.001 (linreg), 0.05 (matcomp)].
    #[arg(long, value_name = "ETA", help_heading = "Learner")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_size: Option<f64>,
    /// linreg: passes over the local batch per epoch.
    #[arg(long, value_name = "P", default_value_t = D::LOCAL_PASSES, help_heading = "Learner")]
    pub local_passes: usize,
    /// matcomp: matrix rows (users).
    #[arg(long, value_name = "R", default_value_t = D::ROWS, help_heading = "Learner")]
    pub rows: usize,
    /// matcomp: matrix columns (items).
    #[arg(long, value_name = "C", default_value_t = D::COLS, help_heading = "Learner")]
    pub cols: usize,
    /// matcomp: rank of the matrix and of the factors.
    #[arg(long, value_name = "K", default_value_t = D::RANK, help_heading = "Learner")]
    pub rank: usize,
    /// matcomp: observed entries per row (10 % of all are held out for the loss).
    #[arg(long, value_name = "M", default_value_t = D::RATINGS_PER_ROW, help_heading = "Learner")]
    pub ratings_per_row: usize,
    /// matcomp: l2 penalty lambda.
    #[arg(long, value_name = "LAMBDA", default_value_t = D::REGULARIZATION, help_heading = "Learner")]
    pub regularization: f64,
    /// matcomp: initial factor entries are N(0, s^2).
    #[arg(long, value_name = "S", default_value_t = D::INIT_SCALE, help_heading = "Learner")]
    pub init_scale: f64,

    /// How master and workers talk.
    #[arg(long, value_enum, default_value_t = TransportKind::Inproc, help_heading = "Cluster")]
    pub transport: TransportKind,
    /// Number of workers n, at most 1024 [default: 4; under mpi, the ranks after the master].
    #[arg(long, short = 'n', value_name = "N", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Epochs to run.
    #[arg(long, value_name = "E", default_value_t = D::EPOCHS, help_heading = "Cluster")]
    pub epochs: usize,
    /// Storage ratio: each worker caches floor(alpha q) points [default: 2/n, at most 1/2].
    #[arg(long, short = 'a', value_name = "A", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// How batches change between epochs.
    #[arg(long, value_enum, default_value_t = PolicyKind::Global, help_heading = "Cluster")]
    pub policy: PolicyKind,
    /// partial-local (required there): the fraction Q in [0, 1] of each worker's points
    /// exchanged per epoch.
    #[arg(long, value_name = "Q", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// inproc: emulated link rate of every node's single send and receive port, e.g. 1gbit,
    /// 10gbit, 500mbit, or none (unshaped).
    #[arg(long, value_name = "RATE", default_value = "none", value_parser = Bandwidth::parse, help_heading = "Cluster")]
    pub bandwidth: Bandwidth,
    /// inproc and tcp: how broadcasts travel (mpi broadcasts with MPI_Bcast) [default:
    /// pseudo-broadcast].
    #[arg(long, value_enum, help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<BroadcastKind>,
    /// Straggler model: none, iid:P, heterogeneous:P_SLOW,P_SS,P_AS or markov:P_FALL,P_RECOVER;
    /// a straggler holds its update past --deadline, which must be given.
    #[arg(long, value_name = "MODEL", default_value = "none", value_parser = StragglerSpec::parse, help_heading = "Cluster")]
    pub stragglers: StragglerSpec,
    /// Seconds the master waits for updates once every worker holds its packets; later
    /// updates are dropped (their workers straggle) [default: wait for every live worker].
    #[arg(long, value_name = "SECONDS", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<f64>,
    /// Seed of the data and of every random choice.
    #[arg(long, value_name = "S", default_value_t = 0, help_heading = "Cluster")]
    pub seed: u64,
    /// Seconds of search a planner may spend on an epoch (the searching schemes: auto,
    /// clique-cover, ubershuffle-opt, the pliable ones), counted in work units so that plans
    /// repeat exactly [default: 10].
    #[arg(long, value_name = "SECONDS", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_budget: Option<f64>,
    /// Largest payload of one data message, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = ubershuffle_runtime::RunConfig::DEFAULT_CHUNK_BYTES, help_heading = "Cluster")]
    pub chunk_bytes: usize,
    /// Seconds any single wait may take before a peer counts as stalled.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, help_heading = "Cluster")]
    pub timeout: f64,
    /// tcp: the address to listen on (port 0 picks a free one; printed on stderr).
    #[arg(long, value_name = "ADDR", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// tcp: the cluster token and sealing.
    #[command(flatten)]
    #[serde(skip)]
    pub token: crate::token::TokenArgs,
    /// tcp: seconds to wait for every worker to join (a worker that leaves before the cluster
    /// starts is replaced by the next one to join within it).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, help_heading = "Cluster")]
    pub join_timeout: f64,
    /// tcp: when fewer than --workers have joined by --join-timeout, start with those if they
    /// are at least N (the missing ones are listed as lost in the first epoch, and the run
    /// shuffles among the others) [default: wait for all --workers].
    #[arg(long, value_name = "N", help_heading = "Cluster")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_workers: Option<usize>,

    /// Print one JSON object on stdout (the configuration, every epoch, totals) instead of a table.
    #[arg(long, help_heading = "Output")]
    #[serde(skip)]
    pub json: bool,
    /// Write DIR/epochs.csv, DIR/summary.json and DIR/checkpoint.json after every epoch.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<PathBuf>,
    /// Continue the run in --out DIR from its last completed epoch (the checkpoint must come
    /// from the same configuration; --epochs may grow).
    #[arg(long, help_heading = "Output")]
    #[serde(skip)]
    pub resume: bool,
    /// Start afresh in an --out DIR that holds an earlier run, replacing its files (without
    /// --force or --resume such a DIR is refused).
    #[arg(long, help_heading = "Output", conflicts_with = "resume")]
    #[serde(skip)]
    pub force: bool,
    /// Fault injection, for demonstrations: worker W (0-based) leaves the run, as if killed,
    /// when epoch E's order reaches it (W@E). Not available under mpi.
    #[arg(long, value_name = "W@E", value_parser = KillSpec::parse, help_heading = "Output")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_worker: Option<KillSpec>,

    /// The long flags given on the command line or in the config file (filled in after
    /// parsing, from clap's matches), so that a flag left at its default can be told from one
    /// given with the default's value.
    #[arg(skip)]
    #[serde(skip)]
    pub given: Vec<String>,
}
