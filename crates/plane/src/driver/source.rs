//! What the engine asks of its caller ([`Hooks`]: the source's records, the content digest, a
//! record store, the sampler's state, a restored chain), on a thread of its own so the engine
//! never waits on a file system, an object store or the caller's interpreter; and the store's
//! plans, each on a thread of its own.

use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::time::Instant;

use ubershuffle_codes::Segmentation;

use crate::coded::CodedSend;
use crate::engine::Input;
use crate::error::PlaneError;
use crate::schedule::Schedule;
use crate::store::SharedStore;

use super::Event;

/// What the engine asks of its caller that it cannot do itself (see the module's docs). Every
/// call returns one line of error text when it cannot.
pub trait Hooks: Send {
    /// Reads the records `ids` (sorted) into `store`; returns their count and bytes.
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String>;
    /// A digest of the bytes of this rank's content sample (the same records on every rank,
    /// chosen by the seed), for the start-up agreement.
    fn content_digest(&mut self) -> Result<u64, String>;
    /// Makes this rank's record store for a data set of `offsets` (a store-mode training rank
    /// without a source).
    fn open_store(&mut self, offsets: &[u64]) -> Result<SharedStore, String> {
        let _ = offsets;
        Err("this rank cannot make a record store".into())
    }
    /// The sampler's state, for the store (the first training rank's catch-up).
    fn sampler_state(&mut self) -> Result<Vec<u8>, String> {
        Err("this rank keeps no sampler state".into())
    }
    /// The chain restored from a training rank's sampler `state`, at `epoch` (the store).
    fn restore(&mut self, state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        let _ = (state, epoch);
        Err("this rank cannot restore a chain".into())
    }
}

/// What the hooks' thread is asked.
pub(super) enum Job {
    Read(u64, Vec<u32>, SharedStore),
    Content,
    OpenStore(Vec<u64>),
    State,
    Restore(Vec<u8>, u64),
}

/// Starts the reader thread; returns where to send it jobs.
pub(super) fn spawn(mut reader: Box<dyn Hooks>, events: Sender<Event>) -> Result<Sender<Job>, PlaneError> {
    let (tx, rx) = channel::<Job>();
    std::thread::Builder::new()
        .name("ubershuffle-source".into())
        .spawn(move || {
            for job in rx {
                let input = match job {
                    Job::Read(epoch, ids, store) => {
                        Input::SourceRead { epoch, result: reader.read(&ids, &store) }
                    }
                    Job::Content => match reader.content_digest() {
                        Ok(d) => Input::Content(d),
                        Err(e) => Input::Fail(PlaneError::Source(e)),
                    },
                    Job::OpenStore(offsets) => Input::Store(reader.open_store(&offsets)),
                    Job::State => match reader.sampler_state() {
                        Ok(state) => Input::State(state),
                        Err(e) => Input::Fail(PlaneError::Internal(format!("the sampler's state: {e}"))),
                    },
                    Job::Restore(state, epoch) => Input::Restored(reader.restore(&state, epoch)),
                };
                if events.send(Event::Source(input)).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| PlaneError::Internal(format!("cannot start the source's thread: {e}")))?;
    Ok(tx)
}

/// How much lower than the process the planner's thread runs (a nice value): the search
/// yields the cores to the threads that send, and takes what they leave.
const PLANNER_NICENESS: i32 = 10;

/// Lowers the calling thread's priority by [`PLANNER_NICENESS`] (best effort: Linux sets a
/// nice value per thread; elsewhere nothing changes).
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        let me = rustix::thread::gettid();
        if let Ok(now) = rustix::process::getpriority_process(Some(me)) {
            let _ = rustix::process::setpriority_process(Some(me), (now + PLANNER_NICENESS).min(19));
        }
    }
}

/// Plans the coded delivery of the epoch after `schedule`'s on a thread of its own, at a lower
/// priority, then tells the engine.
pub(super) fn plan(
    schedule: Box<dyn Schedule>,
    segmentation: Arc<Segmentation>,
    (round_bytes, link_rate): (u64, f64),
    events: Sender<Event>,
) -> Result<(), PlaneError> {
    std::thread::Builder::new()
        .name("ubershuffle-plan".into())
        .spawn(move || {
            lower_this_threads_priority();
            let started = Instant::now();
            let result = CodedSend::plan(schedule.as_ref(), segmentation, round_bytes, link_rate)
                .map(Box::new)
                .map_err(|e| e.to_string());
            let input = Input::Planned {
                epoch: schedule.epoch() + 1,
                digest: schedule.digest(),
                result,
                seconds: started.elapsed().as_secs_f64(),
            };
            let _ = events.send(Event::Source(input));
        })
        .map(drop)
        .map_err(|e| PlaneError::Internal(format!("cannot start a planner's thread: {e}")))
}
