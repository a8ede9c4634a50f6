//! Errors at the Python boundary: every failure is a one-line Python exception, and a Rust
//! panic never crosses into Python (it is caught and raised as `RuntimeError`).

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// A failure of the Rust side, before it becomes a Python exception.
#[derive(Debug)]
pub enum Failure {
    /// Bad input: `ValueError`.
    Value(String),
    /// An internal failure: `RuntimeError`.
    Internal(String),
    /// A file could not be made, read or written: `OSError`.
    Os(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Value(m) | Failure::Internal(m) | Failure::Os(m) => f.write_str(m),
        }
    }
}

/// The result type of the Rust side.
pub type Outcome<T> = Result<T, Failure>;

/// One line: the message and its sources, as the command line prints them (`a: b: c`); the
/// plane's, which every error of this crate shares.
pub use ubershuffle_plane::error::one_line;

/// Bad input with this message.
pub fn bad(message: impl Display) -> Failure {
    Failure::Value(message.to_string().replace('\n', " "))
}

/// Bad input from an error value (its sources joined on one line).
pub fn bad_error<E: std::error::Error + 'static>(e: E) -> Failure {
    Failure::Value(one_line(&e))
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Value(m) => PyValueError::new_err(m),
            Failure::Internal(m) => PyRuntimeError::new_err(m),
            Failure::Os(m) => PyOSError::new_err(m),
        }
    }
}

/// Runs `work` without holding the GIL, catching any panic: the panic becomes a
/// `RuntimeError` and never unwinds into Python.
pub fn guarded<T: Send, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    F: FnOnce() -> Outcome<T> + Send,
{
    py.detach(|| catch(work)).map_err(PyErr::from)
}

/// Runs `work` catching any panic (with the GIL held, for quick steps).
pub fn catch<T, F: FnOnce() -> Outcome<T>>(work: F) -> Outcome<T> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(Failure::Internal(format!(
                "internal error in ubershuffle (a Rust panic): {}",
                what.replace('\n', " ")
            )))
        }
    }
}
