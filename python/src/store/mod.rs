//! `StoreCore`: the Rust side of `ubershuffle.RecordStore`, a rank's records of uneven size in
//! a folder of mapped files ([`MappedStore`]). Python reads records through its own maps of the
//! same files (zero-copy numpy views, in any process); writes, eviction and the planes' decoding
//! go through here, without the GIL. The store sits behind a mutex, so calls from a background
//! thread and the main thread wait for each other instead of failing.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use ubershuffle_codes::RecordIndex;

pub use ubershuffle_plane::store::{MappedStore, StoreError};

use crate::errors::{Failure, Outcome, bad, guarded, one_line};

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::Io { .. } | StoreError::NoSpace(_) => Failure::Os(one_line(&e)),
            _ => bad(one_line(&e)),
        }
    }
}

/// Record ids from a numpy array, each below `records`.
pub fn ids_from(ids: &[i64], records: usize) -> Outcome<Vec<u32>> {
    ids.iter()
        .map(|&i| {
            u32::try_from(i).ok().filter(|&id| (id as usize) < records).ok_or_else(|| {
                bad(format!("record {i} is out of range (the data set has {records} records)"))
            })
        })
        .collect()
}

/// Ids as a numpy `int64` array.
pub fn ids_array<'py>(py: Python<'py>, ids: &[u32]) -> Bound<'py, PyArray1<i64>> {
    ids.iter().map(|&i| i64::from(i)).collect::<Vec<_>>().into_pyarray(py)
}

/// A record index from offsets (`records + 1` of them, from 0, never decreasing).
pub fn index_from_offsets(offsets: &[i64]) -> Outcome<RecordIndex> {
    if offsets.first() != Some(&0) {
        return Err(bad("record offsets must start at 0"));
    }
    let mut sizes = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        if w[1] < w[0] {
            return Err(bad(format!("record offsets must not decrease ({} after {})", w[1], w[0])));
        }
        sizes.push((w[1] - w[0]) as u64);
    }
    RecordIndex::from_sizes(sizes).map_err(|e| bad(one_line(&e)))
}

/// A rank's record store (see the module's docs).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct StoreCore {
    store: Arc<Mutex<MappedStore>>,
    records: usize,
    dir: PathBuf,
}

impl StoreCore {
    /// The store, locked (a panic elsewhere while it was locked leaves it usable: its bytes
    /// are plain data).
    pub fn lock(&self) -> MutexGuard<'_, MappedStore> {
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A handle on the same store for work without the GIL.
    pub fn shared(&self) -> Arc<Mutex<MappedStore>> {
        Arc::clone(&self.store)
    }

    fn ids(&self, ids: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<u32>> {
        Ok(ids_from(ids.as_slice()?, self.records)?)
    }
}

/// Locks a shared store (see [`StoreCore::lock`]).
pub fn locked(store: &Mutex<MappedStore>) -> MutexGuard<'_, MappedStore> {
    store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[pymethods]
impl StoreCore {
    /// Opens (or makes) the store in `directory` for records at `offsets` (`records + 1`
    /// int64 offsets of the data set laid end to end). `temporary`: `directory` is a new
    /// folder of this store alone, removed once its files are mapped (Linux; see
    /// [`MappedStore::open_temporary`]). `expect_bytes`: the bytes of records the store will
    /// hold, checked against its file system's free space (`OSError` in one line).
    #[new]
    #[pyo3(signature = (directory, offsets, temporary = false, expect_bytes = None))]
    fn py_new(
        py: Python<'_>,
        directory: PathBuf,
        offsets: PyReadonlyArray1<'_, i64>,
        temporary: bool,
        expect_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let offsets = offsets.as_slice()?.to_vec();
        let dir = directory.clone();
        let store = guarded(py, move || {
            let index = index_from_offsets(&offsets)?;
            Ok(if temporary {
                MappedStore::open_temporary(&dir, index, expect_bytes)?
            } else {
                MappedStore::open_expecting(&dir, index, expect_bytes)?
            })
        })?;
        let records = store.index().len();
        Ok(StoreCore { store: Arc::new(Mutex::new(store)), records, dir: directory })
    }

    /// The folder.
    #[getter]
    fn directory(&self) -> PathBuf {
        self.dir.clone()
    }

    /// Whether the files have no name any more (a temporary store on Linux): other processes
    /// open them as `/proc/<this pid>/fd/<fd>` ([`MappedStore::fds`]).
    #[getter]
    fn unlinked(&self) -> bool {
        self.lock().is_unlinked()
    }

    /// The descriptors of the index, records and flags files, in that order.
    fn fds(&self) -> (i32, i32, i32) {
        let [a, b, c] = self.lock().fds();
        (a, b, c)
    }

    /// Stores record `id` whole from `data` (uint8; its length must be the record's size).
    fn put(&self, py: Python<'_>, id: i64, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let id = ids_from(&[id], self.records)?[0];
        let bytes = data.as_slice()?;
        let store = &self.store;
        py.detach(|| locked(store).put(id, bytes)).map_err(Failure::from)?;
        Ok(())
    }

    /// Stores the records `ids` from `data`, their bytes back to back (uint8).
    fn put_many(
        &self,
        py: Python<'_>,
        ids: PyReadonlyArray1<'_, i64>,
        data: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<()> {
        let ids = self.ids(&ids)?;
        let bytes = data.as_slice()?;
        let store = &self.store;
        py.detach(|| -> Outcome<()> {
            let mut store = locked(store);
            let mut at = 0usize;
            for &id in &ids {
                let size = store.index().size(id).unwrap_or(0) as usize;
                let piece = bytes
                    .get(at..at + size)
                    .ok_or_else(|| bad(format!("{} bytes are too few for the records given", bytes.len())))?;
                store.put(id, piece)?;
                at += size;
            }
            if at != bytes.len() {
                return Err(bad(format!("{} bytes given for records of {at} bytes", bytes.len())));
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Reads the files `paths` into the records `ids` (one file a record, its size the
    /// record's); returns the bytes read.
    fn load_files(
        &self,
        py: Python<'_>,
        ids: PyReadonlyArray1<'_, i64>,
        paths: Vec<PathBuf>,
    ) -> PyResult<u64> {
        let ids = self.ids(&ids)?;
        if ids.len() != paths.len() {
            return Err(bad(format!("{} ids for {} files", ids.len(), paths.len())).into());
        }
        let store = &self.store;
        Ok(py.detach(|| -> Outcome<u64> {
            let mut total = 0u64;
            for (&id, path) in ids.iter().zip(&paths) {
                let bytes =
                    std::fs::read(path).map_err(|e| Failure::Os(format!("{}: {e}", path.display())))?;
                locked(store).put(id, &bytes)?;
                total += bytes.len() as u64;
            }
            Ok(total)
        })?)
    }

    /// The records `ids`, back to back (uint8); each must be held.
    fn gather<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let ids = self.ids(&ids)?;
        let store = &self.store;
        let out = py.detach(|| -> Outcome<Vec<u8>> {
            let store = locked(store);
            let mut out = Vec::with_capacity(store.index().bytes_of(&ids) as usize);
            for &id in &ids {
                out.extend_from_slice(store.get(id).ok_or_else(|| bad(format!("record {id} is not held")))?);
            }
            Ok(out)
        })?;
        Ok(out.into_pyarray(py))
    }

    /// The records held, sorted (int64).
    fn held<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        let ids = self.lock().held_ids();
        ids_array(py, &ids)
    }

    /// The bytes of the records held.
    fn held_bytes(&self) -> u64 {
        self.lock().held_bytes()
    }

    /// Drops the records `ids` (their pages go back to the file system).
    fn evict(&self, py: Python<'_>, ids: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        let ids = self.ids(&ids)?;
        let store = &self.store;
        py.detach(|| locked(store).evict(&ids));
        Ok(())
    }

    /// Drops every record held but `keep`'s; returns those dropped.
    fn retain<'py>(
        &self,
        py: Python<'py>,
        keep: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut keep = self.ids(&keep)?;
        keep.sort_unstable();
        let store = &self.store;
        let gone = py.detach(|| locked(store).retain(&keep));
        Ok(ids_array(py, &gone))
    }

    /// Writes the mapped bytes to the files.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let store = &self.store;
        py.detach(|| locked(store).flush()).map_err(Failure::from)?;
        Ok(())
    }
}
