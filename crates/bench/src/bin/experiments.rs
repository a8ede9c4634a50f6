//! `experiments`: regenerates the papers' tables and figures into `results/`. Usually started
//! by `cargo xtask experiments [NAME...] [--quick]`, which builds it in release mode.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ubershuffle_bench::experiments::{
    Context, EXPERIMENTS, default_out_dir, experiment_by_name, run_and_write,
};

/// Regenerate the papers' experiments as CSV, SVG and a Markdown summary.
#[derive(Debug, Parser)]
#[command(name = "experiments", about, after_help = after_help())]
struct Args {
    /// Experiments to run (all when none is named).
    names: Vec<String>,
    /// Run the small subset that finishes in minutes.
    #[arg(long)]
    quick: bool,
    /// Where to write results.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// List the experiments and exit.
    #[arg(long)]
    list: bool,
    /// A plugin library for the `plugins` experiment (repeatable).
    #[arg(long = "plugin", value_name = "LIBRARY")]
    plugins: Vec<PathBuf>,
}

fn after_help() -> String {
    let names: Vec<String> = EXPERIMENTS.iter().map(|e| format!("  {:<16} {}", e.name, e.about)).collect();
    format!("Experiments:\n{}", names.join("\n"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        println!("{}", after_help());
        return ExitCode::SUCCESS;
    }
    let mut chosen = Vec::new();
    for name in &args.names {
        match experiment_by_name(name) {
            Some(e) => chosen.push(e),
            None => {
                let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
                eprintln!("error: unknown experiment '{name}'; known: {}", known.join(", "));
                return ExitCode::FAILURE;
            }
        }
    }
    if chosen.is_empty() {
        chosen = EXPERIMENTS.iter().collect();
    }
    let ctx = Context {
        quick: args.quick,
        out_dir: args.out.unwrap_or_else(default_out_dir),
        plugins: args.plugins,
    };
    let mut failed = 0;
    for experiment in chosen {
        eprintln!("experiment {}: {}", experiment.name, experiment.about);
        if let Err(e) = run_and_write(experiment, &ctx) {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            failed += 1;
        }
    }
    if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
