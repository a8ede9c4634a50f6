//! A store outside the job, over loopback TCP (the ranks as threads of one process): training
//! ranks join at the store's address with the job's token; the store serves a job across its
//! attempts from one record store, reading each record from the source once; a rank with
//! another token or another job's size is refused in one line, and the store waits on for the
//! real ranks.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{put_records, record, scratch, sizes, store_config};
use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::driver::Hooks;
use ubershuffle_plane::driver::host::Host;
use ubershuffle_plane::driver::mesh::JobKey;
use ubershuffle_plane::driver::outside::{AttemptEnd, OpensStore, Outside, join_outside, serve_outside};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore, locked};
use ubershuffle_plane::{EngineConfig, PlaneError, Schedule};

const RECORDS: usize = 300;

fn schedule(trainers: usize) -> ChainSchedule {
    let policy = ExchangePolicy::new("global", None).unwrap();
    let params = ChainParams::new(trainers, RECORDS, policy, 4).with_alpha(0.6).unwrap();
    ChainSchedule::new(params, "auto").unwrap()
}

/// The config of `rank` of a job of `world` ranks, the store last.
fn config(rank: usize, world: usize) -> EngineConfig {
    EngineConfig { round_bytes: 32 << 10, ..store_config(rank, world, world - 1) }
}

/// The store's side: reads records from the "source", counting them; its chain from the seed.
struct StoreHooks {
    schedule: ChainSchedule,
    reads: Arc<AtomicU64>,
}

impl Hooks for StoreHooks {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        self.reads.fetch_add(ids.len() as u64, Ordering::Relaxed);
        put_records(store, ids)
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Ok(7)
    }

    fn restore(&mut self, _state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        Ok(Box::new(self.schedule.at(epoch)?))
    }
}

/// One training rank of one attempt: joins, runs `epochs`, checks every record of each
/// epoch's batch byte for byte, closes; returns the store's description.
fn train(
    store: SocketAddr,
    key: &JobKey,
    (place, trainers): (usize, usize),
    epochs: std::ops::Range<u64>,
    dir: PathBuf,
) -> Result<Vec<u8>, PlaneError> {
    let hooks = OpensStore::new(dir);
    let opened = hooks.opened();
    let (plane, joined) = join_outside(
        store,
        key,
        (Some(place), Some(trainers)),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        (Duration::from_secs(20), Duration::from_secs(10)),
        |joined| Ok(config(joined.mesh.rank, trainers + 1)),
        Box::new(hooks),
    )?;
    assert_eq!(joined.mesh.rank, place);
    let schedule = schedule(trainers);
    for epoch in epochs {
        let at = schedule.at(epoch).unwrap();
        plane.set_epoch(at.boxed_copy())?;
        let held = opened.lock().unwrap().clone().unwrap();
        let held = locked(&held);
        for &id in &at.targets()[place] {
            let bytes = held.get(id).unwrap_or_else(|| panic!("rank {place} lacks {id} at epoch {epoch}"));
            assert_eq!(bytes, &record(id, held.index().size(id).unwrap())[..], "record {id}");
        }
    }
    plane.close();
    Ok(joined.about)
}

/// How the store ended, every attempt's end, and the records it read from the source.
type Served = (Result<(), PlaneError>, Vec<String>, u64);

/// The store outside the job, on a thread: returns its host's address, and the thread, which
/// ends with every attempt's end and the records it read from the source.
fn store(
    name: &str,
    key: &JobKey,
    trainers: usize,
    epochs: u64,
) -> (SocketAddr, std::thread::JoinHandle<Served>) {
    let dir = scratch(name);
    let host = Host::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = host.address().unwrap();
    let key = key.clone();
    let thread = std::thread::spawn(move || {
        let index = RecordIndex::from_sizes(sizes(RECORDS, 5)).unwrap();
        let store: SharedStore = Arc::new(Mutex::new(MappedStore::open(&dir.join("store"), index).unwrap()));
        let outside = Outside {
            trainers,
            epochs: Some(epochs),
            join_deadline: Some(Duration::from_secs(30)),
            link_deadline: Duration::from_secs(10),
            about: b"the job's settings".to_vec(),
            stop: Arc::default(),
        };
        let reads = Arc::new(AtomicU64::new(0));
        let mut ends = Vec::new();
        let result = serve_outside(
            &host,
            &key,
            &outside,
            (&config(trainers, trainers + 1), &store),
            Box::new(StoreHooks { schedule: schedule(trainers), reads: Arc::clone(&reads) }),
            |attempt, _, end| {
                ends.push(match end {
                    AttemptEnd::Finished => format!("{attempt}: finished"),
                    AttemptEnd::Closed => format!("{attempt}: closed"),
                    AttemptEnd::Failed(e) => format!("{attempt}: failed: {e}"),
                })
            },
        );
        let _ = std::fs::remove_dir_all(&dir);
        (result, ends, reads.load(Ordering::Relaxed))
    });
    (address, thread)
}

#[test]
fn a_store_outside_the_job_serves_its_attempts_and_reads_each_record_once() {
    let key = JobKey::from_token("the job's token");
    let (address, serving) = store("outside-attempts", &key, 2, 4);
    let dir = scratch("outside-attempts-ranks");
    for (attempt, epochs) in [(0, 0..2), (1, 2..4)] {
        let ranks: Vec<_> = (0..2)
            .map(|place| {
                let (key, dir) = (key.clone(), dir.join(format!("attempt-{attempt}-rank-{place}")));
                let epochs = epochs.clone();
                std::thread::spawn(move || train(address, &key, (place, 2), epochs, dir))
            })
            .collect();
        for r in ranks {
            assert_eq!(r.join().unwrap().unwrap(), b"the job's settings");
        }
    }
    let (result, ends, reads) = serving.join().unwrap();
    result.unwrap();
    assert_eq!(ends, ["0: closed", "1: finished"]);
    assert!(reads > 0 && reads <= RECORDS as u64, "each record read from the source once: {reads}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_with_another_token_or_job_is_refused_in_one_line_and_the_store_waits_on() {
    let key = JobKey::from_token("the job's token");
    let (address, serving) = store("outside-refused", &key, 2, 1);
    let dir = scratch("outside-refused-ranks");
    let guess = JobKey::from_token("a guess");
    let refused = train(address, &guess, (0, 2), 0..1, dir.join("guess")).err().unwrap().to_string();
    assert!(refused.contains("refused training rank 0") && refused.contains("token"), "{refused}");
    assert!(!refused.contains('\n'));
    let refused = train(address, &key, (0, 3), 0..1, dir.join("three")).err().unwrap().to_string();
    assert!(refused.contains("the store serves 2 training ranks; this rank's job has 3"), "{refused}");
    let ranks: Vec<_> = (0..2)
        .map(|place| {
            let (key, dir) = (key.clone(), dir.join(format!("rank-{place}")));
            std::thread::spawn(move || train(address, &key, (place, 2), 0..1, dir))
        })
        .collect();
    for r in ranks {
        r.join().unwrap().unwrap();
    }
    let (result, ends, _) = serving.join().unwrap();
    result.unwrap();
    assert_eq!(ends, ["0: finished"]);
    let _ = std::fs::remove_dir_all(&dir);
}
