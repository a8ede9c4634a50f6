//! `experiments`: regenerates the papers' tables and figures into `results/`, or with `--check`
//! compares a fresh run with the committed results. Usually started by
//! `cargo xtask experiments [NAME...] [--quick] [--check]`, which builds it in release mode.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ubershuffle_bench::cost_model;
use ubershuffle_bench::experiments::{EXPERIMENTS, RunOptions, run_all, scale};

/// Regenerate the papers' experiments as CSV, SVG and a Markdown summary.
#[derive(Debug, Parser)]
#[command(name = "experiments", about, after_help = after_help())]
struct Args {
    /// Experiments to run (all when none is named).
    names: Vec<String>,
    /// Run the small subset that finishes in minutes (results/; without it: results/full/).
    #[arg(long)]
    quick: bool,
    /// Regenerate into a temporary folder and compare every machine-independent column with the
    /// committed CSVs (and README's headline table with results/headline.csv); fail on the first
    /// difference of each experiment.
    #[arg(long)]
    check: bool,
    /// Where to write results (default: results/, or results/full/ for a full run).
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    out: Option<PathBuf>,
    /// List the experiments and exit.
    #[arg(long)]
    list: bool,
    /// A plugin library for the `plugins` experiment (repeatable).
    #[arg(long = "plugin", value_name = "LIBRARY")]
    plugins: Vec<PathBuf>,
    /// Measure the cost model of the emulated clusters' computing on this machine and write it
    /// to results/cost-model.toml (instead of running experiments).
    #[arg(long, conflicts_with_all = ["check", "list"])]
    calibrate: bool,
}

/// Calibrates the cost model and writes it beside the results.
fn calibrate() -> anyhow::Result<PathBuf> {
    let model = cost_model::calibrate(&|step| eprintln!("calibrating: {step}"))?;
    let path = cost_model::committed_path();
    ubershuffle_runtime::write_atomically(&path, cost_model::to_toml(&model).as_bytes())?;
    Ok(path)
}

fn after_help() -> String {
    let names: Vec<String> = EXPERIMENTS.iter().map(|e| format!("  {:<16} {}", e.name, e.about)).collect();
    format!("Experiments:\n{}", names.join("\n"))
}

fn main() -> ExitCode {
    // A child process of the `scale` experiment: one scheme on one point, its row on stdout.
    let argv: Vec<String> = std::env::args().collect();
    if let [_, flag, spec] = argv.as_slice()
        && flag == scale::CHILD_FLAG
    {
        return match scale::child(spec) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
                ExitCode::FAILURE
            }
        };
    }
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            eprintln!("{}", text.lines().next().unwrap_or("error: invalid arguments"));
            return ExitCode::FAILURE;
        }
    };
    if args.list {
        println!("{}", after_help());
        return ExitCode::SUCCESS;
    }
    if args.calibrate {
        return match calibrate() {
            Ok(path) => {
                eprintln!("wrote {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
                ExitCode::FAILURE
            }
        };
    }
    let options = RunOptions {
        names: args.names,
        quick: args.quick,
        check: args.check,
        out: args.out,
        plugins: args.plugins,
    };
    match run_all(&options) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("error: {failed} experiment(s) failed or differ from the committed results");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
