//! Project chores, run as `cargo xtask <task>`: the CI checks, the papers' experiments, a
//! cluster of processes, the MPI checks. Nothing here needs a Makefile or shell glue.

mod cluster;
mod netns;
mod seal_bench;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

/// Project chores.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// The checks CI runs: rustfmt, clippy with warnings denied, and the test suite.
    Ci,
    /// Run the papers' experiments (CSV, SVG, a README) into a folder of the run's own
    /// (target/experiments/quick or full) and print them beside the committed results/; with
    /// --update, regenerate the committed results/ instead. Builds the `experiments` program in
    /// release mode and runs it; `--list` names them.
    Experiments {
        /// Experiments to run (all when none is named).
        names: Vec<String>,
        /// The small subset that finishes in minutes on 2 cores (compared with results/; without
        /// it, the full run, compared with results/full/).
        #[arg(long)]
        quick: bool,
        /// Fail naming the first difference of each experiment's machine-independent columns
        /// from the committed results.
        #[arg(long)]
        check: bool,
        /// With --check (not --quick): re-run a sample of each full run (every cheap row, a
        /// stated subset of the expensive ones) and compare it with results/full/; check every
        /// committed full row against results/full/digests.toml and its CSV's invariants.
        #[arg(long, requires = "check", conflicts_with = "quick")]
        sample: bool,
        /// Where to write the run (default: experiments/quick or experiments/full in cargo's
        /// target folder); never the committed results (that is --update).
        #[arg(long, value_name = "DIR", conflicts_with = "update")]
        out: Option<PathBuf>,
        /// Regenerate the committed results (results/ or results/full/, results/headline.csv
        /// and README's headline table) with this machine's timings: the maintainers' act.
        #[arg(long, conflicts_with_all = ["check", "sample"])]
        update: bool,
        /// List the experiments and exit.
        #[arg(long)]
        list: bool,
        /// A plugin library for the `plugins` experiment (repeatable; default: the example
        /// plugin examples/plugins/pairwise-xor, built in release mode first).
        #[arg(long = "plugin", value_name = "LIBRARY")]
        plugins: Vec<PathBuf>,
    },
    /// Measure the cost model of the emulated clusters' computing on this machine (XOR, copies,
    /// checksums, planning, verifying, peeling, training; a minute or so) and write it to
    /// results/cost-model.toml, which the experiments' charged mode reads.
    Calibrate {
        /// Measure every priced kernel and planner again (alone, on one thread) and print
        /// charged/measured for each; fail when one is outside 0.67x-1.5x.
        #[arg(long)]
        check: bool,
        /// With --check: multiply the measured prices named NAME (xor_ns_per_byte,
        /// plan.ubershuffle, all, ...) by FACTOR, to see the check fail.
        #[arg(long, value_name = "NAME=FACTOR", requires = "check")]
        inject: Option<String>,
        /// With --check: also write the comparison to results/calibration-check.csv (for a
        /// quiet machine's check, which docs cite).
        #[arg(long, requires = "check", conflicts_with = "inject")]
        record: bool,
    },
    /// Run the sealed links' criterion bench with `ring` and with RustCrypto (a few minutes;
    /// a quiet machine) and write the medians, per GB and against `memcpy`, to
    /// results/seal.csv.
    SealBench,
    /// Build the MPI transport (cargo feature `mpi`; needs libopenmpi-dev, openmpi-bin and
    /// libclang-dev) and run, under `mpirun -np 4`, the coded-packet broadcast check and the
    /// transport conformance suite; then a short epoch loop under `mpirun -np 5`
    /// (`ubershuffle run --transport mpi`), checking its JSON.
    MpiTest,
    /// Build the release `ubershuffle` and run the epoch loop over TCP with the master and the
    /// workers as separate processes on 127.0.0.1; `--kill W@E` kills worker W's process with
    /// SIGKILL once epoch E has started and checks that the run goes on without it.
    Cluster(cluster::ClusterArgs),
    /// Linux, root: network namespaces with veth pairs and `tc` rate limits for a master and
    /// 2 to 8 workers; measures the TCP broadcast and a few epochs of the loop between real
    /// processes in them against the emulator's model at the same rate (results/netns.csv).
    Netns(netns::NetnsArgs),
    /// Linux, root: real PyTorch DDP jobs (gloo) between network namespaces shaped by `tc`, a
    /// store node and 2 to 8 training ranks (4 by default), one job per arm (store mode coded
    /// and uncoded, peer mode partial-local and local, a replicated data set): exposed data
    /// time, epoch time, bytes on every link, held-out accuracy against wall time, each store
    /// delivery's rounds replayed on the emulator and bounded by its busiest port
    /// (results/netns-train*.csv).
    NetnsTrain(netns::train::NetnsTrainArgs),
    /// Linux, root: DDP's gradient all-reduce while ShuffleGroup delivers the next epoch's
    /// records, between network namespaces shaped by `tc`: per arm (peer partial-local, peer
    /// global, store coded) with the plane idle, in flight, and yielding to the all-reduces
    /// (results/netns-gradients*.csv).
    NetnsGradients(netns::gradients::NetnsGradientsArgs),
    /// MosaicML Streaming and LitData beside ShuffleGroup's peer and store modes, every arm
    /// reading the same JPEGs from an S3 object store (moto) and training the same CNN under
    /// DDP between network namespaces shaped by `tc`, at the same storage per node: bytes from
    /// the object store, epoch and exposed time, storage, accuracy and mixing across nodes
    /// (results/netns-loaders*.csv).
    #[command(alias = "netns-peers")]
    NetnsLoaders(netns::loaders::NetnsLoadersArgs),
    /// Write again, from the committed netns summary CSVs, what the netns runs publish from
    /// them: the documents' goals tables and the netns rows of results/headline.csv with
    /// README's headline table (for a changed renderer or a new table; no namespaces, no root).
    NetnsPublish {
        /// Write nothing; fail naming each committed row or table that differs.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Ci => ci(),
        Task::Experiments { names, quick, check, sample, out, update, list, plugins } => {
            // Paths the user gives are resolved where the user stands, not in the workspace
            // (where cargo runs the experiments).
            let mut plugins =
                plugins.iter().map(|p| existing(p, "--plugin")).collect::<anyhow::Result<Vec<_>>>()?;
            let out = out.map(|dir| from_here(&dir)).transpose()?;
            let wants_plugins = !sample && (names.is_empty() || names.iter().any(|n| n == "plugins"));
            if plugins.is_empty() && wants_plugins && !list {
                plugins.push(build_example_plugin()?);
            }
            let mut args: Vec<String> =
                ["run", "--release", "--quiet", "-p", "ubershuffle-bench", "--bin", "experiments", "--"]
                    .map(String::from)
                    .to_vec();
            args.extend(names);
            let flags = [
                ("--quick", quick),
                ("--check", check),
                ("--sample", sample),
                ("--update", update),
                ("--list", list),
            ];
            for (flag, on) in flags {
                if on {
                    args.push(flag.into());
                }
            }
            if let Some(dir) = out {
                args.extend(["--out".into(), dir.display().to_string()]);
            }
            for plugin in plugins {
                args.extend(["--plugin".into(), plugin.display().to_string()]);
            }
            let run = cargo(&args.iter().map(String::as_str).collect::<Vec<_>>());
            // The netns rows of results/headline.csv come from runs CI cannot repeat (root, an
            // hour): --check holds them to what their committed summary CSVs give.
            let netns = if check { check_netns_published(&workspace_root()) } else { Ok(()) };
            run.and(netns)
        }
        Task::Calibrate { check, inject, record } => {
            let mut args: Vec<String> = [
                "run",
                "--release",
                "--quiet",
                "-p",
                "ubershuffle-bench",
                "--bin",
                "experiments",
                "--",
                "--calibrate",
            ]
            .map(String::from)
            .to_vec();
            if check {
                args.push("--check".into());
            }
            if let Some(inject) = inject {
                args.extend(["--inject".into(), inject]);
            }
            if record {
                args.push("--record".into());
            }
            cargo(&args.iter().map(String::as_str).collect::<Vec<_>>())
        }
        Task::MpiTest => mpi_test(),
        Task::SealBench => seal_bench::run(),
        Task::Cluster(args) => cluster::run(&args, &workspace_root(), &target_dir()),
        Task::Netns(args) => netns::run(&args, &workspace_root(), &target_dir()),
        Task::NetnsTrain(args) => netns::train::run(&args, &workspace_root(), &target_dir()),
        Task::NetnsGradients(args) => netns::gradients::run(&args, &workspace_root(), &target_dir()),
        Task::NetnsLoaders(args) => netns::loaders::run(&args, &workspace_root(), &target_dir()),
        Task::NetnsPublish { check: false } => {
            netns::publish::render_goal_tables(&workspace_root(), None)?;
            netns::publish::publish_committed_headlines(&workspace_root())
        }
        Task::NetnsPublish { check: true } => check_netns_published(&workspace_root()),
    }
}

/// Fails naming each netns row of results/headline.csv, and each goals table of the documents,
/// that its committed summary CSV does not give (`cargo test` checks the tables too:
/// crates/bench/tests/docs_goals.rs).
fn check_netns_published(root: &std::path::Path) -> anyhow::Result<()> {
    let mut differences = netns::publish::check_headlines(root)?;
    differences.extend(netns::publish::check_goal_tables(root)?);
    for d in &differences {
        eprintln!("error: netns: {d}");
    }
    if let Some(first) = differences.first() {
        bail!("{} netns figures differ from their summary CSVs; the first: {first}", differences.len());
    }
    eprintln!(
        "netns: every netns row of results/headline.csv and every goals table is what its summary CSV gives"
    );
    Ok(())
}

/// Where cargo builds (`CARGO_TARGET_DIR`, or target/ of the workspace).
fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR").map_or_else(|_| workspace_root().join("target"), Into::into)
}

/// `mpirun`, with consent to run as root and to oversubscribe the cores when running as root
/// (CI).
fn mpirun() -> Command {
    let as_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let mut mpirun = Command::new("mpirun");
    if as_root {
        mpirun.args(["--allow-run-as-root", "--oversubscribe"]);
    }
    mpirun.current_dir(workspace_root());
    mpirun
}

/// Builds the MPI examples and runs each under `mpirun -np 4`, then the epoch loop under
/// `mpirun -np 5`.
fn mpi_test() -> anyhow::Result<()> {
    cargo(&["build", "--quiet", "-p", "ubershuffle-transport", "--features", "mpi", "--examples"])?;
    cargo(&["build", "--quiet", "-p", "ubershuffle", "--features", "mpi", "--bin", "ubershuffle"])?;
    let target = target_dir();
    for example in ["mpi_coded_broadcast", "mpi_conformance"] {
        let program = target.join("debug").join("examples").join(example);
        let mut mpirun = mpirun();
        mpirun.args(["-np", "4"]).arg(&program);
        eprintln!("$ {mpirun:?}");
        let status =
            mpirun.status().context("cannot run mpirun (apt-get install openmpi-bin libopenmpi-dev)")?;
        if !status.success() {
            bail!("{example} under mpirun failed ({status})");
        }
    }
    let program = target.join("debug").join("ubershuffle");
    mpi_epoch_loop(&program)?;
    mpi_gradient_coding(&program)
}

/// The flags of the gradient-coded descent checked under mpirun: 4 workers, FRC with s = 2,
/// roles shuffled at random, worker 1 always late, the others never.
const CODED_RUN: &[&str] = &[
    "gradient-coding",
    "--run",
    "--json",
    "-n",
    "4",
    "-s",
    "2",
    "--code",
    "frc",
    "--shuffle",
    "random",
    "--iterations",
    "4",
    "--slow-workers",
    "1",
    "--p-slow-straggle",
    "1",
    "--p-active-straggle",
    "0",
    "--deadline",
    "0.5",
    "--seed",
    "3",
];

/// The JSON object `program` printed on stdout.
fn printed_json(stdout: &[u8]) -> anyhow::Result<serde_json::Value> {
    let stdout = String::from_utf8_lossy(stdout);
    let line = stdout.lines().find(|l| l.starts_with('{')).context("no JSON printed")?;
    serde_json::from_str(line).context("the printed JSON")
}

/// `ubershuffle gradient-coding --run --transport mpi` with 4 workers: the late worker's coded
/// gradient is dropped every iteration, the other three decode the full gradient, and the
/// numbers are those of the same run on threads.
fn mpi_gradient_coding(program: &std::path::Path) -> anyhow::Result<()> {
    let mut mpirun = mpirun();
    mpirun.args(["-np", "5"]).arg(program).args(CODED_RUN).args(["--transport", "mpi"]);
    eprintln!("$ {mpirun:?}");
    let out = mpirun.stderr(Stdio::inherit()).output().context("cannot run mpirun")?;
    if !out.status.success() {
        bail!("gradient-coded descent under mpirun failed ({})", out.status);
    }
    let under_mpi = printed_json(&out.stdout)?;
    let threads = Command::new(program).args(CODED_RUN).current_dir(workspace_root()).output()?;
    let on_threads = printed_json(&threads.stdout)?;
    let column = |v: &serde_json::Value, key: &str| -> Vec<serde_json::Value> {
        v["iterations"].as_array().map(|a| a.iter().map(|i| i[key].clone()).collect()).unwrap_or_default()
    };
    let heard = column(&under_mpi, "updated_workers");
    let dropped = heard.len() == 4 && heard.iter().all(|w| *w == serde_json::json!([0, 2, 3]));
    let exact = column(&under_mpi, "decoding_error").iter().all(|e| e.as_f64() == Some(0.0));
    let same =
        ["held_out_loss", "updated_workers"].iter().all(|k| column(&under_mpi, k) == column(&on_threads, k))
            && under_mpi["model"] == on_threads["model"];
    if !dropped || !exact || !same || under_mpi["transport"] != "mpi" {
        bail!("gradient-coded descent under mpirun gave unexpected results: {under_mpi}");
    }
    eprintln!(
        "gradient coding under mpirun: 4 iterations, the late worker dropped, exact decoding, held-out loss {} -> {} as on threads",
        under_mpi["initial_loss"], under_mpi["final_loss"]
    );
    Ok(())
}

/// `ubershuffle run --transport mpi` with 4 workers for 3 coded epochs: every epoch must
/// complete with every worker's update, broadcasts must carry coded packets, and the loss must
/// fall.
fn mpi_epoch_loop(program: &std::path::Path) -> anyhow::Result<()> {
    let mut mpirun = mpirun();
    mpirun.args(["-np", "5"]).arg(program).args([
        "run",
        "--transport",
        "mpi",
        "--scheme",
        "coded",
        "--epochs",
        "3",
        "--points",
        "2000",
        "--json",
    ]);
    eprintln!("$ {mpirun:?}");
    let out = mpirun.stderr(Stdio::inherit()).output().context("cannot run mpirun")?;
    if !out.status.success() {
        bail!("the epoch loop under mpirun failed ({})", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with('{')).context("the master printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(line).context("the master's JSON")?;
    let epochs = v["epochs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let all_updates =
        epochs.iter().all(|e| e["updates"] == 4 && e["lost_workers"].as_array().is_some_and(Vec::is_empty));
    let broadcasts = epochs.iter().all(|e| e["broadcast_packets"].as_u64() > Some(0));
    let (first, last) = (v["totals"]["initial_loss"].as_f64(), v["totals"]["final_loss"].as_f64());
    let fell = matches!((first, last), (Some(a), Some(b)) if b < a);
    if epochs.len() != 3 || !all_updates || !broadcasts || !fell || v["complete"] != true {
        bail!("the epoch loop under mpirun gave unexpected results: {line}");
    }
    eprintln!(
        "epoch loop under mpirun: 3 epochs, 4 workers, every update in, coded broadcasts, loss {:.4} -> {:.4}",
        first.unwrap_or_default(),
        last.unwrap_or_default()
    );
    Ok(())
}

/// Runs `cargo` with `args` from the workspace root, failing if it fails.
fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Builds the example plugin in release mode; returns its library's path.
fn build_example_plugin() -> anyhow::Result<PathBuf> {
    cargo(&["build", "--release", "--quiet", "-p", "pairwise-xor-plugin"])?;
    let file = format!("{}pairwise_xor{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    Ok(target_dir().join("release").join(file))
}

/// `path` made absolute against the current directory.
fn from_here(path: &std::path::Path) -> anyhow::Result<PathBuf> {
    Ok(std::env::current_dir().context("cannot read the current directory")?.join(path))
}

/// `path` made absolute against the current directory; an error naming `flag` when it does not
/// exist.
fn existing(path: &std::path::Path, flag: &str) -> anyhow::Result<PathBuf> {
    let absolute = from_here(path)?;
    if !absolute.exists() {
        bail!("{flag} {}: no such file (paths are taken from the current directory)", path.display());
    }
    Ok(absolute)
}

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Into::into).unwrap_or_else(|| ".".into())
}

fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    cargo(&["test", "--workspace"])
}
