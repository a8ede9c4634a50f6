//! Running `cargo xtask netns-train`'s jobs: the Python checked, the data set made, the
//! namespaces made and removed, and one job per arm in them, a torchrun agent per node, each rank's
//! JSON log read back.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::TrainRun;
use super::types::{Arm, Job, RankLog};
use crate::netns::host;
use crate::netns::ranks::RankJob;
use crate::netns::topology::{Node, Topology};

/// What the ranks import, checked before anything is made: one line naming the first module
/// `python` lacks.
pub(crate) fn check_python(python: &Path) -> anyhow::Result<()> {
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

/// The data set's flags and partial-local's Q checked: a one-line error naming the first out
/// of range.
pub(crate) fn check_data_flags(fraction: f64, side: u32, grain: f64) -> anyhow::Result<()> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        bail!("--fraction {fraction}: use a fraction in (0, 1]");
    }
    if !(8..=1024).contains(&side) {
        bail!("--side {side}: use 8 to 1024 pixels");
    }
    if !(grain.is_finite() && (0.0..=128.0).contains(&grain)) {
        bail!("--grain {grain}: use 0 to 128 grey levels");
    }
    Ok(())
}

/// Makes the data set (outside the namespaces) and returns its records and bytes.
/// (`script` is `python/benchmarks/netns_train_rank.py`; `side` and `grain` its flags.)
pub(crate) fn make_data(
    python: &Path,
    script: &Path,
    data: &Path,
    side: u32,
    grain: f64,
) -> anyhow::Result<(u64, u64)> {
    let out = Command::new(python)
        .arg(script)
        .args(["--make-data", "--data"])
        .arg(data)
        .args(["--side", &side.to_string(), "--grain", &grain.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !out.status.success() {
        bail!("making the data set with {} failed ({})", python.display(), out.status);
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
    let _guard = host::build_network(topology, "store", "ranks")?;
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

/// Runs one arm's job with `seed` (the chain's and the model's): a torchrun agent per node in its
/// namespace; returns every rank's log.
fn run_job(
    plan: &TrainRun,
    arm: Arm,
    seed: u64,
    script: &Path,
    data: &Path,
    dir: &Path,
) -> anyhow::Result<Vec<RankLog>> {
    let nodes = placement(&plan.topology, arm);
    let data = data.to_string_lossy().into_owned();
    let job = RankJob {
        topology: &plan.topology,
        nodes: &nodes,
        python: &plan.python,
        script,
        args: [
            "--arm",
            &arm.letter().to_string(),
            "--data",
            &data,
            "--epochs",
            &plan.epochs.to_string(),
            "--fraction",
            &plan.fraction.to_string(),
            "--seed",
            &seed.to_string(),
            "--sleep-train",
            &plan.sleep_train.to_string(),
        ]
        .map(String::from)
        .to_vec(),
        dir,
        timeout: plan.timeout,
    };
    job.run().map_err(|e| anyhow::anyhow!("arm {}: {e}", arm.letter()))
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
