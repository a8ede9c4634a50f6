//! `cargo xtask netns-train`: real PyTorch DDP jobs (gloo) between network namespaces shaped
//! by `tc`, one job per arm of the experiment: a store node and `--ranks` training ranks, each
//! in a namespace of its own ([`super::topology`]; the master node is the store), the records
//! JPEG digits of varying size (`python/examples/digits_jpeg.py`), the training script
//! `python/benchmarks/netns_train_rank.py`. Per arm and epoch it records the data time exposed
//! to training, the epoch time, the bytes on every node's link (the kernel's counters) and on
//! the plane, the storage per rank, and held-out loss and accuracy against wall time; it
//! checks the bytes against the plan, puts the emulator's prediction beside the coded and
//! uncoded store arms, and writes a CSV, a chart and a section of results/README.md
//! ([`super::train_report`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;

use super::host;
use super::topology::{Node, Qdisc, Topology};
use super::train_report;

/// Flags of `cargo xtask netns-train`.
#[derive(Debug, Args)]
#[command(after_help = "Needs Linux, root, `ip` and `tc` (iproute2), and a Python with torch, Pillow, \
scikit-learn and the ubershuffle package (--python; PYTHONPATH is passed on). Makes namespaces \
ubsh-nn-<pid>-* with addresses in 10.213.0.0/24 that exist only inside them, and removes them at the \
end (also on failure and Ctrl-C).\n\n\
Examples:\n  cargo xtask netns-train --python /path/to/venv/bin/python\n  \
cargo xtask netns-train --short --out target/netns-train.csv   # CI: 2 epochs, small records, bytes checked")]
pub struct NetnsTrainArgs {
    /// Training ranks, 2 to 8, each in a namespace of its own (the store has one more).
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    /// Rate of every node's send and receive port, in Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    mbit: f64,
    /// The qdisc that shapes the ports.
    #[arg(long, value_enum, default_value_t = Qdisc::Tbf)]
    qdisc: Qdisc,
    /// MTU of every link, 1280 to 9000.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// The arms to run, in this order (letters a to f; repeatable or comma-separated)
    /// [default: all six; with --short b, c, d].
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
    /// arms b, c and d (one of each kind of byte accounting on the plane); the bytes are
    /// checked, not the times.
    #[arg(long)]
    short: bool,
    /// Instead of training, every rank sleeps this many seconds per epoch (spread over its
    /// batches), reading every record of its epoch but decoding none: the CPU idle, as while a
    /// GPU computes, so that the links and not the cores are the bottleneck (the profile's
    /// control). Writes results/netns-train-idle.csv and its own section by default.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    sleep_train: f64,
    /// The Python that runs the ranks.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The most seconds one arm's job may take.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The CSV to write [default: results/netns-train.csv]; the links CSV, summary CSV and
    /// chart go beside it (`-links.csv`, `-summary.csv`, `.svg`), and results/README.md's
    /// section is written only for the default.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only check that this machine can run it: nothing on success, one line saying why not
    /// and a failure otherwise.
    #[arg(long)]
    check_host: bool,
}

/// The most training ranks.
const MAX_RANKS: usize = 8;
/// The port gloo's rendezvous listens on (inside the namespaces only).
const MASTER_PORT: u16 = 29500;

/// One arm of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arm {
    /// Store mode, uncoded, each rank caching only its batch.
    A,
    /// Store mode, coded (`auto`), alpha 0.5.
    B,
    /// Store mode, uncoded, alpha 0.5.
    C,
    /// Peer mode, partial-local.
    D,
    /// Peer mode, local.
    E,
    /// The data set replicated on every rank (DistributedSampler).
    F,
}

impl Arm {
    /// Every arm, in order.
    pub const ALL: [Arm; 6] = [Arm::A, Arm::B, Arm::C, Arm::D, Arm::E, Arm::F];
    /// The short form's arms: one of each kind of byte accounting on the plane (store coded,
    /// store uncoded, peer); a and e account as c and d do, and f moves nothing on the plane.
    pub const SHORT: [Arm; 3] = [Arm::B, Arm::C, Arm::D];

    fn from_letter(c: char) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.letter() == c.to_ascii_lowercase())
    }

    /// The arm's letter.
    pub fn letter(self) -> char {
        match self {
            Arm::A => 'a',
            Arm::B => 'b',
            Arm::C => 'c',
            Arm::D => 'd',
            Arm::E => 'e',
            Arm::F => 'f',
        }
    }

    /// Whether a store rank serves the records (a world of one more rank).
    pub fn has_store(self) -> bool {
        matches!(self, Arm::A | Arm::B | Arm::C)
    }

    /// What the arm is, in a few words.
    pub fn describe(self, fraction: f64) -> String {
        match self {
            Arm::A => "store, uncoded, cache = batch".into(),
            Arm::B => "store, coded (auto), alpha 0.5".into(),
            Arm::C => "store, uncoded, alpha 0.5".into(),
            Arm::D => format!("peer, partial-local Q {fraction}"),
            Arm::E => "peer, local".into(),
            Arm::F => "replicated, DistributedSampler".into(),
        }
    }
}

/// What a run does: the flags, checked.
pub struct TrainRun {
    topology: Topology,
    /// The arms in the order they run (repeats included).
    pub arms: Vec<Arm>,
    /// Epochs per job.
    pub epochs: usize,
    side: u32,
    grain: f64,
    /// Q of arm d.
    pub fraction: f64,
    seed: u64,
    /// Seconds each rank sleeps per epoch instead of training (0: it trains).
    pub sleep_train: f64,
    /// The short form (bytes checked, small records).
    pub short: bool,
    python: PathBuf,
    timeout: Duration,
    /// The CSV to write.
    pub out: PathBuf,
    /// Whether results/README.md's section is written too.
    pub readme: bool,
}

impl NetnsTrainArgs {
    /// The flags checked once, into what the run does.
    fn check(&self, root: &Path) -> anyhow::Result<TrainRun> {
        if !(2..=MAX_RANKS).contains(&self.ranks) {
            bail!("--ranks {}: use 2 to {MAX_RANKS}", self.ranks);
        }
        if !(self.mbit.is_finite() && self.mbit > 0.0 && self.mbit <= 100_000.0) {
            bail!("--mbit {}: use a rate above 0 and at most 100000", self.mbit);
        }
        if !(1280..=9000).contains(&self.mtu) {
            bail!("--mtu {}: use 1280 to 9000", self.mtu);
        }
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            bail!("--fraction {}: use a fraction in (0, 1]", self.fraction);
        }
        if !(8..=1024).contains(&self.side) {
            bail!("--side {}: use 8 to 1024 pixels", self.side);
        }
        if !(self.grain.is_finite() && (0.0..=128.0).contains(&self.grain)) {
            bail!("--grain {}: use 0 to 128 grey levels", self.grain);
        }
        if !(self.sleep_train.is_finite() && (0.0..=600.0).contains(&self.sleep_train)) {
            bail!("--sleep-train {}: use 0 to 600 seconds", self.sleep_train);
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
        let idle = self.sleep_train > 0.0;
        let out = match &self.out {
            Some(path) => crate::from_here(path)?,
            None => root.join("results").join(if idle { "netns-train-idle.csv" } else { "netns-train.csv" }),
        };
        Ok(TrainRun {
            topology: Topology {
                owner: std::process::id(),
                workers: self.ranks,
                mbit: self.mbit,
                qdisc: self.qdisc,
                mtu: self.mtu,
                master_send_buffer: None,
            },
            arms: order,
            epochs,
            side,
            grain,
            fraction: self.fraction,
            seed: self.seed,
            sleep_train: self.sleep_train,
            short: self.short,
            python: self.python.clone(),
            timeout: Duration::from_secs(self.timeout),
            out,
            readme,
        })
    }
}

/// The setting every arm shares (for the report).
#[derive(Clone, Debug)]
pub struct Setting {
    /// Training ranks.
    pub ranks: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// The qdisc's name.
    pub qdisc: &'static str,
    /// MTU of every link.
    pub mtu: u32,
    /// JPEG side and grain.
    pub side: u32,
    /// Grain of the JPEGs.
    pub grain: f64,
    /// Training records and their bytes.
    pub records: u64,
    /// Bytes of every training record together.
    pub bytes: u64,
    /// Epochs per job.
    pub epochs: usize,
    /// Q of arm d.
    pub fraction: f64,
    /// Seconds each rank sleeps per epoch instead of training (0: it trains).
    pub sleep_train: f64,
}

/// A training rank's log of one epoch (`netns_train_rank.py`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EpochLog {
    /// The epoch.
    pub epoch: usize,
    /// Host clock at the epoch's start (after the barrier) and end (after evaluation).
    pub t_start: f64,
    /// Host clock at the epoch's end.
    pub t_end: f64,
    /// The interface's (tx, rx) counters at the epoch's start.
    pub counters_start: (u64, u64),
    /// What `set_epoch` waited.
    pub exposed_seconds: f64,
    /// From `set_epoch` to the end of the training loop.
    pub epoch_seconds: f64,
    /// The delivery of this epoch's records (in the background of the epoch before).
    pub transfer_seconds: f64,
    /// Plane payload bytes sent and received for this epoch's delivery.
    pub bytes_sent: u64,
    /// Plane payload bytes received.
    pub bytes_received: u64,
    /// Padding bytes of the coded packets.
    pub padding_bytes: u64,
    /// Packets and coded packets this rank needed.
    pub packets: u64,
    /// Coded packets among them.
    pub coded_packets: u64,
    /// Bytes this rank holds during the epoch.
    pub held_bytes: u64,
    /// Training loss (mean over the rank's samples).
    pub train_loss: f64,
    /// Held-out loss and accuracy (the first training rank only).
    pub held_out_loss: Option<f64>,
    /// Held-out accuracy.
    pub held_out_accuracy: Option<f64>,
    /// Store mode: from the request to the store's answer (its planning, its wait for every
    /// rank's request).
    pub answer_wait_seconds: Option<f64>,
    /// Store mode: receiving this rank's pieces from the store.
    pub scatter_seconds: Option<f64>,
    /// Store mode: the ranks giving each other their pieces (the all-gather).
    pub relay_seconds: Option<f64>,
    /// Store mode: decoding (the receiver's set-up, rounds and finish).
    pub decode_seconds: Option<f64>,
    /// Store mode: every wait on the plane's group during the delivery.
    pub gloo_wait_seconds: Option<f64>,
}

/// What the store served for one epoch (`ShuffleGroup.serve`'s figures).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Served {
    /// The epoch delivered.
    pub epoch: usize,
    /// `step` or `catch-up`.
    pub kind: String,
    /// Plane bytes the store sent.
    pub bytes_sent: u64,
    /// Packets of the plan (segments).
    pub packets: u64,
    /// Coded packets of the plan.
    pub coded_packets: u64,
    /// Padding and data bytes of the packets.
    pub padding_bytes: u64,
    /// Data bytes of the packets.
    pub data_bytes: u64,
    /// Bytes per segment.
    pub segment_bytes: u64,
    /// The store's seconds for the delivery.
    pub transfer_seconds: f64,
    /// Waiting for every rank's request (before the delivery).
    pub request_wait_seconds: Option<f64>,
    /// What the delivery waited for its plan (made ahead, or then).
    pub plan_seconds: Option<f64>,
    /// The planner's own time when it planned ahead (0 when it planned then).
    pub plan_ahead_seconds: Option<f64>,
    /// Encoding the packets.
    pub encode_seconds: Option<f64>,
    /// Sending the pieces (the scatter).
    pub scatter_seconds: Option<f64>,
    /// Every wait on the plane's group during the delivery.
    pub gloo_wait_seconds: Option<f64>,
}

/// One rank's log (`OUT/rank-R.json`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RankLog {
    /// The rank in the job's world.
    pub rank: usize,
    /// `store` or `trainer`.
    pub role: String,
    /// The training rank's place (the sampler's rank).
    pub place: usize,
    /// Host clock after the job's first barrier.
    pub t0: f64,
    /// Interface counters at the process's start and end.
    pub start_counters: (u64, u64),
    /// Interface counters at the end.
    pub end_counters: (u64, u64),
    /// The training rank's epochs.
    pub epochs: Vec<EpochLog>,
    /// The store's deliveries.
    pub served: Vec<Served>,
    /// The store's counter samples `(time, tx, rx)`.
    pub samples: Vec<(f64, u64, u64)>,
    /// Per epoch after the first, per place: bytes the chain brings each rank (first rank).
    pub chain_bytes: Vec<Vec<u64>>,
    /// The delivery drained at close (the epoch after the last).
    pub drained: BTreeMap<String, f64>,
    /// Bytes the store holds.
    pub held_bytes: u64,
}

/// One finished job: the arm, its place in the run, and every rank's log by rank.
pub struct Job {
    /// The arm.
    pub arm: Arm,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// Every rank's log, by rank.
    pub ranks: Vec<RankLog>,
}

impl Job {
    /// The store's log (store arms).
    pub fn store(&self) -> Option<&RankLog> {
        self.ranks.iter().find(|r| r.role == "store")
    }

    /// The training ranks' logs, by place.
    pub fn trainers(&self) -> Vec<&RankLog> {
        let mut t: Vec<&RankLog> = self.ranks.iter().filter(|r| r.role == "trainer").collect();
        t.sort_by_key(|r| r.place);
        t
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
    check_python(&plan.python)?;
    let (records, bytes) = make_data(&plan, &script, &data)?;
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
    let jobs = measure(&plan, &script, &data, &work)?;
    eprintln!(
        "xtask: namespaces removed after {:.0} s; the emulator's prediction for arms b and c",
        started.elapsed().as_secs_f64()
    );
    train_report::report(&plan, &setting, &jobs, root)
}

/// What the ranks import, checked before anything is made: one line naming the first module
/// `python` lacks.
fn check_python(python: &Path) -> anyhow::Result<()> {
    const PROBE: &str = r"
import importlib, sys
for m in ('torch', 'PIL', 'sklearn', 'ubershuffle.torch'):
    try:
        importlib.import_module(m)
    except Exception as e:
        print(m + ': ' + (str(e).splitlines() or [type(e).__name__])[0])
        sys.exit(1)
";
    let out = Command::new(python)
        .args(["-c", PROBE])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} (--python)", python.display()))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        bail!(
            "{} cannot import {}: the ranks need torch, Pillow, scikit-learn and the ubershuffle package \
(pip install torch pillow scikit-learn ./python, or PYTHONPATH)",
            python.display(),
            text.lines().next().unwrap_or("what it needs").trim()
        );
    }
    Ok(())
}

/// Makes the data set (outside the namespaces) and returns its records and bytes.
fn make_data(plan: &TrainRun, script: &Path, data: &Path) -> anyhow::Result<(u64, u64)> {
    let out = Command::new(&plan.python)
        .arg(script)
        .args(["--make-data", "--data"])
        .arg(data)
        .args(["--side", &plan.side.to_string(), "--grain", &plan.grain.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", plan.python.display()))?;
    if !out.status.success() {
        bail!("making the data set with {} failed ({})", plan.python.display(), out.status);
    }
    #[derive(Deserialize)]
    struct Made {
        records: u64,
        bytes: u64,
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rfind(|l| l.starts_with('{')).context("making the data set printed no JSON")?;
    let made: Made = serde_json::from_str(line).context("the data set's JSON")?;
    if made.records == 0 {
        bail!("the data set under {} has no records", data.display());
    }
    Ok((made.records, made.bytes))
}

/// Makes the network, runs every arm's job in it and removes it (the guard also removes it on
/// an error or a panic, its handler on Ctrl-C).
fn measure(plan: &TrainRun, script: &Path, data: &Path, work: &Path) -> anyhow::Result<Vec<Job>> {
    let topology = &plan.topology;
    let _guard = host::NetworkGuard::arm(topology.owner)?;
    eprintln!(
        "xtask: namespaces {}* : a switch, the store and {} ranks, every port shaped by {} at {} Mbit/s, MTU {}",
        topology.prefix(),
        topology.workers,
        topology.qdisc.name(),
        topology.mbit,
        topology.mtu
    );
    for command in topology.setup_commands() {
        host::run(&command)?;
    }
    let mut jobs = Vec::new();
    let mut seen: BTreeMap<Arm, usize> = BTreeMap::new();
    for &arm in &plan.arms {
        let repeat = *seen.entry(arm).and_modify(|k| *k += 1).or_insert(0);
        let dir = work.join(format!("arm-{}-{repeat}", arm.letter()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let t = Instant::now();
        let ranks = run_job(plan, arm, plan.seed + repeat as u64, script, data, &dir)?;
        eprintln!(
            "xtask: arm {} ({}) done in {:.1} s",
            arm.letter(),
            arm.describe(plan.fraction),
            t.elapsed().as_secs_f64()
        );
        jobs.push(Job { arm, repeat, ranks });
    }
    Ok(jobs)
}

/// Where each rank of an arm's job runs: its namespace, in rank order.
fn placement(topology: &Topology, arm: Arm) -> Vec<Node> {
    let trainers = (0..topology.workers).map(Node::Worker);
    if arm.has_store() { std::iter::once(Node::Master).chain(trainers).collect() } else { trainers.collect() }
}

/// Runs one arm's job with `seed` (the chain's and the model's): a process per rank in its
/// namespace; returns every rank's log.
fn run_job(
    plan: &TrainRun,
    arm: Arm,
    seed: u64,
    script: &Path,
    data: &Path,
    dir: &Path,
) -> anyhow::Result<Vec<RankLog>> {
    let topology = &plan.topology;
    let nodes = placement(topology, arm);
    let master = topology.address(nodes[0]);
    let mut children: Vec<(usize, Child)> = Vec::new();
    let pythonpath = std::env::var("PYTHONPATH").unwrap_or_default();
    for (rank, &node) in nodes.iter().enumerate() {
        let log = File::create(dir.join(format!("rank-{rank}.log")))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &topology.namespace(node), "env"])
            .arg(format!("RANK={rank}"))
            .arg(format!("WORLD_SIZE={}", nodes.len()))
            .arg(format!("LOCAL_RANK={rank}"))
            .arg(format!("MASTER_ADDR={master}"))
            .arg(format!("MASTER_PORT={MASTER_PORT}"))
            .arg("GLOO_SOCKET_IFNAME=eth0")
            .arg(format!("PYTHONPATH={pythonpath}"))
            .arg("OMP_NUM_THREADS=1")
            .arg(&plan.python)
            .arg(script)
            .args(["--arm", &arm.letter().to_string(), "--data"])
            .arg(data)
            .arg("--out")
            .arg(dir)
            .args(["--epochs", &plan.epochs.to_string(), "--fraction", &plan.fraction.to_string()])
            .args(["--seed", &seed.to_string()])
            .args(["--sleep-train", &plan.sleep_train.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = cmd.spawn().context("cannot run `ip netns exec`")?;
        children.push((rank, child));
    }
    let started = Instant::now();
    let mut failed: Option<String> = None;
    while !children.is_empty() {
        let mut still = Vec::new();
        for (rank, mut child) in children {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => {}
                Ok(Some(status)) => {
                    failed.get_or_insert_with(|| {
                        format!("rank {rank} exited with {status}{}", last_line(dir, rank))
                    });
                }
                Ok(None) => still.push((rank, child)),
                Err(e) => {
                    failed.get_or_insert_with(|| format!("cannot wait for rank {rank}: {e}"));
                }
            }
        }
        children = still;
        if failed.is_none() && started.elapsed() > plan.timeout {
            failed = Some(format!("the job did not finish within {} s", plan.timeout.as_secs()));
        }
        if failed.is_some() {
            for (_, child) in &mut children {
                let _ = child.kill();
                let _ = child.wait();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(why) = failed {
        bail!("arm {}: {why} (logs in {})", arm.letter(), dir.display());
    }
    (0..nodes.len())
        .map(|rank| {
            let path = dir.join(format!("rank-{rank}.json"));
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{} is not a rank's log", path.display()))
        })
        .collect()
}

/// `: LAST LINE` of a rank's log, or nothing.
fn last_line(dir: &Path, rank: usize) -> String {
    let text = std::fs::read_to_string(dir.join(format!("rank-{rank}.log"))).unwrap_or_default();
    text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!(": {}", l.trim())).unwrap_or_default()
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
    fn defaults_run_six_arms_on_four_ranks_and_the_short_form_is_small() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.arms, Arm::ALL);
        assert_eq!((plan.topology.workers, plan.epochs, plan.short, plan.readme), (4, 6, false, true));
        assert_eq!(plan.out, Path::new("/ws/results/netns-train.csv"));
        let short = parse(&["--short"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(short.arms, Arm::SHORT);
        let short = parse(&["--short", "--arm", "b,d", "--repeats", "2"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((short.epochs, short.side, short.grain), (2, 64, 0.0));
        assert_eq!(short.arms, [Arm::B, Arm::D, Arm::B, Arm::D]);
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

    #[test]
    fn store_arms_put_rank_zero_in_the_store_namespace() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        let store = placement(&plan.topology, Arm::B);
        assert_eq!(store.len(), 5);
        assert_eq!(store[0], Node::Master);
        let peer = placement(&plan.topology, Arm::D);
        assert_eq!(peer, (0..4).map(Node::Worker).collect::<Vec<_>>());
    }
}
