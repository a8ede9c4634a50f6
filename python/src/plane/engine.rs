//! `PlaneCore`: the data plane's engine ([`ubershuffle_plane`]) as `ubershuffle.torch` drives
//! it. Python hands it the rendezvous (every rank's address, the job's key), the settings, the
//! record store and the source, then calls in: an epoch's records, the gradients' all-reduces,
//! close. Every blocking call releases the GIL; the engine's own threads never take it, but
//! for reading the source through a Python object (boto3, a user's records) on the source's
//! thread.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use numpy::IntoPyArray;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use ubershuffle_plane::driver::mesh::{JobKey, Listener, MeshConfig, link_up};
use ubershuffle_plane::driver::{Hooks, Plane};
use ubershuffle_plane::reader::RecordReader;
use ubershuffle_plane::store::SharedStore;
use ubershuffle_plane::{EngineConfig, Figure, Figures, PlaneError, Schedule};

use crate::errors::catch;
use crate::sampler::SamplerCore;
use crate::store::StoreCore;

use super::reader::SourceReader;

pyo3::create_exception!(
    _native,
    ShuffleError,
    PyRuntimeError,
    "A peer failed, closed its plane or its connection, or sent what the protocol does not allow."
);
pyo3::create_exception!(
    _native,
    ShuffleTimeout,
    PyTimeoutError,
    "A rank waited on died or froze (nothing heard from it for ``timeout`` seconds): the message names both and what was awaited. End the process (torchrun restarts the job from its last saved state)."
);
pyo3::create_exception!(_native, PeerClosed, ShuffleError, "A rank waited on closed its ShuffleGroup.");
pyo3::create_exception!(
    _native,
    PeerFailed,
    ShuffleError,
    "A rank waited on stopped because its own plane failed: the message says where, and why (the error that rank raised, which names the rank that failed first)."
);
pyo3::create_exception!(
    _native,
    ShuffleClosed,
    ShuffleError,
    "This rank's ShuffleGroup was closed (from any thread) while it was waiting."
);

/// The Python exception of a plane's error: one line, of the class that says what happened.
pub fn raise(e: PlaneError) -> PyErr {
    let text = e.to_string().replace('\n', " ");
    match e {
        PlaneError::Silent { .. } => ShuffleTimeout::new_err(text),
        PlaneError::PeerClosed { .. } => PeerClosed::new_err(text),
        PlaneError::PeerFailed { .. } => PeerFailed::new_err(text),
        PlaneError::Closed { .. } => ShuffleClosed::new_err(text),
        PlaneError::PeerLost { .. } | PlaneError::Protocol { .. } | PlaneError::Source(_) => {
            ShuffleError::new_err(text)
        }
        PlaneError::Mismatch(_) => PyValueError::new_err(text),
        PlaneError::Store(_) => PyOSError::new_err(text),
        _ => PyRuntimeError::new_err(text),
    }
}

/// The figures as a dict.
pub fn figures_dict<'py>(py: Python<'py>, f: &Figures) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in f.iter() {
        match value {
            Figure::Count(c) => d.set_item(*name, *c)?,
            Figure::Real(x) => d.set_item(*name, *x)?,
            Figure::Word(w) => d.set_item(*name, *w)?,
            Figure::Reals(v) => d.set_item(*name, PyList::new(py, v)?)?,
            Figure::Flags(v) => d.set_item(*name, PyList::new(py, v)?)?,
            Figure::Text(t) => d.set_item(*name, t)?,
            Figure::Table(rows) => d.set_item(*name, rows.clone())?,
            Figure::Tables(tables) => d.set_item(*name, tables.clone())?,
        }
    }
    Ok(d)
}

/// What the engine asks of the Python side, each a callable (or `None` where this rank has
/// nothing to give): `load(ids) -> bytes read` (a `RecordSource`'s, into the rank's
/// `RecordStore`), `content() -> digest` (of the content sample), `open_store(offsets) ->
/// StoreCore` (a store-mode training rank's store, once the store sent the index),
/// `state() -> bytes` (the sampler's state), `restore(state, epoch) -> SamplerCore` (the
/// store's chain). They run on the engine's hooks thread, which takes the GIL only for them.
pub(super) struct PythonHooks {
    /// The source read by the engine itself, off the GIL, where it has a reader (then `load`
    /// is not called).
    pub(super) reader: Option<Box<dyn RecordReader>>,
    pub(super) load: Option<Py<PyAny>>,
    pub(super) content: Option<Py<PyAny>>,
    pub(super) open_store: Option<Py<PyAny>>,
    pub(super) state: Option<Py<PyAny>>,
    pub(super) restore: Option<Py<PyAny>>,
}

fn one_line(e: PyErr, py: Python<'_>) -> String {
    let text = e.value(py).to_string();
    let name = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_default();
    format!("{name}: {}", text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Calls `hook` (or says it is missing) with the GIL.
fn call<T>(
    hook: &Option<Py<PyAny>>,
    what: &str,
    f: impl FnOnce(Python<'_>, &Py<PyAny>) -> PyResult<T>,
) -> Result<T, String> {
    let hook = hook.as_ref().ok_or_else(|| format!("this rank has nothing to {what}"))?;
    Python::attach(|py| f(py, hook).map_err(|e| one_line(e, py)))
}

impl Hooks for PythonHooks {
    fn read(&mut self, ids: &[u32], store: &SharedStore) -> Result<(u64, u64), String> {
        let count = ids.len() as u64;
        if let Some(reader) = self.reader.as_mut() {
            return Ok((count, reader.read_into(ids, store)?));
        }
        let ids: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
        let bytes =
            call(&self.load, "read records from", |py, f| f.call1(py, (ids.into_pyarray(py),))?.extract(py))?;
        Ok((count, bytes))
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        call(&self.content, "digest", |py, f| f.call0(py)?.extract(py))
    }

    fn open_store(&mut self, offsets: &[u64]) -> Result<SharedStore, String> {
        let offsets: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        let hook = self.open_store.as_ref().ok_or("this rank cannot make a record store")?;
        // A store that does not fit says so in its own words (an `OSError`'s one line).
        Python::attach(|py| {
            let store = hook.call1(py, (offsets.into_pyarray(py),)).map_err(|e| e.value(py).to_string())?;
            let store = store.bind(py).cast::<StoreCore>().map_err(|e| one_line(PyErr::from(e), py))?;
            Ok(store.borrow().shared())
        })
    }

    fn sampler_state(&mut self) -> Result<Vec<u8>, String> {
        call(&self.state, "give as its sampler's state", |py, f| f.call0(py)?.extract(py))
    }

    fn restore(&mut self, state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        call(&self.restore, "restore a chain with", |py, f| {
            let core = f.call1(py, (PyBytes::new(py, state), epoch))?;
            let core = core.bind(py).cast::<SamplerCore>().map_err(PyErr::from)?;
            Ok(Box::new(core.borrow().copy_core()) as Box<dyn Schedule>)
        })
    }
}

/// A listening socket, before the rendezvous hands its address out.
#[pyclass(module = "ubershuffle._native")]
pub struct PlaneListener {
    listener: Option<Listener>,
    pub(super) address: SocketAddr,
}

#[pymethods]
impl PlaneListener {
    /// Listens on `host` (an IP address), on a port the system chooses.
    #[new]
    fn py_new(host: &str) -> PyResult<Self> {
        let ip: IpAddr =
            host.parse().map_err(|e| PyValueError::new_err(format!("not an IP address: {host:?} ({e})")))?;
        let listener = Listener::bind(ip).map_err(raise)?;
        let address = listener.address().map_err(raise)?;
        Ok(PlaneListener { listener: Some(listener), address })
    }

    /// `host:port` (`[host]:port` for IPv6), as peers connect to it.
    #[getter]
    fn address(&self) -> String {
        self.address.to_string()
    }
}

/// One rank's data plane (see the module's docs).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct PlaneCore {
    plane: Plane,
}

#[pymethods]
impl PlaneCore {
    /// Links up with every rank (`addresses`, by rank; this rank listening on `listener`)
    /// under the job's `key` (32 bytes) and `job` (names the job and attempt), within
    /// `deadline` seconds, then starts the engine: `settings` (name, value) pairs every rank
    /// must share, `store` this rank's record store, `load(ids) -> bytes read` and
    /// `content() -> digest` the source (`None`: this rank reads none), `store_error` why its
    /// store could not be made.
    #[new]
    #[pyo3(signature = (
        listener, rank, addresses, key, job, deadline, timeout, settings, store, *,
        load = None, content = None, open_store = None, state = None, restore = None, reader = None,
        store_error = None, chunk_bytes = 1 << 20, yield_to_gradients = true, store_rank = None,
        segment_bytes = 0, round_bytes = 16 << 20, link_rate = 0.0, plane = "ShuffleGroup",
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        mut listener: PyRefMut<'_, PlaneListener>,
        rank: usize,
        addresses: Vec<String>,
        key: Vec<u8>,
        job: String,
        deadline: f64,
        timeout: f64,
        settings: Vec<(String, String)>,
        store: Option<PyRef<'_, StoreCore>>,
        load: Option<Py<PyAny>>,
        content: Option<Py<PyAny>>,
        open_store: Option<Py<PyAny>>,
        state: Option<Py<PyAny>>,
        restore: Option<Py<PyAny>>,
        reader: Option<PyRef<'_, SourceReader>>,
        store_error: Option<String>,
        chunk_bytes: u64,
        yield_to_gradients: bool,
        store_rank: Option<usize>,
        segment_bytes: usize,
        round_bytes: u64,
        link_rate: f64,
        plane: &str,
    ) -> PyResult<Self> {
        let addresses: Vec<SocketAddr> = addresses
            .iter()
            .map(|a| a.parse().map_err(|e| PyValueError::new_err(format!("not an address: {a:?} ({e})"))))
            .collect::<PyResult<_>>()?;
        if rank >= addresses.len() || store_rank.is_some_and(|s| s >= addresses.len()) {
            return Err(PyValueError::new_err(format!(
                "rank {rank} or the store's out of {} ranks",
                addresses.len()
            )));
        }
        let key: [u8; 32] =
            key.try_into().map_err(|_| PyValueError::new_err("the job's key must be 32 bytes"))?;
        if !(timeout.is_finite() && timeout > 0.0 && deadline.is_finite() && deadline > 0.0) {
            return Err(PyValueError::new_err("timeout and deadline must be positive numbers of seconds"));
        }
        if !(link_rate.is_finite() && link_rate >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "link_rate must be a non-negative number of bytes per second, got {link_rate}"
            )));
        }
        let listener = listener
            .listener
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this listener was used already"))?;
        let cfg = EngineConfig {
            rank,
            world: addresses.len(),
            timeout,
            plane: plane.to_string(),
            settings,
            reads_source: load.is_some(),
            store_error,
            chunk_bytes: chunk_bytes.max(1),
            yield_to_gradients,
            store_rank,
            segment_bytes,
            round_bytes: round_bytes.max(1),
            link_rate,
        };
        let reader = reader.map(|r| r.take()).transpose()?;
        let hooks: Box<dyn Hooks> =
            Box::new(PythonHooks { reader, load, content, open_store, state, restore });
        let mesh = MeshConfig {
            rank,
            addresses,
            key: JobKey(key),
            job,
            deadline: Duration::from_secs_f64(deadline),
        };
        let shared = store.map(|s| s.shared());
        let plane = py.detach(move || {
            catch_plane(move || {
                let links = link_up(listener, &mesh)?;
                Plane::start(cfg, shared, links, hooks)
            })
        })?;
        Ok(PlaneCore { plane })
    }

    /// Waits for the start-up agreement (every rank's settings and data set), or raises the
    /// first difference.
    fn wait_agreed(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| catch_plane(|| self.plane.wait_agreed()))
    }

    /// Makes the records of `schedule`'s epoch local (a copy of the sampler's core), then
    /// starts the next epoch's delivery; returns the epoch's figures.
    fn set_epoch<'py>(
        &self,
        py: Python<'py>,
        schedule: PyRef<'_, SamplerCore>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let schedule = Box::new(schedule.copy_core());
        let figures = py.detach(|| catch_plane(|| self.plane.set_epoch(schedule)))?;
        figures_dict(py, &figures)
    }

    /// Waits until the delivery in flight has ended.
    fn wait_idle(&self, py: Python<'_>) {
        py.detach(|| self.plane.wait_idle());
    }

    /// Whether no delivery is in flight now.
    fn is_idle(&self, py: Python<'_>) -> bool {
        py.detach(|| self.plane.is_idle())
    }

    /// A step's all-reduce began.
    fn allreduce_began(&self) {
        self.plane.allreduce_began();
    }

    /// The step's all-reduce ended, `wire_bytes` on the wire at this rank.
    fn allreduce_ended(&self, wire_bytes: f64) {
        self.plane.allreduce_ended(wire_bytes);
    }

    /// Whether the training thread waits for the delivery.
    fn training_waits(&self, waits: bool) {
        self.plane.training_waits(waits);
    }

    /// Waits for the plane's first failure: `(class name, message)`, or `None` once it closed
    /// cleanly.
    fn next_failure(&self, py: Python<'_>) -> Option<(String, String)> {
        let e = py.detach(|| self.plane.next_failure())?;
        let class = match raise(e.clone()).get_type(py).name() {
            Ok(n) => n.to_string(),
            Err(_) => "ShuffleError".into(),
        };
        Some((class, e.to_string().replace('\n', " ")))
    }

    /// The store's loop: serves until every training rank closed; returns the figures of every
    /// epoch served.
    fn serve<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let served = py.detach(|| catch_plane(|| self.plane.serve()))?;
        served.iter().map(|f| figures_dict(py, f)).collect()
    }

    /// Closes the plane (from any thread, more than once); returns `[(epoch, figures)]` of a
    /// delivery that ended without being asked for.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Vec<(u64, Bound<'py, PyDict>)>> {
        let unasked = py.detach(|| self.plane.close());
        unasked.into_iter().map(|(e, f)| Ok((e, figures_dict(py, &f)?))).collect()
    }
}

/// Runs `work` catching a panic; a plane error becomes its Python exception.
pub(super) fn catch_plane<T>(work: impl FnOnce() -> Result<T, PlaneError>) -> PyResult<T> {
    catch(|| Ok(work())).map_err(PyErr::from)?.map_err(raise)
}
