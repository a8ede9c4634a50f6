//! The command line: subcommands, flags and their help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Plan, verify, run and compare coded data shuffling schemes for distributed learning.
#[derive(Debug, Parser)]
#[command(name = "ubershuffle", version, about, propagate_version = true)]
pub struct Cli {
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
    /// List the built-in schemes.
    Schemes(SchemesArgs),
    /// Run the master of a TCP cluster: admit N workers with the token, broadcast seeded test
    /// payloads (pseudo-broadcast or plain), and report the time of each broadcast.
    Master(MasterArgs),
    /// Join a TCP cluster as a worker: take part in the master's broadcasts and check every
    /// byte.
    Worker(WorkerArgs),
}

/// Where the instance comes from: a JSON file, or the seeded generator.
#[derive(Debug, Args)]
pub struct InstanceSource {
    /// Read the instance from this JSON file:
    /// {"workers": n, "points": q, "cache": [[ids of C_0], ...], "assignment": [[ids of D_0], ...]}
    #[arg(long, value_name = "FILE", conflicts_with_all = ["workers", "points", "alpha"])]
    pub instance: Option<PathBuf>,
    /// Generate: number of workers n.
    #[arg(long, short = 'n', value_name = "N", requires_all = ["points", "alpha"])]
    pub workers: Option<usize>,
    /// Generate: number of data points q.
    #[arg(long, short = 'q', value_name = "Q", requires_all = ["workers", "alpha"])]
    pub points: Option<usize>,
    /// Generate: storage ratio alpha in (0, 1]; each worker caches floor(alpha*q) points, its
    /// previous batch plus points drawn uniformly from the rest.
    #[arg(long, short = 'a', value_name = "A", requires_all = ["workers", "points"])]
    pub alpha: Option<f64>,
    /// Seed of the ChaCha8 stream that draws the instance (and the planner's tie-breaks).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Flags of `ubershuffle plan`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  ubershuffle plan --scheme coded --workers 20 --points 100000 --alpha 0.4\n  \
                        ubershuffle plan --scheme uncoded --instance epoch.json --json"
)]
pub struct PlanArgs {
    /// The scheme (see `ubershuffle schemes`).
    #[arg(long, default_value = "coded")]
    pub scheme: String,
    /// The instance.
    #[command(flatten)]
    pub source: InstanceSource,
    /// Wall-clock budget in seconds for schemes that search.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub time_budget: f64,
    /// Also write the plan as JSON to this file ({"transmissions": [[[point, worker], ...], ...]}).
    #[arg(long, value_name = "FILE")]
    pub plan_out: Option<PathBuf>,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
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
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `ubershuffle master`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (three shells):\n  ubershuffle master --listen 127.0.0.1:7070 --workers 2 --token s3cret --bytes 16777216\n  \
                        ubershuffle worker --connect 127.0.0.1:7070 --token s3cret\n  \
                        ubershuffle worker --connect 127.0.0.1:7070 --token s3cret"
)]
pub struct MasterArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Number of workers to wait for.
    #[arg(long, short = 'n', value_name = "N")]
    pub workers: usize,
    /// Shared secret every worker must present.
    #[arg(long, value_name = "T")]
    pub token: String,
    /// Bytes per broadcast.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 24)]
    pub bytes: u64,
    /// Number of broadcasts.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: u32,
    /// Broadcast method: pseudo-broadcast (scatter + ring, UberShuffle Section 3.1) or plain.
    #[arg(long, value_name = "METHOD", default_value = "pseudo-broadcast")]
    pub method: String,
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

/// Flags of `ubershuffle worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The master's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// Shared secret of the cluster.
    #[arg(long, value_name = "T")]
    pub token: String,
    /// Seconds any single wait may take before the peer is declared stalled.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
    /// Seconds to keep trying to reach the master and to wait for the cluster to start.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub join_timeout: f64,
}
