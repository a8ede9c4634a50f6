//! The modelled side of `cargo xtask netns`: the same work on the emulator (the in-process
//! transport with [`LinkShaping`] at the same rate: single-ported nodes, bytes / rate +
//! latency), so the model is the emulator's own code, not a second formula.
//!
//! The broadcast runs the same demo (`ubershuffle_runtime::broadcast_demo`) on an in-process
//! cluster whose clocks count only the links ([`ComputeTime::Charged`] with nothing charged):
//! the time the links alone allow. The epoch loop runs `ubershuffle run --transport inproc
//! --bandwidth RATE` with the same flags and seed, so the same assignments and plans, on
//! per-node clocks that count each node's CPU time and the link model.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail};
use ubershuffle_runtime::EpochMetrics;
use ubershuffle_runtime::broadcast_demo::{DemoJob, run_master, run_worker};
use ubershuffle_transport::in_process::{self, ComputeTime, InProcessConfig, LinkShaping};

use super::measure::{BroadcastJob, EpochJob, parse_epochs};

/// Bytes per second of `mbit` Mbit/s.
pub fn bytes_per_second(mbit: f64) -> f64 {
    mbit * 1e6 / 8.0
}

/// Each broadcast's seconds on the emulator's links (no latency: a veth adds microseconds).
pub fn broadcast(workers: usize, mbit: f64, job: &BroadcastJob) -> anyhow::Result<Vec<f64>> {
    let config = InProcessConfig::default()
        .with_timeout(Duration::from_secs(120))
        .with_broadcast(job.method)
        .with_shaping(Some(LinkShaping::new(bytes_per_second(mbit), Duration::ZERO)))
        .with_compute_time(ComputeTime::Charged);
    let mut ranks = in_process::cluster(workers + 1, &config)?.into_iter();
    let mut master = ranks.next().context("an empty cluster")?;
    let handles: Vec<_> = ranks
        .map(|mut t| thread::spawn(move || run_worker(&mut t).map(|_| ()).map_err(|e| e.to_string())))
        .collect();
    let demo = DemoJob::new(job.rounds, job.bytes, job.seed);
    let rounds = run_master(&mut master, &demo);
    drop(master);
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("an emulated worker failed: {e}"),
            Err(_) => bail!("an emulated worker panicked"),
        }
    }
    Ok(rounds?.iter().map(|r| r.seconds).collect())
}

/// The epochs of the same run of the epoch loop on the emulator at `mbit` Mbit/s.
pub fn epochs(exe: &Path, workers: usize, mbit: f64, job: &EpochJob) -> anyhow::Result<Vec<EpochMetrics>> {
    let mut args: Vec<String> =
        ["run", "--transport", "inproc", "--bandwidth", &format!("{mbit}mbit"), "--json"]
            .map(String::from)
            .to_vec();
    args.extend(job.run_flags(workers));
    eprintln!("xtask: [emulator] ubershuffle {}", args.join(" "));
    let out = Command::new(exe)
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if !out.status.success() {
        bail!("the emulated {} run failed ({})", job.scheme, out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with('{')).context("the emulated run printed no JSON")?;
    parse_epochs(&serde_json::from_str(line).context("the emulated run's JSON")?, job)
}
