//! A store outside the job: the engine's store rank in a process of its own, serving one
//! training job across its attempts. The training ranks meet at the store ([`super::host`]);
//! each attempt is a plane of its own (the store is rank 0), and the store's record store
//! outlives them, so a restarted job's store reads nothing again.
//!
//! How an attempt ends decides what the store does next:
//! - every training rank closed after the job's last epoch was served: the job is done, and
//!   [`serve_outside`] returns;
//! - the ranks closed earlier, or a rank failed (killed, silent, refused): the store logs it
//!   and meets the next attempt, as torchrun restarts every rank of a job when one fails. The
//!   next attempt's ranks catch up from what they hold (nothing, in fresh processes).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::host::Host;
use super::mesh::{JobKey, Listener, link_up};
use super::{Hooks, Plane};
use crate::engine::{EngineConfig, Figures};
use crate::error::PlaneError;
use crate::store::SharedStore;

/// What a store outside the job serves.
#[derive(Clone, Debug)]
pub struct Outside {
    /// Training ranks of every attempt.
    pub trainers: usize,
    /// Epochs the job trains (`0..epochs`): the store ends once an attempt served the last one
    /// and its ranks closed. `None`: it meets attempts for as long as they come.
    pub epochs: Option<u64>,
    /// How long the store waits for an attempt's ranks to join (`None`: as long as it takes).
    pub join_deadline: Option<Duration>,
    /// How long linking up may take.
    pub link_deadline: Duration,
    /// What every training rank is told when it joins (the job's settings, say).
    pub about: Vec<u8>,
}

/// How one attempt ended.
#[derive(Debug)]
pub enum AttemptEnd {
    /// Its ranks closed after the job's last epoch: the job is done.
    Finished,
    /// Its ranks closed before the job's last epoch.
    Closed,
    /// A rank failed, or the attempt could not start.
    Failed(PlaneError),
}

/// Serves `outside`'s job at `host`, attempt after attempt (see the module's docs): each
/// attempt's engine runs `engine` (rank 0, the store) over `store` with fresh `hooks()`, and
/// `report` hears the number, figures and end of every attempt. Returns once an attempt
/// finished the job; fails when no attempt joins within the join deadline.
pub fn serve_outside(
    host: &Host,
    key: &JobKey,
    outside: &Outside,
    (engine, store): (&EngineConfig, &SharedStore),
    mut hooks: impl FnMut() -> Box<dyn Hooks>,
    mut report: impl FnMut(usize, &[Figures], &AttemptEnd),
) -> Result<(), PlaneError> {
    let mut last_failure: Option<PlaneError> = None;
    for attempt in 0.. {
        let listener = Listener::bind(host.address()?.ip())?;
        let engine_address: SocketAddr = listener.address()?;
        let deadlines = (outside.join_deadline, outside.link_deadline);
        let mesh = match host.meet(key, outside.trainers, engine_address, &outside.about, deadlines) {
            Ok(mesh) => mesh,
            Err(e) => {
                return Err(match last_failure {
                    Some(before) => PlaneError::Mismatch(format!("{e}; the attempt before failed: {before}")),
                    None => e,
                });
            }
        };
        let (served, end) = run_attempt(listener, &mesh, engine, store, hooks(), outside.epochs);
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
    plane.close();
    match served {
        Ok(figures) => {
            let last = figures.iter().map(|f| f.count_of("epoch")).max();
            let finished = match (epochs, last) {
                (Some(n), Some(last)) => last + 1 >= n,
                _ => false,
            };
            (figures, if finished { AttemptEnd::Finished } else { AttemptEnd::Closed })
        }
        Err(e) => (Vec::new(), AttemptEnd::Failed(e)),
    }
}
