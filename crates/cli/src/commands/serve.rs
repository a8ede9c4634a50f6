//! `ubershuffle serve`: the master of the data plane. It holds records of any size (a file of
//! fixed-size records, a blob with an index of offsets, or a folder of one record a file) and
//! delivers each epoch's batches to the Python ranks (`ubershuffle.Exchange`) by coded delivery
//! over TCP (`ubershuffle_runtime::exchange`).

use std::process::ExitCode;

use anyhow::{Context, bail};

use serde_json::json;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::limits::Limits;
use ubershuffle_runtime::ShuffledRecords;
use ubershuffle_runtime::exchange::record_files::{blob_records, fixed_records, folder_records};
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
    let sizes = match serving.record_bytes() {
        Some(width) => format!("of {width} bytes"),
        None => format!("of any size ({} bytes in all)", serving.total_bytes()),
    };
    eprintln!(
        "serving {} records {sizes} on {}, waiting for {} workers",
        serving.records(),
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

/// The records, whole, within the memory cap: a file of one size, a blob and its index, or a
/// folder.
fn read_records(args: &ServeArgs) -> anyhow::Result<ShuffledRecords> {
    let limits = Limits::from_env()?;
    Ok(match (&args.records, args.record_size, &args.index, &args.records_dir) {
        (Some(path), Some(width), None, None) => {
            if width == 0 {
                bail!("--record-size must be at least 1 byte");
            }
            fixed_records(path, width, &limits)?.into()
        }
        (Some(path), None, Some(index), None) => ShuffledRecords::Sized(blob_records(path, index, &limits)?),
        (None, None, None, Some(dir)) => ShuffledRecords::Sized(folder_records(dir, &limits)?),
        (Some(_), None, None, None) => bail!("--records needs --record-size B or --index FILE"),
        _ => bail!(
            "give the records as --records FILE (with --record-size or --index) or as --records-dir DIR"
        ),
    })
}
