//! The measured side of `cargo xtask netns`: real `ubershuffle` processes, the master in its
//! namespace and each worker in its own, talking TCP through the shaped veths; times on the
//! master's wall clock.

use std::path::Path;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ubershuffle_runtime::EpochMetrics;
use ubershuffle_transport::BroadcastMethod;

use super::topology::{Node, Topology};
use crate::cluster::{Processes, Who, echo, master_stdout, random_token, wait_for_address, worker_args};

/// The longest a measured run may take before it is stopped (and counted as failed).
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// Broadcasts of seeded payloads (`ubershuffle master`), each checked byte for byte by every
/// worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BroadcastJob {
    /// Bytes per broadcast.
    pub bytes: u64,
    /// Broadcasts.
    pub rounds: u32,
    /// How they travel.
    pub method: BroadcastMethod,
    /// Seed of the payloads.
    pub seed: u64,
}

/// A run of the epoch loop (`ubershuffle run`): linear regression on seeded data, so that the
/// measured run and the emulated one draw the same assignments and plans.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochJob {
    /// The shuffling scheme.
    pub scheme: String,
    /// Epochs.
    pub epochs: usize,
    /// Training points.
    pub points: usize,
    /// Features per point (a record is `8 (features + 1)` bytes).
    pub features: usize,
    /// Storage ratio: each worker caches `floor(alpha * points)` points.
    pub alpha: f64,
    /// Seed of the data and every random choice.
    pub seed: u64,
}

impl EpochJob {
    /// The flags of `ubershuffle run` that fix the work (the same for the measured and the
    /// emulated run).
    pub fn run_flags(&self, workers: usize) -> Vec<String> {
        [
            ("--scheme", self.scheme.clone()),
            ("--workers", workers.to_string()),
            ("--epochs", self.epochs.to_string()),
            ("--points", self.points.to_string()),
            ("--features", self.features.to_string()),
            ("--alpha", self.alpha.to_string()),
            ("--seed", self.seed.to_string()),
            ("--timeout", "60".into()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }
}

/// `exe args` run inside `node`'s namespace: the arguments of `ip`.
fn in_namespace(topology: &Topology, node: Node, exe: &Path, args: &[String]) -> Vec<String> {
    let mut argv = vec!["netns".into(), "exec".into(), topology.namespace(node), exe.display().to_string()];
    argv.extend(args.iter().cloned());
    argv
}

/// Runs `master_args` (an `ubershuffle` subcommand that admits workers over TCP) in the
/// master's namespace and `ubershuffle worker` in every worker's; returns the master's JSON.
fn run_cluster(topology: &Topology, exe: &Path, master_args: &[String]) -> anyhow::Result<serde_json::Value> {
    let token = random_token();
    let mut args = master_args.to_vec();
    let listen = format!("{}:0", topology.address(Node::Master));
    args.extend(["--listen".into(), listen, "--json".into()]);
    let ip = Path::new("ip");
    let (tx, lines) = channel();
    let mut procs = Processes::default();
    procs.token = token;
    eprintln!("xtask: [{}] ubershuffle {}", topology.namespace(Node::Master), master_args.join(" "));
    procs.spawn(Who::Master, ip, &in_namespace(topology, Node::Master, exe, &args), &tx)?;
    let printed = master_stdout(&mut procs);
    let addr = wait_for_address(&mut procs, &lines)?;
    let worker_args = worker_args(&addr);
    for k in 0..topology.workers {
        procs.spawn(Who::Worker(k), ip, &in_namespace(topology, Node::Worker(k), exe, &worker_args), &tx)?;
    }
    drop(tx);
    let started = Instant::now();
    let status = loop {
        if let Ok((who, line)) = lines.recv_timeout(Duration::from_millis(50)) {
            echo(who, &line);
        }
        if let Some(Ok(Some(status))) = procs.child(Who::Master).map(|c| c.try_wait()) {
            while let Ok((who, line)) = lines.recv_timeout(Duration::from_millis(100)) {
                echo(who, &line);
            }
            break status;
        }
        if started.elapsed() > RUN_LIMIT {
            bail!("the master did not finish within {} s", RUN_LIMIT.as_secs());
        }
    };
    let text = printed.join().unwrap_or_default();
    if !status.success() {
        bail!("the master in namespace {} failed ({status})", topology.namespace(Node::Master));
    }
    let line = text.lines().find(|l| l.starts_with('{')).context("the master printed no JSON")?;
    serde_json::from_str(line).context("the master's JSON")
}

/// Each broadcast's seconds, measured at the master from the barrier to the last worker
/// holding the payload.
pub fn broadcast(topology: &Topology, exe: &Path, job: &BroadcastJob) -> anyhow::Result<Vec<f64>> {
    let args: Vec<String> = [
        "master",
        "--workers",
        &topology.workers.to_string(),
        "--bytes",
        &job.bytes.to_string(),
        "--rounds",
        &job.rounds.to_string(),
        "--method",
        job.method.name(),
        "--seed",
        &job.seed.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let v = run_cluster(topology, exe, &args)?;
    if v["verified"] != true {
        bail!("the broadcast's payloads were not verified: {v}");
    }
    let seconds: Option<Vec<f64>> =
        v["seconds"].as_array().map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect());
    match seconds {
        Some(s) if s.len() == job.rounds as usize => Ok(s),
        _ => bail!("the master reported no time per round: {v}"),
    }
}

/// The epochs of a run of the epoch loop over TCP, as the master measured them.
pub fn epochs(topology: &Topology, exe: &Path, job: &EpochJob) -> anyhow::Result<Vec<EpochMetrics>> {
    let mut args = vec!["run".to_string(), "--transport".into(), "tcp".into()];
    args.extend(job.run_flags(topology.workers));
    let v = run_cluster(topology, exe, &args)?;
    parse_epochs(&v, job)
}

/// The epochs of a run's JSON, checked complete.
pub fn parse_epochs(v: &serde_json::Value, job: &EpochJob) -> anyhow::Result<Vec<EpochMetrics>> {
    if v["complete"] != true {
        bail!("the {} run did not complete", job.scheme);
    }
    let epochs: Vec<EpochMetrics> =
        serde_json::from_value(v["epochs"].clone()).context("the run's JSON has no epochs")?;
    if epochs.len() != job.epochs {
        bail!("the {} run reported {} epochs instead of {}", job.scheme, epochs.len(), job.epochs);
    }
    Ok(epochs)
}
