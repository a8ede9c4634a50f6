//! `cargo xtask netns-gradients`: does the plane's background delivery slow DDP's gradient
//! all-reduce, and does yielding to it (`ShuffleGroup.yield_to`) help? Real PyTorch DDP jobs
//! (gloo) between network namespaces shaped by `tc` ([`super::topology`]), the rank script
//! `python/benchmarks/netns_gradients_rank.py`: each step reads its records, sleeps the
//! compute, and all-reduces a gradient of `--gradient-mb` MB. Per arm (the plane's modes) and
//! plane (idle: the delivery done before the epoch; flight: in flight, not yielding; yield: in
//! flight, yielding) it records every step's all-reduce time and step time, the data time
//! exposed to training and the delivery's time, and writes CSVs, a chart and a section of
//! results/README.md ([`report`]). Every run checks the plane's bytes ([`checks`]): the digests
//! of the records each rank read against the source's and between the planes.

mod checks;
mod report;
mod types;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use super::host;
use super::ranks::RankJob;
use super::topology::{NetFlags, Node, Topology};
use super::train::jobs::{check_data_flags, check_python, make_data};
use types::{Job, Plane, RankLog, Setting};

pub use report::headline_records;

/// Flags of `cargo xtask netns-gradients`.
#[derive(Debug, Args)]
#[command(after_help = "Needs Linux, root, `ip` and `tc` (iproute2), and a Python with torch, Pillow, \
scikit-learn and the ubershuffle package (--python; PYTHONPATH is passed on). Makes namespaces \
ubsh-nn-<pid>-* with addresses in 10.213.0.0/24 that exist only inside them, and removes them at the \
end (also on failure and Ctrl-C).\n\n\
Arms: p (peer, partial-local Q = --fraction), g (peer, global), s (store, coded, alpha 0.5).\n\
Planes: idle (the next epoch's delivery done before the epoch starts), flight (in flight during \
the epoch, not yielding), yield (in flight, yielding to the all-reduces).\n\n\
Examples:\n  cargo xtask netns-gradients --python /path/to/venv/bin/python --repeats 2\n  \
cargo xtask netns-gradients --mbit 1000   # a 20 MB gradient; writes results/netns-gradients-1000mbit.csv\n  \
cargo xtask netns-gradients --short --out target/netns-gradients.csv   # CI: one arm, 2 epochs")]
pub struct NetnsGradientsArgs {
    #[command(flatten)]
    net: NetFlags,
    /// The arms to run (p, g, s; comma-separated) [default: all three; with --short p].
    #[arg(long = "arm", value_delimiter = ',', value_name = "P|G|S")]
    arms: Vec<char>,
    /// The planes to run (idle, flight, yield; comma-separated) [default: all three].
    #[arg(long = "plane", value_delimiter = ',', value_enum)]
    planes: Vec<Plane>,
    /// Times to run every (arm, plane) job, interleaved; run r takes seed + r.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Epochs per job (the figures are the epochs after the first).
    #[arg(long, default_value_t = 4)]
    epochs: usize,
    /// Records per step and rank.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Seconds of compute per step (slept: the CPU idle, as while a GPU computes).
    #[arg(long, default_value_t = 0.25)]
    compute: f64,
    /// The gradient's MB per step [default: 2 MB per 100 Mbit/s of --mbit, at least 1].
    #[arg(long, value_name = "MB")]
    gradient_mb: Option<f64>,
    /// Side of the JPEGs in pixels (512: about 80 KB each, so that a delivery spans several
    /// steps of the epoch).
    #[arg(long, default_value_t = 512)]
    side: u32,
    /// Grain added before encoding (standard deviation in grey levels): larger records.
    #[arg(long, default_value_t = 32.0)]
    grain: f64,
    /// Q of the partial-local arm (p).
    #[arg(long, default_value_t = 0.3)]
    fraction: f64,
    /// Seed of the chain and the model in the first run; run r takes seed + r.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The short form for CI: arm p, the planes flight and yield, 2 epochs, 256-pixel records
    /// with grain 32 (large enough that each delivery meets the all-reduces), 0.1 s of compute
    /// and a 1 MB gradient. It checks the bytes, not the times (the full run checks them too):
    /// every rank read the source's bytes, the same with and without yielding, the plane
    /// counted the same deliveries, every step's all-reduce was timed, and the yielding plane
    /// yielded.
    #[arg(long)]
    short: bool,
    /// The Python that runs the ranks.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The most seconds one job may take.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The CSV to write [default: results/netns-gradients.csv, with `-{ranks}ranks` unless 4
    /// ranks and `-{mbit}mbit` unless 100 Mbit/s before `.csv`]; `-steps.csv`,
    /// `-summary.csv` and the chart (`.svg`) go beside it, and results/README.md's section of
    /// the same name is written only for the default.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only check that this machine can run it: nothing on success, one line saying why not
    /// and a failure otherwise.
    #[arg(long)]
    check_host: bool,
}

/// What a run does: the flags, checked.
pub struct GradientsRun {
    topology: Topology,
    /// The jobs in the order they run: (arm, plane, repeat).
    jobs: Vec<(char, Plane, usize)>,
    setting: Setting,
    seed: u64,
    python: PathBuf,
    timeout: Duration,
    out: PathBuf,
    readme: bool,
    short: bool,
}

impl NetnsGradientsArgs {
    /// The flags checked once, into what the run does.
    fn check(&self, root: &Path) -> anyhow::Result<GradientsRun> {
        let topology = self.net.topology()?;
        check_data_flags(self.fraction, self.side, self.grain)?;
        if !(self.compute.is_finite() && (0.0..=60.0).contains(&self.compute)) {
            bail!("--compute {}: use 0 to 60 seconds", self.compute);
        }
        let gradient_mb = self.gradient_mb.unwrap_or((2.0 * self.net.mbit / 100.0).max(1.0));
        if !(gradient_mb.is_finite() && gradient_mb > 0.0 && gradient_mb <= 1000.0) {
            bail!("--gradient-mb {gradient_mb}: use above 0 and at most 1000");
        }
        if self.epochs < 2 || self.repeats == 0 || self.timeout == 0 || self.batch == 0 {
            bail!("--epochs must be at least 2, --repeats, --batch and --timeout at least 1");
        }
        let mut arms = Vec::new();
        for &c in &self.arms {
            let arm = c.to_ascii_lowercase();
            if !types::ARMS.contains(&arm) {
                bail!("--arm {c}: use p, g or s");
            }
            if arms.contains(&arm) {
                bail!("--arm {c}: named twice");
            }
            arms.push(arm);
        }
        if arms.is_empty() {
            arms = if self.short { vec!['p'] } else { types::ARMS.to_vec() };
        }
        let mut planes = Vec::new();
        for &p in &self.planes {
            if planes.contains(&p) {
                bail!("--plane {}: named twice", p.name());
            }
            planes.push(p);
        }
        if planes.is_empty() {
            planes = if self.short { vec![Plane::Flight, Plane::Yield] } else { Plane::ALL.to_vec() };
        }
        let mut jobs = Vec::new();
        for repeat in 0..self.repeats {
            for &arm in &arms {
                jobs.extend(planes.iter().map(|&plane| (arm, plane, repeat)));
            }
        }
        let (epochs, side, grain, compute, gradient_mb) = if self.short {
            (2, 256, 32.0, 0.1, self.gradient_mb.unwrap_or(1.0))
        } else {
            (self.epochs, self.side, self.grain, self.compute, gradient_mb)
        };
        let readme = self.out.is_none();
        let out = match &self.out {
            Some(path) => crate::from_here(path)?,
            None => root.join("results").join(types::run_name(self.net.ranks, self.net.mbit) + ".csv"),
        };
        Ok(GradientsRun {
            topology,
            jobs,
            setting: Setting {
                ranks: self.net.ranks,
                mbit: self.net.mbit,
                qdisc: self.net.qdisc.name(),
                mtu: self.net.mtu,
                side,
                grain,
                records: 0,
                bytes: 0,
                epochs,
                batch: self.batch,
                compute,
                gradient_mb,
                fraction: self.fraction,
            },
            seed: self.seed,
            python: self.python.clone(),
            timeout: Duration::from_secs(self.timeout),
            out,
            readme,
            short: self.short,
        })
    }
}

/// Runs `cargo xtask netns-gradients`.
pub fn run(args: &NetnsGradientsArgs, root: &Path, target: &Path) -> anyhow::Result<()> {
    let mut plan = args.check(root)?;
    if let Some(why) = host::unmet_requirement() {
        bail!("{}", why.replace("cargo xtask netns ", "cargo xtask netns-gradients "));
    }
    host::remove_stale()?;
    if args.check_host {
        return super::probe(&plan.topology);
    }
    let benchmarks = root.join("python").join("benchmarks");
    let script = benchmarks.join("netns_gradients_rank.py");
    let work = target.join("netns-gradients");
    let s = &plan.setting;
    let data = work.join(format!("digits-{}-{}", s.side, s.grain));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    check_python(&plan.python)?;
    let (records, bytes) =
        make_data(&plan.python, &benchmarks.join("netns_train_rank.py"), &data, s.side, s.grain)?;
    (plan.setting.records, plan.setting.bytes) = (records, bytes);
    eprintln!(
        "xtask: {records} JPEGs ({:.1} MB); {} jobs of {} epochs, {} s of compute and a {} MB gradient per step",
        bytes as f64 / 1e6,
        plan.jobs.len(),
        plan.setting.epochs,
        plan.setting.compute,
        plan.setting.gradient_mb
    );
    let started = Instant::now();
    let jobs = measure(&plan, &script, &data, &work)?;
    eprintln!("xtask: namespaces removed after {:.0} s", started.elapsed().as_secs_f64());
    report::report(
        &report::Options { out: &plan.out, readme: plan.readme, short: plan.short },
        &plan.setting,
        &jobs,
        root,
    )
}

/// Makes the network, runs every job in it and removes it (the guard also on an error, a
/// panic or Ctrl-C).
fn measure(plan: &GradientsRun, script: &Path, data: &Path, work: &Path) -> anyhow::Result<Vec<Job>> {
    let topology = &plan.topology;
    let _guard = host::build_network(topology, "store", "ranks")?;
    let s = &plan.setting;
    let mut jobs = Vec::new();
    for &(arm, plane, repeat) in &plan.jobs {
        let dir = work.join(format!("{arm}-{}-{repeat}", plane.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let trainers = (0..topology.workers).map(Node::Worker);
        let nodes: Vec<Node> = if arm == 's' {
            std::iter::once(Node::Master).chain(trainers).collect()
        } else {
            trainers.collect()
        };
        let data = data.to_string_lossy().into_owned();
        let args: Vec<String> = [
            ("--arm", arm.to_string()),
            ("--plane", plane.name().to_string()),
            ("--data", data),
            ("--epochs", s.epochs.to_string()),
            ("--batch", s.batch.to_string()),
            ("--compute", s.compute.to_string()),
            ("--gradient-mb", s.gradient_mb.to_string()),
            ("--fraction", s.fraction.to_string()),
            ("--seed", (plan.seed + repeat as u64).to_string()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect();
        let t = Instant::now();
        let job = RankJob {
            topology,
            nodes: &nodes,
            python: &plan.python,
            script,
            args,
            dir: &dir,
            timeout: plan.timeout,
        };
        let ranks: Vec<RankLog> =
            job.run().map_err(|e| anyhow::anyhow!("arm {arm}, plane {}: {e}", plane.name()))?;
        eprintln!(
            "xtask: arm {arm} ({}), plane {} done in {:.1} s",
            types::describe(arm, s.fraction),
            plane.name(),
            t.elapsed().as_secs_f64()
        );
        jobs.push(Job { arm, plane, repeat, ranks });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: NetnsGradientsArgs,
    }

    fn parse(flags: &[&str]) -> anyhow::Result<GradientsRun> {
        let cli = Cli::try_parse_from(std::iter::once("netns-gradients").chain(flags.iter().copied()))?;
        cli.args.check(Path::new("/ws"))
    }

    #[test]
    fn defaults_run_every_arm_and_plane_and_the_short_form_one_arm() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.jobs.len(), 9);
        assert_eq!(plan.jobs[0], ('p', Plane::Idle, 0));
        assert_eq!(plan.setting.gradient_mb, 2.0);
        assert_eq!(plan.out, Path::new("/ws/results/netns-gradients.csv"));
        let short = parse(&["--short"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(short.jobs, [('p', Plane::Flight, 0), ('p', Plane::Yield, 0)]);
        assert_eq!((short.setting.epochs, short.setting.side, short.setting.grain), (2, 256, 32.0));
        let fast =
            parse(&["--mbit", "1000", "--arm", "s", "--repeats", "2"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fast.setting.gradient_mb, 20.0);
        assert_eq!(fast.jobs.len(), 6);
        assert_eq!(fast.out, Path::new("/ws/results/netns-gradients-1000mbit.csv"));
    }

    #[test]
    fn flags_are_checked_with_one_line_errors() {
        for (flags, wanted) in [
            (&["--ranks", "9"][..], "--ranks 9: use 2 to 8"),
            (&["--arm", "x"][..], "--arm x: use p, g or s"),
            (&["--arm", "p,p"][..], "--arm p: named twice"),
            (&["--plane", "idle,idle"][..], "--plane idle: named twice"),
            (&["--compute=-1"][..], "--compute -1: use 0 to 60 seconds"),
            (&["--gradient-mb", "0"][..], "--gradient-mb 0: use above 0"),
            (&["--epochs", "1"][..], "--epochs must be at least 2"),
        ] {
            let err = parse(flags).map(|_| ()).unwrap_err().to_string();
            assert!(err.starts_with(wanted) && !err.contains('\n'), "{flags:?}: {err}");
        }
    }
}
