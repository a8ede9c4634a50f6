//! The exchange's rank side: a worker of the runtime's epoch loop on a thread of its own,
//! handing what it receives to Python through a channel ([`ChannelSink`]); Python fills its
//! record store from each event ([`ExchangeCore::next_event`] writes the rows straight into the
//! numpy array). An epoch is acknowledged to the master only once Python has taken it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numpy::{IntoPyArray, PyReadwriteArray1, PyReadwriteArray2};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::exchange::{Delivery, DeliveryFigures, RecordSink};
use ubershuffle_runtime::protocol::JobSpec;
use ubershuffle_runtime::{RuntimeError, WorkerExit, WorkerOptions, run_worker_with};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::{TcpConfig, connect_worker};

use crate::errors::{Failure, Outcome, bad, catch, one_line};

/// What the worker thread tells Python.
enum Event {
    Joined {
        worker: u32,
        workers: u32,
        points: u32,
        width: u32,
        capacity: u32,
    },
    Records {
        ids: Vec<u32>,
        bytes: Vec<u8>,
    },
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
    new_bytes: Vec<u8>,
    cache_after: Vec<u32>,
    figures: DeliveryFigures,
}

/// The sink of the worker thread: every event goes to Python; an epoch waits for Python to
/// take it (so the master hears the epoch is done only then).
struct ChannelSink {
    events: Sender<Event>,
    taken: Receiver<()>,
}

impl ChannelSink {
    fn send(&self, e: Event) -> Result<(), RuntimeError> {
        self.events.send(e).map_err(|_| closed())
    }
}

/// The error of a worker whose Python side went away.
fn closed() -> RuntimeError {
    RuntimeError::SinkClosed
}

impl RecordSink for ChannelSink {
    fn joined(&mut self, job: &JobSpec) -> Result<(), RuntimeError> {
        self.send(Event::Joined {
            worker: job.worker,
            workers: job.workers,
            points: job.points,
            width: job.record_width,
            capacity: job.cache_capacity,
        })
    }

    fn starting_records(&mut self, ids: &[u32], bytes: &[u8]) -> Result<(), RuntimeError> {
        self.send(Event::Records { ids: ids.to_vec(), bytes: bytes.to_vec() })
    }

    fn cache_ready(&mut self) {
        let _ = self.events.send(Event::CacheReady);
    }

    fn epoch(&mut self, d: Delivery<'_>) -> Result<(), RuntimeError> {
        let mut new_bytes = Vec::with_capacity(d.new_ids.len() * d.store.width());
        for &id in &d.new_ids {
            let record = d.store.get(id).ok_or(ubershuffle_codes::CodecError::UnknownPoint { point: id })?;
            new_bytes.extend_from_slice(record);
        }
        self.send(Event::Epoch(EpochEvent {
            epoch: d.epoch,
            attempt: d.attempt,
            batch: d.batch.to_vec(),
            new_ids: d.new_ids,
            new_bytes,
            cache_after: d.cache_after.to_vec(),
            figures: d.figures,
        }))?;
        self.taken.recv().map_err(|_| closed())
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

/// One rank of the exchange (see the module's docs).
#[pyclass(module = "ubershuffle._native")]
pub struct ExchangeCore {
    events: Mutex<Receiver<Event>>,
    taken: SyncSender<()>,
    thread: Option<JoinHandle<()>>,
    /// An epoch taken but not yet acknowledged.
    owing: bool,
    ended: Option<Result<(), String>>,
    width: usize,
    points: usize,
}

/// A Python float of seconds as a duration, checked.
fn duration(what: &str, seconds: f64) -> Outcome<Duration> {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero() && seconds < 1e9)
        .ok_or_else(|| bad(format!("{what} must be a positive number of seconds below 1e9, got {seconds}")))
}

fn u32s(v: &[u32]) -> Vec<i64> {
    v.iter().map(|&x| i64::from(x)).collect()
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
            let (taken, taken_rx) = sync_channel(1);
            let sink = ChannelSink { events: events_tx, taken: taken_rx };
            let thread = std::thread::Builder::new()
                .name("ubershuffle-exchange".into())
                .spawn(move || run_rank(&address, &config, sink))
                .map_err(|e| Failure::Internal(format!("cannot start the exchange thread: {e}")))?;
            Ok(ExchangeCore {
                events: Mutex::new(events),
                taken,
                thread: Some(thread),
                owing: false,
                ended: None,
                width: 0,
                points: 0,
            })
        })?)
    }

    /// The next event, waiting without the GIL up to `timeout` seconds (`None`: until the
    /// worker ends). Records go straight into `store` (a `(points, width)` uint8 array) and
    /// `present` (a bool per point). Returns a dict with `kind`: `joined`, `records`,
    /// `ready`, `epoch`, `members`, `ended` or `timeout`. Taking an event acknowledges the
    /// epoch taken before.
    #[pyo3(signature = (store, present, timeout=None))]
    fn next_event<'py>(
        &mut self,
        py: Python<'py>,
        store: Option<PyReadwriteArray2<'py, u8>>,
        present: Option<PyReadwriteArray1<'py, bool>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        // A panic never crosses into Python.
        let call = AssertUnwindSafe(|| self.event(py, store, present, timeout));
        catch_unwind(call).unwrap_or_else(|_| {
            Err(PyRuntimeError::new_err("internal error in ubershuffle (a Rust panic in the exchange)"))
        })
    }

    /// Leaves the cluster: the worker thread ends (the master sees this rank gone).
    fn close(&mut self, py: Python<'_>) {
        // Dropping our ends makes the worker's next hand-over fail, which ends its run.
        let (dead_tx, dead_rx) = sync_channel(0);
        drop(dead_rx);
        self.taken = dead_tx;
        let (_, dead_events) = channel();
        self.events = Mutex::new(dead_events);
        if let Some(thread) = self.thread.take() {
            // The thread may wait on the network up to its timeouts: do not wait for it.
            py.detach(move || drop(thread));
        }
    }
}

impl ExchangeCore {
    /// [`ExchangeCore::next_event`]'s work.
    fn event<'py>(
        &mut self,
        py: Python<'py>,
        mut store: Option<PyReadwriteArray2<'py, u8>>,
        mut present: Option<PyReadwriteArray1<'py, bool>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.acknowledge();
        let d = PyDict::new(py);
        if let Some(ended) = &self.ended {
            d.set_item("kind", "ended")?;
            d.set_item("error", ended.as_ref().err())?;
            return Ok(d);
        }
        let limit = timeout.map(|t| duration("timeout", t)).transpose().map_err(PyErr::from)?;
        let Some(event) = self.wait(py, limit)? else {
            d.set_item("kind", "timeout")?;
            return Ok(d);
        };
        match event {
            Event::Joined { worker, workers, points, width, capacity } => {
                (self.width, self.points) = (width as usize, points as usize);
                d.set_item("kind", "joined")?;
                d.set_item("rank", worker)?;
                d.set_item("world", workers)?;
                d.set_item("points", points)?;
                d.set_item("record_size", width)?;
                d.set_item("cache_capacity", capacity)?;
            }
            Event::Records { ids, bytes } => {
                self.fill(&mut store, &mut present, &ids, &bytes)?;
                d.set_item("kind", "records")?;
                d.set_item("count", ids.len())?;
            }
            Event::CacheReady => d.set_item("kind", "ready")?,
            Event::Epoch(e) => {
                let start = Instant::now();
                self.fill(&mut store, &mut present, &e.new_ids, &e.new_bytes)?;
                self.owing = true;
                epoch_dict(py, &d, e, start.elapsed().as_secs_f64())?;
            }
            Event::Members(workers) => {
                d.set_item("kind", "members")?;
                d.set_item("workers", u32s(&workers).into_pyarray(py))?;
            }
            Event::Ended(outcome) => {
                d.set_item("kind", "ended")?;
                d.set_item("error", outcome.as_ref().err())?;
                self.ended = Some(outcome);
            }
        }
        Ok(d)
    }

    /// Lets the worker acknowledge the epoch Python took last.
    fn acknowledge(&mut self) {
        if std::mem::take(&mut self.owing) {
            let _ = self.taken.try_send(());
        }
    }

    /// Waits for an event without the GIL, in slices so that Ctrl-C reaches Python.
    fn wait(&mut self, py: Python<'_>, limit: Option<Duration>) -> PyResult<Option<Event>> {
        let start = Instant::now();
        loop {
            let slice = Duration::from_millis(100);
            let slice = limit.map_or(slice, |l| slice.min(l.saturating_sub(start.elapsed())));
            let events = &self.events;
            let received = py.detach(|| match events.lock() {
                Ok(events) => events.recv_timeout(slice),
                Err(_) => Err(RecvTimeoutError::Disconnected),
            });
            match received {
                Ok(e) => return Ok(Some(e)),
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

    /// Writes records `ids` (bytes back to back) into the store's rows and marks them present.
    fn fill(
        &self,
        store: &mut Option<PyReadwriteArray2<'_, u8>>,
        present: &mut Option<PyReadwriteArray1<'_, bool>>,
        ids: &[u32],
        bytes: &[u8],
    ) -> PyResult<()> {
        let (Some(store), Some(present)) = (store.as_mut(), present.as_mut()) else {
            return Err(PyRuntimeError::new_err("records arrived without a store to fill"));
        };
        let mut rows = store.as_array_mut();
        let mut marks = present.as_array_mut();
        if rows.shape() != [self.points, self.width] || marks.len() != self.points {
            return Err(PyRuntimeError::new_err(format!(
                "the store must be ({}, {}) uint8 with a mask of {}, got {:?} and {}",
                self.points,
                self.width,
                self.points,
                rows.shape(),
                marks.len()
            )));
        }
        for (&id, record) in ids.iter().zip(bytes.chunks_exact(self.width)) {
            let id = id as usize;
            if id >= self.points {
                return Err(PyRuntimeError::new_err(format!("record {id} is outside the store")));
            }
            let mut row = rows.row_mut(id);
            match row.as_slice_mut() {
                Some(slice) => slice.copy_from_slice(record),
                None => row.iter_mut().zip(record).for_each(|(d, s)| *d = *s),
            }
            marks[id] = true;
        }
        Ok(())
    }
}

/// The epoch event as a dict.
fn epoch_dict<'py>(
    py: Python<'py>,
    d: &Bound<'py, PyDict>,
    e: EpochEvent,
    fill_seconds: f64,
) -> PyResult<()> {
    d.set_item("kind", "epoch")?;
    d.set_item("epoch", e.epoch)?;
    d.set_item("attempt", e.attempt)?;
    d.set_item("batch", u32s(&e.batch).into_pyarray(py))?;
    d.set_item("new_ids", u32s(&e.new_ids).into_pyarray(py))?;
    d.set_item("cache", u32s(&e.cache_after).into_pyarray(py))?;
    let f = e.figures;
    d.set_item("bytes_received", f.received_bytes)?;
    d.set_item("packets", f.packets)?;
    d.set_item("coded_packets", f.coded_packets)?;
    d.set_item("uncoded_packets", f.packets - f.coded_packets)?;
    d.set_item("receive_seconds", f.receive_seconds)?;
    d.set_item("decode_seconds", f.decode_seconds)?;
    d.set_item("fill_seconds", fill_seconds)?;
    Ok(())
}

impl Drop for ExchangeCore {
    fn drop(&mut self) {
        // The worker thread's hand-overs fail once these ends are gone; it ends on its own.
        self.thread.take();
    }
}
