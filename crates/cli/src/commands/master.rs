//! `ubershuffle master`: admit workers over TCP, broadcast test payloads, report the times.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_runtime::broadcast_demo::{DemoJob, run_master};
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::MasterListener;

use crate::cli::MasterArgs;
use crate::output::{print_json, print_table};

/// Checks a number of seconds given on the command line.
pub fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    if !(value > 0.0 && value.is_finite() && value < 1e9) {
        let shown = if value.abs() < 1e15 { format!("{value}") } else { format!("{value:e}") };
        bail!("{flag} must be a positive number of seconds below 1e9, got {shown}");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Runs the master.
pub fn run(args: &MasterArgs) -> anyhow::Result<ExitCode> {
    let method = args.method.method();
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let config = args
        .token
        .require()?
        .config()
        .with_timeout(seconds("--timeout", args.timeout)?)
        .with_join_timeout(seconds("--join-timeout", args.join_timeout)?)
        .with_broadcast(method)
        .with_max_message(usize::try_from(args.bytes.max(1 << 20)).unwrap_or(usize::MAX));
    if args.bytes > u64::from(u32::MAX) {
        bail!("--bytes must be below 4 GiB (one frame), got {}", args.bytes);
    }
    let listener = MasterListener::bind(&args.listen, config)?;
    eprintln!("listening on {}, waiting for {} workers", listener.local_addr()?, args.workers);
    let mut t = listener.accept_workers(args.workers, |r| {
        eprintln!("warning: refused a connection from {}: {}", r.from, r.reason);
    })?;
    eprintln!("all {} workers joined; broadcasting with {}", args.workers, method.name());
    for rank in 1..t.size() {
        ClusterJob::BroadcastDemo
            .send(&mut t, rank)
            .with_context(|| format!("sending the job to rank {rank}"))?;
    }
    let job = DemoJob::new(args.rounds, args.bytes, args.seed);
    let seconds: Vec<f64> =
        run_master(&mut t, &job).context("master")?.iter().map(|r| r.wall_seconds).collect();
    let mut sorted = seconds.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let gbit = args.bytes as f64 * 8.0 / median / 1e9;
    if args.json {
        print_json(&json!({
            "workers": args.workers,
            "bytes": args.bytes,
            "method": method.name(),
            "rounds": args.rounds,
            "seconds": seconds,
            "median_seconds": median,
            "gbit_per_second_per_worker": gbit,
            "verified": true,
        }))?;
    } else {
        print_table(&[
            ("workers", t.size().saturating_sub(1).to_string()),
            ("bytes", args.bytes.to_string()),
            ("method", method.name().to_string()),
            ("rounds", args.rounds.to_string()),
            ("median broadcast", format!("{median:.4} s")),
            ("delivered to each worker", format!("{gbit:.2} Gbit/s")),
            ("verified", "yes: every worker checked every byte".into()),
        ])?;
    }
    Ok(ExitCode::SUCCESS)
}
