//! The engine over sealed TCP connections on loopback, as the ranks of a job run it (here as
//! threads of one process): epochs delivered byte for byte; a rank without the job's key is
//! refused with one line and served nothing; a rank that closes is named.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Setting, config, put_records, record, scratch, sizes};
use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_plane::driver::mesh::{JobKey, Listener, MeshConfig, link_up};
use ubershuffle_plane::driver::{Hooks, Plane};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore, locked};
use ubershuffle_plane::{PlaneError, Schedule};

struct Reader;

impl Hooks for Reader {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        put_records(store, ids)
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Ok(7)
    }
}

/// Runs `world` ranks as threads: each links up under `key_of(rank)`, then runs `body`.
fn job<T: Send + 'static>(
    name: &str,
    s: &Setting,
    key_of: impl Fn(usize) -> JobKey,
    body: impl Fn(usize, Result<Plane, PlaneError>, SharedStore, ChainSchedule) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let dir = scratch(name);
    let index = RecordIndex::from_sizes(sizes(s.records, s.seed)).unwrap();
    let listeners: Vec<Listener> =
        (0..s.world).map(|_| Listener::bind(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap()).collect();
    let addresses: Vec<_> = listeners.iter().map(|l| l.address().unwrap()).collect();
    let schedule =
        ChainSchedule::new(ChainParams::new(s.world, s.records, s.policy, s.seed), "uncoded").unwrap();
    let body = Arc::new(body);
    let mut threads = Vec::new();
    for (rank, listener) in listeners.into_iter().enumerate() {
        let cfg = config(s, rank);
        let mesh = MeshConfig {
            rank,
            addresses: addresses.clone(),
            key: key_of(rank),
            job: name.into(),
            deadline: Duration::from_secs(5),
        };
        let store = MappedStore::open(&dir.join(format!("rank-{rank}")), index.clone()).unwrap();
        let store: SharedStore = Arc::new(Mutex::new(store));
        let (body, schedule) = (Arc::clone(&body), schedule.clone());
        threads.push(std::thread::spawn(move || {
            let plane = link_up(listener, &mesh)
                .and_then(|links| Plane::start(cfg, Some(Arc::clone(&store)), links, Box::new(Reader)));
            body(rank, plane, store, schedule)
        }));
    }
    let out = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn epochs_arrive_byte_for_byte_over_sealed_connections() {
    let mut s = Setting::peer(4, 400);
    s.chunk_bytes = 64 << 10;
    let key = JobKey::random().unwrap();
    let results = job(
        "tcp-epochs",
        &s,
        move |_| key.clone(),
        |rank, plane, store, schedule| {
            let plane = plane.unwrap();
            plane.wait_agreed().unwrap();
            let mut received = Vec::new();
            for epoch in 0..4 {
                let at = schedule.at(epoch).unwrap();
                let f = plane.set_epoch(at.boxed_copy()).unwrap();
                received.push(f.count_of("records_received"));
                let store = locked(&store);
                for &id in &at.targets()[rank] {
                    let bytes =
                        store.get(id).unwrap_or_else(|| panic!("rank {rank} lacks {id} at epoch {epoch}"));
                    assert_eq!(bytes, &record(id, store.index().size(id).unwrap())[..]);
                }
            }
            plane.close();
            received
        },
    );
    for r in &results {
        assert_eq!(r[0], 0, "epoch 0 comes from the source");
        assert!(r[1..].iter().all(|&n| n > 0), "later epochs move records between ranks: {r:?}");
    }
}

#[test]
fn a_rank_without_the_job_s_key_is_refused_in_one_line_and_served_nothing() {
    let s = Setting::peer(3, 60);
    let key = JobKey::random().unwrap();
    let results = job(
        "tcp-key",
        &s,
        move |r| if r == 2 { JobKey::from_token("a guess") } else { key.clone() },
        |_, plane, store, _| (plane.err().map(|e| e.to_string()), locked(&store).held_ids().len()),
    );
    let (refused, held) = &results[2];
    let text = refused.as_ref().unwrap();
    assert!(text.contains("refused the link of rank 2") && text.contains("key or token"), "{text}");
    assert!(!text.contains('\n'));
    assert_eq!(*held, 0, "nothing was served to it");
    for (r, (e, _)) in results.iter().enumerate().take(2) {
        let e = e.as_ref().unwrap_or_else(|| panic!("rank {r} linked up with an impostor"));
        assert!(e.contains("waited in vain for ranks [2]") || e.contains("rank 2"), "rank {r}: {e}");
    }
}
