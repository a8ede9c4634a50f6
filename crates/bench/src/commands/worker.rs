//! `ubershuffle worker`: join the master's TCP cluster and check every broadcast.

use std::process::ExitCode;

use anyhow::Context;
use bench::broadcast_demo::run_worker;
use transport::Transport;
use transport::tcp::{TcpConfig, connect_worker};

use super::master::seconds;
use crate::cli::WorkerArgs;

/// Runs a worker until the master's job is done.
pub fn run(args: &WorkerArgs) -> anyhow::Result<ExitCode> {
    let config = TcpConfig {
        timeout: seconds("--timeout", args.timeout)?,
        join_timeout: seconds("--join-timeout", args.join_timeout)?,
        max_message: u32::MAX as usize,
        ..TcpConfig::new(args.token.clone())
    };
    let mut t = connect_worker(&args.connect, &config)?;
    let rank = t.rank();
    eprintln!("joined as rank {rank} of {}", t.size());
    let job = run_worker(&mut t).with_context(|| format!("rank {rank}"))?;
    eprintln!("rank {rank}: received and checked {} broadcasts of {} bytes", job.rounds, job.bytes);
    Ok(ExitCode::SUCCESS)
}
