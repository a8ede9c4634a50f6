//! `ubershuffle serve`: a store outside the job. It holds a data set of records of any size (a
//! file of records of one size, a blob with an index of offsets, or a folder of one record a
//! file) and serves a training job's ranks (`ubershuffle.Exchange.connect`, or a Rust program
//! over `ubershuffle_plane`) as the data plane's engine in store mode, attempt after attempt
//! (`ubershuffle_plane::driver::outside`): each epoch a coded delivery of what every rank
//! lacks, each packet only to the ranks that decode it.

mod source;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::driver::host::Host;
use ubershuffle_plane::driver::mesh::JobKey;
use ubershuffle_plane::driver::outside::{AttemptEnd, Outside, SeededStore, serve_outside};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore};
use ubershuffle_plane::{EngineConfig, Figure, Figures};

use super::master::seconds;
use crate::cli::ServeArgs;

/// Bytes of a data message, and a round's at the most (`ubershuffle.torch.ShuffleGroup`'s).
const CHUNK_BYTES: u64 = 1 << 20;
const ROUND_BYTES: u64 = 16 << 20;
/// Seconds beyond `--timeout` an attempt's ranks have to link up.
const LINK_MARGIN: f64 = 60.0;

/// Runs the command.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let token = args.token.require()?;
    if !token.sealed {
        bail!("--insecure-plaintext: the plane's links are always sealed");
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    let timeout = seconds("--timeout", args.timeout)?;
    let join_deadline =
        if args.join_timeout == 0.0 { None } else { Some(seconds("--join-timeout", args.join_timeout)?) };
    if !(args.link_gbps.is_finite() && args.link_gbps > 0.0) {
        bail!("--link-gbps must be a positive number of Gbit/s, got {}", args.link_gbps);
    }
    let listen = address(&args.listen)?;
    let (index, reader) = source::open(args)?;
    let (schedule, chain) = chain(args, index.len())?;
    let store = store(args.store_dir.as_deref(), &index)?;
    let about = json!({
        "trainers": args.workers,
        "epochs": args.epochs,
        "chain": chain,
        "timeout": args.timeout,
        "chunk_bytes": CHUNK_BYTES,
        "segment_bytes": args.segment_bytes,
        "round_bytes": ROUND_BYTES,
    });
    let digest: String =
        Sha256::digest(about.to_string()).iter().take(8).map(|b| format!("{b:02x}")).collect();
    let settings = vec![("exchange".to_string(), digest)];
    let mut about = about;
    about["settings"] = json!(settings);
    let cfg = EngineConfig {
        rank: args.workers,
        world: args.workers + 1,
        timeout: timeout.as_secs_f64(),
        plane: "Exchange".into(),
        settings,
        reads_source: true,
        store_error: None,
        chunk_bytes: CHUNK_BYTES,
        yield_to_gradients: false,
        store_rank: Some(args.workers),
        segment_bytes: args.segment_bytes,
        round_bytes: ROUND_BYTES,
        link_rate: args.link_gbps * 1e9 / 8.0,
    };
    let outside = Outside {
        trainers: args.workers,
        epochs: Some(args.epochs + 1),
        join_deadline,
        link_deadline: seconds("--timeout", args.timeout + LINK_MARGIN)?,
        about: about.to_string().into_bytes(),
        stop: Arc::default(),
    };
    let host = Host::bind(listen)?;
    eprintln!(
        "serving {} records ({} bytes) on {} to {} training ranks, epochs 0 to {}",
        index.len(),
        index.total_bytes(),
        host.address()?,
        args.workers,
        args.epochs
    );
    let mut attempts = Vec::new();
    let hooks = Box::new(SeededStore { reader, schedule });
    let served = serve_outside(
        &host,
        &JobKey::from_token(token.token.expose()),
        &outside,
        (&cfg, &store),
        hooks,
        |n, served, end| {
            report(n, served, end);
            attempts.push(attempt_json(n, served, end));
        },
    );
    if args.json {
        println!("{}", json!({ "attempts": attempts }));
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

/// The socket address of `HOST:PORT`.
fn address(text: &str) -> anyhow::Result<SocketAddr> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| anyhow!("--listen {text:?} is not an address to listen at (give HOST:PORT)"))
}

/// The chain of the flags, and its settings as the training ranks' samplers take them.
fn chain(args: &ServeArgs, records: usize) -> anyhow::Result<(ChainSchedule, Value)> {
    let policy = ExchangePolicy::of(args.policy.into(), args.fraction).context("--policy")?;
    let params = ChainParams::new(args.workers, records, policy, args.seed);
    let params = match (args.alpha, args.extra_cache) {
        (Some(a), None) => params.with_alpha(a).map_err(|e| anyhow!("--alpha {a}: {e}"))?,
        (None, Some(x)) => params.with_extra_cache(x).map_err(|e| anyhow!("--extra-cache {x}: {e}"))?,
        _ => bail!("give one of --alpha and --extra-cache"),
    };
    let schedule =
        ChainSchedule::new(params, &args.scheme).map_err(|e| anyhow!("--scheme {:?}: {e}", args.scheme))?;
    let partial = matches!(policy, ExchangePolicy::PartialLocal { .. });
    let chain = json!({
        "seed": args.seed,
        "policy": policy.name(),
        "fraction": if partial { Some(policy.fraction()) } else { None },
        "alpha": args.alpha,
        "extra_cache": args.extra_cache,
        "scheme": args.scheme,
    });
    Ok((schedule, chain))
}

/// The store's record store: in `dir` (kept), or temporary in shared memory.
fn store(dir: Option<&Path>, index: &RecordIndex) -> anyhow::Result<SharedStore> {
    let store = match dir {
        Some(dir) => MappedStore::open(dir, index.clone())?,
        None => {
            let shm = Path::new("/dev/shm");
            let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
            let dir = base.join(format!("ubershuffle-serve-{}", std::process::id()));
            MappedStore::open_temporary(&dir, index.clone(), None)?
        }
    };
    Ok(Arc::new(Mutex::new(store)))
}

fn count(f: &Figures, name: &str) -> u64 {
    f.count_of(name)
}

fn real(f: &Figures, name: &str) -> f64 {
    match f.get(name) {
        Some(Figure::Real(x)) => *x,
        _ => 0.0,
    }
}

/// One line per epoch served and one for the attempt's end, on stderr.
fn report(attempt: usize, served: &[Figures], end: &AttemptEnd) {
    for f in served {
        eprintln!(
            "attempt {attempt}, epoch {}: {} bytes sent, {} packets ({} coded), {:.3} s",
            count(f, "epoch"),
            count(f, "bytes_sent"),
            count(f, "packets"),
            count(f, "coded_packets"),
            real(f, "transfer_seconds"),
        );
    }
    match end {
        AttemptEnd::Finished => eprintln!("attempt {attempt}: the job finished"),
        AttemptEnd::Closed => eprintln!(
            "attempt {attempt}: the ranks closed before the last epoch; waiting for the next attempt"
        ),
        AttemptEnd::Failed(e) => eprintln!("attempt {attempt} failed: {e}; waiting for the next attempt"),
    }
}

/// An attempt as JSON: how it ended, and every epoch's figures.
fn attempt_json(attempt: usize, served: &[Figures], end: &AttemptEnd) -> Value {
    let (kind, error) = match end {
        AttemptEnd::Finished => ("finished", None),
        AttemptEnd::Closed => ("closed", None),
        AttemptEnd::Failed(e) => ("failed", Some(e.to_string())),
    };
    let epochs: Vec<Value> = served
        .iter()
        .map(|f| {
            let fields = f.iter().filter_map(|(name, value)| {
                let v = match value {
                    Figure::Count(c) => json!(c),
                    Figure::Real(x) => json!(x),
                    Figure::Word(w) => json!(w),
                    Figure::Text(t) => json!(t),
                    _ => return None,
                };
                Some(((*name).to_string(), v))
            });
            Value::Object(fields.collect())
        })
        .collect();
    json!({ "attempt": attempt, "end": kind, "error": error, "epochs": epochs })
}
