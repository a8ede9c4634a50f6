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
                        ubershuffle plan --scheme ubershuffle-opt --workers 20 --points 1000000 --alpha 0.55 --time-budget 5\n  \
                        ubershuffle plan --scheme uncoded --instance epoch.json --json"
)]
pub struct PlanArgs {
    /// The scheme (see `ubershuffle schemes`).
    #[arg(long, default_value = "coded")]
    pub scheme: String,
    /// The instance.
    #[command(flatten)]
    pub source: InstanceSource,
    /// Budget in seconds for schemes that search. ubershuffle-opt counts it in work units
    /// calibrated to seconds on a 2-core machine, so its plan depends only on the instance,
    /// the seed and the budget, not on the machine's load.
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
