//! What `cargo xtask netns` asks of the host: root, `ip` and `tc`; running their commands; and
//! removing the run's namespaces on every way out (a guard dropped on success, error or panic,
//! and a handler for Ctrl-C and SIGTERM), plus those of earlier runs that were killed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::topology::{Argv, Topology, owned_namespaces, stale_namespaces, teardown_commands};

/// Why this machine cannot run the check (one line), or `None` when it can.
pub fn unmet_requirement() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("cargo xtask netns needs Linux (network namespaces and tc)".into());
    }
    match effective_uid() {
        Some(0) => {}
        Some(uid) => return Some(format!("cargo xtask netns needs root (running as uid {uid})")),
        None => return Some("cargo xtask netns needs root (cannot read /proc/self/status)".into()),
    }
    for tool in ["ip", "tc"] {
        if find_program(tool).is_none() {
            return Some(format!("cargo xtask netns needs `{tool}` (apt-get install iproute2)"));
        }
    }
    None
}

/// The effective uid, from /proc/self/status.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// `name` on the PATH (or in /sbin, /usr/sbin, where root's tools live).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs one command, failing with its stderr's first line.
pub fn run(command: &Argv) -> anyhow::Result<String> {
    let (program, args) = command.split_first().context("an empty command")?;
    let out = Command::new(program).args(args).output().with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().next().unwrap_or("no message").trim().to_string();
        bail!("`{}` failed: {why}", command.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip netns list`.
fn list_namespaces() -> String {
    run(&vec!["ip".into(), "netns".into(), "list".into()]).unwrap_or_default()
}

/// Ends the processes in each namespace and deletes it; returns what could not be removed.
fn remove(namespaces: &[String]) -> Vec<String> {
    let mut failed = Vec::new();
    for ns in namespaces {
        let pids = run(&vec!["ip".into(), "netns".into(), "pids".into(), ns.clone()]).unwrap_or_default();
        let mut ok = true;
        for command in teardown_commands(ns, &pids) {
            ok &= run(&command).is_ok();
        }
        if !ok {
            failed.push(ns.clone());
        }
    }
    failed
}

/// Removes every namespace process `owner` made; reports on stderr what is left.
pub fn remove_owned(owner: u32) {
    let failed = remove(&owned_namespaces(&list_namespaces(), owner));
    if !failed.is_empty() {
        eprintln!("xtask: could not remove namespaces {} (ip netns delete NAME)", failed.join(" "));
    }
}

/// Removes the namespaces of earlier runs whose process is gone (killed before it could).
pub fn remove_stale() -> anyhow::Result<()> {
    let alive = |pid: u32| Path::new("/proc").join(pid.to_string()).exists();
    let stale = stale_namespaces(&list_namespaces(), alive);
    if !stale.is_empty() {
        eprintln!("xtask: removing namespaces left by an earlier run: {}", stale.join(" "));
        let failed = remove(&stale);
        if !failed.is_empty() {
            bail!("cannot remove leftover namespaces {}", failed.join(" "));
        }
    }
    Ok(())
}

/// Removes the run's namespaces when dropped (success, error, panic); on Ctrl-C or SIGTERM a
/// handler does the same and exits.
pub struct NetworkGuard {
    owner: u32,
}

impl NetworkGuard {
    /// Arms removal of every namespace `owner` makes, now and on a signal.
    pub fn arm(owner: u32) -> anyhow::Result<NetworkGuard> {
        let installed = ctrlc::set_handler(move || {
            eprintln!("xtask: interrupted; removing the namespaces");
            remove_owned(owner);
            std::process::exit(130);
        });
        match installed {
            // A handler from an earlier guard of this process removes the same namespaces.
            Ok(()) | Err(ctrlc::Error::MultipleHandlers) => Ok(NetworkGuard { owner }),
            Err(e) => Err(e).context("cannot install the Ctrl-C handler"),
        }
    }
}

impl Drop for NetworkGuard {
    fn drop(&mut self) {
        remove_owned(self.owner);
    }
}

/// Makes `topology`'s namespaces and says so (`master` and `workers`: what the master and the
/// workers are in this experiment); they are removed when the returned guard drops, on an
/// error, a panic or Ctrl-C.
pub fn build_network(topology: &Topology, master: &str, workers: &str) -> anyhow::Result<NetworkGuard> {
    let guard = NetworkGuard::arm(topology.owner)?;
    eprintln!(
        "xtask: namespaces {}* : a switch, the {master} and {} {workers}, every port shaped by {} at {} Mbit/s, MTU {}",
        topology.prefix(),
        topology.workers,
        topology.qdisc.name(),
        topology.mbit,
        topology.mtu
    );
    for command in topology.setup_commands() {
        run(&command)?;
    }
    Ok(guard)
}
