//! `ubershuffle run`: one training run of the epoch loop (`runtime`) over a transport:
//! threads of this process, `ubershuffle worker` processes over TCP, or MPI ranks.

#[cfg(feature = "mpi")]
mod mpi;
mod report;
mod settings;
pub(crate) mod specs;

use std::process::ExitCode;

use anyhow::{Context, bail};
use ubershuffle_core::limits::{Limits, instance_bytes};
use ubershuffle_core::{PlannerOptions, ShufflePlanner};
use ubershuffle_learners::StragglerModel;
use ubershuffle_planners::planner_by_name;
use ubershuffle_plugin_host::PluginLibrary;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process};
use ubershuffle_runtime::{Master, RunData, RunReport};
use ubershuffle_transport::Transport;
use ubershuffle_transport::in_process::InProcessConfig;
use ubershuffle_transport::tcp::{MasterListener, TcpConfig};

use crate::cli::{RunArgs, TransportKind};
use report::Recorder;
use settings::{Resolved, SchemeChoice};

/// Runs the command.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let settings = &args.settings;
    if settings.transport == TransportKind::Mpi {
        return run_mpi(settings);
    }
    let r = settings.resolve(None)?;
    match r.transport {
        TransportKind::Inproc => in_process(&r),
        TransportKind::Tcp => tcp_master(&r),
        TransportKind::Mpi => bail!("--transport mpi: internal error, resolved outside mpirun"),
    }
}

#[cfg(feature = "mpi")]
fn run_mpi(settings: &crate::cli::RunSettings) -> anyhow::Result<ExitCode> {
    mpi::run(settings)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &crate::cli::RunSettings) -> anyhow::Result<ExitCode> {
    bail!(
        "--transport mpi needs an ubershuffle built with the mpi feature \
         (cargo build --release -p ubershuffle --features mpi; Open MPI installed) and started by mpirun"
    )
}

/// What the master's side of a run holds.
struct Prepared {
    data: RunData,
    planner: Box<dyn ShufflePlanner>,
    stragglers: Box<dyn StragglerModel>,
    recorder: Recorder,
}

/// Generates the data, loads the scheme, builds the straggler model, prepares `--out`.
fn prepare(r: &Resolved) -> anyhow::Result<Prepared> {
    let planner: Box<dyn ShufflePlanner> = match &r.scheme {
        SchemeChoice::Builtin(name) => planner_by_name(name, &PlannerOptions::default())?,
        SchemeChoice::Plugin(path, name) => Box::new(PluginLibrary::load(path)?.planner(name.as_deref())?),
    };
    check_memory(r)?;
    let earlier = report::prepare_out(r)?;
    let data = r.data.build(r.config.seed).context("generating the data")?;
    let stragglers = r.stragglers.build(r.config.workers, r.config.seed)?;
    Ok(Prepared { data, planner, stragglers, recorder: Recorder::new(r, earlier) })
}

/// Refuses a run whose data would pass the memory cap ([`Limits`]), before generating it: the
/// records (generated, split and encoded: about three copies), the workers' caches (in-process,
/// all of them live in this process) and one epoch's instance.
fn check_memory(r: &Resolved) -> anyhow::Result<()> {
    let limits = Limits::from_env()?;
    let width = r.config.learner.build()?.record_width() as u64;
    let (q, held) = (r.data.training_points() as u64, r.data.held_out() as u64);
    let (n, s) = (r.config.workers as u64, r.config.cache_capacity as u64);
    let records = q.saturating_add(held).saturating_mul(width).saturating_mul(3);
    let caches = n.saturating_mul(s).saturating_mul(width);
    let instance = instance_bytes(r.config.workers, r.data.training_points(), r.config.cache_capacity);
    let what = format!("a run of {q} points of {width} bytes on {n} workers");
    Ok(limits.check_memory(&what, records.saturating_add(caches).saturating_add(instance))?)
}

/// Runs the master over `t` (rank 0 of `workers + 1`), recording every epoch.
/// `newcomers`: the job for workers that join while the run goes on (TCP), if any may.
fn drive_master<T: Transport>(
    t: T,
    r: &Resolved,
    p: Prepared,
    newcomers: Option<ClusterJob>,
) -> anyhow::Result<ExitCode> {
    let Prepared { data, planner, mut stragglers, mut recorder } = p;
    let report = Master::new(t, &r.config, planner.as_ref(), stragglers.as_mut(), &data)
        .map(|m| match newcomers {
            Some(job) => m.admitting(job),
            None => m,
        })
        .and_then(|m| m.run(&mut |metrics| recorder.on_epoch(metrics)));
    finish(recorder, report)
}

fn finish(
    recorder: Recorder,
    report: Result<RunReport, ubershuffle_runtime::RuntimeError>,
) -> anyhow::Result<ExitCode> {
    match report {
        Ok(report) => recorder.finish(&report),
        Err(e) => {
            recorder.abandon();
            Err(e.into())
        }
    }
}

/// Master and workers on threads of this process.
fn in_process(r: &Resolved) -> anyhow::Result<ExitCode> {
    let Prepared { data, planner, mut stragglers, mut recorder } = prepare(r)?;
    let transport = InProcessConfig::default()
        .with_timeout(r.timeout)
        .with_broadcast(r.broadcast)
        .with_shaping(r.shaping);
    let run = InProcessRun::new(&r.config, planner.as_ref(), stragglers.as_mut(), &data)
        .with_transport(transport)
        .with_faults(r.kill.into_iter().map(|k| (k.worker, k.epoch)).collect());
    let result = run_in_process(run, &mut |metrics| recorder.on_epoch(metrics));
    let result = result.map(|(report, workers)| {
        for (w, outcome) in workers.iter().enumerate() {
            if let Err(e) = outcome {
                eprintln!("warning: worker {w}: {e}");
            }
        }
        report
    });
    finish(recorder, result)
}

/// The master of a TCP cluster: admits `--workers` `ubershuffle worker` processes (or, with
/// `--min-workers`, as many as joined by `--join-timeout`), tells them the job, runs the epoch
/// loop.
fn tcp_master(r: &Resolved) -> anyhow::Result<ExitCode> {
    let Some((addr, key)) = &r.listen else { bail!("--transport tcp needs --listen ADDR") };
    let prepared = prepare(r)?;
    let config = TcpConfig {
        timeout: r.timeout,
        join_timeout: r.join_timeout,
        broadcast: r.broadcast,
        ..key.config()
    };
    let listener = MasterListener::bind(addr, config)?;
    let workers = r.config.workers;
    eprintln!("listening on {}, waiting for {workers} workers", listener.local_addr()?);
    let mut t = listener.accept_at_least(workers, r.min_workers, |refused| {
        eprintln!("warning: refused a connection from {}: {}", refused.from, refused.reason);
    })?;
    let joined: Vec<usize> = t.connected();
    if joined.len() == workers {
        eprintln!("all {workers} workers joined; running {} epochs", r.config.epochs);
    } else {
        eprintln!(
            "{} of {workers} workers joined within --join-timeout; running {} epochs with them (--min-workers {}); the others are lost before the first epoch",
            joined.len(),
            r.config.epochs,
            r.min_workers
        );
    }
    for rank in joined {
        let exit_at_epoch = r.kill.filter(|k| k.worker + 1 == rank).map(|k| k.epoch);
        // A worker gone already is found lost, and reported, when the run starts.
        if let Err(e) = (ClusterJob::EpochLoop { timeout: r.timeout, exit_at_epoch }).send(&mut t, rank) {
            eprintln!("warning: sending the job to rank {rank}: {e}");
        }
    }
    // A worker that joins later (a lost one's process started again, or a spare) takes a
    // lost worker's place at the next epoch boundary.
    let newcomers = ClusterJob::EpochLoop { timeout: r.timeout, exit_at_epoch: None };
    drive_master(t, r, prepared, Some(newcomers))
}
