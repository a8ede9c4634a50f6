//! The engine at hundreds of ranks, in one process (the hub): peer and store mode run whole
//! epochs at 64 and 256 ranks, and each rank's control bytes per epoch (every message but
//! records) grow no faster than the world size, nor do a rank's messages of the start (its
//! hellos and its first epoch's, O(world) each). The engine's
//! CPU per rank and epoch is printed beside them (a measurement, not a test: wall times).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::{Job, Setting, put_records, scratch};
use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::hub::{Caller, Hub};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore};
use ubershuffle_plane::{Engine, EngineConfig, Input, Output, Schedule};

/// Per rank: control bytes of an epoch's delivery, messages at start, engine seconds.
struct Cost {
    control_per_epoch: f64,
    start_messages: f64,
    cpu_per_epoch: f64,
}

fn peer_cost(world: usize) -> Cost {
    let mut s = Setting::peer(world, world * 4);
    s.policy = ExchangePolicy::new("partial-local", Some(0.5)).unwrap();
    let mut job = Job::new(&format!("scale-peer-{world}"), &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    // The start: hellos, the catch-up's holdings, the first step's credit.
    let start: u64 = job.hub.traffic().iter().map(|t| t.messages_sent).sum();
    let before: u64 = job.hub.traffic().iter().map(|t| t.control_sent).sum();
    let cpu_before: f64 = job.hub.traffic().iter().map(|t| t.engine_seconds).sum();
    let epochs = 3;
    for e in 1..=epochs {
        for out in job.epoch(e, &mut source) {
            assert!(out.iter().any(|o| matches!(o, Output::Ready { .. })), "{out:?}");
        }
    }
    job.check_holds(epochs);
    let after: u64 = job.hub.traffic().iter().map(|t| t.control_sent).sum();
    let cpu_after: f64 = job.hub.traffic().iter().map(|t| t.engine_seconds).sum();
    let per = (world * epochs as usize) as f64;
    Cost {
        control_per_epoch: (after - before) as f64 / per,
        start_messages: start as f64 / world as f64,
        cpu_per_epoch: (cpu_after - cpu_before) / per,
    }
}

struct StoreSide {
    stores: Arc<Mutex<Vec<Option<SharedStore>>>>,
    dir: std::path::PathBuf,
    schedule: ChainSchedule,
}

impl Caller for StoreSide {
    fn read(&mut self, _rank: usize, ids: &[u32]) -> Result<(u64, u64), String> {
        let store = self.stores.lock().unwrap()[0].clone().unwrap();
        put_records(&store, ids)
    }
    fn content(&mut self, _rank: usize) -> u64 {
        0
    }
    fn open_store(&mut self, rank: usize, offsets: &[u64]) -> Result<SharedStore, String> {
        let index = RecordIndex::from_sizes(offsets.windows(2).map(|w| w[1] - w[0])).unwrap();
        let store = MappedStore::open(&self.dir.join(format!("rank-{rank}")), index).unwrap();
        let store: SharedStore = Arc::new(Mutex::new(store));
        self.stores.lock().unwrap()[rank] = Some(Arc::clone(&store));
        Ok(store)
    }
    fn state(&mut self, _rank: usize) -> Result<Vec<u8>, String> {
        Ok(vec![1])
    }
    fn restore(&mut self, _state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        Ok(Box::new(self.schedule.at(epoch)?))
    }
}

fn store_cost(trainers: usize) -> Cost {
    let world = trainers + 1;
    let records = trainers * 4;
    let dir = scratch(&format!("scale-store-{trainers}"));
    let sizes: Vec<u64> = (0..records as u64).map(|i| 64 + i % 64).collect();
    let index = RecordIndex::from_sizes(sizes).unwrap();
    let store = Arc::new(Mutex::new(MappedStore::open(&dir.join("rank-0"), index).unwrap()));
    let mut all = vec![None; world];
    all[0] = Some(Arc::clone(&store));
    let stores = Arc::new(Mutex::new(all));
    let cfg = |rank: usize| EngineConfig {
        rank,
        world,
        timeout: 30.0,
        plane: "ShuffleGroup".into(),
        settings: vec![],
        reads_source: rank == 0,
        store_error: None,
        chunk_bytes: 1 << 20,
        yield_to_gradients: false,
        store_rank: Some(0),
        segment_bytes: 64,
        round_bytes: 1 << 20,
        link_rate: 0.0,
    };
    let engines =
        (0..world).map(|r| Engine::new(cfg(r), (r == 0).then(|| Arc::clone(&store)), 0.0)).collect();
    let policy = ExchangePolicy::new("global", None).unwrap();
    let params = ChainParams::new(trainers, records, policy, 1).with_alpha(2.0 / trainers as f64).unwrap();
    let schedule = ChainSchedule::new(params, "uncoded").unwrap();
    let mut hub = Hub::new(engines, 0.0);
    let mut side = StoreSide { stores: Arc::clone(&stores), dir: dir.clone(), schedule: schedule.clone() };
    let mut start = 0u64;
    let mut control = 0u64;
    let mut cpu = 0.0;
    let epochs = 3;
    for e in 0..=epochs {
        let before: u64 = hub.traffic().iter().skip(1).map(|t| t.control_sent).sum();
        let cpu_before: f64 = hub.traffic().iter().skip(1).map(|t| t.engine_seconds).sum();
        let at = schedule.at(e).unwrap();
        for r in 1..world {
            hub.input(r, Input::SetEpoch(at.boxed_copy()));
        }
        hub.run(&mut side);
        for r in 1..world {
            let out = hub.take_outputs(r);
            assert!(out.iter().any(|o| matches!(o, Output::Ready { .. })), "rank {r}: {out:?}");
        }
        if e == 0 {
            start = hub.traffic().iter().map(|t| t.messages_sent).sum();
        } else {
            control += hub.traffic().iter().skip(1).map(|t| t.control_sent).sum::<u64>() - before;
            cpu += hub.traffic().iter().skip(1).map(|t| t.engine_seconds).sum::<f64>() - cpu_before;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let per = (trainers * epochs as usize) as f64;
    Cost {
        control_per_epoch: control as f64 / per,
        start_messages: start as f64 / world as f64,
        cpu_per_epoch: cpu / per,
    }
}

fn check(mode: &str, small: (usize, Cost), large: (usize, Cost)) {
    let growth = large.0 as f64 / small.0 as f64;
    println!(
        "{mode}: control bytes per rank and epoch {:.0} at {} ranks, {:.0} at {} ({:.2}x for {growth:.1}x the ranks); \
         start-up messages per rank {:.0} and {:.0}; engine CPU per rank and epoch {:.2} ms and {:.2} ms",
        small.1.control_per_epoch,
        small.0,
        large.1.control_per_epoch,
        large.0,
        large.1.control_per_epoch / small.1.control_per_epoch,
        small.1.start_messages,
        large.1.start_messages,
        small.1.cpu_per_epoch * 1e3,
        large.1.cpu_per_epoch * 1e3,
    );
    assert!(
        large.1.control_per_epoch <= growth * small.1.control_per_epoch * 1.1,
        "{mode}: control bytes grew faster than the ranks"
    );
    assert!(large.1.start_messages <= growth * small.1.start_messages * 1.1, "{mode}: start-up grew faster");
}

#[test]
fn control_bytes_and_start_up_grow_no_faster_than_the_ranks_at_256_in_peer_mode() {
    check("peer", (64, peer_cost(64)), (256, peer_cost(256)));
}

#[test]
fn control_bytes_and_start_up_grow_no_faster_than_the_ranks_at_256_in_store_mode() {
    check("store", (64, store_cost(64)), (256, store_cost(256)));
}
