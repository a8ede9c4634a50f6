//! The data plane's engine alone, as a Rust training framework would run it: one process per
//! rank, peer or store mode, over sealed loopback connections, without Python.
//!
//! ```text
//! cargo run --release -p ubershuffle-plane --example job -- --mode store --trainers 4
//! ```
//!
//! The command starts one process per rank (itself again, with `--rank`); they meet through a
//! folder of their own (each writes the address it listens on), share a key from the
//! environment (`UBERSHUFFLE_PLANE_KEY`, made by the first process: a secret never goes on a
//! command line), and run `--epochs` epochs of an epoch chain over records of lognormal sizes
//! made from a seed (the "source": any rank that must read a record makes its bytes). Every
//! training rank checks every record it holds against the source's bytes, and prints one line a
//! epoch; the first process sums them: the records delivered and how fast.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::driver::mesh::{JobKey, Listener, MeshConfig, link_up};
use ubershuffle_plane::driver::{Hooks, Plane};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore, locked};
use ubershuffle_plane::{EngineConfig, Figure, Schedule};

/// What every rank is told (all but the rank itself and the folder come from the first
/// process's command line).
#[derive(Clone, Debug)]
struct Args {
    mode: String,
    trainers: usize,
    records: usize,
    mean: f64,
    epochs: u64,
    alpha: f64,
    scheme: String,
    link_gbps: f64,
    seed: u64,
    rank: Option<usize>,
    dir: Option<PathBuf>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        mode: "peer".into(),
        trainers: 4,
        records: 2000,
        mean: 110_000.0,
        epochs: 5,
        alpha: 0.5,
        scheme: "auto".into(),
        link_gbps: 10.0,
        seed: 0,
        rank: None,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let bad = |e: &dyn std::fmt::Display| format!("{flag}: {e}");
        match flag.as_str() {
            "--mode" => a.mode = value()?,
            "--trainers" => a.trainers = value()?.parse().map_err(|e| bad(&e))?,
            "--records" => a.records = value()?.parse().map_err(|e| bad(&e))?,
            "--mean" => a.mean = value()?.parse().map_err(|e| bad(&e))?,
            "--epochs" => a.epochs = value()?.parse().map_err(|e| bad(&e))?,
            "--alpha" => a.alpha = value()?.parse().map_err(|e| bad(&e))?,
            "--scheme" => a.scheme = value()?,
            "--link-gbps" => a.link_gbps = value()?.parse().map_err(|e| bad(&e))?,
            "--seed" => a.seed = value()?.parse().map_err(|e| bad(&e))?,
            "--rank" => a.rank = Some(value()?.parse().map_err(|e| bad(&e))?),
            "--dir" => a.dir = Some(PathBuf::from(value()?)),
            "--help" | "-h" => {
                return Err("usage: job [--mode peer|store] [--trainers N] [--records N] [--mean BYTES] \
                            [--epochs N] [--alpha A] [--scheme NAME] [--link-gbps G] [--seed S]"
                    .into());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.mode != "peer" && a.mode != "store" {
        return Err(format!("--mode must be peer or store, not {:?}", a.mode));
    }
    if !(a.link_gbps.is_finite() && a.link_gbps > 0.0) {
        return Err(format!("--link-gbps must be a positive number, not {}", a.link_gbps));
    }
    if a.trainers == 0 || a.records < a.trainers {
        return Err("--trainers must be at least 1 and at most --records".into());
    }
    Ok(a)
}

/// A stream of pseudo-random numbers (splitmix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Sizes of a lognormal distribution of mean `mean` and coefficient of variation 0.7.
fn sizes(count: usize, mean: f64, seed: u64) -> Vec<u64> {
    let sigma2 = (1.0f64 + 0.49).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    let mut m = Mix(seed);
    (0..count)
        .map(|_| {
            // Box-Muller from two uniforms in (0, 1).
            let u1 = (m.next() >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON;
            let u2 = (m.next() >> 11) as f64 / (1u64 << 53) as f64;
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            ((mu + sigma2.sqrt() * z).exp() as u64).max(1)
        })
        .collect()
}

/// Record `id`'s bytes (the source).
fn record(id: u32, size: u64) -> Vec<u8> {
    let mut m = Mix(u64::from(id) ^ 0xABCD);
    let mut out = Vec::with_capacity(size as usize + 8);
    while (out.len() as u64) < size {
        out.extend_from_slice(&m.next().to_le_bytes());
    }
    out.truncate(size as usize);
    out
}

/// The source of every rank: records made from their ids.
struct Source {
    schedule: ChainSchedule,
}

impl Hooks for Source {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        let mut store = locked(store);
        let mut bytes = 0;
        for &id in ids {
            let size = store.index().size(id).ok_or("no such record")?;
            store.put(id, &record(id, size)).map_err(|e| e.to_string())?;
            bytes += size;
        }
        Ok((ids.len() as u64, bytes))
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Ok(1) // every rank makes the same bytes
    }

    fn sampler_state(&mut self) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }

    fn restore(&mut self, _state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        Ok(Box::new(self.schedule.at(epoch)?))
    }
}

fn schedule(a: &Args) -> Result<ChainSchedule, String> {
    let policy = ExchangePolicy::new("global", None).map_err(|e| e.to_string())?;
    let mut params = ChainParams::new(a.trainers, a.records, policy, a.seed);
    if a.mode == "store" {
        params = params.with_alpha(a.alpha).map_err(|e| e.to_string())?;
    }
    ChainSchedule::new(params, if a.mode == "store" { &a.scheme } else { "uncoded" })
}

/// One rank's process.
fn rank_main(a: &Args, rank: usize, dir: &Path) -> Result<(), String> {
    let store_rank = (a.mode == "store").then_some(0);
    let world = a.trainers + usize::from(store_rank.is_some());
    let key = std::env::var("UBERSHUFFLE_PLANE_KEY").map_err(|_| "UBERSHUFFLE_PLANE_KEY is not set")?;
    let key: Vec<u8> =
        (0..key.len() / 2).filter_map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).ok()).collect();
    let key: [u8; 32] = key.try_into().map_err(|_| "UBERSHUFFLE_PLANE_KEY is not 64 hex digits")?;
    let listener = Listener::bind(IpAddr::V4(Ipv4Addr::LOCALHOST)).map_err(|e| e.to_string())?;
    let addr = listener.address().map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("addr-{rank}.tmp")), addr.to_string()).map_err(|e| e.to_string())?;
    std::fs::rename(dir.join(format!("addr-{rank}.tmp")), dir.join(format!("addr-{rank}")))
        .map_err(|e| e.to_string())?;
    let mut addresses: Vec<SocketAddr> = Vec::new();
    for r in 0..world {
        let path = dir.join(format!("addr-{r}"));
        let until = Instant::now() + Duration::from_secs(60);
        let text = loop {
            if let Ok(t) = std::fs::read_to_string(&path) {
                break t;
            }
            if Instant::now() > until {
                return Err(format!("rank {r} never published its address"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        addresses.push(text.trim().parse().map_err(|e| format!("rank {r}'s address: {e}"))?);
    }
    let index = RecordIndex::from_sizes(sizes(a.records, a.mean, a.seed)).map_err(|e| e.to_string())?;
    let store: SharedStore = Arc::new(Mutex::new(
        MappedStore::open_temporary(&dir.join(format!("store-{rank}")), index.clone(), None)
            .map_err(|e| e.to_string())?,
    ));
    let schedule = schedule(a)?;
    let cfg = EngineConfig {
        rank,
        world,
        timeout: 60.0,
        plane: "job".into(),
        settings: vec![("mode".into(), a.mode.clone()), ("seed".into(), a.seed.to_string())],
        reads_source: true,
        store_error: None,
        chunk_bytes: 1 << 20,
        yield_to_gradients: false,
        store_rank,
        segment_bytes: 0,
        round_bytes: 16 << 20,
        link_rate: a.link_gbps * 1e9 / 8.0,
    };
    let mesh = MeshConfig {
        rank,
        addresses,
        key: JobKey(key),
        job: dir.display().to_string(),
        deadline: Duration::from_secs(60),
    };
    let links = link_up(listener, &mesh).map_err(|e| e.to_string())?;
    let hooks = Box::new(Source { schedule: schedule.clone() });
    let plane = Plane::start(cfg, Some(Arc::clone(&store)), links, hooks).map_err(|e| e.to_string())?;
    plane.wait_agreed().map_err(|e| e.to_string())?;
    if store_rank == Some(rank) {
        let served = plane.serve().map_err(|e| e.to_string())?;
        for f in served {
            let made_by = match f.get("made_by") {
                Some(Figure::Text(t)) => t.clone(),
                _ => String::new(),
            };
            let real = |name: &str| match f.get(name) {
                Some(Figure::Real(x)) => *x,
                _ => 0.0,
            };
            println!(
                "served epoch={} bytes={} by={made_by} plan_wait={:.3} planning={:.3} encoding={:.3}",
                f.count_of("epoch"),
                f.count_of("bytes_sent"),
                real("plan_seconds"),
                real("plan_ahead_seconds"),
                real("encode_seconds"),
            );
        }
        plane.close();
        return Ok(());
    }
    let place = rank - usize::from(store_rank.is_some());
    for epoch in 0..a.epochs {
        let at = schedule.at(epoch)?;
        let started = Instant::now();
        let f = plane.set_epoch(Box::new(at.clone())).map_err(|e| e.to_string())?;
        let waited = started.elapsed().as_secs_f64();
        // Every record of the epoch, byte for byte.
        let s = locked(&store);
        for &id in &at.targets()[place] {
            let want = record(id, index.size(id).unwrap_or(0));
            if s.get(id) != Some(&want[..]) {
                return Err(format!("rank {rank}: record {id} of epoch {epoch} has the wrong bytes"));
            }
        }
        drop(s);
        let transfer = match f.get("transfer_seconds") {
            Some(Figure::Real(x)) => *x,
            _ => 0.0,
        };
        println!(
            "epoch={epoch} rank={rank} records={} bytes={} transfer={transfer:.6} waited={waited:.6}",
            f.count_of("records_received"),
            f.count_of("record_bytes_received"),
        );
        if epoch + 1 < a.epochs {
            // No training: wait for the next epoch's delivery before asking for it, so its
            // time is the delivery's alone.
            plane.wait_idle();
        }
    }
    plane.close();
    Ok(())
}

/// The first process: starts every rank and sums what they print.
fn parent(a: &Args) -> Result<(), String> {
    let world = a.trainers + usize::from(a.mode == "store");
    // The ranks' stores in shared memory where there is one, as `ubershuffle.torch` keeps them.
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let dir = base.join(format!("ubershuffle-plane-job-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let key = JobKey::random().map_err(|e| e.to_string())?;
    let hex: String = key.0.iter().map(|b| format!("{b:02x}")).collect();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    for rank in 0..world {
        let child = Command::new(&exe)
            .args(std::env::args().skip(1))
            .args(["--rank", &rank.to_string(), "--dir", &dir.display().to_string()])
            .env("UBERSHUFFLE_PLANE_KEY", &hex)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start rank {rank}: {e}"))?;
        children.push(child);
    }
    let mut per_epoch: BTreeMap<u64, (u64, u64, f64)> = BTreeMap::new();
    let mut failed = false;
    for (rank, mut child) in children.into_iter().enumerate() {
        let out = child.stdout.take().ok_or("no output")?;
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let fields: BTreeMap<&str, &str> = line.split(' ').filter_map(|f| f.split_once('=')).collect();
            if let (Some(e), Some(r), Some(b), Some(t)) =
                (fields.get("epoch"), fields.get("records"), fields.get("bytes"), fields.get("transfer"))
            {
                let e: u64 = e.parse().unwrap_or(0);
                let slot = per_epoch.entry(e).or_default();
                slot.0 += r.parse::<u64>().unwrap_or(0);
                slot.1 += b.parse::<u64>().unwrap_or(0);
                slot.2 = slot.2.max(t.parse().unwrap_or(0.0));
            } else {
                println!("rank {rank}: {line}");
            }
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        failed |= !status.success();
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (e, (records, bytes, seconds)) in &per_epoch {
        let rate = if *seconds > 0.0 { *bytes as f64 / seconds / 1e9 } else { 0.0 };
        println!(
            "epoch {e}: {records} records, {bytes} bytes to the ranks in {seconds:.3} s: {rate:.3} GB/s"
        );
    }
    if failed {
        return Err("a rank failed (its message is above)".into());
    }
    Ok(())
}

fn main() {
    let result = parse().and_then(|a| match (a.rank, a.dir.clone()) {
        (Some(rank), Some(dir)) => rank_main(&a, rank, &dir),
        _ => parent(&a),
    });
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
