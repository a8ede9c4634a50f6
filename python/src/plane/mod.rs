//! The Rust side of `ubershuffle.torch.ShuffleGroup`: the data plane's engine
//! ([`ubershuffle_plane`]) as Python drives it ([`engine`]), and a store's coded delivery
//! planned and encoded alone, for the benchmarks ([`CodedSendCore`]).

pub mod engine;
pub mod outside;
pub mod reader;
pub mod tar;

use std::sync::{Arc, Mutex};

use numpy::{IntoPyArray, PyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ubershuffle_codes::Segmentation;
use ubershuffle_plane::coded::CodedSend;
use ubershuffle_plane::store::LockedStore;

use crate::errors::{Failure, Outcome, bad, guarded, one_line};
use crate::sampler::SamplerCore;
use crate::store::{MappedStore, StoreCore, ids_array, locked};

/// The segmentation of a store's records in segments of `segment_bytes`.
fn segmentation(store: &MappedStore, segment_bytes: usize) -> Outcome<Arc<Segmentation>> {
    Segmentation::new(store.index().clone(), segment_bytes).map(Arc::new).map_err(|e| bad(one_line(&e)))
}

/// A coded delivery's failure as the Python side raises it.
fn plane_failure(e: ubershuffle_plane::PlaneError) -> Failure {
    match e {
        ubershuffle_plane::PlaneError::Store(m) => Failure::Os(m),
        other => Failure::Internal(other.to_string()),
    }
}

/// A store rank's coded delivery of the next epoch (the benchmarks plan and encode through it: `python/benchmarks/bench_segments.py`).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct CodedSendCore {
    send: CodedSend,
    store: Arc<Mutex<MappedStore>>,
}

#[pymethods]
impl CodedSendCore {
    /// Plans and routes the epoch after `now`'s over segments of `segment_bytes`, in rounds of
    /// at most `round_bytes`, to be encoded from `store` (which holds every record).
    #[new]
    fn py_new(
        py: Python<'_>,
        now: PyRef<'_, SamplerCore>,
        store: PyRef<'_, StoreCore>,
        segment_bytes: usize,
        round_bytes: u64,
    ) -> PyResult<Self> {
        let shared = store.shared();
        let now = &*now;
        let s = Arc::clone(&shared);
        let send = guarded(py, move || {
            let seg = segmentation(&locked(&s), segment_bytes)?;
            CodedSend::plan(now, seg, round_bytes, 0.0).map_err(plane_failure)
        })?;
        Ok(CodedSendCore { send, store: shared })
    }

    /// Training rank `rank`'s part of the plan and its routes, as bytes (what it needs to
    /// lay out and decode its rounds: [`ubershuffle_plane::receiver_part::read_part`]).
    fn part_for<'py>(&self, py: Python<'py>, rank: usize) -> Bound<'py, PyArray1<u8>> {
        self.send.rounds.part_for(rank, &self.send.epoch.plan).into_pyarray(py)
    }

    /// Number of rounds.
    #[getter]
    fn rounds(&self) -> usize {
        self.send.rounds.rounds()
    }

    /// Round `k`'s bytes to each training rank, in rank order.
    fn round_sizes(&self, k: usize) -> Vec<u64> {
        self.send.rounds.store_sizes(k)
    }

    /// Round `k`'s relay among the training ranks: bytes from rank `i` to rank `j`, `[i][j]`.
    fn relay_matrix(&self, k: usize) -> Vec<Vec<u64>> {
        self.send.rounds.relay_matrix(k)
    }

    /// The records the sent packets carry, sorted (int64): what the store must hold before
    /// the first round is encoded.
    fn records<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        ids_array(py, &self.send.records())
    }

    /// Encodes round `k`'s messages into `out` (every training rank's, in rank order).
    fn encode_into(&self, py: Python<'_>, k: usize, mut out: PyReadwriteArray1<'_, u8>) -> PyResult<()> {
        let out = out.as_slice_mut()?;
        let (send, store) = (&self.send, &self.store);
        guarded(py, move || {
            let store = LockedStore(Arc::clone(store));
            if k == 0 {
                send.check(&store).map_err(plane_failure)?;
            }
            send.encode_into(&store, k, out).map_err(plane_failure)
        })
    }

    /// The plan's figures: packets, coded packets, the uncoded count on segments and on
    /// records, padding and data bytes, the segment size, the scheme that made it, and how the
    /// packets travel (unicast, multicast among their receivers, or not at all).
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = &self.send.epoch;
        let d = PyDict::new(py);
        let width = self.send.segmentation.segment_bytes() as u64;
        let routes = self.send.rounds.figures();
        d.set_item("epoch", e.epoch)?;
        d.set_item("packets", e.plan.len())?;
        d.set_item("coded_packets", e.plan.iter().filter(|t| t.len() > 1).count())?;
        d.set_item("uncoded_packets", e.segments.uncoded_transmissions())?;
        d.set_item("record_uncoded_transmissions", e.records.uncoded_transmissions())?;
        d.set_item("padding_bytes", e.padding_bytes)?;
        d.set_item("data_bytes", e.plan.len() as u64 * width - e.padding_bytes)?;
        d.set_item("segment_bytes", width)?;
        d.set_item("made_by", &e.made_by)?;
        d.set_item("unicast_packets", routes.unicast_packets)?;
        d.set_item("multicast_packets", routes.multicast_packets)?;
        d.set_item("unneeded_packets", routes.unneeded_packets)?;
        d.set_item("unicast_bytes", routes.unicast_bytes)?;
        d.set_item("multicast_bytes", routes.multicast_bytes)?;
        Ok(d)
    }
}
