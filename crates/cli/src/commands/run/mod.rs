//! `ubershuffle run`: one training run of the epoch loop (`runtime`) over a transport:
//! threads of this process, `ubershuffle worker` processes over TCP, or MPI ranks.

#[cfg(feature = "mpi")]
mod mpi;
mod report;
mod settings;

use std::process::ExitCode;

use anyhow::bail;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process};
use ubershuffle_runtime::{Master, PreparedRun, RunReport};
use ubershuffle_transport::Transport;
use ubershuffle_transport::in_process::InProcessConfig;
use ubershuffle_transport::tcp::MasterListener;

use crate::cli::{RunArgs, TransportKind};
use report::Recorder;
use settings::Resolved;

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

/// What the master's side of a run holds: the runtime's parts, and what this command shows
/// and writes.
struct Prepared {
    run: PreparedRun,
    recorder: Recorder,
}

/// Builds the run's parts once (the runtime's [`ubershuffle_runtime::spec::CheckedSpec::prepare`]: the scheme, the
/// memory check, the data, the straggler model, a resumed checkpoint matched to the run), then
/// prepares `--out`.
fn prepare(r: &Resolved) -> anyhow::Result<Prepared> {
    let run = r.run.prepare().map_err(settings::prepare_failed)?;
    report::prepare_out(r)?;
    let earlier = run.resume.as_ref().map(|p| p.checkpoint().metrics.clone()).unwrap_or_default();
    let recorder = Recorder::new(r, &run.fingerprint, earlier);
    Ok(Prepared { run, recorder })
}

/// Runs the master over `t` (rank 0 of `workers + 1`), recording every epoch.
/// `newcomers`: the job for workers that join while the run goes on (TCP), if any may.
fn drive_master<T: Transport>(
    t: T,
    r: &Resolved,
    p: Prepared,
    newcomers: Option<ClusterJob>,
) -> anyhow::Result<ExitCode> {
    let Prepared { run, mut recorder } = p;
    let PreparedRun { planner, mut stragglers, data, resume, .. } = run;
    let report = Master::new(t, &r.run.config, planner.as_ref(), stragglers.as_mut(), &data)
        .map(|m| match newcomers {
            Some(job) => m.admitting(job),
            None => m,
        })
        .and_then(|m| match resume {
            Some(point) => m.resuming(point),
            None => Ok(m),
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
    let Prepared { run, mut recorder } = prepare(r)?;
    let PreparedRun { planner, mut stragglers, data, resume, .. } = run;
    let transport = InProcessConfig::default()
        .with_timeout(r.timeout)
        .with_broadcast(r.broadcast)
        .with_shaping(r.shaping);
    let run = InProcessRun::new(&r.run.config, planner.as_ref(), stragglers.as_mut(), &data)
        .with_transport(transport)
        .with_faults(r.kill.into_iter().map(|k| (k.worker, k.epoch)).collect())
        .with_resume(resume);
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
    let config = key
        .config()
        .with_timeout(r.timeout)
        .with_join_timeout(r.join_timeout)
        .with_broadcast(r.broadcast)
        .with_join_limits(Some(ubershuffle_runtime::join_limits()));
    let listener = MasterListener::bind(addr, config)?;
    let workers = r.run.config.workers;
    eprintln!("listening on {}, waiting for {workers} workers", listener.local_addr()?);
    let mut t = listener.accept_at_least(workers, r.min_workers, |refused| {
        eprintln!("warning: refused a connection from {}: {}", refused.from, refused.reason);
    })?;
    let joined: Vec<usize> = t.connected();
    if joined.len() == workers {
        eprintln!("all {workers} workers joined; running {} epochs", r.run.config.epochs);
    } else {
        eprintln!(
            "{} of {workers} workers joined within --join-timeout; running {} epochs with them (--min-workers {}); the others are lost before the first epoch",
            joined.len(),
            r.run.config.epochs,
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
