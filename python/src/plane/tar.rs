//! Tar headers read from Python ([`ubershuffle_plane::tar`]): a local shard scanned off the
//! GIL ([`scan_tar`]), an object's headers fed to a [`TarWalker`] as ranged reads bring them,
//! and a record made of a sample's members split again ([`scan_tar_bytes`]). Errors are one-line
//! `ValueError`s naming the offset; the Python side names the shard.

use std::path::PathBuf;
use std::sync::Mutex;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use ubershuffle_plane::tar::{self, TarMember};

use crate::errors::{bad, bad_error, catch, guarded};

/// Members as Python takes them: names, first headers' offsets, data offsets, sizes.
type Members<'py> =
    (Vec<String>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

fn members_out(py: Python<'_>, members: Vec<TarMember>) -> Members<'_> {
    let headers: Vec<i64> = members.iter().map(|m| m.header as i64).collect();
    let offsets: Vec<i64> = members.iter().map(|m| m.offset as i64).collect();
    let sizes: Vec<i64> = members.iter().map(|m| m.size as i64).collect();
    let names = members.into_iter().map(|m| m.name).collect();
    (names, headers.into_pyarray(py), offsets.into_pyarray(py), sizes.into_pyarray(py))
}

/// The regular files of the tar file `path` from its headers alone, without the GIL: names,
/// first headers' offsets, data offsets and sizes, and the bytes read to find them.
#[pyfunction]
pub fn scan_tar(py: Python<'_>, path: PathBuf) -> PyResult<(Members<'_>, u64)> {
    let (members, read) = guarded(py, move || tar::scan_file(&path).map_err(bad))?;
    Ok((members_out(py, members), read))
}

/// The regular files of `data`, a whole tar archive, or with `fragment` members cut out of
/// one (a sample's record).
#[pyfunction]
#[pyo3(signature = (data, fragment = false))]
pub fn scan_tar_bytes<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    fragment: bool,
) -> PyResult<Members<'py>> {
    let bytes = data.as_slice()?;
    let members = catch(|| tar::scan_bytes(bytes, fragment).map_err(bad_error))?;
    Ok(members_out(py, members))
}

/// An archive's headers parsed as reads of it arrive ([`tar::TarWalker`]): `want()` names the
/// offset to read next (and the bytes needed there at least), `feed(at, data)` takes what was
/// read there, `finish()` gives the members once `want()` is `None`.
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct TarWalker {
    walker: Mutex<Option<tar::TarWalker>>,
}

impl TarWalker {
    fn with<T>(&self, f: impl FnOnce(&mut tar::TarWalker) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.walker.lock().map_err(|_| PyRuntimeError::new_err("a tar walker failed"))?;
        let walker = guard.as_mut().ok_or_else(|| PyRuntimeError::new_err("this tar walker has finished"))?;
        f(walker)
    }
}

#[pymethods]
impl TarWalker {
    /// A walker of an archive of `size` bytes.
    #[new]
    fn py_new(size: u64) -> Self {
        TarWalker { walker: Mutex::new(Some(tar::TarWalker::new(size))) }
    }

    /// `(offset, least)`: where to read next and how many bytes at least; `None` when done.
    fn want(&self) -> PyResult<Option<(u64, u64)>> {
        self.with(|w| Ok(w.want()))
    }

    /// Parses the headers within `data`, read at `at`.
    fn feed(&self, at: u64, data: &[u8]) -> PyResult<()> {
        self.with(|w| Ok(catch(|| w.feed(at, data).map_err(bad_error))?))
    }

    /// The bytes needed at the wanted offset to progress, given the `data` read there.
    fn need(&self, data: &[u8]) -> PyResult<u64> {
        self.with(|w| Ok(w.need(data)))
    }

    /// Bytes fed so far.
    #[getter]
    fn fed(&self) -> PyResult<u64> {
        self.with(|w| Ok(w.fed()))
    }

    /// The members (as :func:`scan_tar`'s), or the error of an archive that ends early.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Members<'py>> {
        let walker = self
            .walker
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a tar walker failed"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this tar walker has finished"))?;
        let members = catch(|| walker.finish().map_err(bad_error))?;
        Ok(members_out(py, members))
    }
}
