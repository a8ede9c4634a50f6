//! The exchange's master from Python: `ubershuffle_runtime::exchange::serve` on a background
//! thread of this process (rank 0 hosting the data plane, `Exchange.host`), serving the records
//! of a record store (`ubershuffle.RecordStore`) that holds the whole data set.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_runtime::exchange::{ServeError, ServeOptions, Serving, serve};
use ubershuffle_runtime::{EpochMetrics, ShuffledRecords, SizedRecords};
use ubershuffle_transport::tcp::{MasterListener, TcpConfig};

use crate::errors::{Failure, bad, bad_error, catch, guarded, one_line};
use crate::store::{StoreCore, locked};
use ubershuffle_plane::store::LockedStore;

/// How the served run ended: `Ok(lost workers)` or the one-line error.
type Served = Result<Vec<usize>, String>;

/// A master serving on a background thread.
#[pyclass(module = "ubershuffle._native")]
pub struct HostCore {
    address: String,
    epochs: Arc<Mutex<Vec<EpochMetrics>>>,
    thread: Option<JoinHandle<Served>>,
    outcome: Option<Served>,
}

/// The serve options from Python's arguments.
#[allow(clippy::too_many_arguments)]
fn options(
    workers: usize,
    alpha: f64,
    policy: &str,
    fraction: Option<f64>,
    scheme: String,
    seed: u64,
    epochs: usize,
    timeout: f64,
    join_timeout: f64,
    checkpoint: Option<String>,
    resume: bool,
) -> Result<ServeOptions, Failure> {
    let seconds = |what: &str, s: f64| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero() && s < 1e9)
            .ok_or_else(|| bad(format!("{what} must be a positive number of seconds below 1e9, got {s}")))
    };
    let mut o = ServeOptions::new(workers, alpha);
    o.policy = ExchangePolicy::new(policy, fraction).map_err(bad_error)?;
    o.scheme = scheme;
    o.seed = seed;
    o.epochs = epochs;
    o.timeout = seconds("timeout", timeout)?;
    o.join_timeout = seconds("join_timeout", join_timeout)?;
    o.checkpoint = checkpoint.map(Into::into);
    o.resume = resume;
    Ok(o)
}

#[pymethods]
impl HostCore {
    /// Binds `listen` and serves the records of `store` (which must hold every record of its
    /// data set) to `workers` ranks on a background thread.
    #[new]
    #[pyo3(signature = (store, workers, alpha, policy, fraction, scheme, seed, epochs, listen, token, timeout, join_timeout, checkpoint, resume))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        store: PyRef<'_, StoreCore>,
        workers: usize,
        alpha: f64,
        policy: String,
        fraction: Option<f64>,
        scheme: String,
        seed: u64,
        epochs: usize,
        listen: String,
        token: String,
        timeout: f64,
        join_timeout: f64,
        checkpoint: Option<String>,
        resume: bool,
    ) -> PyResult<Self> {
        let shared = store.shared();
        let o = catch(|| {
            options(
                workers,
                alpha,
                &policy,
                fraction,
                scheme,
                seed,
                epochs,
                timeout,
                join_timeout,
                checkpoint,
                resume,
            )
        })?;
        let (listener, address, serving) = guarded(py, || {
            let index = locked(&shared).index().clone();
            let records = SizedRecords::new(index, Arc::new(LockedStore(shared)))
                .map_err(|e| bad(format!("the store does not hold the whole data set: {}", one_line(&e))))?;
            let records = ShuffledRecords::Sized(records);
            // Settings that do not fit the records, an unknown scheme or another run's
            // checkpoint are refused here, before anything listens.
            let serving = Serving::prepare(records, &o).map_err(|e| match e {
                ServeError::Spec(e) => bad(e.render(&|s| s.name().replace('-', "_"))),
                other => bad_error(other),
            })?;
            let config = TcpConfig::new(token)
                .with_timeout(o.timeout)
                .with_join_timeout(o.join_timeout)
                .with_join_limits(Some(ubershuffle_runtime::join_limits()));
            let listener = MasterListener::bind(&listen, config).map_err(bad_error)?;
            let address = listener.local_addr().map_err(bad_error)?.to_string();
            Ok((listener, address, serving))
        })?;
        let epochs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&epochs);
        let thread = std::thread::Builder::new()
            .name("ubershuffle-serve".into())
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve(listener, serving, &mut |m| {
                        if let Ok(mut all) = seen.lock() {
                            all.push(m.clone());
                        }
                    })
                }));
                match result {
                    Ok(Ok(report)) => Ok(report.lost_workers),
                    Ok(Err(e)) => Err(one_line(&e)),
                    Err(_) => Err("internal error in ubershuffle (a Rust panic in the master)".into()),
                }
            })
            .map_err(|e| PyErr::from(Failure::Internal(format!("cannot start the master thread: {e}"))))?;
        Ok(HostCore { address, epochs, thread: Some(thread), outcome: None })
    }

    /// The address the ranks connect to.
    #[getter]
    fn address(&self) -> String {
        self.address.clone()
    }

    /// Whether the master is still serving.
    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Every finished epoch's metrics so far, as dicts (the master's figures).
    fn epochs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let all = self.epochs.lock().map(|a| a.clone()).unwrap_or_default();
        let out = PyList::empty(py);
        for m in &all {
            out.append(metrics_dict(py, m)?)?;
        }
        Ok(out)
    }

    /// Waits (without the GIL, in slices so Ctrl-C works) up to `timeout` seconds for the
    /// master to finish: `None` while it runs, else `(ok, lost workers or the error)`.
    #[pyo3(signature = (timeout=None))]
    fn join(&mut self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(bool, String, Vec<usize>)>> {
        let start = std::time::Instant::now();
        while self.outcome.is_none() {
            let Some(thread) = self.thread.take() else { break };
            if thread.is_finished() {
                let outcome = py.detach(|| thread.join());
                self.outcome = Some(outcome.unwrap_or_else(|_| Err("the master thread panicked".into())));
                break;
            }
            self.thread = Some(thread);
            if timeout.is_some_and(|t| start.elapsed().as_secs_f64() >= t) {
                return Ok(None);
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(20)));
            py.check_signals()?;
        }
        Ok(self.outcome.clone().map(|o| match o {
            Ok(lost) => (true, String::new(), lost),
            Err(e) => (false, e, Vec::new()),
        }))
    }
}

/// One epoch's metrics as a dict (the fields of `ubershuffle run --json`'s epochs).
fn metrics_dict<'py>(py: Python<'py>, m: &EpochMetrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let value = serde_json::to_value(m).map_err(|e| PyErr::from(Failure::Internal(e.to_string())))?;
    if let serde_json::Value::Object(map) = value {
        for (k, v) in map {
            match v {
                serde_json::Value::Number(n) if n.is_u64() => d.set_item(k, n.as_u64())?,
                serde_json::Value::Number(n) => d.set_item(k, n.as_f64())?,
                serde_json::Value::Array(items) => {
                    let list: Vec<u64> = items.iter().filter_map(serde_json::Value::as_u64).collect();
                    d.set_item(k, list)?
                }
                other => d.set_item(k, other.to_string())?,
            }
        }
    }
    Ok(d)
}
