//! Running `cargo xtask netns-train`'s jobs: the Python checked, the data set made, the
//! namespaces made and removed, and one job per arm in them, a process per rank, each rank's
//! JSON log read back.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;

use super::TrainRun;
use super::types::{Arm, Job, RankLog};
use crate::netns::host;
use crate::netns::topology::{Node, Topology};

/// The port gloo's rendezvous listens on (inside the namespaces only).
const MASTER_PORT: u16 = 29500;

/// What the ranks import, checked before anything is made: one line naming the first module
/// `python` lacks.
pub(super) fn check_python(python: &Path) -> anyhow::Result<()> {
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
pub(super) fn make_data(plan: &TrainRun, script: &Path, data: &Path) -> anyhow::Result<(u64, u64)> {
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
pub(super) fn measure(plan: &TrainRun, script: &Path, data: &Path, work: &Path) -> anyhow::Result<Vec<Job>> {
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
pub(super) fn placement(topology: &Topology, arm: Arm) -> Vec<Node> {
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
    use crate::netns::topology::Qdisc;

    #[test]
    fn store_arms_put_rank_zero_in_the_store_namespace() {
        let topology = Topology {
            owner: 1,
            workers: 4,
            mbit: 100.0,
            qdisc: Qdisc::Tbf,
            mtu: 1500,
            master_send_buffer: None,
        };
        let store = placement(&topology, Arm::B);
        assert_eq!(store.len(), 5);
        assert_eq!(store[0], Node::Master);
        let peer = placement(&topology, Arm::D);
        assert_eq!(peer, (0..4).map(Node::Worker).collect::<Vec<_>>());
    }
}
