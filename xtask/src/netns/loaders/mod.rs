//! `cargo xtask netns-loaders` (also `netns-peers`): the loaders our users run, MosaicML
//! Streaming and LitData, beside ShuffleGroup's peer and store modes, every arm reading the
//! same JPEG data set from an S3 object store (moto's server, in the store's namespace) and
//! training the same CNN under DDP over network namespaces shaped by `tc`
//! ([`super::topology`]). Every arm gets the same storage per node, S = (1 + Q) N / M, what
//! peer mode holds; the half arms get half of a node's share. Per arm, epoch and rank it
//! records the bytes read from the object store (its request log), the bytes on the rank's
//! link, epoch and exposed data time, storage, held-out accuracy and how the ranks' samples
//! mix across nodes, and writes CSVs, charts and a section of results/README.md ([`report`]).
//! The rank script is `python/benchmarks/netns_loaders_rank.py`; the data set and the server
//! are `python/benchmarks/loaders_data.py`'s.

mod object_store;
mod report;
mod store_reads;
mod types;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;

use super::host;
use super::ranks::RankJob;
use super::topology::{NetFlags, Node, Topology};
use super::train::jobs::{check_data_flags, make_data};
use object_store::ObjectStore;
use types::{Arm, Job, RankLog, Setting};

pub use report::headline_records;

/// Flags of `cargo xtask netns-loaders`.
#[derive(Debug, Args)]
#[command(after_help = "Needs Linux, root, `ip` and `tc` (iproute2), and python3 with venv: without \
--python the command makes its own venv (target/netns-loaders/venv: torch, Pillow, scikit-learn, boto3, \
moto[server], mosaicml-streaming, litdata and ./python; about 6.6 GB, made once). PYTHONPATH is passed \
on. Makes namespaces ubsh-nn-<pid>-* with addresses in 10.213.0.0/24 that exist only inside them, and \
removes them at the end (also on failure and Ctrl-C).\n\n\
Arms (every node keeps at most S = (1 + Q) N / M bytes, what peer mode holds):\n  \
m       MosaicML Streaming, cache_limit S\n  \
l       LitData, max_cache_size S\n  \
p       ShuffleGroup peer mode, partial-local Q\n  \
s       ShuffleGroup store mode, coded, alpha S/N; the store reads the object store\n  \
m-half  m with half a node's share, N/(2M)\n  \
l-half  l with half a node's share\n\n\
Examples:\n  cargo xtask netns-loaders --repeats 3\n  \
cargo xtask netns-loaders --python /path/to/venv/bin/python --arm m,p --epochs 3\n  \
cargo xtask netns-loaders --short --out target/netns-loaders.csv   # CI: arms m, p and s, 2 epochs, small records")]
pub struct NetnsLoadersArgs {
    #[command(flatten)]
    net: NetFlags,
    /// The arms to run (comma-separated) [default: all six; with --short m,p,s].
    #[arg(long = "arm", value_delimiter = ',', value_enum)]
    arms: Vec<Arm>,
    /// Times to run every arm, interleaved; run r takes seed + r.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Epochs per job (the figures are the epochs after the first).
    #[arg(long, default_value_t = 8)]
    epochs: usize,
    /// Records per step and rank.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Seconds every step sleeps after its update (the CPU idle, as while a GPU computes a
    /// larger model): the compute window in which the loaders may hide their reads.
    #[arg(long, default_value_t = 0.25)]
    compute: f64,
    /// Side of the JPEGs in pixels (512: about 80 KB each).
    #[arg(long, default_value_t = 512)]
    side: u32,
    /// Grain added before encoding (standard deviation in grey levels): larger records.
    #[arg(long, default_value_t = 32.0)]
    grain: f64,
    /// Q: arm p's partial-local fraction, and the storage S = (1 + Q) N / M of every arm.
    #[arg(long, default_value_t = 0.3)]
    fraction: f64,
    /// Seed of the loaders' shuffles, the chain and the model in the first run.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The short form for CI: arms m, p and s, 2 epochs, 64-pixel records without grain, no
    /// compute sleep; it checks the object store's byte counts (and in arm s the store's
    /// reads: each object at most once, whole, by the store alone, every record trained on
    /// read, the store's own counts the object store's), not the times.
    #[arg(long)]
    short: bool,
    /// The Python that runs the ranks and the object store [default: the command's own venv,
    /// made on first use].
    #[arg(long)]
    python: Option<PathBuf>,
    /// The most seconds an epoch (or a rank's set-up) may take before the rank is recorded as
    /// hung.
    #[arg(long, default_value_t = 300)]
    epoch_timeout: u64,
    /// The CSV to write [default: results/netns-loaders.csv, with `-{ranks}ranks` unless 4 ranks
    /// and `-{mbit}mbit` unless 100 Mbit/s before `.csv`]; `-summary.csv` and the charts go
    /// beside it, and results/README.md's section is written only for the default.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only check that this machine can run it: nothing on success, one line saying why not
    /// and a failure otherwise.
    #[arg(long)]
    check_host: bool,
}

/// What a run does: the flags, checked.
struct LoadersRun {
    topology: Topology,
    /// The jobs in the order they run: (arm, repeat).
    jobs: Vec<(Arm, usize)>,
    setting: Setting,
    seed: u64,
    epoch_timeout: u64,
    out: PathBuf,
    readme: bool,
    short: bool,
}

impl NetnsLoadersArgs {
    /// The flags checked once, into what the run does.
    fn check(&self, root: &Path) -> anyhow::Result<LoadersRun> {
        let topology = self.net.topology()?;
        check_data_flags(self.fraction, self.side, self.grain)?;
        if !(self.compute.is_finite() && (0.0..=60.0).contains(&self.compute)) {
            bail!("--compute {}: use 0 to 60 seconds", self.compute);
        }
        if self.epochs < 2 || self.repeats == 0 || self.epoch_timeout == 0 || self.batch == 0 {
            bail!("--epochs must be at least 2, --repeats, --batch and --epoch-timeout at least 1");
        }
        let mut arms: Vec<Arm> = Vec::new();
        for &arm in &self.arms {
            if arms.contains(&arm) {
                bail!("--arm {}: named twice", arm.name());
            }
            arms.push(arm);
        }
        if arms.is_empty() {
            arms = if self.short { Arm::SHORT.to_vec() } else { Arm::ALL.to_vec() };
        }
        let jobs = (0..self.repeats).flat_map(|r| arms.iter().map(move |&a| (a, r))).collect();
        let (epochs, side, grain, compute) =
            if self.short { (2, 64, 0.0, 0.0) } else { (self.epochs, self.side, self.grain, self.compute) };
        let readme = self.out.is_none();
        let out = match &self.out {
            Some(path) => crate::from_here(path)?,
            None => root.join("results").join(types::run_name(self.net.ranks, self.net.mbit) + ".csv"),
        };
        Ok(LoadersRun {
            topology,
            jobs,
            setting: Setting {
                ranks: self.net.ranks,
                mbit: self.net.mbit,
                qdisc: self.net.qdisc.name(),
                mtu: self.net.mtu,
                side,
                grain,
                epochs,
                batch: self.batch,
                compute,
                fraction: self.fraction,
                ..Setting::default()
            },
            seed: self.seed,
            epoch_timeout: self.epoch_timeout,
            out,
            readme,
            short: self.short,
        })
    }
}

/// The MDS shard and LitData chunk size: Streaming refuses a `cache_limit` below 4 shards, so
/// the smallest cache (half a node's share) holds 8 of the largest, and at most 1 MB.
fn chunk_bytes(half: u64) -> u64 {
    (half / 8).clamp(4096, 1 << 20)
}

/// Runs `cargo xtask netns-loaders`.
pub fn run(args: &NetnsLoadersArgs, root: &Path, target: &Path) -> anyhow::Result<()> {
    let mut plan = args.check(root)?;
    if let Some(why) = host::unmet_requirement() {
        bail!("{}", why.replace("cargo xtask netns ", "cargo xtask netns-loaders "));
    }
    host::remove_stale()?;
    if args.check_host {
        return super::probe(&plan.topology);
    }
    let mut arms: Vec<Arm> = plan.jobs.iter().map(|&(a, _)| a).collect();
    arms.dedup();
    let python = object_store::python(args.python.as_deref(), &arms, root, target)?;
    let benchmarks = root.join("python").join("benchmarks");
    let work = target.join("netns-loaders");
    let s = &plan.setting;
    let data = work.join(format!("digits-{}-{}", s.side, s.grain));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let (records, bytes) =
        make_data(&python, &benchmarks.join("netns_train_rank.py"), &data, s.side, s.grain)?;
    (plan.setting.records, plan.setting.bytes) = (records, bytes);
    plan.setting.chunk_bytes = chunk_bytes(plan.setting.half_bytes());
    let started = Instant::now();
    let jobs = measure(&mut plan, &python, &benchmarks, &data, &work)?;
    eprintln!("xtask: namespaces removed after {:.0} s", started.elapsed().as_secs_f64());
    report::report(
        &report::Options { out: &plan.out, readme: plan.readme, short: plan.short },
        &plan.setting,
        &jobs,
        root,
    )
}

/// Makes the network, starts the object store, uploads the data set, runs every job and
/// removes it all (the guards also on an error, a panic or Ctrl-C).
fn measure(
    plan: &mut LoadersRun,
    python: &Path,
    benchmarks: &Path,
    data: &Path,
    work: &Path,
) -> anyhow::Result<Vec<Job>> {
    let topology = plan.topology.clone();
    let _guard = host::build_network(&topology, "store", "ranks")?;
    let data_script = benchmarks.join("loaders_data.py");
    let store = ObjectStore::start(&topology, python, &data_script, work)?;
    let mut arms: Vec<Arm> = plan.jobs.iter().map(|&(a, _)| a).collect();
    arms.dedup();
    let s = &mut plan.setting;
    let up = object_store::upload(
        &topology,
        &store,
        python,
        &data_script,
        data,
        &work.join("formats"),
        s.chunk_bytes,
        &arms,
    )?;
    if up.records != s.records || up.bytes != s.bytes {
        bail!(
            "the upload holds {} records of {} bytes, the data set {} of {}",
            up.records,
            up.bytes,
            s.records,
            s.bytes
        );
    }
    (s.mds_bytes, s.lit_bytes) = (up.mds_bytes, up.lit_bytes);
    s.sizes = object_store::record_sizes(&work.join("formats"))?;
    eprintln!(
        "xtask: {} JPEGs ({:.1} MB; MDS {:.1} MB, LitData {:.1} MB in chunks of at most {} KB) in s3://{}; S = {:.1} MB per node, half a share {:.1} MB; {} jobs of {} epochs",
        s.records,
        s.bytes as f64 / 1e6,
        s.mds_bytes as f64 / 1e6,
        s.lit_bytes as f64 / 1e6,
        s.chunk_bytes / 1024,
        object_store::BUCKET,
        s.storage_bytes() as f64 / 1e6,
        s.half_bytes() as f64 / 1e6,
        plan.jobs.len(),
        s.epochs
    );
    let script = benchmarks.join("netns_loaders_rank.py");
    let mut jobs = Vec::new();
    for &(arm, repeat) in &plan.jobs {
        let dir = work.join(format!("{}-{repeat}", arm.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let t = Instant::now();
        let job = run_job(plan, arm, repeat, python, &script, data, &dir, &store)?;
        match &job.error {
            None => eprintln!(
                "xtask: arm {} ({}) done in {:.1} s",
                arm.name(),
                arm.describe(plan.setting.fraction),
                t.elapsed().as_secs_f64()
            ),
            Some(e) => {
                eprintln!("xtask: arm {} FAILED after {:.1} s: {e}", arm.name(), t.elapsed().as_secs_f64())
            }
        }
        jobs.push(job);
    }
    Ok(jobs)
}

/// Runs one arm's job: a torchrun agent per node, in its namespace. A job that fails is a result (its
/// ranks' logs hold the epochs they finished and why they stopped).
#[allow(clippy::too_many_arguments)]
fn run_job(
    plan: &LoadersRun,
    arm: Arm,
    repeat: usize,
    python: &Path,
    script: &Path,
    data: &Path,
    dir: &Path,
    store: &ObjectStore,
) -> anyhow::Result<Job> {
    let topology = &plan.topology;
    let s = &plan.setting;
    let trainers = (0..topology.workers).map(Node::Worker);
    let nodes: Vec<Node> = if arm.has_store() {
        std::iter::once(Node::Master).chain(trainers).collect()
    } else {
        trainers.collect()
    };
    let args: Vec<String> = [
        ("--arm", arm.script_arm().to_string()),
        ("--bucket", object_store::BUCKET.to_string()),
        ("--endpoint", store.endpoint.clone()),
        ("--data", data.to_string_lossy().into_owned()),
        ("--cache-bytes", s.cache_bytes(arm).to_string()),
        ("--cache-root", dir.join("cache").to_string_lossy().into_owned()),
        ("--fraction", s.fraction.to_string()),
        ("--alpha", s.alpha().to_string()),
        ("--epochs", s.epochs.to_string()),
        ("--batch", s.batch.to_string()),
        ("--compute", s.compute.to_string()),
        ("--seed", (plan.seed + repeat as u64).to_string()),
        ("--epoch-timeout", plan.epoch_timeout.to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect();
    let mark = store.mark();
    let t0 = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let job = RankJob {
        topology,
        nodes: &nodes,
        python,
        script,
        args,
        dir,
        timeout: Duration::from_secs(plan.epoch_timeout * (s.epochs as u64 + 2)),
    };
    let (ranks, error) = match job.run::<RankLog>() {
        Ok(ranks) => (ranks, None),
        Err(e) => {
            // What each rank had written, and the first rank's own account of why it stopped.
            let ranks: Vec<RankLog> = (0..nodes.len())
                .map(|r| {
                    std::fs::read_to_string(dir.join(format!("rank-{r}.json")))
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok())
                        .unwrap_or(RankLog { rank: r, ..RankLog::default() })
                })
                .collect();
            let why = ranks.iter().find_map(|r| r.error.clone()).unwrap_or_else(|| e.to_string());
            (ranks, Some(why))
        }
    };
    // The server logs a request when its body is sent: the job's are all there once it ends.
    std::thread::sleep(Duration::from_millis(300));
    let requests = store.requests_since(mark)?;
    let addresses = nodes.iter().map(|&n| topology.address(n)).collect();
    Ok(Job { arm, repeat, ranks, addresses, requests, t0, error })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: NetnsLoadersArgs,
    }

    fn parse(flags: &[&str]) -> anyhow::Result<LoadersRun> {
        let cli = Cli::try_parse_from(std::iter::once("netns-loaders").chain(flags.iter().copied()))?;
        cli.args.check(Path::new("/ws"))
    }

    #[test]
    fn defaults_run_every_arm_and_the_short_form_one_loader_and_both_of_ours() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.jobs.len(), 6);
        assert_eq!(plan.jobs[0], (Arm::M, 0));
        assert_eq!(plan.out, Path::new("/ws/results/netns-loaders.csv"));
        let short = parse(&["--short"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(short.jobs, [(Arm::M, 0), (Arm::P, 0), (Arm::S, 0)]);
        assert_eq!((short.setting.epochs, short.setting.side, short.setting.compute), (2, 64, 0.0));
        let two = parse(&["--arm", "p,m-half", "--repeats", "2", "--mbit", "1000"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(two.jobs, [(Arm::P, 0), (Arm::MHalf, 0), (Arm::P, 1), (Arm::MHalf, 1)]);
        assert_eq!(two.out, Path::new("/ws/results/netns-loaders-1000mbit.csv"));
    }

    #[test]
    fn flags_are_checked_with_one_line_errors() {
        for (flags, wanted) in [
            (&["--ranks", "9"][..], "--ranks 9: use 2 to 8"),
            (&["--arm", "p,p"][..], "--arm p: named twice"),
            (&["--epochs", "1"][..], "--epochs must be at least 2"),
            (&["--fraction", "0"][..], "--fraction 0: use a fraction in (0, 1]"),
            (&["--compute=-1"][..], "--compute -1: use 0 to 60 seconds"),
        ] {
            let err = parse(flags).map(|_| ()).unwrap_err().to_string();
            assert!(err.starts_with(wanted) && !err.contains('\n'), "{flags:?}: {err}");
        }
        assert!(parse(&["--arm", "x"]).is_err());
    }

    #[test]
    fn every_arm_keeps_s_and_the_half_arms_half_a_share() {
        let s = Setting { ranks: 4, bytes: 120_000_000, fraction: 0.3, ..Setting::default() };
        assert_eq!(s.cache_bytes(Arm::M), 39_000_000);
        assert_eq!(s.cache_bytes(Arm::LHalf), 15_000_000);
        assert!((s.alpha() - 0.325).abs() < 1e-12);
        // Streaming wants 4 shards in the smallest cache: 8 fit.
        assert_eq!(chunk_bytes(s.half_bytes()), 1 << 20);
        assert_eq!(chunk_bytes(150_000), 18_750);
    }
}
