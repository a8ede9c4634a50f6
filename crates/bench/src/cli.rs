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
    /// Coded map-shuffle-reduce with stragglers (Y = A X over GF(2^31-1)): the unified and the
    /// improved scheme's loads in closed form, both executed with real MDS + repetition codes
    /// and coded multicast, and Y checked against A X.
    Msr(MsrArgs),
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
