//! A job of in-process engines over the hub: records of uneven size that are a function of
//! their id (so any rank's bytes can be checked), a temporary record store per rank, and the
//! chain of a seed.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ubershuffle_codes::RecordIndex;
use ubershuffle_core::epoch_chain::{ChainParams, ChainStart};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::hub::{Caller, Hub};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::{MappedStore, SharedStore, locked};
use ubershuffle_plane::{Engine, EngineConfig, Figures, Input, Output, PlaneError, Schedule};

/// Record `id`'s bytes: `size` bytes of a stream keyed by the id.
pub fn record(id: u32, size: u64) -> Vec<u8> {
    let mut x = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Puts records `ids` (their bytes by [`record`]) into `store`; returns their count and bytes,
/// as a source's read does.
pub fn put_records(store: &SharedStore, ids: &[u32]) -> Result<(u64, u64), String> {
    let mut store = locked(store);
    let mut bytes = 0;
    for &id in ids {
        let size = store.index().size(id).unwrap();
        store.put(id, &record(id, size)).map_err(|e| e.to_string())?;
        bytes += size;
    }
    Ok((ids.len() as u64, bytes))
}

/// Sizes from 0 to a few KiB, every 13th record empty.
pub fn sizes(count: usize, seed: u64) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    (0..count)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 13 == 0 { 0 } else { x % 5000 }
        })
        .collect()
}

/// A folder of this test process's own.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ubs-plane-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The job: the hub, every rank's store, the data set's index, and the chain.
pub struct Job {
    pub hub: Hub,
    pub stores: Vec<SharedStore>,
    pub index: RecordIndex,
    pub schedule: ChainSchedule,
    pub dir: PathBuf,
}

/// Reads from the "source" (the records' function) into a rank's store.
pub struct Source {
    pub stores: Vec<SharedStore>,
    pub reads: Vec<u64>,
    /// Every rank's ids read, in the order read.
    pub read_ids: Vec<Vec<u32>>,
}

impl Caller for Source {
    fn read(&mut self, rank: usize, ids: &[u32]) -> Result<(u64, u64), String> {
        let mut store = locked(&self.stores[rank]);
        let mut bytes = 0;
        for &id in ids {
            let size = store.index().size(id).unwrap();
            store.put(id, &record(id, size)).map_err(|e| e.to_string())?;
            bytes += size;
        }
        self.reads[rank] += ids.len() as u64;
        self.read_ids[rank].extend_from_slice(ids);
        Ok((ids.len() as u64, bytes))
    }

    fn content(&mut self, rank: usize) -> u64 {
        // Every rank reads the same records: one digest (a rank told to differ adds its rank).
        let _ = rank;
        7
    }
}

/// What a job is built with.
pub struct Setting {
    pub world: usize,
    pub records: usize,
    pub policy: ExchangePolicy,
    pub seed: u64,
    pub timeout: f64,
    pub chunk_bytes: u64,
    pub yielding: bool,
    /// How the chain's first epoch is made.
    pub start: ChainStart,
}

impl Setting {
    pub fn peer(world: usize, records: usize) -> Setting {
        Setting {
            world,
            records,
            policy: ExchangePolicy::new("global", None).unwrap(),
            seed: 3,
            timeout: 10.0,
            chunk_bytes: 16 << 10,
            yielding: false,
            start: ChainStart::Random,
        }
    }
}

/// The config of `rank` of a store-mode job of `world` ranks whose store is `store` (the one
/// rank that reads the source), not yielding, in 512-byte segments and 16 KiB rounds.
pub fn store_config(rank: usize, world: usize, store: usize) -> EngineConfig {
    EngineConfig {
        rank,
        world,
        timeout: 10.0,
        plane: "ShuffleGroup".into(),
        settings: vec![("mode".into(), "'store'".into())],
        reads_source: rank == store,
        store_error: None,
        chunk_bytes: 8 << 10,
        yield_to_gradients: false,
        store_rank: Some(store),
        segment_bytes: 512,
        round_bytes: 16 << 10,
        link_rate: 0.0,
    }
}

pub fn config(s: &Setting, rank: usize) -> EngineConfig {
    EngineConfig {
        rank,
        world: s.world,
        timeout: s.timeout,
        plane: "ShuffleGroup".into(),
        settings: vec![("seed".into(), s.seed.to_string()), ("policy".into(), s.policy.name().into())],
        reads_source: true,
        store_error: None,
        chunk_bytes: s.chunk_bytes,
        yield_to_gradients: s.yielding,
        store_rank: None,
        segment_bytes: 0,
        round_bytes: 16 << 20,
        link_rate: 0.0,
    }
}

impl Job {
    pub fn new(name: &str, s: &Setting) -> Job {
        Job::with_configs(name, s, |_, c| c)
    }

    /// A job whose configs `edit` may change (a rank given another setting).
    pub fn with_configs(name: &str, s: &Setting, edit: impl Fn(usize, EngineConfig) -> EngineConfig) -> Job {
        let dir = scratch(name);
        let index = RecordIndex::from_sizes(sizes(s.records, s.seed)).unwrap();
        let stores: Vec<SharedStore> = (0..s.world)
            .map(|r| {
                let store = MappedStore::open(&dir.join(format!("rank-{r}")), index.clone()).unwrap();
                Arc::new(Mutex::new(store))
            })
            .collect();
        let engines = (0..s.world)
            .map(|r| Engine::new(edit(r, config(s, r)), Some(Arc::clone(&stores[r])), 0.0))
            .collect();
        let params = ChainParams::new(s.world, s.records, s.policy, s.seed).with_start(s.start);
        let schedule = ChainSchedule::new(params, "uncoded").unwrap();
        Job { hub: Hub::new(engines, 0.0), stores, index, schedule, dir }
    }

    pub fn source(&self) -> Source {
        let ranks = self.stores.len();
        Source { stores: self.stores.clone(), reads: vec![0; ranks], read_ids: vec![Vec::new(); ranks] }
    }

    /// Every rank asks for `epoch`; runs until nothing moves; returns every rank's outputs.
    pub fn epoch(&mut self, epoch: u64, source: &mut Source) -> Vec<Vec<Output>> {
        let at = self.schedule.at(epoch).unwrap();
        for r in 0..self.stores.len() {
            self.hub.input(r, Input::SetEpoch(at.boxed_copy()));
        }
        self.hub.run(source);
        (0..self.stores.len()).map(|r| self.hub.take_outputs(r)).collect()
    }

    /// Checks that every rank holds its target of `epoch`, every byte right, and nothing but
    /// it and the next epoch's (delivered ahead).
    pub fn check_holds(&self, epoch: u64) {
        let targets = self.schedule.at(epoch).unwrap().targets();
        let next = self.schedule.at(epoch + 1).unwrap().targets();
        for (r, target) in targets.iter().enumerate() {
            let store = locked(&self.stores[r]);
            for &id in target {
                let got =
                    store.get(id).unwrap_or_else(|| panic!("rank {r} lacks record {id} at epoch {epoch}"));
                assert_eq!(got, &record(id, self.index.size(id).unwrap())[..], "rank {r}, record {id}");
            }
            for id in store.held_ids() {
                let wanted = target.binary_search(&id).is_ok() || next[r].binary_search(&id).is_ok();
                assert!(wanted, "rank {r} holds record {id}, of neither epoch {epoch} nor the next");
                assert_eq!(store.get(id).unwrap(), &record(id, self.index.size(id).unwrap())[..]);
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The figures of the `Ready` among `outputs`, or the failure.
pub fn ready(outputs: &[Output], epoch: u64) -> Result<Figures, PlaneError> {
    for o in outputs {
        match o {
            Output::Ready { epoch: e, figures } if *e == epoch => return Ok((**figures).clone()),
            Output::Failed(e) => return Err(e.clone()),
            _ => {}
        }
    }
    panic!("no answer for epoch {epoch}: {outputs:?}")
}

/// The first failure among `outputs`.
pub fn failure(outputs: &[Output]) -> Option<PlaneError> {
    outputs.iter().find_map(|o| if let Output::Failed(e) = o { Some(e.clone()) } else { None })
}
