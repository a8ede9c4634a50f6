//! `ubershuffle worker`: join the master's TCP cluster and run the job it gives: the epoch
//! loop (`ubershuffle run --transport tcp`) or the broadcast demo (`ubershuffle master`).

use std::process::ExitCode;

use anyhow::Context;
use ubershuffle_runtime::broadcast_demo;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::{WorkerExit, WorkerOptions, run_worker};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::connect_worker;

use super::master::seconds;
use crate::cli::WorkerArgs;

/// Runs a worker until the master's job is done.
pub fn run(args: &WorkerArgs) -> anyhow::Result<ExitCode> {
    let config = args
        .token
        .require()?
        .config()
        .with_timeout(seconds("--timeout", args.timeout)?)
        .with_join_timeout(seconds("--join-timeout", args.join_timeout)?)
        .with_max_message(u32::MAX as usize)
        .with_join_limits(Some(ubershuffle_runtime::join_limits()));
    let mut t = connect_worker(&args.connect, &config)?;
    let rank = t.rank();
    eprintln!("joined as rank {rank} of {}", t.size());
    match ClusterJob::receive(&mut t).with_context(|| format!("rank {rank}"))? {
        ClusterJob::BroadcastDemo => {
            let job = broadcast_demo::run_worker(&mut t).with_context(|| format!("rank {rank}"))?;
            eprintln!("rank {rank}: received and checked {} broadcasts of {} bytes", job.rounds, job.bytes);
        }
        ClusterJob::EpochLoop { timeout, exit_at_epoch } => {
            t.set_timeout(timeout);
            let options = WorkerOptions::default().with_exit_at_epoch(exit_at_epoch);
            let summary = run_worker(t, &options).with_context(|| format!("rank {rank}"))?;
            let worker = summary.worker;
            match summary.exit {
                WorkerExit::Stopped => {
                    eprintln!("rank {rank}: worker {worker} finished {} epochs", summary.epochs);
                }
                WorkerExit::InjectedFailure => eprintln!(
                    "rank {rank}: worker {worker} left after {} epochs (fault injection, --kill-worker)",
                    summary.epochs
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
