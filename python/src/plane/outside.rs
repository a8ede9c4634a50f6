//! A store outside the job, from Python: [`OutsideStore`] serves a job's training ranks
//! attempt after attempt on a thread of its own (`ubershuffle.Exchange.host`), and
//! [`join_store`] is a training rank's meeting with it (`ubershuffle.Exchange.connect`), after
//! which the rank's engine links up as [`super::engine::PlaneCore`] does for any plane.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use ubershuffle_plane::driver::host::{Host, join};
use ubershuffle_plane::driver::mesh::JobKey;
use ubershuffle_plane::driver::outside::{AttemptEnd, Outside, serve_outside};
use ubershuffle_plane::{EngineConfig, Figures, PlaneError};

use super::engine::{PlaneListener, PythonHooks, figures_dict, raise};
use super::reader::SourceReader;
use crate::store::StoreCore;

/// The key of the job's `token` (a secret shared by the store and its training ranks).
#[pyfunction]
pub fn plane_token_key<'py>(py: Python<'py>, token: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &JobKey::from_token(token).0)
}

/// The address of `text` (`HOST:PORT`, the host a name or an IP address).
fn address_of(text: &str) -> PyResult<SocketAddr> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| PyValueError::new_err(format!("not an address to reach: {text:?} (give HOST:PORT)")))
}

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
        PyValueError::new_err(format!("{name} must be a positive number of seconds, got {value}"))
    })
}

/// Joins the store at `store` (`HOST:PORT`) under the job's `key` (32 bytes) as the training
/// rank at `place` of `trainers` (`None`: the store's first free place, of as many as it
/// serves), whose engine listens on `listener`; waits (without the GIL, at most `deadline`
/// seconds) until the attempt is complete. Returns `(rank, addresses, job, about)`: this
/// rank's place (its rank in the plane: the store is the last), every rank's address, the
/// attempt's name and the store's description of the job.
#[pyfunction]
#[pyo3(signature = (listener, store, key, place = None, trainers = None, deadline = 60.0))]
pub fn join_store<'py>(
    py: Python<'py>,
    listener: PyRef<'_, PlaneListener>,
    store: &str,
    key: Vec<u8>,
    place: Option<usize>,
    trainers: Option<usize>,
    deadline: f64,
) -> PyResult<(usize, Vec<String>, String, Bound<'py, PyBytes>)> {
    let store = address_of(store)?;
    let key: [u8; 32] =
        key.try_into().map_err(|_| PyValueError::new_err("the job's key must be 32 bytes"))?;
    let deadline = seconds("deadline", deadline)?;
    let address = listener.address;
    let joined = py
        .detach(move || {
            crate::errors::catch(|| {
                Ok(join(store, &JobKey(key), (place, trainers), address, (deadline, deadline)))
            })
        })
        .map_err(PyErr::from)?;
    // Not reaching the store, or refused by it, is a connection's failure.
    let joined = joined.map_err(|e| match e {
        PlaneError::Mismatch(m) => PyConnectionError::new_err(m),
        other => raise(other),
    })?;
    let addresses = joined.mesh.addresses.iter().map(ToString::to_string).collect();
    Ok((joined.mesh.rank, addresses, joined.mesh.job, PyBytes::new(py, &joined.about)))
}

/// How every attempt ended, with what the store served in it.
type Attempts = Arc<Mutex<Vec<(usize, AttemptEnd, Vec<Figures>)>>>;

/// A store outside the job, serving on a thread of its own (see the module's docs).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct OutsideStore {
    address: String,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<Result<(), PlaneError>>>>,
    ended: Mutex<Option<Result<(), String>>>,
    attempts: Attempts,
}

#[pymethods]
impl OutsideStore {
    /// Listens at `listen` (`HOST:PORT`; port 0: one the system chooses) and serves the
    /// records of `store` to `trainers` training ranks under the job's `key`, attempt after
    /// attempt, until an attempt's ranks close after epoch `epochs - 1` (`None`: until
    /// stopped). `settings` are the (name, value) pairs every rank must share; `about` what
    /// each training rank is told when it joins; `reader` (read off the GIL) or `load(ids)`
    /// reads the source; `restore(state, epoch) -> SamplerCore` is the chain at a catch-up.
    #[new]
    #[pyo3(signature = (
        store, listen, key, trainers, settings, about, *, epochs = None, timeout = 10.0,
        join_timeout = None, link_timeout = 60.0, load = None, reader = None, restore = None,
        chunk_bytes = 1 << 20, segment_bytes = 0, round_bytes = 16 << 20, link_rate = 0.0,
        plane = "Exchange",
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        store: PyRef<'_, StoreCore>,
        listen: &str,
        key: Vec<u8>,
        trainers: usize,
        settings: Vec<(String, String)>,
        about: Vec<u8>,
        epochs: Option<u64>,
        timeout: f64,
        join_timeout: Option<f64>,
        link_timeout: f64,
        load: Option<Py<PyAny>>,
        reader: Option<PyRef<'_, SourceReader>>,
        restore: Option<Py<PyAny>>,
        chunk_bytes: u64,
        segment_bytes: usize,
        round_bytes: u64,
        link_rate: f64,
        plane: &str,
    ) -> PyResult<Self> {
        if trainers == 0 {
            return Err(PyValueError::new_err("a store serves at least one training rank"));
        }
        let key: [u8; 32] =
            key.try_into().map_err(|_| PyValueError::new_err("the job's key must be 32 bytes"))?;
        let host = Host::bind(address_of(listen)?).map_err(raise)?;
        let address = host.address().map_err(raise)?.to_string();
        let outside = Outside {
            trainers,
            epochs,
            join_deadline: join_timeout.map(|t| seconds("join_timeout", t)).transpose()?,
            link_deadline: seconds("link_timeout", link_timeout)?,
            about,
            stop: Arc::default(),
        };
        let cfg = EngineConfig {
            rank: trainers,
            world: trainers + 1,
            timeout: seconds("timeout", timeout)?.as_secs_f64(),
            plane: plane.to_string(),
            settings,
            reads_source: true,
            store_error: None,
            chunk_bytes: chunk_bytes.max(1),
            yield_to_gradients: false,
            store_rank: Some(trainers),
            segment_bytes,
            round_bytes: round_bytes.max(1),
            link_rate,
        };
        let reader = reader.map(|r| r.take()).transpose()?;
        let hooks =
            Box::new(PythonHooks { reader, load, content: None, open_store: None, state: None, restore });
        let shared = store.shared();
        let attempts: Attempts = Arc::default();
        let (stop, heard) = (Arc::clone(&outside.stop), Arc::clone(&attempts));
        let thread = std::thread::Builder::new()
            .name("ubershuffle-outside-store".into())
            .spawn(move || {
                let key = JobKey(key);
                serve_outside(&host, &key, &outside, (&cfg, &shared), hooks, |attempt, served, end| {
                    let heard = &mut heard.lock().unwrap_or_else(|p| p.into_inner());
                    heard.push((attempt, end.clone(), served.to_vec()));
                })
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the store's thread: {e}")))?;
        Ok(OutsideStore {
            address,
            stop,
            thread: Mutex::new(Some(thread)),
            ended: Mutex::new(None),
            attempts,
        })
    }

    /// `HOST:PORT` the training ranks join at.
    #[getter]
    fn address(&self) -> String {
        self.address.clone()
    }

    /// Whether the store still serves.
    fn running(&self) -> bool {
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Meets no further attempt (one under way runs to its end).
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits (without the GIL; at most `timeout` seconds, `None`: as long as it serves) for
    /// the store to end; `None` if it still serves, else `(ok, error)`.
    #[pyo3(signature = (timeout = None))]
    fn join(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(bool, Option<String>)>> {
        let limit = timeout.map(|t| Duration::try_from_secs_f64(t.max(0.0)).unwrap_or(Duration::MAX));
        let finished = py.detach(|| {
            let started = std::time::Instant::now();
            loop {
                let done = {
                    let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner());
                    thread.as_ref().is_none_or(|t| t.is_finished())
                };
                if done {
                    return true;
                }
                if limit.is_some_and(|l| started.elapsed() >= l) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        if !finished {
            return Ok(None);
        }
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if ended.is_none() {
            let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            let outcome = match handle.map(JoinHandle::join) {
                Some(Ok(result)) => result.map_err(|e| e.to_string()),
                Some(Err(_)) => Err("the store's thread panicked".to_string()),
                None => Err("the store ended".to_string()),
            };
            *ended = Some(outcome);
        }
        Ok(ended.as_ref().map(|o| match o {
            Ok(()) => (true, None),
            Err(e) => (false, Some(e.clone())),
        }))
    }

    /// Every attempt so far: a dict of its number, how it ended (`"finished"`, `"closed"` or
    /// `"failed"`), its `error` and the figures of every epoch the store served in it.
    fn attempts<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        attempts
            .iter()
            .map(|(attempt, end, served)| {
                let d = PyDict::new(py);
                d.set_item("attempt", attempt)?;
                let (kind, error) = match end {
                    AttemptEnd::Finished => ("finished", None),
                    AttemptEnd::Closed => ("closed", None),
                    AttemptEnd::Failed(e) => ("failed", Some(e.to_string())),
                };
                d.set_item("end", kind)?;
                d.set_item("error", error)?;
                let epochs: Vec<_> = served.iter().map(|f| figures_dict(py, f)).collect::<PyResult<_>>()?;
                d.set_item("epochs", epochs)?;
                Ok(d)
            })
            .collect()
    }
}

impl Drop for OutsideStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
