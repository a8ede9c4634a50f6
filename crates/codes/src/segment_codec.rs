//! The codec over records of uneven size, on a [`Segmentation`]: the sender encodes segment
//! packets from any [`RecordSource`] straight into a caller's buffer ([`SegmentEncoder`]), and
//! a receiver decodes them with the one [`Decoder`](crate::Decoder) into any
//! [`RecordWriter`] through a [`SegmentTarget`], which writes each learned segment into its
//! record's place and checks that its padding decodes to zeros.

use std::collections::HashMap;
use std::sync::Arc;

use ubershuffle_core::Plan;
use ubershuffle_core::rng::{fill_bytes, seeded};

use crate::decode::DecodeStore;
use crate::xor::xor_into;
use crate::{CodecError, RecordIndex, Records, Segmentation};

/// Where records' bytes are read from: a data set, or a rank's store.
pub trait RecordSource {
    /// Record `id`'s size if the source holds it.
    fn size(&self, id: u32) -> Option<u64>;

    /// XORs bytes `at..at + dst.len()` of record `id` into `dst` (for a store being filled,
    /// the bytes written so far).
    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError>;

    /// Copies bytes `at..at + dst.len()` of record `id` into `dst` (what XOR into zeros
    /// gives; a source that can read its bytes in place copies them in one pass).
    fn copy_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        dst.fill(0);
        self.xor_piece_into(id, at, dst)
    }
}

/// [`RecordSource::copy_piece_into`] over record `id`'s bytes in memory (`None`: the source
/// has no such record).
pub fn copy_piece_of(record: Option<&[u8]>, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
    let bytes = record.ok_or(CodecError::UnknownPoint { point: id })?;
    let piece =
        at.checked_add(dst.len()).and_then(|end| bytes.get(at..end)).ok_or(CodecError::WrongSize {
            point: id,
            len: at.saturating_add(dst.len()),
            size: bytes.len() as u64,
        })?;
    dst.copy_from_slice(piece);
    Ok(())
}

/// [`RecordSource::xor_piece_into`] over record `id`'s bytes in memory (`None`: the source
/// has no such record): XORs bytes `at..at + dst.len()` of it into `dst`.
pub fn xor_piece_of(record: Option<&[u8]>, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
    let bytes = record.ok_or(CodecError::UnknownPoint { point: id })?;
    let piece =
        at.checked_add(dst.len()).and_then(|end| bytes.get(at..end)).ok_or(CodecError::WrongSize {
            point: id,
            len: at.saturating_add(dst.len()),
            size: bytes.len() as u64,
        })?;
    xor_into(dst, piece);
    Ok(())
}

impl RecordSource for Records {
    fn size(&self, id: u32) -> Option<u64> {
        self.get(id).map(|r| r.len() as u64)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        xor_piece_of(self.get(id), id, at, dst)
    }

    fn copy_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        copy_piece_of(self.get(id), id, at, dst)
    }
}

/// A store that decoded records are written into, piece by piece.
pub trait RecordWriter: RecordSource {
    /// Writes `bytes` at byte `at` of record `id`'s place.
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError>;
    /// Every byte of record `id` has been written.
    fn complete(&mut self, id: u32) -> Result<(), CodecError>;
}

/// A data set of records of uneven size in memory: their bytes end to end, and the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnevenRecords {
    index: RecordIndex,
    bytes: Vec<u8>,
}

impl UnevenRecords {
    /// Records laid end to end in `bytes` as `index` says (the lengths must agree).
    pub fn new(index: RecordIndex, bytes: Vec<u8>) -> Result<Self, CodecError> {
        if index.total_bytes() != bytes.len() as u64 {
            return Err(CodecError::RaggedRecords { len: bytes.len(), width: 0 });
        }
        Ok(UnevenRecords { index, bytes })
    }

    /// The records given, in order.
    pub fn from_records<B: AsRef<[u8]>>(records: impl IntoIterator<Item = B>) -> Result<Self, CodecError> {
        let mut bytes = Vec::new();
        let mut sizes = Vec::new();
        for r in records {
            sizes.push(r.as_ref().len() as u64);
            bytes.extend_from_slice(r.as_ref());
        }
        UnevenRecords::new(RecordIndex::from_sizes(sizes)?, bytes)
    }

    /// Records of the given sizes filled with seeded pseudo-random bytes (tests, benchmarks).
    pub fn random(sizes: &[u64], seed: u64) -> Result<Self, CodecError> {
        let index = RecordIndex::from_sizes(sizes.iter().copied())?;
        let mut bytes = vec![0u8; index.total_bytes() as usize];
        fill_bytes(&mut seeded(seed), &mut bytes);
        UnevenRecords::new(index, bytes)
    }

    /// Where each record lies.
    pub fn index(&self) -> &RecordIndex {
        &self.index
    }

    /// Every record, end to end.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Record `id`'s bytes.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        let r = self.index.range(id)?;
        self.bytes.get(r.start as usize..r.end as usize)
    }
}

impl RecordSource for UnevenRecords {
    fn size(&self, id: u32) -> Option<u64> {
        self.index.size(id)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        xor_piece_of(self.get(id), id, at, dst)
    }
}

/// Records of uneven size held in memory by id, each allocated when its first piece arrives
/// (a worker's store for tests and the runtime; a rank of `ubershuffle.torch` keeps its own in
/// shared memory).
#[derive(Clone, Debug, Default)]
pub struct UnevenStore {
    sizes: HashMap<u32, u64>,
    records: HashMap<u32, (Vec<u8>, bool)>,
}

impl UnevenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a whole record.
    pub fn insert(&mut self, id: u32, bytes: &[u8]) {
        self.records.insert(id, (bytes.to_vec(), true));
    }

    /// Makes room for record `id` of `size` bytes (zeros) before its pieces are written.
    pub fn expect(&mut self, id: u32, size: u64) {
        self.sizes.insert(id, size);
    }

    /// A complete record's bytes.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        self.records.get(&id).filter(|(_, done)| *done).map(|(b, _)| b.as_slice())
    }

    /// The complete records' ids, sorted.
    pub fn ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.records.iter().filter(|(_, (_, d))| *d).map(|(&id, _)| id).collect();
        ids.sort_unstable();
        ids
    }

    /// Drops every record but `keep`'s.
    pub fn retain(&mut self, keep: &[u32]) {
        self.records.retain(|id, _| keep.binary_search(id).is_ok());
    }
}

impl RecordSource for UnevenStore {
    fn size(&self, id: u32) -> Option<u64> {
        self.get(id).map(|r| r.len() as u64)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        xor_piece_of(self.records.get(&id).map(|(b, _)| b.as_slice()), id, at, dst)
    }
}

impl RecordWriter for UnevenStore {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError> {
        let size = *self.sizes.get(&id).ok_or(CodecError::UnknownPoint { point: id })?;
        let (record, _) = self.records.entry(id).or_insert_with(|| (vec![0; size as usize], false));
        let end = at
            .checked_add(bytes.len())
            .filter(|&e| e <= record.len())
            .ok_or(CodecError::WrongSize { point: id, len: at.saturating_add(bytes.len()), size })?;
        record[at..end].copy_from_slice(bytes);
        Ok(())
    }

    fn complete(&mut self, id: u32) -> Result<(), CodecError> {
        let size = self.sizes.get(&id).copied().unwrap_or(0);
        let (_, done) = self.records.entry(id).or_insert_with(|| (vec![0; size as usize], false));
        *done = true;
        Ok(())
    }
}

/// Encodes the packets of a segment-level plan from a source of whole records.
#[derive(Clone, Copy, Debug)]
pub struct SegmentEncoder<'a, R: ?Sized> {
    plan: &'a Plan,
    segments: &'a Segmentation,
    source: &'a R,
}

impl<'a, R: RecordSource + ?Sized> SegmentEncoder<'a, R> {
    /// An encoder of `plan` (over the segments of `segments`) from `source`, which must hold
    /// every record the plan names, each of the index's size.
    pub fn new(plan: &'a Plan, segments: &'a Segmentation, source: &'a R) -> Result<Self, CodecError> {
        SegmentEncoder::check(plan, segments, source)?;
        Ok(SegmentEncoder::checked(plan, segments, source))
    }

    /// An encoder of `plan` that [`SegmentEncoder::check`] passed with this `source` before,
    /// without scanning the plan again (an encoder made per round of a delivery); a record the
    /// source lacks is then read as the bytes at its place.
    pub fn checked(plan: &'a Plan, segments: &'a Segmentation, source: &'a R) -> Self {
        SegmentEncoder { plan, segments, source }
    }

    /// Checks that `source` holds every record `plan` names (over the segments of `segments`),
    /// each of the index's size, and that no transmission is empty.
    pub fn check(plan: &Plan, segments: &Segmentation, source: &R) -> Result<(), CodecError> {
        let mut checked = vec![false; segments.records()];
        for parts in plan.iter() {
            if parts.is_empty() {
                return Err(CodecError::MalformedPacket { reason: "a transmission has no part".into() });
            }
            for p in parts {
                let (record, _) =
                    segments.record_of(p.point).ok_or(CodecError::UnknownPoint { point: p.point })?;
                if std::mem::replace(&mut checked[record as usize], true) {
                    continue;
                }
                let len = source.size(record).ok_or(CodecError::UnknownPoint { point: record })?;
                let size = segments.index().size(record).unwrap_or(0);
                if len != size {
                    return Err(CodecError::WrongSize { point: record, len: len as usize, size });
                }
            }
        }
        Ok(())
    }

    /// Bytes per packet (the segment size).
    pub fn width(&self) -> usize {
        self.segments.segment_bytes()
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.plan.len()
    }

    /// Whether the plan sends nothing.
    pub fn is_empty(&self) -> bool {
        self.plan.is_empty()
    }

    /// Writes packet `seq` into `out` (`width()` bytes): the XOR of its parts' segments, each
    /// zero-padded. Fails only if the source lost a record since `new` checked it.
    pub fn encode_into(&self, seq: usize, out: &mut [u8]) -> Result<(), CodecError> {
        let mut filled = 0;
        for (i, part) in self.plan.transmission(seq).iter().enumerate() {
            let (record, k) =
                self.segments.record_of(part.point).ok_or(CodecError::UnknownPoint { point: part.point })?;
            let size = self.segments.index().size(record).unwrap_or(0) as usize;
            let piece = self.segments.piece(size, k);
            let len = piece.len();
            if len > out.len() {
                return Err(CodecError::WrongSize { point: record, len, size: out.len() as u64 });
            }
            if i == 0 {
                // The first piece is copied, the rest of the packet zeroed: one pass, not two.
                self.source.copy_piece_into(record, piece.start, &mut out[..len])?;
                out[len..].fill(0);
                filled = out.len();
            } else {
                self.source.xor_piece_into(record, piece.start, &mut out[..len])?;
            }
        }
        if filled == 0 {
            out.fill(0);
        }
        Ok(())
    }
}

/// A decoder's store over records of uneven size: the segments of the records it holds are
/// read from `records`; a learned segment of a wanted record is written into its place (its
/// padding checked to be zeros) and the record completed once all its segments are in; any
/// other learned segment (a two-step decoder's intermediate) is kept aside.
#[derive(Debug)]
pub struct SegmentTarget<W> {
    segments: Arc<Segmentation>,
    records: W,
    known: Vec<bool>,
    remaining: HashMap<u32, u32>,
    aside: HashMap<u32, Vec<u8>>,
}

impl<W: RecordWriter> SegmentTarget<W> {
    /// A target over `records`, which holds the whole records `held` and must end holding
    /// `wanted` too.
    pub fn new(segments: Arc<Segmentation>, records: W, held: &[u32], wanted: &[u32]) -> Self {
        let mut known = vec![false; segments.segments()];
        for s in segments.expand(held) {
            known[s as usize] = true;
        }
        let remaining = wanted
            .iter()
            .filter(|&&r| !segments.of_record(r).any(|s| known[s as usize]))
            .map(|&r| (r, segments.of_record(r).len() as u32))
            .collect();
        SegmentTarget { segments, records, known, remaining, aside: HashMap::new() }
    }

    /// The segments it knows at the start (pass them to [`crate::Decoder::over`]).
    pub fn known_segments(&self) -> Vec<u32> {
        (0..self.known.len() as u32).filter(|&s| self.known[s as usize]).collect()
    }

    /// The records it must still complete, sorted.
    pub fn incomplete(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.remaining.iter().filter(|&(_, &n)| n > 0).map(|(&r, _)| r).collect();
        ids.sort_unstable();
        ids
    }

    /// The records, with what was written.
    pub fn into_records(self) -> W {
        self.records
    }

    /// The records.
    pub fn records(&self) -> &W {
        &self.records
    }
}

impl<W: RecordWriter> DecodeStore for SegmentTarget<W> {
    fn width(&self) -> usize {
        self.segments.segment_bytes()
    }

    fn universe(&self) -> usize {
        self.segments.segments()
    }

    fn contains(&self, point: u32) -> bool {
        self.known.get(point as usize).copied().unwrap_or(false)
    }

    fn xor_known_into(&self, point: u32, dst: &mut [u8]) -> Result<(), CodecError> {
        if !self.contains(point) {
            return Err(CodecError::UnknownPoint { point });
        }
        if let Some(bytes) = self.aside.get(&point) {
            xor_into(dst, bytes);
            return Ok(());
        }
        let (record, k) = self
            .segments
            .record_of(point)
            .ok_or(CodecError::PointOutOfRange { point, points: self.universe() })?;
        let size = self.segments.index().size(record).unwrap_or(0) as usize;
        let piece = self.segments.piece(size, k);
        self.records.xor_piece_into(record, piece.start, &mut dst[..piece.len()])
    }

    fn insert(&mut self, point: u32, bytes: &[u8]) -> Result<bool, CodecError> {
        let width = self.width();
        if bytes.len() != width {
            return Err(CodecError::WrongWidth { point, len: bytes.len(), width });
        }
        let (record, k) = self
            .segments
            .record_of(point)
            .ok_or(CodecError::PointOutOfRange { point, points: self.universe() })?;
        if self.contains(point) {
            return Ok(false);
        }
        match self.remaining.get_mut(&record) {
            Some(left) => {
                let size = self.segments.index().size(record).unwrap_or(0) as usize;
                let piece = self.segments.piece(size, k);
                if bytes[piece.len()..].iter().any(|&b| b != 0) {
                    return Err(CodecError::DirtyPadding { segment: point });
                }
                self.records.write_at(record, piece.start, &bytes[..piece.len()])?;
                *left -= 1;
                if *left == 0 {
                    self.records.complete(record)?;
                }
            }
            None => {
                self.aside.insert(point, bytes.to_vec());
            }
        }
        self.known[point as usize] = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{Decoder, PacketBatch};
    use ubershuffle_core::{GeneratorParams, PlannerOptions, seeded, verify};

    /// Plans the segment instance of a generated instance over records of random sizes,
    /// encodes every packet, decodes at every worker and compares bytes; `false` when the
    /// scheme refuses the instance as outside its model.
    fn round_trip(scheme: &str, sizes: &[u64], segment_bytes: usize) -> bool {
        let q = sizes.len();
        let inst = GeneratorParams { workers: 4, points: q, alpha: 0.5, seed: 7 }.check().unwrap().generate();
        let records = UnevenRecords::random(sizes, 3).unwrap();
        let seg = Segmentation::new(records.index().clone(), segment_bytes).unwrap();
        let seg_inst = seg.instance(&inst).unwrap();
        let planner = ubershuffle_planners::planner_by_name(scheme, &PlannerOptions::default()).unwrap();
        let plan = match planner.plan(&seg_inst, &mut seeded(1)) {
            Err(ubershuffle_core::PlanError::Unsupported { .. }) => return false,
            plan => plan.unwrap(),
        };
        assert!(verify(&seg_inst, &plan).unwrap().is_valid(), "{scheme}");
        let encoder = SegmentEncoder::new(&plan, &seg, &records).unwrap();
        let seqs: Vec<u32> = (0..plan.len() as u32).collect();
        let mut wire = Vec::new();
        PacketBatch::write(&mut wire, &seqs, seg.segment_bytes(), |k, out| {
            encoder.encode_into(k, out).unwrap()
        });
        let seg = Arc::new(seg);
        for w in 0..inst.workers() {
            let held = inst.cache(w).to_vec();
            let wanted = inst.needs(w).to_vec();
            let mut store = UnevenStore::new();
            for &r in &held {
                store.insert(r, records.get(r).unwrap());
            }
            for &r in &wanted {
                store.expect(r, records.index().size(r).unwrap());
            }
            let target = SegmentTarget::new(Arc::clone(&seg), store, &held, &wanted);
            let known = target.known_segments();
            let mut decoder = Decoder::over(w, &plan, target, known, seg.expand(&wanted)).unwrap();
            decoder.receive_batch(&PacketBatch::from_bytes(&wire, seg.segment_bytes()).unwrap()).unwrap();
            let target = decoder.finish().unwrap().into_store();
            assert!(target.incomplete().is_empty());
            let store = target.into_records();
            for &r in &wanted {
                assert_eq!(store.get(r), records.get(r), "{scheme}: worker {w}, record {r}");
            }
        }
        true
    }

    #[test]
    fn uneven_records_round_trip_through_every_builtin_scheme() {
        let sizes: Vec<u64> = (0..60u64).map(|i| (i * 37 + 11) % 97 + (i % 5 == 0) as u64 * 300).collect();
        let mut planned = 0;
        for entry in ubershuffle_planners::builtin_planners() {
            // A pliable scheme chooses assignments of records, then its plan is expanded
            // (`Segmentation::expand_plan`, tested in the runtime): it never plans segments.
            if (entry.build)(&PlannerOptions::default()).as_pliable().is_some() {
                continue;
            }
            // A scheme built for another model (no excess storage) refuses these instances.
            if round_trip(entry.name, &sizes, 16) {
                planned += 1;
            }
        }
        assert!(planned >= 6, "{planned} schemes planned the segment instance");
        assert!(round_trip("auto", &[0, 1, 2, 3, 4, 5, 6, 7], 2));
    }

    #[test]
    fn dirty_padding_and_wrong_sizes_are_errors() {
        let records = UnevenRecords::from_records([&b"abc"[..], b"de"]).unwrap();
        let seg = Arc::new(Segmentation::new(records.index().clone(), 4).unwrap());
        let mut store = UnevenStore::new();
        store.expect(1, 2);
        let mut target = SegmentTarget::new(Arc::clone(&seg), store, &[], &[1]);
        assert_eq!(target.insert(1, b"de\0\x01"), Err(CodecError::DirtyPadding { segment: 1 }));
        assert!(target.insert(1, b"de").is_err(), "a short payload");
        assert_eq!(target.insert(1, b"de\0\0"), Ok(true));
        assert_eq!(target.into_records().get(1), Some(&b"de"[..]));
        let short = UnevenRecords::from_records([&b"ab"[..], b"de"]).unwrap();
        let mut plan = Plan::new();
        plan.push(&[ubershuffle_core::Part::new(0, 0)]);
        assert!(matches!(SegmentEncoder::new(&plan, &seg, &short), Err(CodecError::WrongSize { .. })));
    }
}
