//! One job of Python ranks in the namespaces, launched as a multi-node job is: one torchrun
//! agent per node (`--nnodes N --nproc-per-node 1 --rdzv-backend c10d`), each in its node's
//! namespace, the rendezvous at the first node and crossing the shaped links. Each node's
//! output goes to `DIR/rank-R.log`, its rank's JSON log is read back from `DIR/rank-R.json`.
//! Shared by `cargo xtask netns-train`, `netns-gradients` and `netns-loaders`.
//!
//! Ranks follow the nodes' order: the c10d rendezvous numbers its agents in the order of their
//! `--local-addr` (torch's dynamic rendezvous sorts its participants by address, then process),
//! and the nodes' addresses sort as the nodes do ([`Topology::address`]: the first node `.1`,
//! worker `k` `.1k`, two digits for fewer than 90 workers). Each rank checks it
//! (`UBERSHUFFLE_NETNS_RANK`, the rank its node was meant to have) and fails naming both.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

use super::topology::{Node, Topology};

/// The port the c10d rendezvous listens on (inside the namespaces only).
const RENDEZVOUS_PORT: u16 = 29500;

/// What one job runs: `python script ARGS --out DIR` on every node of `nodes` (rank order),
/// under a torchrun agent of its own.
pub struct RankJob<'a> {
    /// The namespaces.
    pub topology: &'a Topology,
    /// Where each rank runs, in rank order (rank 0's node hosts the rendezvous).
    pub nodes: &'a [Node],
    /// The Python that runs torchrun and the script.
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
        let addresses: Vec<String> = self.nodes.iter().map(|&n| self.topology.address(n)).collect();
        if addresses.windows(2).any(|w| w[0] >= w[1]) {
            bail!(
                "the nodes' addresses do not sort in rank order ({}): torchrun would number them otherwise",
                addresses.join(", ")
            );
        }
        let endpoint = format!("{}:{RENDEZVOUS_PORT}", addresses[0]);
        let pythonpath = std::env::var("PYTHONPATH").unwrap_or_default();
        let mut children: Vec<(usize, Child)> = Vec::new();
        for (rank, &node) in self.nodes.iter().enumerate() {
            let log = File::create(self.dir.join(format!("rank-{rank}.log")))?;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &self.topology.namespace(node), "env"])
                .arg(format!("UBERSHUFFLE_NETNS_RANK={rank}"))
                .arg("GLOO_SOCKET_IFNAME=eth0")
                .arg(format!("PYTHONPATH={pythonpath}"))
                .arg("OMP_NUM_THREADS=1")
                .arg(self.python)
                .args(["-m", "torch.distributed.run", "--nproc-per-node", "1", "--max-restarts", "0"])
                .arg(format!("--nnodes={}", self.nodes.len()))
                .args(["--rdzv-backend", "c10d", "--rdzv-id", "netns"])
                .arg(format!("--rdzv-endpoint={endpoint}"))
                .arg(format!("--rdzv-conf=is_host={}", u8::from(rank == 0)))
                .arg(format!("--local-addr={}", addresses[rank]))
                .arg(self.script)
                .args(&self.args)
                .arg("--out")
                .arg(self.dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                // A group of its own: the agent and its rank are killed together.
                .process_group(0);
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
                    kill_group(child);
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

/// Kills a node's process group (its torchrun agent and the rank it started) and reaps the
/// agent.
fn kill_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
    let _ = child.kill();
    let _ = child.wait();
}
