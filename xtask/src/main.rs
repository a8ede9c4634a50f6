//! Project chores, run as `cargo xtask <task>`: the CI checks and the papers' experiments.
//! Nothing here needs a Makefile or shell glue.

use std::process::Command;

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
    /// Regenerate the papers' experiments into `results/` (CSV, SVG, results/README.md).
    /// Builds the `experiments` program in release mode and runs it; `--list` names them.
    Experiments {
        /// Experiments to run (all when none is named).
        names: Vec<String>,
        /// The small subset that finishes in minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Where to write results (default: results/ of the workspace).
        #[arg(long, value_name = "DIR")]
        out: Option<String>,
        /// List the experiments and exit.
        #[arg(long)]
        list: bool,
        /// A plugin library for the `plugins` experiment (repeatable; default: the example
        /// plugin examples/plugins/pairwise-xor, built in release mode first).
        #[arg(long = "plugin", value_name = "LIBRARY")]
        plugins: Vec<String>,
    },
    /// Build the MPI transport (cargo feature `mpi`; needs libopenmpi-dev, openmpi-bin and
    /// libclang-dev) and run, under `mpirun -np 4`, the coded-packet broadcast check and the
    /// transport conformance suite.
    MpiTest,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Ci => ci(),
        Task::Experiments { names, quick, out, list, mut plugins } => {
            let wants_plugins = names.is_empty() || names.iter().any(|n| n == "plugins");
            if plugins.is_empty() && wants_plugins && !list {
                plugins.push(build_example_plugin()?);
            }
            let mut args = vec!["run", "--release", "--quiet", "-p", "bench", "--bin", "experiments", "--"];
            args.extend(names.iter().map(String::as_str));
            if quick {
                args.push("--quick");
            }
            if list {
                args.push("--list");
            }
            if let Some(dir) = &out {
                args.extend(["--out", dir.as_str()]);
            }
            for plugin in &plugins {
                args.extend(["--plugin", plugin.as_str()]);
            }
            cargo(&args)
        }
        Task::MpiTest => mpi_test(),
    }
}

/// Builds the MPI examples and runs each under `mpirun -np 4`.
fn mpi_test() -> anyhow::Result<()> {
    cargo(&["build", "--quiet", "-p", "transport", "--features", "mpi", "--examples"])?;
    let root = workspace_root();
    let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), Into::into);
    // As root (CI), Open MPI wants explicit consent; 4 ranks may exceed the cores.
    let as_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    for example in ["mpi_coded_broadcast", "mpi_conformance"] {
        let program = target.join("debug").join("examples").join(example);
        let mut mpirun = Command::new("mpirun");
        if as_root {
            mpirun.args(["--allow-run-as-root", "--oversubscribe"]);
        }
        mpirun.args(["-np", "4"]).arg(&program).current_dir(&root);
        eprintln!("$ {mpirun:?}");
        let status =
            mpirun.status().context("cannot run mpirun (apt-get install openmpi-bin libopenmpi-dev)")?;
        if !status.success() {
            bail!("{example} under mpirun failed ({status})");
        }
    }
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

/// Builds the example plugin in release mode; returns its library's path (relative to the
/// workspace root unless `CARGO_TARGET_DIR` says otherwise).
fn build_example_plugin() -> anyhow::Result<String> {
    cargo(&["build", "--release", "--quiet", "-p", "pairwise-xor-plugin"])?;
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let file = format!("{}pairwise_xor{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    Ok(format!("{target}/release/{file}"))
}

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Into::into).unwrap_or_else(|| ".".into())
}

fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    cargo(&["test", "--workspace"])
}
