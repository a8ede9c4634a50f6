//! One job of Python ranks in the namespaces: a process per rank, each in its node's
//! namespace with torchrun's environment (gloo's rendezvous at the first node), its output in
//! `DIR/rank-R.log`, its JSON log read back from `DIR/rank-R.json`. Shared by
//! `cargo xtask netns-train` and `cargo xtask netns-gradients`.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

use super::topology::{Node, Topology};

/// The port gloo's rendezvous listens on (inside the namespaces only).
const MASTER_PORT: u16 = 29500;

/// What one job runs: `python script ARGS --out DIR` on every node of `nodes` (rank order).
pub struct RankJob<'a> {
    /// The namespaces.
    pub topology: &'a Topology,
    /// Where each rank runs, in rank order (rank 0 hosts the rendezvous).
    pub nodes: &'a [Node],
    /// The Python that runs the script.
    pub python: &'a Path,
    /// The rank script.
    pub script: &'a Path,
    /// The script's arguments (the same on every rank; `--out DIR` is added).
    pub args: Vec<String>,
    /// Where the ranks write their logs.
    pub dir: &'a Path,
    /// The most the job may take.
    pub timeout: Duration,
}

impl RankJob<'_> {
    /// Runs the job; every rank's JSON log by rank, or a one-line error naming the first rank
    /// that failed (with its output's last line) or the timeout. The other ranks are killed
    /// when one fails.
    pub fn run<T: DeserializeOwned>(&self) -> anyhow::Result<Vec<T>> {
        let master = self.topology.address(self.nodes[0]);
        let pythonpath = std::env::var("PYTHONPATH").unwrap_or_default();
        let mut children: Vec<(usize, Child)> = Vec::new();
        for (rank, &node) in self.nodes.iter().enumerate() {
            let log = File::create(self.dir.join(format!("rank-{rank}.log")))?;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &self.topology.namespace(node), "env"])
                .arg(format!("RANK={rank}"))
                .arg(format!("WORLD_SIZE={}", self.nodes.len()))
                .arg(format!("LOCAL_RANK={rank}"))
                .arg(format!("MASTER_ADDR={master}"))
                .arg(format!("MASTER_PORT={MASTER_PORT}"))
                .arg("GLOO_SOCKET_IFNAME=eth0")
                .arg(format!("PYTHONPATH={pythonpath}"))
                .arg("OMP_NUM_THREADS=1")
                .arg(self.python)
                .arg(self.script)
                .args(&self.args)
                .arg("--out")
                .arg(self.dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log);
            let child = cmd.spawn().context("cannot run `ip netns exec`")?;
            children.push((rank, child));
        }
        if let Some(why) = self.wait_all(children) {
            bail!("{why} (logs in {})", self.dir.display());
        }
        (0..self.nodes.len())
            .map(|rank| {
                let path = self.dir.join(format!("rank-{rank}.json"));
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                serde_json::from_str(&text).with_context(|| format!("{} is not a rank's log", path.display()))
            })
            .collect()
    }

    /// Waits for every rank; why the job failed, if it did (the others are then killed).
    fn wait_all(&self, mut children: Vec<(usize, Child)>) -> Option<String> {
        let started = Instant::now();
        let mut failed: Option<String> = None;
        while !children.is_empty() {
            let mut still = Vec::new();
            for (rank, mut child) in children {
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => {}
                    Ok(Some(status)) => {
                        failed.get_or_insert_with(|| {
                            format!("rank {rank} exited with {status}{}", last_line(self.dir, rank))
                        });
                    }
                    Ok(None) => still.push((rank, child)),
                    Err(e) => {
                        failed.get_or_insert_with(|| format!("cannot wait for rank {rank}: {e}"));
                    }
                }
            }
            children = still;
            if failed.is_none() && started.elapsed() > self.timeout {
                failed = Some(format!("the job did not finish within {} s", self.timeout.as_secs()));
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
        failed
    }
}

/// `: LAST LINE` of a rank's log, or nothing.
fn last_line(dir: &Path, rank: usize) -> String {
    let text = std::fs::read_to_string(dir.join(format!("rank-{rank}.log"))).unwrap_or_default();
    text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!(": {}", l.trim())).unwrap_or_default()
}
