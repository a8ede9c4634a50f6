//! `experiments`: runs the papers' experiments into a folder of the run's own and prints them
//! beside the committed results (`--check` fails where they differ; `--update` regenerates the
//! committed `results/`). Usually started by `cargo xtask experiments [NAME...] [--quick]
//! [--check | --update]`, which builds it in release mode.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ubershuffle_bench::calibration;
use ubershuffle_bench::experiments::{EXPERIMENTS, RunOptions, run_all, scale};

/// Run the papers' experiments, writing CSV, SVG and a Markdown summary into a folder of the run's own.
#[derive(Debug, Parser)]
#[command(name = "experiments", about, after_help = after_help())]
struct Args {
    /// Experiments to run (all when none is named).
    names: Vec<String>,
    /// Run the small subset that finishes in minutes (compared with results/; without it, the
    /// full run, compared with results/full/).
    #[arg(long)]
    quick: bool,
    /// Fail on the first difference of each experiment's machine-independent columns from the
    /// committed CSVs (and of README's headline table from results/headline.csv).
    #[arg(long)]
    check: bool,
    /// With --check (not --quick): re-run, for each experiment with committed full results, a
    /// sample of its full run (every cheap row, a stated subset of the expensive ones) and
    /// compare it with the committed rows of results/full/; then check every committed full row
    /// against results/full/digests.toml (what the full run wrote) and its CSV's invariants.
    #[arg(long, requires = "check", conflicts_with = "quick")]
    sample: bool,
    /// Where to write the run (default: experiments/quick or experiments/full in cargo's target
    /// folder); never the committed results (that is --update).
    #[arg(long, value_name = "DIR", conflicts_with = "update")]
    out: Option<PathBuf>,
    /// Regenerate the committed results (results/ or results/full/, results/headline.csv and
    /// README's headline table) instead: the maintainers' act, with this machine's timings.
    #[arg(long, conflicts_with_all = ["check", "sample"])]
    update: bool,
    /// List the experiments and exit.
    #[arg(long)]
    list: bool,
    /// A plugin library for the `plugins` experiment (repeatable).
    #[arg(long = "plugin", value_name = "LIBRARY")]
    plugins: Vec<PathBuf>,
    /// Measure the cost model of the emulated clusters' computing on this machine and write it
    /// to results/cost-model.toml (instead of running experiments).
    /// (With --check: measure every price again and compare; fails when one is outside 0.67x-1.5x.)
    #[arg(long, conflicts_with_all = ["list", "quick", "sample", "update"])]
    calibrate: bool,
    /// With --calibrate --check: multiply the measured prices named NAME (a price such as
    /// xor_ns_per_byte, a table such as plan.ubershuffle, or all) by FACTOR, to see the check fail.
    #[arg(long, value_name = "NAME=FACTOR", requires = "calibrate")]
    inject: Option<String>,
    /// With --calibrate --check: also write the comparison to results/calibration-check.csv.
    #[arg(long, requires = "check", conflicts_with = "inject")]
    record: bool,
}

/// `--calibrate`: measures the cost model and writes it; with `--check`, measures every price
/// again and compares it with the committed model instead (failing outside the band).
fn calibrate(args: &Args) -> anyhow::Result<()> {
    let progress = |step: &str| eprintln!("calibrating: {step}");
    if !args.check {
        let path = calibration::calibrate(&progress)?;
        eprintln!("wrote {}", path.display());
        return Ok(());
    }
    let inject = args.inject.as_deref().map(parse_inject).transpose()?;
    let (checks, table) = calibration::check(inject, &progress)?;
    println!("{table}");
    if args.record {
        let path = calibration::record(&checks)?;
        eprintln!("wrote {}", path.display());
    }
    let outside: Vec<&str> = checks.iter().filter(|c| !c.within_band()).map(|c| c.name.as_str()).collect();
    anyhow::ensure!(
        outside.is_empty(),
        "{} of {} prices outside the band: {} (calibrate again with `cargo xtask calibrate` and regenerate the charged results)",
        outside.len(),
        checks.len(),
        outside.join(", ")
    );
    Ok(())
}

/// `NAME=FACTOR` of `--inject`.
fn parse_inject(text: &str) -> anyhow::Result<(&str, f64)> {
    let (name, factor) = text.split_once('=').ok_or_else(|| anyhow::anyhow!("--inject takes NAME=FACTOR"))?;
    let factor: f64 =
        factor.parse().map_err(|_| anyhow::anyhow!("--inject {text}: FACTOR is not a number"))?;
    anyhow::ensure!(factor.is_finite() && factor > 0.0, "--inject {text}: FACTOR must be positive");
    Ok((name, factor))
}

fn after_help() -> String {
    let names: Vec<String> = EXPERIMENTS.iter().map(|e| format!("  {:<16} {}", e.name, e.about)).collect();
    format!("Experiments:\n{}", names.join("\n"))
}

fn main() -> ExitCode {
    // A child process of the `scale` experiment: one scheme on one point, or one point's clique
    // family figures, as JSON on stdout.
    let argv: Vec<String> = std::env::args().collect();
    if let [_, flag, spec] = argv.as_slice()
        && scale::is_child_flag(flag)
    {
        return match scale::child(flag, spec) {
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
        return match calibrate(&args) {
            Ok(()) => ExitCode::SUCCESS,
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
        sample: args.sample,
        out: args.out,
        update: args.update,
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
