//! `SourceReader`: a data set the engine reads itself, off the GIL ([`RecordReader`]): the
//! local layouts of `ubershuffle.sources` (a file per record, a blob with offsets, records at
//! byte ranges of shards). A source without one is read through its Python `load`, on the
//! engine's source thread.

use std::path::PathBuf;
use std::sync::Mutex;

use numpy::PyReadonlyArray1;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use ubershuffle_codes::RecordIndex;
use ubershuffle_plane::reader::{BlobReader, FileReader, RecordReader, ShardRange, ShardReader};

/// A reader of a data set for the engine, handed to one `PlaneCore` (which takes it).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct SourceReader {
    reader: Mutex<Option<Box<dyn RecordReader>>>,
}

/// The index of `offsets` (`records + 1` non-decreasing ints from 0).
fn index_of(offsets: &PyReadonlyArray1<'_, i64>) -> PyResult<RecordIndex> {
    let offsets = offsets.as_slice()?;
    let bad = || PyValueError::new_err("offsets must be records + 1 non-decreasing ints from 0");
    if offsets.first() != Some(&0) || offsets.windows(2).any(|w| w[1] < w[0]) {
        return Err(bad());
    }
    RecordIndex::from_sizes(offsets.windows(2).map(|w| (w[1] - w[0]) as u64))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

impl SourceReader {
    /// The reader, once: the engine that takes it owns it.
    pub(crate) fn take(&self) -> PyResult<Box<dyn RecordReader>> {
        self.reader
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .ok_or_else(|| PyRuntimeError::new_err("this source reader was handed to a plane already"))
    }
}

#[pymethods]
impl SourceReader {
    /// Record `i` is the file `paths[i]`, of the size `offsets` says.
    #[staticmethod]
    fn files(paths: Vec<PathBuf>, offsets: PyReadonlyArray1<'_, i64>) -> PyResult<Self> {
        let reader = FileReader::new(paths, index_of(&offsets)?).map_err(PyValueError::new_err)?;
        Ok(SourceReader { reader: Mutex::new(Some(Box::new(reader))) })
    }

    /// Records end to end in the file `path`, at `offsets`.
    #[staticmethod]
    fn blob(path: PathBuf, offsets: PyReadonlyArray1<'_, i64>) -> PyResult<Self> {
        let reader = BlobReader::open(path, index_of(&offsets)?).map_err(PyValueError::new_err)?;
        Ok(SourceReader { reader: Mutex::new(Some(Box::new(reader))) })
    }

    /// Record `i` at byte `starts[i]` of the shard `paths[shards[i]]`, of the size `offsets`
    /// says; the shards' sizes were `shard_sizes` when the index was made.
    #[staticmethod]
    fn shards(
        paths: Vec<PathBuf>,
        shard_sizes: Vec<u64>,
        shards: PyReadonlyArray1<'_, i64>,
        starts: PyReadonlyArray1<'_, i64>,
        offsets: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Self> {
        let (shards, starts) = (shards.as_slice()?, starts.as_slice()?);
        if shards.len() != starts.len() {
            return Err(PyValueError::new_err("shards and starts must have one entry a record"));
        }
        let ranges = shards
            .iter()
            .zip(starts)
            .map(|(&shard, &start)| match (u32::try_from(shard), u64::try_from(start)) {
                (Ok(shard), Ok(start)) => Ok(ShardRange { shard, start }),
                _ => Err(PyValueError::new_err("shard numbers and starts must not be negative")),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let reader = ShardReader::new(paths, shard_sizes, ranges, index_of(&offsets)?)
            .map_err(PyValueError::new_err)?;
        Ok(SourceReader { reader: Mutex::new(Some(Box::new(reader))) })
    }

    fn __repr__(&self) -> String {
        match self.reader.lock().ok().as_deref() {
            Some(Some(r)) => format!("SourceReader({})", r.describe()),
            _ => "SourceReader(taken)".into(),
        }
    }
}
