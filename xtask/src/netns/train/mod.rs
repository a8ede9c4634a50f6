//! `cargo xtask netns-train`: real PyTorch DDP jobs (gloo) between network namespaces shaped
//! by `tc`, one job per arm of the experiment: a store node and `--ranks` training ranks, each
//! in a namespace of its own ([`super::topology`]; the master node is the store), the records
//! JPEG digits of varying size (`python/examples/digits_jpeg.py`), the training script
//! `python/benchmarks/netns_train_rank.py`. Per arm and epoch it records the data time exposed
//! to training, the epoch time, the bytes on every node's link (the kernel's counters) and on
//! the plane, the storage per rank, and held-out loss and accuracy against wall time; it
//! checks the bytes against the plan (and, for the uncoded store arms, against the kernel's
//! counters), replays each store delivery's rounds on the emulator, and writes a CSV, a chart
//! and a section of results/README.md ([`report`]).
//!
//! Here: the flags and the run; [`jobs`] runs the jobs, [`types`] holds what both share,
//! [`report`] turns the logs into rows, checks, goals and Markdown.

pub(crate) mod jobs;
mod report;
mod types;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use super::host;
use super::topology::{NetFlags, Topology};
use types::{Arm, ReportOptions, Setting, run_name};

pub use report::headline_records;

/// Flags of `cargo xtask netns-train`.
#[derive(Debug, Args)]
#[command(after_help = "Needs Linux, root, `ip` and `tc` (iproute2), and a Python with torch, Pillow, \
scikit-learn and the ubershuffle package (--python; PYTHONPATH is passed on). Makes namespaces \
ubsh-nn-<pid>-* with addresses in 10.213.0.0/24 that exist only inside them, and removes them at the \
end (also on failure and Ctrl-C).\n\n\
Examples:\n  cargo xtask netns-train --python /path/to/venv/bin/python\n  \
cargo xtask netns-train --short --out target/netns-train.csv   # CI: 2 epochs, small records, idle ranks, bytes checked\n  \
cargo xtask netns-train --sleep-train 1 --arm b,c --ranks 8   # writes results/netns-train-idle-8ranks.csv")]
pub struct NetnsTrainArgs {
    #[command(flatten)]
    net: NetFlags,
    /// The arms to run, in this order (letters a to f; repeatable or comma-separated)
    /// [default: all six; with --short a, b, c, d].
    #[arg(long = "arm", value_delimiter = ',', value_name = "A..F")]
    arms: Vec<char>,
    /// Times to run the list of arms (interleaved: a..f, a..f, ...); the CSV keeps every run.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Epochs per job.
    #[arg(long, default_value_t = 6)]
    epochs: usize,
    /// Side of the JPEGs in pixels (the digits upscaled; decoded back to 32x32).
    #[arg(long, default_value_t = 256)]
    side: u32,
    /// Grain added before encoding (standard deviation in grey levels): larger records.
    #[arg(long, default_value_t = 32.0)]
    grain: f64,
    /// Q of the partial-local arm (d).
    #[arg(long, default_value_t = 0.3)]
    fraction: f64,
    /// Seed of the sampler chain and the model in the first run of the arms; run r (of
    /// --repeats) takes seed + r in every arm, so the repeats sample the data orders too.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The short form for CI: 2 epochs, 64-pixel records without grain (about 2 KB each),
    /// arms a, b, c and d (every store arm and a peer arm), the ranks idle (--sleep-train
    /// 0.5 unless given), so that no gradient shares the links with the plane; the bytes are
    /// checked (the uncoded arms' against the kernel's counters too), not the times.
    #[arg(long)]
    short: bool,
    /// Instead of training, every rank sleeps this many seconds per epoch (spread over its
    /// batches), reading every record of its epoch but decoding none: the CPU idle, as while a
    /// GPU computes, so that the links and not the cores are the bottleneck (the profile's
    /// control). Writes results/netns-train-idle*.csv and its own section by default
    /// [default: 0, it trains; with --short 0.5].
    #[arg(long, value_name = "SECONDS")]
    sleep_train: Option<f64>,
    /// The Python that runs the ranks.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The most seconds one arm's job may take.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The CSV to write [default: results/netns-train.csv, with `-idle` when the ranks
    /// sleep, `-{ranks}ranks` unless 4 ranks, `-{mbit}mbit` unless 100 Mbit/s, before `.csv`];
    /// the links CSV, summary CSV and chart go beside it (`-links.csv`, `-summary.csv`,
    /// `.svg`), and results/README.md's section of the same name is written only for the
    /// default.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only check that this machine can run it: nothing on success, one line saying why not
    /// and a failure otherwise.
    #[arg(long)]
    check_host: bool,
}

/// Seconds each rank sleeps per epoch in the short form unless --sleep-train says otherwise.
const SHORT_SLEEP: f64 = 0.5;

/// What a run does: the flags, checked.
pub struct TrainRun {
    topology: Topology,
    /// The arms in the order they run (repeats included).
    arms: Vec<Arm>,
    /// Epochs per job.
    epochs: usize,
    side: u32,
    grain: f64,
    /// Q of arm d.
    fraction: f64,
    seed: u64,
    /// Seconds each rank sleeps per epoch instead of training (0: it trains).
    sleep_train: f64,
    python: PathBuf,
    timeout: Duration,
    /// What the report needs: where it writes, and whether it is the short form.
    report: ReportOptions,
}

impl NetnsTrainArgs {
    /// The flags checked once, into what the run does.
    fn check(&self, root: &Path) -> anyhow::Result<TrainRun> {
        let topology = self.net.topology()?;
        jobs::check_data_flags(self.fraction, self.side, self.grain)?;
        let sleep_train = self.sleep_train.unwrap_or(if self.short { SHORT_SLEEP } else { 0.0 });
        if !(sleep_train.is_finite() && (0.0..=600.0).contains(&sleep_train)) {
            bail!("--sleep-train {sleep_train}: use 0 to 600 seconds");
        }
        if self.epochs < 2 || self.repeats == 0 || self.timeout == 0 {
            bail!("--epochs must be at least 2, --repeats and --timeout at least 1");
        }
        let mut arms = Vec::new();
        for &c in &self.arms {
            let arm = Arm::from_letter(c).with_context(|| format!("--arm {c}: use a letter from a to f"))?;
            if arms.contains(&arm) {
                bail!("--arm {c}: named twice");
            }
            arms.push(arm);
        }
        if arms.is_empty() {
            arms = if self.short { Arm::SHORT.to_vec() } else { Arm::ALL.to_vec() };
        }
        let order: Vec<Arm> = (0..self.repeats).flat_map(|_| arms.iter().copied()).collect();
        let (epochs, side, grain) =
            if self.short { (2, 64, 0.0) } else { (self.epochs, self.side, self.grain) };
        let readme = self.out.is_none();
        let out = match &self.out {
            Some(path) => crate::from_here(path)?,
            None => {
                root.join("results").join(run_name(self.net.ranks, self.net.mbit, sleep_train > 0.0) + ".csv")
            }
        };
        Ok(TrainRun {
            topology,
            arms: order,
            epochs,
            side,
            grain,
            fraction: self.fraction,
            seed: self.seed,
            sleep_train,
            python: self.python.clone(),
            timeout: Duration::from_secs(self.timeout),
            report: ReportOptions { out, readme, short: self.short },
        })
    }
}

/// Runs `cargo xtask netns-train`.
pub fn run(args: &NetnsTrainArgs, root: &Path, target: &Path) -> anyhow::Result<()> {
    let plan = args.check(root)?;
    if let Some(why) = host::unmet_requirement() {
        bail!("{}", why.replace("cargo xtask netns ", "cargo xtask netns-train "));
    }
    host::remove_stale()?;
    if args.check_host {
        return super::probe(&plan.topology);
    }
    let script = root.join("python").join("benchmarks").join("netns_train_rank.py");
    let work = target.join("netns-train");
    let data = work.join(format!("digits-{}-{}", plan.side, plan.grain));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    jobs::check_python(&plan.python)?;
    let (records, bytes) = jobs::make_data(&plan.python, &script, &data, plan.side, plan.grain)?;
    let t = &plan.topology;
    let setting = Setting {
        ranks: t.workers,
        mbit: t.mbit,
        qdisc: t.qdisc.name(),
        mtu: t.mtu,
        side: plan.side,
        grain: plan.grain,
        records,
        bytes,
        epochs: plan.epochs,
        fraction: plan.fraction,
        sleep_train: plan.sleep_train,
    };
    eprintln!(
        "xtask: {records} training JPEGs of {:.1} KB on average ({:.1} MB), {} epochs per arm",
        bytes as f64 / records as f64 / 1e3,
        bytes as f64 / 1e6,
        plan.epochs
    );
    let started = Instant::now();
    let jobs = jobs::measure(&plan, &script, &data, &work)?;
    eprintln!(
        "xtask: namespaces removed after {:.0} s; replaying the store arms' deliveries on the emulator",
        started.elapsed().as_secs_f64()
    );
    report::report(&plan.report, &setting, &jobs, root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: NetnsTrainArgs,
    }

    fn parse(flags: &[&str]) -> anyhow::Result<TrainRun> {
        let cli = Cli::try_parse_from(std::iter::once("netns-train").chain(flags.iter().copied()))?;
        cli.args.check(Path::new("/ws"))
    }

    #[test]
    fn defaults_run_six_arms_on_four_ranks_and_the_short_form_is_small_and_idle() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.arms, Arm::ALL);
        assert_eq!((plan.topology.workers, plan.epochs, plan.sleep_train), (4, 6, 0.0));
        assert_eq!((plan.report.short, plan.report.readme), (false, true));
        assert_eq!(plan.report.out, Path::new("/ws/results/netns-train.csv"));
        let short = parse(&["--short"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(short.arms, Arm::SHORT);
        assert_eq!((short.sleep_train, short.report.short), (SHORT_SLEEP, true));
        let short = parse(&["--short", "--arm", "b,d", "--repeats", "2"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((short.epochs, short.side, short.grain), (2, 64, 0.0));
        assert_eq!(short.arms, [Arm::B, Arm::D, Arm::B, Arm::D]);
        let trained = parse(&["--short", "--sleep-train", "0"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trained.sleep_train, 0.0);
    }

    #[test]
    fn the_default_out_names_the_setting_and_only_it_writes_the_readme() {
        for (flags, file) in [
            (&["--sleep-train", "1"][..], "netns-train-idle.csv"),
            (&["--sleep-train", "1", "--ranks", "8"][..], "netns-train-idle-8ranks.csv"),
            (&["--sleep-train", "1", "--mbit", "1000"][..], "netns-train-idle-1000mbit.csv"),
            (&["--ranks", "2", "--mbit", "12.5"][..], "netns-train-2ranks-12.5mbit.csv"),
        ] {
            let plan = parse(flags).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(plan.report.out, Path::new("/ws/results").join(file), "{flags:?}");
            assert!(plan.report.readme);
        }
        let plan = parse(&["--out", "/tmp/x.csv"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((plan.report.out.as_path(), plan.report.readme), (Path::new("/tmp/x.csv"), false));
    }

    #[test]
    fn flags_are_checked_with_one_line_errors() {
        for (flags, wanted) in [
            (&["--ranks", "9"][..], "--ranks 9: use 2 to 8"),
            (&["--mbit", "0"][..], "--mbit 0: use a rate above 0"),
            (&["--arm", "g"][..], "--arm g: use a letter from a to f"),
            (&["--arm", "a,a"][..], "--arm a: named twice"),
            (&["--epochs", "1"][..], "--epochs must be at least 2"),
            (&["--fraction", "0"][..], "--fraction 0: use a fraction in (0, 1]"),
            (&["--side", "4"][..], "--side 4: use 8 to 1024 pixels"),
            (&["--sleep-train=-1"][..], "--sleep-train -1: use 0 to 600 seconds"),
        ] {
            let err = parse(flags).map(|_| ()).unwrap_err().to_string();
            assert!(err.starts_with(wanted) && !err.contains('\n'), "{flags:?}: {err}");
        }
    }
}
