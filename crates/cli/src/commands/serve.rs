//! `ubershuffle serve`: the master of the data plane. It holds a file of fixed-size records and
//! delivers each epoch's batches to the Python ranks (`ubershuffle.Exchange`) by coded delivery
//! over TCP (`ubershuffle_runtime::exchange`).

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_codes::Records;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::limits::Limits;
use ubershuffle_runtime::exchange::{ServeError, ServeOptions, Serving, serve};
use ubershuffle_transport::tcp::MasterListener;

use super::master::seconds;
use crate::cli::ServeArgs;

/// Runs the command.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let key = args.token.require()?;
    let options = options(args)?;
    let records = read_records(args)?;
    let serving = Serving::prepare(records, &options).map_err(in_flags)?;
    let config = key
        .config()
        .with_timeout(options.timeout)
        .with_join_timeout(options.join_timeout)
        .with_join_limits(Some(ubershuffle_runtime::join_limits()));
    let listener = MasterListener::bind(&args.listen, config)?;
    eprintln!(
        "serving {} records of {} bytes on {}, waiting for {} workers",
        serving.records(),
        serving.record_bytes(),
        listener.local_addr()?,
        args.workers
    );
    let report = serve(listener, serving, &mut |m| {
        eprintln!(
            "epoch {}: {} transmissions ({} uncoded), {} payload bytes, {:.3} s",
            m.epoch, m.transmissions, m.uncoded_transmissions, m.payload_bytes, m.epoch_seconds
        );
    })?;
    if args.json {
        println!("{}", json!({ "epochs": report.epochs, "lost_workers": report.lost_workers }));
    }
    Ok(ExitCode::SUCCESS)
}

/// A settings problem said in this command's flags, which are the settings' names
/// (`--checkpoint` included); anything else as it is.
fn in_flags(e: ServeError) -> anyhow::Error {
    match e {
        ServeError::Spec(e) => anyhow::anyhow!(e.render(&|s| format!("--{}", s.name()))),
        other => other.into(),
    }
}

/// The checked flags.
fn options(args: &ServeArgs) -> anyhow::Result<ServeOptions> {
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if args.record_size == 0 {
        bail!("--record-size must be at least 1 byte");
    }
    let mut o = ServeOptions::new(args.workers, args.alpha);
    o.policy = ExchangePolicy::of(args.policy.into(), args.fraction).context("--policy")?;
    o.scheme = args.scheme.clone();
    o.seed = args.seed;
    o.epochs = args.epochs;
    o.timeout = seconds("--timeout", args.timeout)?;
    o.join_timeout = seconds("--join-timeout", args.join_timeout)?;
    o.checkpoint = args.checkpoint.clone();
    o.resume = args.resume;
    Ok(o)
}

/// The records file, whole, within the memory cap.
fn read_records(args: &ServeArgs) -> anyhow::Result<Records> {
    let path = &args.records;
    let len = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
    Limits::from_env()?.check_memory(&format!("the records file {}", path.display()), len)?;
    if len == 0 || len % args.record_size as u64 != 0 {
        bail!(
            "{}: {len} bytes is not a positive multiple of --record-size {}",
            path.display(),
            args.record_size
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Records::from_bytes(args.record_size, bytes)?)
}
