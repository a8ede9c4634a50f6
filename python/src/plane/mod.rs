//! The Rust side of `ubershuffle.torch.ShuffleGroup`: what moves each epoch and the bytes
//! themselves. Python only hands buffers to the process group; everything here runs without the
//! GIL. [`TransferCore`]: records sent whole, rank to rank (peer mode, and every catch-up);
//! [`CodedSendCore`] and [`CodedRecvCore`]: a store rank's coded delivery and a training
//! rank's decoding, in rounds; [`LivenessCore`]: who is alive; [`PaceCore`]: when a delivery
//! yields to the job's gradient all-reduces.

pub mod engine;
mod liveness;
mod transfer;

use std::sync::{Arc, Mutex};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ubershuffle_codes::Segmentation;

use crate::errors::{Failure, Outcome, bad, guarded, one_line};
use crate::sampler::SamplerCore;
use crate::store::{MappedStore, StoreCore, ids_array, ids_from, locked};
use liveness::{CLOSED, Liveness, Verdict};
use transfer::{Holding, Transfer};
use ubershuffle_plane::coded::{CodedReceive, CodedSend};
use ubershuffle_plane::pace::{Hold, Pace};
use ubershuffle_plane::store::LockedStore;

/// A coded delivery's failure as the Python side raises it.
fn plane_failure(e: ubershuffle_plane::PlaneError) -> Failure {
    match e {
        ubershuffle_plane::PlaneError::Store(m) => Failure::Os(m),
        other => Failure::Internal(other.to_string()),
    }
}

/// Holdings from Python: an int64 array of record ids, or `None` for every record.
fn holdings(lists: &[Option<PyReadonlyArray1<'_, i64>>], records: usize) -> PyResult<Vec<Holding>> {
    lists
        .iter()
        .map(|l| match l {
            None => Ok(Holding::All),
            Some(a) => {
                let mut ids = ids_from(a.as_slice()?, records)?;
                ids.sort_unstable();
                ids.dedup();
                Ok(Holding::Some(ids))
            }
        })
        .collect()
}

/// The segmentation of a store's records in segments of `segment_bytes`.
fn segmentation(store: &MappedStore, segment_bytes: usize) -> Outcome<Arc<Segmentation>> {
    Segmentation::new(store.index().clone(), segment_bytes).map(Arc::new).map_err(|e| bad(one_line(&e)))
}

/// Records sent whole between ranks (see [`transfer`]).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct TransferCore {
    transfer: Transfer,
    store: Arc<Mutex<MappedStore>>,
}

#[pymethods]
impl TransferCore {
    /// The transfer that brings every rank from `holdings` to `targets` (per rank an int64
    /// array, or `None`: every record), seen from `rank`, in rounds of `round_bytes`.
    #[new]
    fn py_new(
        py: Python<'_>,
        store: PyRef<'_, StoreCore>,
        holdings_: Vec<Option<PyReadonlyArray1<'_, i64>>>,
        targets: Vec<Option<PyReadonlyArray1<'_, i64>>>,
        rank: usize,
        round_bytes: u64,
    ) -> PyResult<Self> {
        let shared = store.shared();
        let records = locked(&shared).index().len();
        let (held, wanted) = (holdings(&holdings_, records)?, holdings(&targets, records)?);
        let s = Arc::clone(&shared);
        let transfer = guarded(py, move || {
            let index = locked(&s).index().clone();
            Transfer::plan(&index, &held, &wanted, rank, round_bytes.max(1)).map_err(bad)
        })?;
        Ok(TransferCore { transfer, store: shared })
    }

    /// Number of rounds.
    #[getter]
    fn rounds(&self) -> usize {
        self.transfer.rounds()
    }

    /// Round `k`'s bytes to and from every peer: `(sent, received)`, one int per rank.
    fn sizes(&self, k: usize) -> (Vec<u64>, Vec<u64>) {
        let store = locked(&self.store);
        let bytes = |lists: &[Vec<u32>]| -> Vec<u64> {
            let (world, _) = self.transfer.ranks();
            (0..world).map(|p| lists.get(p).map_or(0, |l| store.index().bytes_of(l))).collect()
        };
        (bytes(self.transfer.sends(k)), bytes(self.transfer.recvs(k)))
    }

    /// Writes round `k`'s records for every peer into `out`, peer by peer, each peer's in id
    /// order (`out` holds exactly the round's sent bytes).
    fn pack_into(&self, py: Python<'_>, k: usize, mut out: PyReadwriteArray1<'_, u8>) -> PyResult<()> {
        let out = out.as_slice_mut()?;
        let (store, transfer) = (&self.store, &self.transfer);
        guarded(py, move || {
            let store = locked(store);
            let mut at = 0usize;
            for id in transfer.sends(k).iter().flatten() {
                let bytes = store
                    .get(*id)
                    .ok_or_else(|| bad(format!("record {id} is not held: it cannot be sent")))?;
                let slot =
                    out.get_mut(at..at + bytes.len()).ok_or_else(|| bad("the send buffer is too small"))?;
                slot.copy_from_slice(bytes);
                at += bytes.len();
            }
            if at != out.len() {
                return Err(bad(format!("the send buffer has {} bytes, round {k} sends {at}", out.len())));
            }
            Ok(())
        })
    }

    /// Stores round `k`'s records from `buffer` (every peer's, in rank order).
    fn unpack(&self, py: Python<'_>, k: usize, buffer: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let buffer = buffer.as_slice()?;
        let (store, transfer) = (&self.store, &self.transfer);
        guarded(py, move || {
            let mut store = locked(store);
            let mut at = 0usize;
            for &id in transfer.recvs(k).iter().flatten() {
                let size = store.index().size(id).unwrap_or(0) as usize;
                let bytes =
                    buffer.get(at..at + size).ok_or_else(|| bad("the receive buffer is too small"))?;
                store.put(id, bytes)?;
                at += size;
            }
            if at != buffer.len() {
                return Err(bad(format!(
                    "the receive buffer has {} bytes, round {k} brings {at}",
                    buffer.len()
                )));
            }
            Ok(())
        })
    }

    /// The records this rank reads from the source (no rank holds them).
    fn source_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        ids_array(py, self.transfer.source())
    }

    /// What the transfer moves, at this rank and in all.
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = self.transfer.figures(locked(&self.store).index());
        let d = PyDict::new(py);
        d.set_item("records_sent", f.records_sent)?;
        d.set_item("bytes_sent", f.bytes_sent)?;
        d.set_item("records_received", f.records_received)?;
        d.set_item("bytes_received", f.bytes_received)?;
        d.set_item("source_records", f.source_records)?;
        d.set_item("source_bytes", f.source_bytes)?;
        d.set_item("all_records_moved", f.all_records_moved)?;
        d.set_item("all_bytes_moved", f.all_bytes_moved)?;
        d.set_item("all_source_records", f.all_source_records)?;
        Ok(d)
    }
}

/// A store rank's coded delivery of the next epoch (see [`coded`]).
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
            CodedSend::plan(now, seg, round_bytes).map_err(plane_failure)
        })?;
        Ok(CodedSendCore { send, store: shared })
    }

    /// Training rank `rank`'s part of the plan and its routes, as bytes (what it needs to
    /// lay out and decode its rounds: [`ubershuffle_runtime::exchange::read_part`]).
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
        guarded(py, move || send.encode_into(&LockedStore(Arc::clone(store)), k, out).map_err(plane_failure))
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

/// A training rank's decoding of the store's coded delivery (see [`coded`]).
#[pyclass(module = "ubershuffle._native", frozen)]
pub struct CodedRecvCore {
    receive: Mutex<CodedReceive>,
}

#[pymethods]
impl CodedRecvCore {
    /// The decoder of `rank` for its `part` of the store's delivery (the store's
    /// `part_for(rank)`), from its cache in `now` to its batch in `next`, into `store`.
    #[new]
    fn py_new(
        py: Python<'_>,
        now: PyRef<'_, SamplerCore>,
        next: PyRef<'_, SamplerCore>,
        part: PyReadonlyArray1<'_, u8>,
        store: PyRef<'_, StoreCore>,
        rank: usize,
        segment_bytes: usize,
    ) -> PyResult<Self> {
        let part = part.as_slice()?;
        let shared = store.shared();
        let (now, next) = (&*now, &*next);
        let receive = guarded(py, move || {
            let seg = segmentation(&locked(&shared), segment_bytes)?;
            CodedReceive::new(now, next, part, seg, LockedStore(shared), rank).map_err(plane_failure)
        })?;
        Ok(CodedRecvCore { receive: Mutex::new(receive) })
    }

    /// Number of rounds.
    #[getter]
    fn rounds(&self) -> usize {
        self.lock().rounds.rounds()
    }

    /// Round `k`'s bytes from the store to this rank.
    fn store_len(&self, k: usize) -> u64 {
        let r = self.lock();
        r.rounds.store_sizes(k).get(r.rank).copied().unwrap_or(0)
    }

    /// Whether round `k` has a relay (every training rank then takes part in it).
    fn has_relay(&self, k: usize) -> bool {
        self.lock().rounds.has_relay(k)
    }

    /// Round `k`'s relay at this rank: `(sent, received)`, bytes to and from each training rank.
    fn relay_sizes(&self, k: usize) -> (Vec<u64>, Vec<u64>) {
        let r = self.lock();
        r.rounds.relay_sizes(k, r.rank)
    }

    /// Writes this rank's relay of round `k` into `out` (every other rank's bytes in rank
    /// order) from `from_store`, the store's message of that round.
    fn pack_relay(
        &self,
        py: Python<'_>,
        k: usize,
        from_store: PyReadonlyArray1<'_, u8>,
        mut out: PyReadwriteArray1<'_, u8>,
    ) -> PyResult<()> {
        let (from_store, out) = (from_store.as_slice()?, out.as_slice_mut()?);
        let receive = &self.receive;
        guarded(py, move || lock(receive).pack_relay(k, from_store, out).map_err(plane_failure))
    }

    /// Decodes round `k` into the store from the store's message and the relay's bytes.
    fn decode(
        &self,
        py: Python<'_>,
        k: usize,
        from_store: PyReadonlyArray1<'_, u8>,
        from_peers: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<()> {
        let (from_store, from_peers) = (from_store.as_slice()?, from_peers.as_slice()?);
        let receive = &self.receive;
        guarded(py, move || lock(receive).decode(k, from_store, from_peers).map_err(plane_failure))
    }

    /// After the last round: the packets this rank needed (and the coded ones), the records it
    /// received and the plan's padding bytes; an error names what is missing.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.lock();
        let incomplete = r.decoder.store().incomplete();
        if let Some(first) = incomplete.first() {
            return Err(Failure::Internal(format!(
                "the coded delivery left record {first} incomplete ({} records in all)",
                incomplete.len()
            ))
            .into());
        }
        let d = PyDict::new(py);
        d.set_item("packets_needed", r.decoder.packets_needed())?;
        d.set_item("coded_packets_needed", r.decoder.coded_packets_needed())?;
        d.set_item("new_records", ids_array(py, &r.new_records))?;
        d.set_item("padding_bytes", r.padding_bytes)?;
        Ok(d)
    }
}

impl CodedRecvCore {
    fn lock(&self) -> std::sync::MutexGuard<'_, CodedReceive> {
        lock(&self.receive)
    }
}

/// A receiver's state, whoever panicked holding it.
fn lock(receive: &Mutex<CodedReceive>) -> std::sync::MutexGuard<'_, CodedReceive> {
    receive.lock().unwrap_or_else(|p| p.into_inner())
}

/// A rank's view of who in its group is alive (see [`liveness`]): heartbeats in as the raw
/// values read from the job's key-value store, verdicts out.
#[pyclass(module = "ubershuffle._native")]
pub struct LivenessCore {
    liveness: Liveness,
}

/// A heartbeat value as a rank writes it: its count in decimal, or `closed`. Anything else (a
/// faulty or hostile peer's bytes) counts as no heartbeat.
fn beat_of(value: &[u8]) -> Option<u64> {
    if value == b"closed" {
        return Some(CLOSED);
    }
    std::str::from_utf8(value).ok()?.parse::<u64>().ok().filter(|&b| b != CLOSED)
}

#[pymethods]
impl LivenessCore {
    /// `world` ranks, each counted as heard at `now` (seconds of a monotonic clock); silent
    /// after `timeout` seconds without a new heartbeat.
    #[new]
    fn py_new(world: usize, timeout: f64, now: f64) -> PyResult<Self> {
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(bad(format!("timeout must be a positive number of seconds, got {timeout}")).into());
        }
        Ok(LivenessCore { liveness: Liveness::new(world, timeout, now) })
    }

    /// Seconds between two heartbeats, and between two observations.
    #[getter]
    fn period(&self) -> f64 {
        self.liveness.period()
    }

    /// The heartbeat value this rank writes for its `count`-th beat.
    #[staticmethod]
    fn beat_value(count: u64) -> String {
        count.min(CLOSED - 1).to_string()
    }

    /// Records every rank's heartbeat value as read at `now` (`None`: not written yet).
    fn observe(&mut self, values: Vec<Option<Vec<u8>>>, now: f64) {
        for (rank, value) in values.iter().enumerate() {
            self.liveness.observe(rank, value.as_deref().and_then(beat_of), now);
        }
    }

    /// `None` while every rank of `ranks` is alive at `now`; else `("closed", rank, 0.0)` or
    /// `("silent", rank, seconds since its last heartbeat)`.
    fn verdict(&self, ranks: Vec<usize>, now: f64) -> Option<(&'static str, usize, f64)> {
        self.liveness.verdict(&ranks, now).map(verdict_tuple)
    }

    /// `("silent", rank, seconds)` for the first of `ranks` that has not closed and is silent
    /// at `now`, else `None` (what a rank watching all the others reports).
    fn silent(&self, ranks: Vec<usize>, now: f64) -> Option<(&'static str, usize, f64)> {
        self.liveness.silent(&ranks, now).map(verdict_tuple)
    }
}

/// A verdict as Python sees it.
fn verdict_tuple(v: Verdict) -> (&'static str, usize, f64) {
    match v {
        Verdict::Closed { rank } => ("closed", rank, 0.0),
        Verdict::Silent { rank, seconds } => ("silent", rank, seconds),
    }
}

/// When a background delivery may post its next round (see [`pace`]): the steps' all-reduces
/// and the rounds' times in, on the caller's monotonic clock; a verdict out.
#[pyclass(module = "ubershuffle._native")]
pub struct PaceCore {
    pace: Pace,
}

#[pymethods]
impl PaceCore {
    /// A rank that has seen no step yet.
    #[new]
    fn py_new() -> Self {
        PaceCore { pace: Pace::new() }
    }

    /// A step's all-reduce began at `now`.
    fn began(&mut self, now: f64) {
        self.pace.began(now);
    }

    /// The step's all-reduce ended at `now`, having sent and received `wire_bytes` at each rank.
    fn ended(&mut self, now: f64, wire_bytes: f64) {
        self.pace.ended(now, wire_bytes);
    }

    /// Whether the training thread waits for the delivery (then nothing is held).
    fn set_training_waits(&mut self, waits: bool) {
        self.pace.set_training_waits(waits);
    }

    /// With `in_flight` bytes posted and not landed after the post: `0.0`, post now; `None`,
    /// an all-reduce is in flight, wait for its end; `s > 0`, the next all-reduce is due, wait
    /// at most `s` seconds.
    fn hold(&self, now: f64, in_flight: f64) -> Option<f64> {
        match self.pace.hold(now, in_flight) {
            Hold::Go => Some(0.0),
            Hold::UntilEnd => None,
            Hold::For(s) => Some(s),
        }
    }
}
