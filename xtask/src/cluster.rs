//! `cargo xtask cluster`: one run of the epoch loop over TCP with the master and every worker
//! as separate processes on 127.0.0.1 (a free port, a random token), optionally killing one
//! worker's process with SIGKILL once a given epoch has started. Every process started here
//! is killed and reaped on every way out (success, error, panic).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

/// Flags of `cargo xtask cluster`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Worker processes.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Epochs.
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// The shuffling scheme.
    #[arg(long, default_value = "coded")]
    scheme: String,
    /// Training points (linear regression; large enough that an epoch outlasts a kill).
    #[arg(long, default_value_t = 100_000)]
    points: usize,
    /// Seconds any single wait may take before a peer counts as stalled.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Kill worker W's process with SIGKILL (a real kill) once epoch E has started: W@E.
    #[arg(long, value_name = "W@E")]
    kill: Option<String>,
    /// Kill worker W's process as epoch E starts, as `--kill` does, and start a new worker
    /// process at once: the master takes it back in at the next epoch boundary (W@E). Checks
    /// that W rejoins and that every epoch from then on runs with all workers and broadcasts,
    /// and prints those epochs' packets against the uncoded count.
    #[arg(long, value_name = "W@E", conflicts_with = "kill")]
    restart: Option<String>,
    /// More flags for `ubershuffle run` (after `--`), e.g. `-- --learner matcomp`.
    #[arg(last = true)]
    run_flags: Vec<String>,
}

/// Who wrote a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    Master,
    Worker(usize),
}

/// Processes that are killed and reaped when this value is dropped.
#[derive(Default)]
pub(crate) struct Processes {
    children: Vec<(Who, Child)>,
    /// The cluster token, given to every process in `UBERSHUFFLE_TOKEN` (empty: none).
    pub(crate) token: String,
}

impl Processes {
    /// Starts `exe args` with piped output; its stderr lines go to `lines`.
    pub(crate) fn spawn(
        &mut self,
        who: Who,
        exe: &Path,
        args: &[String],
        lines: &Sender<(Who, String)>,
    ) -> anyhow::Result<u32> {
        let mut command = Command::new(exe);
        if !self.token.is_empty() {
            // The token travels in the environment, never on a command line (`ps` shows those).
            command.env("UBERSHUFFLE_TOKEN", &self.token);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        if let Some(stderr) = child.stderr.take() {
            let lines = lines.clone();
            thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let _ = lines.send((who, line));
                }
            });
        }
        let pid = child.id();
        self.children.push((who, child));
        Ok(pid)
    }

    pub(crate) fn child(&mut self, who: Who) -> Option<&mut Child> {
        self.children.iter_mut().find(|(w, _)| *w == who).map(|(_, c)| c)
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// A token nobody guesses: 128 bits from the standard library's randomly keyed hasher.
pub(crate) fn random_token() -> String {
    let mut token = String::new();
    for k in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(k ^ u64::from(std::process::id()));
        token.push_str(&format!("{:016x}", h.finish()));
    }
    token
}

fn parse_kill(text: &str, workers: usize, epochs: usize) -> anyhow::Result<(usize, usize)> {
    let parsed = text.split_once('@').and_then(|(w, e)| Some((w.parse().ok()?, e.parse().ok()?)));
    match parsed {
        Some((w, e)) if w < workers && (1..=epochs).contains(&e) => Ok((w, e)),
        _ => bail!("--kill {text}: use W@E with a worker W in 0..{workers} and an epoch E in 1..={epochs}"),
    }
}

/// Runs the cluster.
pub fn run(args: &ClusterArgs, root: &Path, target: &Path) -> anyhow::Result<()> {
    if args.workers == 0 || args.epochs == 0 {
        bail!("--workers and --epochs must be at least 1");
    }
    let kill = args.kill.as_deref().or(args.restart.as_deref());
    let kill = kill.map(|k| parse_kill(k, args.workers, args.epochs)).transpose()?;
    crate::cargo(&["build", "--release", "--quiet", "-p", "ubershuffle", "--bin", "ubershuffle"])?;
    let exe = target.join("release").join("ubershuffle");
    let out = target.join("cluster");
    let _ = std::fs::remove_file(out.join("summary.json"));
    let token = random_token();
    let mut master_args: Vec<String> = ["run", "--transport", "tcp", "--listen", "127.0.0.1:0", "--workers"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    master_args.extend([
        args.workers.to_string(),
        "--epochs".into(),
        args.epochs.to_string(),
        "--scheme".into(),
        args.scheme.clone(),
        "--points".into(),
        args.points.to_string(),
        "--timeout".into(),
        args.timeout.to_string(),
        "--out".into(),
        out.display().to_string(),
    ]);
    master_args.extend(args.run_flags.iter().cloned());
    // The folder holds the previous cluster run: replace it, unless asked to resume it.
    if !args.run_flags.iter().any(|f| f == "--resume") {
        master_args.push("--force".into());
    }

    let (tx, lines) = channel();
    let mut procs = Processes::default();
    procs.token = token;
    eprintln!("xtask: master: {} {}", exe.display(), master_args.join(" "));
    procs.spawn(Who::Master, &exe, &master_args, &tx)?;
    let summary = master_stdout(&mut procs);
    let addr = wait_for_address(&mut procs, &lines)?;
    let worker_args = worker_args(&addr);
    for k in 0..args.workers {
        procs.spawn(Who::Worker(k), &exe, &worker_args, &tx)?;
    }
    eprintln!("xtask: started {} worker processes connecting to {addr}", args.workers);
    // After a kill with --restart, a new worker process (it waits to be admitted).
    let mut restart = |procs: &mut Processes| -> anyhow::Result<()> {
        if args.restart.is_some() {
            procs.spawn(Who::Worker(args.workers), &exe, &worker_args, &tx)?;
            eprintln!("xtask: started a new worker process (process {}) connecting to {addr}", args.workers);
        }
        Ok(())
    };
    let status = follow(&mut procs, &lines, kill, args.workers, &mut restart)?;
    print!("{}", summary.join().unwrap_or_default());
    if !status.master.success() {
        bail!("the master failed ({})", status.master);
    }
    // The workers stop when the master says so; give them a moment, then the guard kills.
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0..=args.workers {
        while let Some(child) = procs.child(Who::Worker(k)) {
            if !matches!(child.try_wait(), Ok(None)) || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
    let files = out.strip_prefix(root).unwrap_or(&out).display().to_string();
    eprintln!("xtask: the master wrote {files}/epochs.csv and {files}/summary.json");
    if let Some((w, e)) = kill {
        check_kill(&out, w, e, status.killed_at_epoch_start)?;
        if args.restart.is_some() {
            check_rejoin(&out, w, args.workers)?;
        }
    }
    Ok(())
}

/// Reads the master's standard output to its end on a thread of its own (its JSON or its
/// summary), so that the pipe never fills while the run goes on.
pub(crate) fn master_stdout(procs: &mut Processes) -> thread::JoinHandle<String> {
    let stdout = procs.child(Who::Master).and_then(|c| c.stdout.take());
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_string(&mut text);
        }
        text
    })
}

/// The arguments of `ubershuffle worker` joining the master at `addr` (the token in the
/// environment: [`Processes::token`]).
pub(crate) fn worker_args(addr: &str) -> Vec<String> {
    ["worker", "--connect", addr].iter().map(|s| s.to_string()).collect()
}

/// Waits for the master's "listening on ADDR" line.
pub(crate) fn wait_for_address(
    procs: &mut Processes,
    lines: &Receiver<(Who, String)>,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok((who, line)) => {
                echo(who, &line);
                if let Some(rest) = line.strip_prefix("listening on ") {
                    return Ok(rest.split(',').next().unwrap_or(rest).to_string());
                }
            }
            Err(_) => {
                if let Some(Ok(Some(status))) = procs.child(Who::Master).map(|c| c.try_wait()) {
                    bail!("the master exited ({status}) before listening");
                }
            }
        }
    }
    bail!("the master did not start listening within 60 s")
}

pub(crate) fn echo(who: Who, line: &str) {
    match who {
        Who::Master => eprintln!("[master] {line}"),
        Who::Worker(k) => eprintln!("[process {k}] {line}"),
    }
}

/// How the run went.
struct Followed {
    master: ExitStatus,
    /// Whether the kill was sent (as the epoch started).
    killed_at_epoch_start: bool,
}

/// Echoes every line until the master exits, killing worker `W` as epoch `E` starts.
fn follow(
    procs: &mut Processes,
    lines: &Receiver<(Who, String)>,
    kill: Option<(usize, usize)>,
    workers: usize,
    after_kill: &mut dyn FnMut(&mut Processes) -> anyhow::Result<()>,
) -> anyhow::Result<Followed> {
    let mut ranks: HashMap<usize, Who> = HashMap::new();
    let (mut armed, mut killed) = (false, false);
    loop {
        if let Ok((who, line)) = lines.recv_timeout(Duration::from_millis(50)) {
            echo(who, &line);
            if let (Who::Worker(_), Some(rest)) = (who, line.strip_prefix("joined as rank "))
                && let Some(rank) = rest.split_whitespace().next().and_then(|r| r.parse().ok())
            {
                ranks.insert(rank, who);
            }
            if let (Some((_, e)), Who::Master) = (kill, who) {
                armed |= if e == 1 {
                    line.starts_with(&format!("all {workers} workers joined"))
                } else {
                    line.starts_with(&format!("epoch {}/", e - 1)) && line.contains(" done: ")
                };
            }
        }
        // The epoch has started; the worker's process is known once it has printed its rank.
        if let (Some((w, e)), true, false) = (kill, armed, killed)
            && let Some(&process) = ranks.get(&(w + 1))
        {
            let child = procs.child(process).context("no such worker process")?;
            let pid = child.id();
            child.kill().with_context(|| format!("cannot kill process {pid}"))?;
            eprintln!("xtask: sent SIGKILL to worker {w} (process {pid}) as epoch {e} started");
            killed = true;
            ranks.remove(&(w + 1));
            after_kill(procs)?;
        }
        if let Some(Ok(Some(status))) = procs.child(Who::Master).map(|c| c.try_wait()) {
            // Drain what is left of the master's lines.
            while let Ok((who, line)) = lines.recv_timeout(Duration::from_millis(100)) {
                echo(who, &line);
            }
            return Ok(Followed { master: status, killed_at_epoch_start: killed });
        }
    }
}

/// Checks, from the master's summary, that the killed worker was reported lost, the run went
/// on to the end without it, and every later epoch broadcast coded packets among the survivors.
fn check_kill(out: &Path, worker: usize, epoch: usize, killed: bool) -> anyhow::Result<()> {
    if !killed {
        bail!("the run ended before epoch {epoch} started: worker {worker} was not killed");
    }
    let path: PathBuf = out.join("summary.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let summary: serde_json::Value = serde_json::from_str(&text)?;
    let epochs = summary["epochs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let lost_in = epochs.iter().find(|e| {
        e["lost_workers"].as_array().is_some_and(|l| l.iter().any(|x| x.as_u64() == Some(worker as u64)))
    });
    let lost_at = lost_in.and_then(|e| e["epoch"].as_u64()).unwrap_or(u64::MAX);
    // The survivors re-form the broadcast group: every later epoch broadcasts coded packets.
    let uncoded_after: Vec<u64> = epochs
        .iter()
        .filter(|e| {
            e["epoch"].as_u64().is_some_and(|k| k > lost_at) && e["broadcast_packets"].as_u64() == Some(0)
        })
        .filter_map(|e| e["epoch"].as_u64())
        .collect();
    if !uncoded_after.is_empty() {
        bail!("after losing worker {worker}, epochs {uncoded_after:?} sent no broadcast packets");
    }
    match (summary["complete"].as_bool(), lost_in) {
        (Some(true), Some(e)) => {
            eprintln!(
                "xtask: worker {worker} was killed as epoch {epoch} started; the master reported it lost in epoch {} and completed all {} epochs with the other workers",
                e["epoch"],
                epochs.len()
            );
            Ok(())
        }
        (Some(true), None) => bail!(
            "worker {worker} was killed but the master did not report it lost (the run may have finished first)"
        ),
        _ => bail!("the run did not complete after worker {worker} was killed"),
    }
}

/// Checks, from the master's summary, that worker `worker` was taken back in after its loss,
/// and that every epoch from then on ran with all `workers` and broadcast coded packets;
/// prints those epochs' packets against the uncoded count.
fn check_rejoin(out: &Path, worker: usize, workers: usize) -> anyhow::Result<()> {
    let path: PathBuf = out.join("summary.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let summary: serde_json::Value = serde_json::from_str(&text)?;
    let epochs = summary["epochs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let names = |e: &serde_json::Value, key: &str| {
        e[key].as_array().is_some_and(|l| l.iter().any(|x| x.as_u64() == Some(worker as u64)))
    };
    let Some(back) = epochs.iter().position(|e| names(e, "rejoined_workers")) else {
        bail!("worker {worker}'s new process was not taken back in before the run ended");
    };
    let field = |e: &serde_json::Value, key: &str| e[key].as_u64().unwrap_or(0);
    eprintln!(
        "xtask: worker {worker} rejoined before epoch {}; from then on:",
        field(&epochs[back], "epoch")
    );
    eprintln!("xtask:   epoch  workers  uncoded  transmissions  broadcast  unicast  sent/uncoded");
    for e in &epochs[back..] {
        let (bc, uc, unc) =
            (field(e, "broadcast_packets"), field(e, "unicast_packets"), field(e, "uncoded_transmissions"));
        eprintln!(
            "xtask:   {:>5}  {:>7}  {:>7}  {:>13}  {:>9}  {:>7}  {:>12.3}",
            field(e, "epoch"),
            field(e, "workers"),
            unc,
            field(e, "transmissions"),
            bc,
            uc,
            (bc + uc) as f64 / unc.max(1) as f64
        );
        if field(e, "workers") != workers as u64 || bc == 0 {
            bail!(
                "epoch {} after the rejoin ran with {} workers and {bc} broadcast packets",
                e["epoch"],
                e["workers"]
            );
        }
    }
    Ok(())
}
