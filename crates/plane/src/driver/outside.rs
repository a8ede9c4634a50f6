//! A store outside the job: the engine's store rank in a process of its own, serving one
//! training job across its attempts. The training ranks meet at the store ([`super::host`]);
//! each attempt is a plane of its own (the training ranks `0..n`, the store rank `n`), and the
//! store's record store outlives them, so a restarted job's store reads nothing again.
//!
//! How an attempt ends decides what the store does next:
//! - every training rank closed having taken the job's last epoch (each rank's close says
//!   which epoch it took last): the job is done, and [`serve_outside`] returns;
//! - the ranks closed earlier, or a rank failed (killed, silent, refused): the store logs it
//!   and meets the next attempt, as torchrun restarts every rank of a job when one fails. The
//!   next attempt's ranks catch up from what they hold (nothing, in fresh processes).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::host::Host;
use super::mesh::{JobKey, Listener, link_up};
use super::{Hooks, Plane};
use crate::engine::{EngineConfig, Figures};
use crate::error::PlaneError;
use crate::reader::RecordReader;
use crate::schedule::{ChainSchedule, Schedule};
use crate::store::SharedStore;

/// What a store outside the job serves.
#[derive(Clone, Debug)]
pub struct Outside {
    /// Training ranks of every attempt.
    pub trainers: usize,
    /// Epochs the job trains (`0..epochs`): the store ends once an attempt's ranks closed
    /// having taken the last one. `None`: it meets attempts for as long as they come.
    pub epochs: Option<u64>,
    /// How long the store waits for an attempt's ranks to join (`None`: as long as it takes).
    pub join_deadline: Option<Duration>,
    /// How long linking up may take.
    pub link_deadline: Duration,
    /// What every training rank is told when it joins (the job's settings, say).
    pub about: Vec<u8>,
    /// Set, the store meets no further attempt (one under way runs to its end).
    pub stop: Arc<AtomicBool>,
}

/// How one attempt ended.
#[derive(Clone, Debug)]
pub enum AttemptEnd {
    /// Its ranks closed after the job's last epoch: the job is done.
    Finished,
    /// Its ranks closed before the job's last epoch.
    Closed,
    /// A rank failed, or the attempt could not start.
    Failed(PlaneError),
}

/// Serves `outside`'s job at `host`, attempt after attempt (see the module's docs): each
/// attempt's engine runs `engine` (the store: rank and store rank `outside.trainers`) over
/// `store` and `hooks`, and `report`
/// hears the number, figures and end of every attempt. Returns once an attempt finished the
/// job; fails when no attempt joins within the join deadline, or once stopped.
pub fn serve_outside(
    host: &Host,
    key: &JobKey,
    outside: &Outside,
    (engine, store): (&EngineConfig, &SharedStore),
    hooks: Box<dyn Hooks>,
    mut report: impl FnMut(usize, &[Figures], &AttemptEnd),
) -> Result<(), PlaneError> {
    let hooks = Arc::new(Mutex::new(hooks));
    let mut last_failure: Option<PlaneError> = None;
    for attempt in 0.. {
        let listener = Listener::bind(host.address()?.ip())?;
        let engine_address: SocketAddr = listener.address()?;
        let deadlines = (outside.join_deadline, outside.link_deadline);
        let mesh = match host.meet(
            key,
            outside.trainers,
            engine_address,
            &outside.about,
            deadlines,
            &outside.stop,
        ) {
            Ok(mesh) => mesh,
            Err(e) => {
                return Err(match last_failure {
                    Some(before) => PlaneError::Mismatch(format!("{e}; the attempt before failed: {before}")),
                    None => e,
                });
            }
        };
        let hooks = Box::new(Attempt(Arc::clone(&hooks)));
        let (served, end) = run_attempt(listener, &mesh, engine, store, hooks, outside.epochs);
        report(attempt, &served, &end);
        match end {
            AttemptEnd::Finished => return Ok(()),
            AttemptEnd::Closed => tracing::info!("attempt {attempt} of the job closed before its last epoch"),
            AttemptEnd::Failed(e) => {
                tracing::warn!("attempt {attempt} of the job failed: {e}");
                last_failure = Some(e);
            }
        }
    }
    unreachable!("the attempts never run out")
}

/// The store's hooks lent to one attempt (attempts run one after another).
struct Attempt(Arc<Mutex<Box<dyn Hooks>>>);

impl Attempt {
    fn hooks(&self) -> std::sync::MutexGuard<'_, Box<dyn Hooks>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Hooks for Attempt {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        self.hooks().read(ids, store)
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        self.hooks().content_digest()
    }

    fn restore(&mut self, state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        self.hooks().restore(state, epoch)
    }
}

/// One attempt: link up, agree, serve until every training rank closed.
fn run_attempt(
    listener: Listener,
    mesh: &super::mesh::MeshConfig,
    engine: &EngineConfig,
    store: &SharedStore,
    hooks: Box<dyn Hooks>,
    epochs: Option<u64>,
) -> (Vec<Figures>, AttemptEnd) {
    let links = match link_up(listener, mesh) {
        Ok(links) => links,
        Err(e) => return (Vec::new(), AttemptEnd::Failed(e)),
    };
    let plane = match Plane::start(engine.clone(), Some(Arc::clone(store)), links, hooks) {
        Ok(plane) => plane,
        Err(e) => return (Vec::new(), AttemptEnd::Failed(e)),
    };
    let served = plane.wait_agreed().and_then(|()| plane.serve());
    // Whether the ranks' callers took the last epoch before they closed (an epoch served
    // ahead, which no caller took, does not count).
    let taken = plane.closed_after(Duration::from_secs_f64(engine.timeout));
    plane.close();
    match served {
        Ok(figures) => {
            let finished = matches!((epochs, taken), (Some(n), Some(last)) if last + 1 >= n);
            (figures, if finished { AttemptEnd::Finished } else { AttemptEnd::Closed })
        }
        Err(e) => (Vec::new(), AttemptEnd::Failed(e)),
    }
}

/// A store's hooks for a Rust program: the source read by `reader`, the chain restored from
/// the seed, at epoch `e` of the chain of the store's own settings, whatever state the first
/// training rank sends (a training rank on another chain is named at its first stream).
/// Neither a pliable scheme nor a change of the number of training ranks is restored this way.
pub struct SeededStore {
    /// Reads the source.
    pub reader: Box<dyn RecordReader>,
    /// The chain at epoch 0.
    pub schedule: ChainSchedule,
}

impl Hooks for SeededStore {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        Ok((ids.len() as u64, self.reader.read_into(ids, store)?))
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Err("a store outside the job is the one rank that reads the source".into())
    }

    fn restore(&mut self, _state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        Ok(Box::new(self.schedule.at(epoch)?))
    }
}

/// A training rank's hooks for a Rust program served by a store outside the job: it reads no
/// source, and makes its record store in `dir` (kept: a restarted rank is sent only what it
/// lacks) once the store's index comes; [`OpensStore::opened`] is that store.
pub struct OpensStore {
    dir: std::path::PathBuf,
    opened: Arc<Mutex<Option<SharedStore>>>,
}

impl OpensStore {
    /// Hooks that make the record store in `dir`.
    pub fn new(dir: std::path::PathBuf) -> OpensStore {
        OpensStore { dir, opened: Arc::default() }
    }

    /// Where the store will be once made (share it before handing the hooks to the engine).
    pub fn opened(&self) -> Arc<Mutex<Option<SharedStore>>> {
        Arc::clone(&self.opened)
    }
}

impl Hooks for OpensStore {
    fn read(&mut self, _ids: &[u32], _store: &SharedStore) -> Result<(u64, u64), String> {
        Err("a training rank served by a store outside the job reads no source".into())
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Err("a training rank served by a store outside the job reads no source".into())
    }

    fn open_store(&mut self, offsets: &[u64]) -> Result<SharedStore, String> {
        let sizes = offsets.windows(2).map(|w| w[1].saturating_sub(w[0]));
        let index = ubershuffle_codes::RecordIndex::from_sizes(sizes).map_err(|e| e.to_string())?;
        let store = crate::store::MappedStore::open(&self.dir, index).map_err(|e| e.to_string())?;
        let store: SharedStore = Arc::new(Mutex::new(store));
        *self.opened.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&store));
        Ok(store)
    }

    fn sampler_state(&mut self) -> Result<Vec<u8>, String> {
        // The store restores its chain from its own settings (see `SeededStore`).
        Ok(Vec::new())
    }
}

/// A training rank of a job served by a store outside it, as a Rust program runs one: joins
/// the store at `store` (see [`super::host::join`]), its engine listening on `host`; links up
/// with the job's other ranks; starts its engine with the config `config` makes from what it
/// joined (the store's description says the settings) and `hooks`. Returns the plane, agreed,
/// and what it joined.
pub fn join_outside(
    store: SocketAddr,
    key: &JobKey,
    (place, trainers): (Option<usize>, Option<usize>),
    host: std::net::IpAddr,
    deadlines: (Duration, Duration),
    config: impl FnOnce(&super::host::Joined) -> Result<EngineConfig, PlaneError>,
    hooks: Box<dyn Hooks>,
) -> Result<(Plane, super::host::Joined), PlaneError> {
    let listener = Listener::bind(host)?;
    let joined = super::host::join(store, key, (place, trainers), listener.address()?, deadlines)?;
    let cfg = config(&joined)?;
    let links = link_up(listener, &joined.mesh)?;
    let plane = Plane::start(cfg, None, links, hooks)?;
    plane.wait_agreed()?;
    Ok((plane, joined))
}
