//! The exchange's rank side: a worker of the runtime's epoch loop on a thread of its own. It
//! decodes every epoch straight into the rank's shared record store ([`RankStore`], over the
//! `StoreCore` Python made for the job) and tells Python what arrived through a channel
//! ([`ChannelSink`]). An epoch is handed to Python when it is decoded. As soon as Python takes
//! it, the worker drops from the store the records the rank no longer keeps (Python has
//! finished the epoch before; the new batch stays), then acknowledges the epoch to the master,
//! so the next epoch's delivery runs while Python trains on this one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numpy::IntoPyArray;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ubershuffle_codes::{CodecError, RecordSource, RecordWriter};
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::exchange::{Delivery, DeliveryFigures, RecordSink};
use ubershuffle_runtime::protocol::{JobSpec, RecordShape};
use ubershuffle_runtime::{
    ReadRecords, RuntimeError, WorkerExit, WorkerOptions, WorkerStore, read_found, run_worker_with,
};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::{TcpConfig, connect_worker};

use crate::errors::{Failure, Outcome, bad, catch, one_line};
use crate::store::{MappedStore, StoreCore, ids_array, locked};

/// What the worker thread tells Python.
enum Event {
    Joined {
        worker: u32,
        workers: u32,
        capacity: u32,
        width: u32,
        offsets: Vec<i64>,
    },
    Records(usize),
    CacheReady,
    Epoch(EpochEvent),
    Members(Vec<u32>),
    /// The worker's run ended: `Ok` when the master said stop.
    Ended(Result<(), String>),
}

struct EpochEvent {
    epoch: u32,
    attempt: u32,
    batch: Vec<u32>,
    new_ids: Vec<u32>,
    cache_after: Vec<u32>,
    figures: DeliveryFigures,
}

/// A rank's record store as the worker keeps it: the shared store Python reads, and the
/// records dropped when Python took the last epoch, kept aside until the master's next order
/// says which cache it assumes (a master that loses another rank restarts the epoch from the
/// cache before it).
struct RankStore {
    store: Arc<Mutex<MappedStore>>,
    retired: Vec<(u32, Vec<u8>)>,
}

impl RankStore {
    fn lock(&self) -> MutexGuard<'_, MappedStore> {
        locked(&self.store)
    }
}

impl RecordSource for RankStore {
    fn size(&self, id: u32) -> Option<u64> {
        self.lock().size(id)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        self.lock().xor_piece_into(id, at, dst)
    }
}

impl RecordWriter for RankStore {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError> {
        self.lock().write_at(id, at, bytes)
    }

    fn complete(&mut self, id: u32) -> Result<(), CodecError> {
        self.lock().complete(id)
    }
}

impl ReadRecords for RankStore {
    fn read(&self, ids: &[u32], read: &mut dyn FnMut(&[&[u8]])) -> Result<(), CodecError> {
        let store = self.lock();
        read_found(ids, |id| store.get(id), read)
    }
}

/// A store error as the codec's (what a worker's store reports).
fn codec(e: crate::store::StoreError) -> CodecError {
    match e {
        crate::store::StoreError::Codec(c) => c,
        other => CodecError::MalformedPacket { reason: one_line(&other) },
    }
}

impl WorkerStore for RankStore {
    fn put(&mut self, id: u32, bytes: &[u8]) -> Result<(), CodecError> {
        self.lock().put(id, bytes).map_err(codec)
    }

    fn start_epoch(&mut self, cache: &[u32]) -> Result<(), CodecError> {
        let retired = std::mem::take(&mut self.retired);
        let mut store = locked(&self.store);
        for (id, bytes) in retired {
            if cache.binary_search(&id).is_ok() && !store.is_held(id) {
                store.put(id, &bytes).map_err(codec)?;
            }
        }
        match cache.iter().find(|&&id| !store.is_held(id)) {
            Some(&point) => Err(CodecError::UnknownPoint { point }),
            None => Ok(()),
        }
    }

    fn taken(&mut self, before: &[u32], after: &[u32]) -> Result<(), CodecError> {
        let mut store = locked(&self.store);
        let gone: Vec<u32> =
            store.held_ids().into_iter().filter(|id| after.binary_search(id).is_err()).collect();
        self.retired = gone
            .iter()
            .filter(|id| before.binary_search(id).is_ok())
            .filter_map(|&id| store.get(id).map(|bytes| (id, bytes.to_vec())))
            .collect();
        store.evict(&gone);
        Ok(())
    }
}

/// The sink of the worker thread: every event goes to Python; the job's store comes from
/// Python; an epoch waits until Python has taken it.
struct ChannelSink {
    events: Sender<Event>,
    stores: Receiver<Arc<Mutex<MappedStore>>>,
    taken: Receiver<()>,
}

impl ChannelSink {
    fn send(&self, e: Event) -> Result<(), RuntimeError> {
        self.events.send(e).map_err(|_| RuntimeError::SinkClosed)
    }
}

impl RecordSink for ChannelSink {
    fn store(
        &mut self,
        job: &JobSpec,
        shape: &RecordShape,
    ) -> Result<Option<Box<dyn WorkerStore>>, RuntimeError> {
        let offsets: Vec<i64> = match shape {
            RecordShape::Segmented(s) => s.index().offsets().iter().map(|&o| o as i64).collect(),
            _ => (0..=i64::from(job.points)).map(|i| i * i64::from(job.record_width)).collect(),
        };
        self.send(Event::Joined {
            worker: job.worker,
            workers: job.workers,
            capacity: job.cache_capacity,
            width: job.record_width,
            offsets,
        })?;
        // Python opens the store for these offsets and hands it over (or closes: then none comes).
        let store = self.stores.recv().map_err(|_| RuntimeError::SinkClosed)?;
        Ok(Some(Box::new(RankStore { store, retired: Vec::new() })))
    }

    fn starting_records(&mut self, ids: &[u32], _bytes: &[u8]) -> Result<(), RuntimeError> {
        self.send(Event::Records(ids.len()))
    }

    fn cache_ready(&mut self) {
        let _ = self.events.send(Event::CacheReady);
    }

    fn epoch(&mut self, d: Delivery<'_>) -> Result<(), RuntimeError> {
        self.send(Event::Epoch(EpochEvent {
            epoch: d.epoch,
            attempt: d.attempt,
            batch: d.batch.to_vec(),
            new_ids: d.new_ids,
            cache_after: d.cache_after.to_vec(),
            figures: d.figures,
        }))?;
        self.taken.recv().map_err(|_| RuntimeError::SinkClosed)
    }

    fn members(&mut self, workers: &[u32]) {
        let _ = self.events.send(Event::Members(workers.to_vec()));
    }
}

/// Joins the master at `address` and runs the worker until it stops, sending every event.
fn run_rank(address: &str, config: &TcpConfig, mut sink: ChannelSink) {
    let outcome = (|| -> Result<(), String> {
        let mut t = connect_worker(address, config).map_err(|e| one_line(&e))?;
        match ClusterJob::receive(&mut t).map_err(|e| one_line(&e))? {
            ClusterJob::EpochLoop { timeout, .. } => t.set_timeout(timeout),
            ClusterJob::BroadcastDemo => return Err("the master runs the broadcast demo, not serve".into()),
        }
        let summary = run_worker_with(t, &WorkerOptions::default(), &mut sink).map_err(|e| one_line(&e))?;
        match summary.exit {
            WorkerExit::Stopped => Ok(()),
            WorkerExit::InjectedFailure => Err("the exchange was closed".into()),
        }
    })();
    let _ = sink.events.send(Event::Ended(outcome));
}

/// One rank of the exchange (see the module's docs). Every method takes it shared, so one
/// thread may close it while another waits in [`ExchangeCore::next_event`].
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct ExchangeCore {
    /// The worker thread's events; `None` once closed.
    events: Mutex<Option<Receiver<Event>>>,
    /// Where the store Python opens for the job goes; `None` once handed over or closed.
    stores: Mutex<Option<SyncSender<Arc<Mutex<MappedStore>>>>>,
    /// Tells the worker that Python took an epoch; `None` once closed.
    taken: Mutex<Option<SyncSender<()>>>,
    closed: AtomicBool,
    ended: Mutex<Option<Result<(), String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A Python float of seconds as a duration, checked.
fn duration(what: &str, seconds: f64) -> Outcome<Duration> {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero() && seconds < 1e9)
        .ok_or_else(|| bad(format!("{what} must be a positive number of seconds below 1e9, got {seconds}")))
}

/// A mutex's contents, whether or not a panic poisoned it (they are plain handles).
fn hold<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[pymethods]
impl ExchangeCore {
    /// Starts joining the master at `address` on a thread; [`ExchangeCore::next_event`]
    /// reports the job, the starting records and the epochs.
    #[new]
    fn py_new(address: String, token: String, timeout: f64, join_timeout: f64) -> PyResult<Self> {
        Ok(catch(|| {
            if token.is_empty() {
                return Err(bad("the token is empty: pass token= or set UBERSHUFFLE_TOKEN"));
            }
            let config = TcpConfig::new(token)
                .with_timeout(duration("timeout", timeout)?)
                .with_join_timeout(duration("join_timeout", join_timeout)?)
                .with_max_message(u32::MAX as usize)
                .with_join_limits(Some(ubershuffle_runtime::join_limits()));
            let (events_tx, events) = channel();
            let (stores, stores_rx) = sync_channel(1);
            let (taken, taken_rx) = sync_channel(1);
            let sink = ChannelSink { events: events_tx, stores: stores_rx, taken: taken_rx };
            let thread = std::thread::Builder::new()
                .name("ubershuffle-exchange".into())
                .spawn(move || run_rank(&address, &config, sink))
                .map_err(|e| Failure::Internal(format!("cannot start the exchange thread: {e}")))?;
            Ok(ExchangeCore {
                events: Mutex::new(Some(events)),
                stores: Mutex::new(Some(stores)),
                taken: Mutex::new(Some(taken)),
                closed: AtomicBool::new(false),
                ended: Mutex::new(None),
                thread: Mutex::new(Some(thread)),
            })
        })?)
    }

    /// Hands the worker the store Python opened for the job's records (after the `joined`
    /// event): the worker writes the starting cache and every epoch's records into it.
    fn attach(&self, store: PyRef<'_, StoreCore>) -> PyResult<()> {
        let sender = hold(&self.stores).take();
        match sender {
            Some(s) => {
                s.try_send(store.shared()).map_err(|_| PyRuntimeError::new_err("the exchange has ended"))
            }
            None => Err(PyRuntimeError::new_err("the exchange has a store already, or was closed")),
        }
    }

    /// The next event, waiting without the GIL up to `timeout` seconds (`None`: until the
    /// worker ends). Returns a dict with `kind`: `joined` (with the data set's `offsets`),
    /// `records`, `ready`, `epoch`, `members`, `ended` or `timeout`. An `epoch` is taken by
    /// returning it: the worker drops from the store what the rank no longer keeps and
    /// acknowledges the epoch to the master at once.
    #[pyo3(signature = (timeout=None))]
    fn next_event<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        // A panic never crosses into Python.
        let call = std::panic::AssertUnwindSafe(|| self.event(py, timeout));
        std::panic::catch_unwind(call).unwrap_or_else(|_| {
            Err(PyRuntimeError::new_err("internal error in ubershuffle (a Rust panic in the exchange)"))
        })
    }

    /// Leaves the cluster: the worker thread ends at its next hand-over (the master sees this
    /// rank gone); a wait in another thread returns `ended`. Safe from any thread.
    fn close(&self, py: Python<'_>) {
        self.closed.store(true, Ordering::SeqCst);
        // Dropping our ends makes the worker's next hand-over fail, which ends its run.
        hold(&self.taken).take();
        hold(&self.stores).take();
        let thread = hold(&self.thread).take();
        // A wait in progress holds the events for at most one slice.
        py.detach(|| {
            hold(&self.events).take();
            // The thread may wait on the network up to its timeouts: do not wait for it.
            drop(thread);
        });
    }
}

impl ExchangeCore {
    /// [`ExchangeCore::next_event`]'s work.
    fn event<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let ended = |d: &Bound<'py, PyDict>, error: Option<&str>| -> PyResult<()> {
            d.set_item("kind", "ended")?;
            d.set_item("error", error)
        };
        if self.closed.load(Ordering::SeqCst) {
            ended(&d, Some("the exchange was closed"))?;
            return Ok(d);
        }
        if let Some(outcome) = hold(&self.ended).as_ref() {
            ended(&d, outcome.as_ref().err().map(String::as_str))?;
            return Ok(d);
        }
        let limit = timeout.map(|t| duration("timeout", t)).transpose().map_err(PyErr::from)?;
        let Some(event) = self.wait(py, limit)? else {
            d.set_item("kind", "timeout")?;
            return Ok(d);
        };
        match event {
            Event::Joined { worker, workers, capacity, width, offsets } => {
                d.set_item("kind", "joined")?;
                d.set_item("rank", worker)?;
                d.set_item("world", workers)?;
                d.set_item("cache_capacity", capacity)?;
                d.set_item("record_size", (width > 0).then_some(width))?;
                d.set_item("offsets", offsets.into_pyarray(py))?;
            }
            Event::Records(count) => {
                d.set_item("kind", "records")?;
                d.set_item("count", count)?;
            }
            Event::CacheReady => d.set_item("kind", "ready")?,
            Event::Epoch(e) => {
                epoch_dict(py, &d, e)?;
                // Taken: the worker drops what the rank no longer keeps and acknowledges the
                // epoch while Python trains on it.
                if let Some(taken) = hold(&self.taken).as_ref() {
                    let _ = taken.try_send(());
                }
            }
            Event::Members(workers) => {
                d.set_item("kind", "members")?;
                d.set_item("workers", ids_array(py, &workers))?;
            }
            Event::Ended(outcome) => {
                ended(&d, outcome.as_ref().err().map(String::as_str))?;
                *hold(&self.ended) = Some(outcome);
            }
        }
        Ok(d)
    }

    /// Waits for an event without the GIL, in slices so that Ctrl-C reaches Python and a close
    /// from another thread ends the wait.
    fn wait(&self, py: Python<'_>, limit: Option<Duration>) -> PyResult<Option<Event>> {
        let start = Instant::now();
        loop {
            // A close from another thread ends the wait at the next slice; checked before the
            // events are locked again, so that the wait does not starve the close of the lock.
            if self.closed.load(Ordering::SeqCst) {
                return Ok(Some(Event::Ended(Err("the exchange was closed".into()))));
            }
            let slice = Duration::from_millis(100);
            let slice = limit.map_or(slice, |l| slice.min(l.saturating_sub(start.elapsed())));
            let received = py.detach(|| match hold(&self.events).as_ref() {
                Some(events) => events.recv_timeout(slice),
                None => Err(RecvTimeoutError::Disconnected),
            });
            match received {
                Ok(e) => return Ok(Some(e)),
                Err(RecvTimeoutError::Disconnected) if self.closed.load(Ordering::SeqCst) => {
                    return Ok(Some(Event::Ended(Err("the exchange was closed".into()))));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err("the exchange's worker thread is gone"));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            py.check_signals()?;
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return Ok(None);
            }
        }
    }
}

/// The epoch event as a dict.
fn epoch_dict<'py>(py: Python<'py>, d: &Bound<'py, PyDict>, e: EpochEvent) -> PyResult<()> {
    d.set_item("kind", "epoch")?;
    d.set_item("epoch", e.epoch)?;
    d.set_item("attempt", e.attempt)?;
    d.set_item("batch", ids_array(py, &e.batch))?;
    d.set_item("new_ids", ids_array(py, &e.new_ids))?;
    d.set_item("cache", ids_array(py, &e.cache_after))?;
    let f = e.figures;
    d.set_item("bytes_received", f.received_bytes)?;
    d.set_item("packets", f.packets)?;
    d.set_item("coded_packets", f.coded_packets)?;
    d.set_item("uncoded_packets", f.packets - f.coded_packets)?;
    d.set_item("padding_bytes", f.padding_bytes)?;
    d.set_item("receive_seconds", f.receive_seconds)?;
    d.set_item("decode_seconds", f.decode_seconds)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_codes::RecordIndex;

    #[test]
    fn a_taken_epoch_drops_what_the_rank_no_longer_keeps_and_a_restart_gets_it_back() {
        let dir = std::env::temp_dir().join(format!("ubs-rank-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let index = RecordIndex::from_sizes([3u64, 5000, 0, 7, 4096]).unwrap();
        let shared = Arc::new(Mutex::new(MappedStore::open(&dir, index).unwrap()));
        let mut store = RankStore { store: Arc::clone(&shared), retired: Vec::new() };
        let bytes = |id: u32| -> Vec<u8> { vec![id as u8 + 1; [3, 5000, 0, 7, 4096][id as usize]] };
        for id in [0, 1, 2, 3] {
            store.put(id, &bytes(id)).unwrap();
        }
        // The epoch started from [0, 1, 2] and keeps [0, 3]; 3 arrived with it.
        store.start_epoch(&[0, 1, 2]).unwrap();
        store.taken(&[0, 1, 2], &[0, 3]).unwrap();
        assert_eq!(locked(&shared).held_ids(), vec![0, 3], "only the cache it keeps");
        // The master restarts the epoch from the cache before it: it is whole again.
        store.start_epoch(&[0, 1, 2]).unwrap();
        assert_eq!(locked(&shared).held_ids(), vec![0, 1, 2, 3]);
        let mut read = Vec::new();
        store.read(&[1, 2], &mut |views| read = views.iter().map(|v| v.to_vec()).collect()).unwrap();
        assert_eq!(read, vec![bytes(1), bytes(2)]);
        // The next epoch starts from the cache after it: what was set aside is gone for good.
        store.taken(&[0, 1, 2], &[0, 3]).unwrap();
        store.start_epoch(&[0, 3]).unwrap();
        assert!(store.retired.is_empty());
        assert!(matches!(store.start_epoch(&[1]), Err(CodecError::UnknownPoint { point: 1 })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
