//! `cargo xtask netns`: a kernel-shaped ground truth for the emulator. It builds a small
//! cluster of network namespaces (a switch, the master, 2 to 8 workers; see [`topology`]),
//! shapes every node's send and receive port with `tc` at one rate, runs real `ubershuffle`
//! processes in them over TCP (the broadcast of `ubershuffle master`, then a few epochs of
//! `ubershuffle run --transport tcp` per scheme), runs the same work on the emulator at the
//! same rate ([`model`]), and writes measured against modelled seconds per phase to
//! results/netns.csv. Linux and root only; every namespace is removed afterwards, also on
//! failure and on Ctrl-C.

mod compare;
mod goal;
pub mod gradients;
mod host;
pub mod loaders;
mod measure;
mod model;
pub mod publish;
mod ranks;
mod replay;
mod rounds;
mod topology;
pub mod train;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use ubershuffle_transport::BroadcastMethod;

use compare::{Row, Setting};
use measure::{BroadcastJob, EpochJob};
use topology::{Qdisc, Topology};

/// Flags of `cargo xtask netns`.
#[derive(Debug, Args)]
#[command(after_help = "Needs Linux, root, `ip` and `tc` (iproute2). Makes namespaces ubsh-nn-<pid>-* \
with addresses in 10.213.0.0/24 that exist only inside them, and removes them at the end (also on \
failure and Ctrl-C; namespaces of an earlier run that was killed are removed at the start).\n\n\
Example:\n  cargo xtask netns --workers 8 --mbit 100 --qdisc htb")]
pub struct NetnsArgs {
    /// Worker nodes, 2 to 8, each in a namespace of its own (besides the master's).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Rate of every node's send port and receive port, in Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    mbit: f64,
    /// The qdisc that shapes the ports.
    #[arg(long, value_enum, default_value_t = Qdisc::Tbf)]
    qdisc: Qdisc,
    /// MTU of every link, 1280 to 9000: jumbo frames by default, so that the 66 bytes of
    /// Ethernet, IP and TCP headers per frame (which the emulator's message-level model does
    /// not count) are 0.7 % of a full frame; 1500 (standard Ethernet) makes them 4.6 %.
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
    /// Cap the TCP send buffers of the master's namespace at this many bytes (at least
    /// 16384), so that a send returns about when its bytes have left the port, as in the
    /// emulator's model [default: the kernel's, where a send returns once its bytes are
    /// buffered].
    #[arg(long, value_name = "BYTES")]
    master_send_buffer: Option<u32>,
    /// Bytes per broadcast (`ubershuffle master`, pseudo-broadcast and plain).
    #[arg(long, default_value_t = 4 << 20)]
    bytes: u64,
    /// Broadcasts per method (the first, over fresh connections, is slower).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// A scheme of the epoch loop (repeatable) [default: uncoded and coded].
    #[arg(long = "scheme", value_name = "NAME")]
    schemes: Vec<String>,
    /// Epochs of the loop per scheme.
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// Training points of the loop (linear regression).
    #[arg(long, default_value_t = 8000)]
    points: usize,
    /// Features per point (records of 8 (features + 1) bytes).
    #[arg(long, default_value_t = 255)]
    features: usize,
    /// Storage ratio of the loop: each worker caches floor(alpha * points) points (at least
    /// its batch, points / workers). The run's own default, 2 / workers, would make every
    /// worker cache everything at 2 workers, leaving nothing to ship.
    #[arg(long, default_value_t = 0.5)]
    alpha: f64,
    /// Seed of the data, the plans and the payloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The CSV to write [default: results/netns.csv of the workspace].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only check that this machine can run it (Linux, root, ip, tc, a namespace can be made
    /// and shaped): nothing on success, one line saying why not and a failure otherwise.
    #[arg(long)]
    check_host: bool,
}

/// What a run does: the flags, checked.
struct NetnsRun {
    topology: Topology,
    broadcasts: Vec<BroadcastJob>,
    loops: Vec<EpochJob>,
    out: PathBuf,
}

impl NetnsArgs {
    /// The flags checked once, into what the run does.
    fn check(&self, root: &Path) -> anyhow::Result<NetnsRun> {
        let topology = Topology::checked("--workers", self.workers, self.mbit, self.qdisc, self.mtu)?;
        if self.master_send_buffer.is_some_and(|b| b < 16384) {
            bail!("--master-send-buffer: use at least 16384 bytes");
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            bail!("--alpha {}: use a storage ratio in (0, 1]", self.alpha);
        }
        if self.rounds == 0 || self.epochs == 0 || self.bytes == 0 || self.points == 0 || self.features == 0 {
            bail!("--rounds, --epochs, --bytes, --points and --features must be at least 1");
        }
        if self.bytes > 1 << 30 {
            bail!("--bytes {}: at most 1 GiB", self.bytes);
        }
        let topology = Topology { master_send_buffer: self.master_send_buffer, ..topology };
        let broadcasts = [BroadcastMethod::PseudoBroadcast, BroadcastMethod::Plain]
            .map(|method| BroadcastJob { bytes: self.bytes, rounds: self.rounds, method, seed: self.seed })
            .to_vec();
        let schemes = if self.schemes.is_empty() {
            vec!["uncoded".into(), "coded".into()]
        } else {
            self.schemes.clone()
        };
        let loops = schemes
            .into_iter()
            .map(|scheme| EpochJob {
                scheme,
                epochs: self.epochs,
                points: self.points,
                features: self.features,
                alpha: self.alpha,
                seed: self.seed,
            })
            .collect();
        let out = match &self.out {
            Some(path) => crate::from_here(path)?,
            None => root.join("results").join("netns.csv"),
        };
        Ok(NetnsRun { topology, broadcasts, loops, out })
    }
}

/// What the namespaces measured, in the plan's order.
struct Measured {
    /// Each broadcast job's seconds per round.
    broadcasts: Vec<Vec<f64>>,
    /// Each epoch loop's epochs.
    loops: Vec<Vec<ubershuffle_runtime::EpochMetrics>>,
}

/// Runs `cargo xtask netns`.
pub fn run(args: &NetnsArgs, root: &Path, target: &Path) -> anyhow::Result<()> {
    let plan = args.check(root)?;
    if let Some(why) = host::unmet_requirement() {
        bail!("{why}");
    }
    host::remove_stale()?;
    if args.check_host {
        return probe(&plan.topology);
    }
    crate::cargo(&["build", "--release", "--quiet", "-p", "ubershuffle", "--bin", "ubershuffle"])?;
    let exe = target.join("release").join("ubershuffle");
    let t = &plan.topology;
    let setting = Setting {
        workers: t.workers,
        mbit: t.mbit,
        qdisc: t.qdisc.name(),
        mtu: t.mtu,
        master_send_buffer: t.master_send_buffer,
    };

    let Measured { broadcasts, loops } = measure(&plan, &exe)?;
    eprintln!("xtask: namespaces removed; running the same work on the emulator at {} Mbit/s", setting.mbit);
    let mut rows: Vec<Row> = Vec::new();
    for (job, measured) in plan.broadcasts.iter().zip(&broadcasts) {
        let modelled = model::broadcast(setting.workers, setting.mbit, job)?;
        rows.extend(compare::broadcast_rows(&setting, job, measured, &modelled)?);
    }
    for (job, measured) in plan.loops.iter().zip(&loops) {
        let modelled = model::epochs(&exe, setting.workers, setting.mbit, job)?;
        rows.extend(compare::epoch_rows(&setting, job, measured, &modelled)?);
    }
    write_csv(&plan.out, &rows)?;
    print_summary(&rows, &setting);
    let shown = plan.out.strip_prefix(root).unwrap_or(&plan.out).display().to_string();
    eprintln!("xtask: wrote {shown}");
    Ok(())
}

/// Makes the network, measures every broadcast and every epoch loop in it, and removes it
/// (the guard also removes it on an error or a panic, its handler on Ctrl-C).
fn measure(plan: &NetnsRun, exe: &Path) -> anyhow::Result<Measured> {
    let topology = &plan.topology;
    let _guard = host::build_network(topology, "master", "workers")?;
    let broadcasts = plan
        .broadcasts
        .iter()
        .map(|job| measure::broadcast(topology, exe, job))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let loops = plan
        .loops
        .iter()
        .map(|job| measure::epochs(topology, exe, job))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Measured { broadcasts, loops })
}

/// Makes one namespace, shapes its loopback and removes it: proof that the kernel lets us.
pub(super) fn probe(topology: &Topology) -> anyhow::Result<()> {
    let _guard = host::NetworkGuard::arm(topology.owner)?;
    let ns = format!("{}probe", topology.prefix());
    host::run(&["ip", "netns", "add", &ns].map(String::from).to_vec())
        .context("cannot make a network namespace")?;
    for command in topology.shaping_commands(&ns, "lo") {
        host::run(&command).with_context(|| format!("cannot shape a link with {}", topology.qdisc.name()))?;
    }
    Ok(())
}

/// `out` with its `.csv` replaced by `tail` (the side files of an experiment's CSV).
fn beside(out: &Path, tail: &str) -> PathBuf {
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "results".into());
    out.with_file_name(format!("{stem}{tail}"))
}

/// Writes the rows with the csv crate, atomically ([`ubershuffle_runtime::files`]).
fn write_csv<T: serde::Serialize>(path: &Path, rows: &[T]) -> anyhow::Result<()> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row)?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(ubershuffle_runtime::write_atomically(path, &bytes)?)
}

/// One line per experiment, name and phase: the medians and whether the goal is met.
fn print_summary(rows: &[Row], setting: &Setting) {
    let send_buffer =
        setting.master_send_buffer.map(|b| format!(", master send buffer {b} B")).unwrap_or_default();
    eprintln!(
        "netns: measured (TCP between namespaces, {} at {} Mbit/s, MTU {}, {} workers{send_buffer}) against the emulator's model; medians over rounds:",
        setting.qdisc, setting.mbit, setting.mtu, setting.workers
    );
    for m in compare::medians(rows) {
        let verdict = match (compare::goal_applies(m.phase), compare::within_goal(m.ratio)) {
            (false, _) => "",
            (true, true) => "  within the 10 % goal",
            (true, false) => "  OUTSIDE the 10 % goal",
        };
        eprintln!(
            "  {:<10} {:<16} {:<9} measured {:>8.4} s  model {:>8.4} s  ratio {:.3} ({} samples){verdict}",
            m.experiment, m.name, m.phase, m.measured_s, m.model_s, m.ratio, m.samples
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: NetnsArgs,
    }

    fn parse(flags: &[&str]) -> anyhow::Result<NetnsRun> {
        let cli = Cli::try_parse_from(std::iter::once("netns").chain(flags.iter().copied()))?;
        cli.args.check(Path::new("/ws"))
    }

    #[test]
    fn defaults_make_four_workers_at_100_mbit_with_both_broadcasts_and_two_schemes() {
        let plan = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((plan.topology.workers, plan.topology.mbit, plan.topology.qdisc), (4, 100.0, Qdisc::Tbf));
        assert_eq!(plan.broadcasts.len(), 2);
        let schemes: Vec<&str> = plan.loops.iter().map(|j| j.scheme.as_str()).collect();
        assert_eq!(schemes, ["uncoded", "coded"]);
        assert_eq!(plan.out, Path::new("/ws/results/netns.csv"));
        assert_eq!(plan.topology.owner, std::process::id());
    }

    #[test]
    fn flags_are_checked_with_one_line_errors() {
        let plan = parse(&["--workers", "8", "--mbit", "250", "--qdisc", "htb", "--scheme", "ubershuffle"]);
        let plan = plan.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((plan.topology.workers, plan.topology.qdisc, plan.loops.len()), (8, Qdisc::Htb, 1));
        for (flags, wanted) in [
            (&["--workers", "9"][..], "--workers 9: use 2 to 8"),
            (&["--workers", "1"][..], "--workers 1: use 2 to 8"),
            (&["--mbit", "0"][..], "--mbit 0: use a rate above 0"),
            (&["--mbit", "NaN"][..], "--mbit NaN"),
            (
                &["--epochs", "0"][..],
                "--rounds, --epochs, --bytes, --points and --features must be at least 1",
            ),
            (&["--mtu", "100"][..], "--mtu 100: use 1280 to 9000"),
            (&["--alpha", "1.5"][..], "--alpha 1.5: use a storage ratio in (0, 1]"),
            (&["--master-send-buffer", "100"][..], "--master-send-buffer: use at least 16384 bytes"),
        ] {
            let err = parse(flags).map(|_| ()).unwrap_err().to_string();
            assert!(err.starts_with(wanted) && !err.contains('\n'), "{flags:?}: {err}");
        }
        assert!(parse(&["--qdisc", "fq"]).is_err());
    }
}
