//! `ubershuffle gradient-coding --run`: gradient-coded descent executed on the master/worker
//! runtime over threads, `ubershuffle worker` processes (TCP) or MPI ranks. The workers are the
//! runtime's: over TCP they are plain `ubershuffle worker` processes, which learn the learner
//! (the code, the shuffle, the step) from the master's job.

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{PlannerOptions, ShufflePlanner};
use ubershuffle_gradient_codes::RoleShuffle;
use ubershuffle_learners::gradient_coding::glm::GlmLoss;
use ubershuffle_learners::gradient_coding::learner::{CodedDescent, CodedDescentParams};
use ubershuffle_learners::straggler::{HeterogeneousParams, HeterogeneousStragglers};
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::gradient_coding::{CodedJob, coded_job, decoding_errors};
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process_from};
use ubershuffle_runtime::{Master, RunReport};
use ubershuffle_transport::Transport;
use ubershuffle_transport::in_process::InProcessConfig;
use ubershuffle_transport::tcp::MasterListener;

use super::master::seconds;
use crate::cli::{GradientCodingArgs, TransportKind};
use crate::output::{print_json, print_line};

/// Gradient steps unless `--iterations` says otherwise.
const DEFAULT_STEPS: usize = 100;
/// The seed stream the slow workers are drawn from.
const STREAM_SLOW: u64 = 30;

/// What the master's side holds.
struct Prepared {
    job: CodedJob,
    planner: Box<dyn ShufflePlanner>,
    stragglers: HeterogeneousStragglers,
}

/// Runs the command.
pub fn run(args: &GradientCodingArgs) -> anyhow::Result<ExitCode> {
    if args.execute.transport == TransportKind::Mpi {
        return run_mpi(args);
    }
    let prepared = prepare(args)?;
    let learner = prepared.job.learner.clone();
    let report = match args.execute.transport {
        TransportKind::Tcp => tcp_master(args, prepared)?,
        _ => in_process(args, prepared)?,
    };
    print_report(args, &learner, &report)
}

/// The job, the scheme and the straggler model of `args` (every rank of an MPI job builds
/// them alike, so that a bad flag fails everywhere).
fn prepare(args: &GradientCodingArgs) -> anyhow::Result<Prepared> {
    let e = &args.execute;
    let (train, held) = e.task.prepare(e.held_out, args.seed).context("preparing the data")?;
    let loss = if e.task.is_classification() { GlmLoss::Logistic } else { GlmLoss::LeastSquares };
    let step = e.step_size.unwrap_or(if loss == GlmLoss::Logistic { 4.0 } else { 0.3 });
    let steps = args.iterations.unwrap_or(DEFAULT_STEPS);
    let n = args.workers;
    let params =
        CodedDescentParams::new(train.features(), loss, args.code, (n, args.replication), step, train.len())
            .with_shuffle(args.shuffle)
            .with_seed(args.seed);
    let deadline = seconds("--deadline", e.deadline)?;
    let job = coded_job(params, steps, deadline, &train.to_records()?, &held.to_records()?)?;
    let planner = planner_by_name(&e.scheme, &PlannerOptions::default())?;
    let model = HeterogeneousParams::new(args.p_slow, args.p_slow_straggle, args.p_active_straggle);
    let stragglers = match &e.slow_workers {
        Some(slow) => HeterogeneousStragglers::with_slow_workers(n, slow, model)?,
        None => HeterogeneousStragglers::draw(n, model, &mut seeded_stream(args.seed, STREAM_SLOW))?,
    };
    Ok(Prepared { job, planner, stragglers })
}

/// Master and workers on threads of this process.
fn in_process(args: &GradientCodingArgs, p: Prepared) -> anyhow::Result<RunReport> {
    let Prepared { job, planner, mut stragglers } = p;
    let transport = InProcessConfig::default().with_timeout(seconds("--timeout", args.execute.timeout)?);
    let run = InProcessRun::new(&job.config, planner.as_ref(), &mut stragglers, &job.data)
        .with_transport(transport);
    let (report, workers) = run_in_process_from(run, Some(job.start.clone()), &mut |_| {})?;
    for (w, outcome) in workers.iter().enumerate() {
        if let Err(e) = outcome {
            eprintln!("warning: worker {w}: {e}");
        }
    }
    Ok(report)
}

/// The master of a TCP cluster of `ubershuffle worker` processes.
fn tcp_master(args: &GradientCodingArgs, p: Prepared) -> anyhow::Result<RunReport> {
    let e = &args.execute;
    let Some(addr) = &e.listen else { bail!("--transport tcp needs --listen ADDR") };
    let timeout = seconds("--timeout", e.timeout)?;
    let config = e
        .token
        .require()?
        .config()
        .with_timeout(timeout)
        .with_join_timeout(seconds("--join-timeout", e.join_timeout)?);
    let listener = MasterListener::bind(addr, config)?;
    let workers = args.workers;
    eprintln!("listening on {}, waiting for {workers} workers", listener.local_addr()?);
    let mut t = listener.accept_at_least(workers, workers, |refused| {
        eprintln!("warning: refused a connection from {}: {}", refused.from, refused.reason);
    })?;
    for rank in 1..=workers {
        (ClusterJob::EpochLoop { timeout, exit_at_epoch: None })
            .send(&mut t, rank)
            .with_context(|| format!("sending the job to rank {rank}"))?;
    }
    drive_master(t, p)
}

/// Runs the master over `t` (rank 0 of `workers + 1`) from the roles' starting blocks.
fn drive_master<T: Transport>(t: T, p: Prepared) -> anyhow::Result<RunReport> {
    let Prepared { job, planner, mut stragglers } = p;
    let master = Master::new(t, &job.config, planner.as_ref(), &mut stragglers, &job.data)?;
    Ok(master.with_start(job.start.clone())?.run(&mut |_| {})?)
}

#[cfg(feature = "mpi")]
fn run_mpi(args: &GradientCodingArgs) -> anyhow::Result<ExitCode> {
    use ::mpi::topology::Communicator;
    use ubershuffle_runtime::{WorkerOptions, run_worker};
    use ubershuffle_transport::mpi::MpiTransport;

    let Some(universe) = ::mpi::initialize() else { bail!("MPI could not be initialised") };
    let mut t = MpiTransport::new(universe.world());
    if t.size() != args.workers + 1 {
        bail!(
            "--transport mpi: {} workers need mpirun -np {} (got {} ranks)",
            args.workers,
            args.workers + 1,
            t.size()
        );
    }
    t.set_timeout(seconds("--timeout", args.execute.timeout)?);
    let prepared = prepare(args)?;
    let rank = t.rank();
    if rank > 0 {
        run_worker(t, &WorkerOptions::default()).with_context(|| format!("rank {rank}"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let learner = prepared.job.learner.clone();
    match drive_master(t, prepared) {
        Ok(report) => print_report(args, &learner, &report),
        Err(e) => {
            // The workers would wait for orders that never come: end the whole job.
            eprintln!("error: {}", crate::output::one_line(&e));
            universe.world().abort(1);
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &GradientCodingArgs) -> anyhow::Result<ExitCode> {
    bail!(
        "--transport mpi needs an ubershuffle built with the mpi feature \
         (cargo build --release -p ubershuffle --features mpi; Open MPI installed) and started by mpirun"
    )
}

/// Prints each iteration's held-out loss, decoding error and updates, or one JSON object.
fn print_report(
    args: &GradientCodingArgs,
    learner: &CodedDescent,
    report: &RunReport,
) -> anyhow::Result<ExitCode> {
    let errors = decoding_errors(learner, &report.epochs);
    let final_loss = report.epochs.last().map_or(report.initial_loss, |m| m.loss);
    if args.json {
        let iterations: Vec<_> = report
            .epochs
            .iter()
            .zip(&errors)
            .map(|(m, error)| {
                json!({"iteration": m.epoch, "held_out_loss": m.loss, "decoding_error": error,
                       "updated_workers": m.updated_workers, "stragglers": m.stragglers,
                       "seconds": m.epoch_seconds})
            })
            .collect();
        print_json(&json!({
            "task": args.execute.task.name(), "code": args.code.name(), "workers": args.workers,
            "replication": learner.code().replication(), "shuffle": args.shuffle.name(),
            "transport": format!("{:?}", args.execute.transport).to_lowercase(),
            "initial_loss": report.initial_loss, "final_loss": final_loss,
            "model": report.model.params, "lost_workers": report.lost_workers, "iterations": iterations,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_line(&format!(
        "{:>9} {:>14} {:>14} {:>8} {:>10}",
        "iteration", "held-out loss", "decoding err", "updates", "stragglers"
    ))?;
    print_line(&format!("{:>9} {:>14.6} {:>14} {:>8} {:>10}", 0, report.initial_loss, "-", "-", "-"))?;
    for (m, error) in report.epochs.iter().zip(&errors) {
        print_line(&format!(
            "{:>9} {:>14.6} {:>14.4} {:>8} {:>10}",
            m.epoch, m.loss, error, m.updates, m.stragglers
        ))?;
    }
    let shuffled = if args.shuffle == RoleShuffle::None { "roles fixed" } else { "roles shuffled" };
    print_line(&format!(
        "{} on {} workers (s = {}, {shuffled}): held-out loss {:.6} -> {final_loss:.6}",
        args.code.name(),
        args.workers,
        learner.code().replication(),
        report.initial_loss
    ))?;
    Ok(ExitCode::SUCCESS)
}
