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
use pyo3::types::{PyDict, PyList};
use ubershuffle_plane::driver::mesh::{JobKey, Listener, MeshConfig, link_up};
use ubershuffle_plane::driver::{Hooks, Plane};
use ubershuffle_plane::store::SharedStore;
use ubershuffle_plane::{EngineConfig, Figure, Figures, PlaneError};

use crate::errors::catch;
use crate::sampler::SamplerCore;
use crate::store::StoreCore;

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

/// Reads the source through the Python side: `load(store, ids)` (a `RecordSource`'s, into
/// the Python `RecordStore`) and `content()` (the digest of the content sample).
struct PythonReader {
    load: Py<PyAny>,
    content: Py<PyAny>,
}

fn one_line(e: PyErr, py: Python<'_>) -> String {
    let text = e.value(py).to_string();
    let name = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_default();
    format!("{name}: {}", text.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl Hooks for PythonReader {
    fn read(&mut self, ids: &[u32], _store: &SharedStore) -> Result<(u64, u64), String> {
        Python::attach(|py| {
            let count = ids.len() as u64;
            let ids: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
            let bytes = self.load.call1(py, (ids.into_pyarray(py),)).map_err(|e| one_line(e, py))?;
            let bytes: u64 = bytes.extract(py).map_err(|e| one_line(e, py))?;
            Ok((count, bytes))
        })
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Python::attach(|py| {
            let d = self.content.call0(py).map_err(|e| one_line(e, py))?;
            d.extract::<u64>(py).map_err(|e| one_line(e, py))
        })
    }
}

/// A listening socket, before the rendezvous hands its address out.
#[pyclass(module = "ubershuffle._native")]
pub struct PlaneListener {
    listener: Option<Listener>,
    address: SocketAddr,
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
    #[pyo3(signature = (listener, rank, addresses, key, job, deadline, timeout, settings, store, load, content, store_error, chunk_bytes, yield_to_gradients, plane = "ShuffleGroup"))]
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
        store: PyRef<'_, StoreCore>,
        load: Option<Py<PyAny>>,
        content: Option<Py<PyAny>>,
        store_error: Option<String>,
        chunk_bytes: u64,
        yield_to_gradients: bool,
        plane: &str,
    ) -> PyResult<Self> {
        let addresses: Vec<SocketAddr> = addresses
            .iter()
            .map(|a| a.parse().map_err(|e| PyValueError::new_err(format!("not an address: {a:?} ({e})"))))
            .collect::<PyResult<_>>()?;
        if rank >= addresses.len() {
            return Err(PyValueError::new_err(format!("rank {rank} of {} addresses", addresses.len())));
        }
        let key: [u8; 32] =
            key.try_into().map_err(|_| PyValueError::new_err("the job's key must be 32 bytes"))?;
        if !(timeout.is_finite() && timeout > 0.0 && deadline.is_finite() && deadline > 0.0) {
            return Err(PyValueError::new_err("timeout and deadline must be positive numbers of seconds"));
        }
        let listener = listener
            .listener
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this listener was used already"))?;
        let reads_source = load.is_some();
        let reader: Box<dyn Hooks> = match (load, content) {
            (Some(load), Some(content)) => Box::new(PythonReader { load, content }),
            _ => Box::new(NoSource),
        };
        let cfg = EngineConfig {
            rank,
            world: addresses.len(),
            timeout,
            plane: plane.to_string(),
            settings,
            reads_source,
            store_error,
            chunk_bytes: chunk_bytes.max(1),
            yield_to_gradients,
            store_rank: None,
            segment_bytes: 0,
            round_bytes: 16 << 20,
        };
        let mesh = MeshConfig {
            rank,
            addresses,
            key: JobKey(key),
            job,
            deadline: Duration::from_secs_f64(deadline),
        };
        let shared = store.shared();
        let plane = py.detach(move || {
            catch_plane(move || {
                let links = link_up(listener, &mesh)?;
                Plane::start(cfg, Some(shared), links, reader)
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

    /// Closes the plane (from any thread, more than once); returns `[(epoch, figures)]` of a
    /// delivery that ended without being asked for.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Vec<(u64, Bound<'py, PyDict>)>> {
        let unasked = py.detach(|| self.plane.close());
        unasked.into_iter().map(|(e, f)| Ok((e, figures_dict(py, &f)?))).collect()
    }
}

/// A rank that reads no source.
struct NoSource;

impl Hooks for NoSource {
    fn read(&mut self, ids: &[u32], _store: &SharedStore) -> Result<(u64, u64), String> {
        Err(format!("this rank has no source to read {} records from", ids.len()))
    }

    fn content_digest(&mut self) -> Result<u64, String> {
        Err("this rank has no source".into())
    }
}

/// Runs `work` catching a panic; a plane error becomes its Python exception.
fn catch_plane<T>(work: impl FnOnce() -> Result<T, PlaneError>) -> PyResult<T> {
    catch(|| Ok(work())).map_err(PyErr::from)?.map_err(raise)
}
