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
    /// List the built-in schemes, or those of a plugin library.
    Schemes(SchemesArgs),
    /// Expected decoding error of a gradient code (FRC, CRC) under heterogeneous stragglers,
    /// by the paper's theorems, exact enumeration and Monte Carlo.
    GradientCoding(GradientCodingArgs),
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
                        ubershuffle plan --scheme uncoded --instance epoch.json --json\n  \
                        ubershuffle plan --plugin target/release/libpairwise_xor.so -n 20 -q 100000 -a 0.4"
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
    pub code: String,
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
    pub shuffle: String,
    /// Monte Carlo: independent runs (each draws its slow workers).
    #[arg(long, value_name = "R", default_value_t = 4000)]
    pub runs: usize,
    /// Monte Carlo: iterations per run (default 2n).
    #[arg(long, value_name = "T")]
    pub iterations: Option<usize>,
    /// Seed of the Monte Carlo runs (and of crc-exact's coefficients).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
}
