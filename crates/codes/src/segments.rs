//! Records of uneven size: where each record lies ([`RecordIndex`]) and how records split into
//! fixed-size segments that the shuffle problem and the codec treat as points
//! ([`Segmentation`]).
//!
//! Choice (the papers assume equal records): a record of `len` bytes is `ceil(len / S)`
//! segments of `S` bytes (at least one), the last one zero-padded, and an epoch is planned on
//! the *segment* instance, where every segment has its record's cachers and receiver. A coded
//! packet then XORs `S`-byte segments, so the only padding is each record's last segment: on
//! average `S / 2` bytes a record, whatever the spread of sizes. Padding whole records to the
//! longest in a packet instead costs the gap between the longest part and the others, which
//! grows with the spread of sizes (measured in `docs/uneven-records.md`).

use std::ops::Range;

use ubershuffle_core::{InstanceError, Part, Plan, ShuffleInstance};

use crate::CodecError;

/// Where every record of a data set lies: `offsets[i]..offsets[i + 1]` are record `i`'s bytes
/// in the records laid end to end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordIndex {
    offsets: Vec<u64>,
}

impl RecordIndex {
    /// The index of records of the given sizes, in order. At most `u32::MAX` records.
    pub fn from_sizes(sizes: impl IntoIterator<Item = u64>) -> Result<Self, CodecError> {
        let sizes = sizes.into_iter();
        let mut offsets = Vec::with_capacity(sizes.size_hint().0 + 1);
        offsets.push(0u64);
        let mut end = 0u64;
        for size in sizes {
            end = end.checked_add(size).ok_or(CodecError::TooManyBytes)?;
            offsets.push(end);
        }
        if u32::try_from(offsets.len() - 1).is_err() {
            return Err(CodecError::TooManyRecords { records: offsets.len() - 1 });
        }
        Ok(RecordIndex { offsets })
    }

    /// `points` records of `width` bytes each.
    pub fn fixed(points: usize, width: usize) -> Result<Self, CodecError> {
        Self::from_sizes(std::iter::repeat_n(width as u64, points))
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of all records together.
    pub fn total_bytes(&self) -> u64 {
        self.offsets[self.len()]
    }

    /// Record `id`'s size in bytes (`None` past the end).
    pub fn size(&self, id: u32) -> Option<u64> {
        Some(self.range(id)?.end - self.range(id)?.start)
    }

    /// Record `id`'s bytes in the records laid end to end.
    pub fn range(&self, id: u32) -> Option<Range<u64>> {
        let i = id as usize;
        Some(*self.offsets.get(i)?..*self.offsets.get(i + 1)?)
    }

    /// The offsets, `len() + 1` of them, from 0 to [`RecordIndex::total_bytes`].
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The largest record, in bytes.
    pub fn max_size(&self) -> u64 {
        self.offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
    }

    /// The bytes of the records `ids` together.
    pub fn bytes_of(&self, ids: &[u32]) -> u64 {
        ids.iter().filter_map(|&id| self.size(id)).sum()
    }
}

/// Segments the default segment size allows a data set (about 4 million): the planners' reach
/// at a few workers (a million points plan in seconds), and 16 bytes of index per segment.
pub const MAX_DEFAULT_SEGMENTS: u64 = 1 << 22;

/// The default segment size for the records of `index`. Records all of one size (up to
/// 1 MiB) are one segment each: no padding, and the plans of fixed-width records. Otherwise the
/// power of two at or below a thirty-second of the mean record, between 512 bytes and 1 MiB,
/// doubled while the data set would have more than [`MAX_DEFAULT_SEGMENTS`] segments. Smaller
/// segments pair better and pad less but cost planning time, which grows with their number;
/// `python/benchmarks/bench_segments.py` measures both for every size (results/segments.csv,
/// docs/uneven-records.md).
pub fn default_segment_bytes(index: &RecordIndex) -> usize {
    const SMALLEST: usize = 512;
    const LARGEST: usize = 1 << 20;
    let largest = index.max_size();
    if largest > 0 && largest <= LARGEST as u64 && index.offsets().windows(2).all(|w| w[1] - w[0] == largest)
    {
        return largest as usize;
    }
    let mean = index.total_bytes() as f64 / index.len().max(1) as f64;
    let target = (mean / 32.0).max(1.0);
    let mut s = SMALLEST;
    while s < LARGEST && (2 * s) as f64 <= target {
        s *= 2;
    }
    while s < LARGEST && index.total_bytes() / s as u64 > MAX_DEFAULT_SEGMENTS {
        s *= 2;
    }
    s
}

/// Records split into segments of `segment_bytes`: record `i` is the segments
/// `first[i]..first[i + 1]`, numbered across the data set, each of `segment_bytes` but the
/// last, which is zero-padded. A zero-byte record is one segment of padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segmentation {
    index: RecordIndex,
    segment_bytes: usize,
    first: Vec<u32>,
}

impl Segmentation {
    /// Splits the records of `index` into segments of `segment_bytes` (at least 1). Fails when
    /// the segments would number more than `u32::MAX`.
    pub fn new(index: RecordIndex, segment_bytes: usize) -> Result<Self, CodecError> {
        if segment_bytes == 0 {
            return Err(CodecError::ZeroWidth);
        }
        let mut first = Vec::with_capacity(index.len() + 1);
        let mut at = 0u64;
        first.push(0u32);
        for w in index.offsets.windows(2) {
            at += (w[1] - w[0]).div_ceil(segment_bytes as u64).max(1);
            let id = u32::try_from(at)
                .map_err(|_| CodecError::TooManySegments { segment_bytes, bytes: index.total_bytes() })?;
            first.push(id);
        }
        Ok(Segmentation { index, segment_bytes, first })
    }

    /// The records' index.
    pub fn index(&self) -> &RecordIndex {
        &self.index
    }

    /// Bytes per segment.
    pub fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    /// Number of records.
    pub fn records(&self) -> usize {
        self.index.len()
    }

    /// Number of segments of all records.
    pub fn segments(&self) -> usize {
        self.first[self.records()] as usize
    }

    /// The segments of record `id`.
    pub fn of_record(&self, id: u32) -> Range<u32> {
        let i = id as usize;
        match (self.first.get(i), self.first.get(i + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    /// The record that segment `segment` belongs to, and its place in the record.
    pub fn record_of(&self, segment: u32) -> Option<(u32, u32)> {
        if segment as usize >= self.segments() {
            return None;
        }
        let record = self.first.partition_point(|&f| f <= segment) - 1;
        Some((record as u32, segment - self.first[record]))
    }

    /// The bytes of segment `k` of a record of `len` bytes, as a range within the record
    /// (empty for the padding-only segment of an empty record).
    pub fn piece(&self, len: usize, k: u32) -> Range<usize> {
        let start = (k as usize).saturating_mul(self.segment_bytes).min(len);
        start..(start + self.segment_bytes).min(len)
    }

    /// The real (unpadded) bytes of segment `segment`.
    pub fn real_bytes(&self, segment: u32) -> usize {
        match self.record_of(segment) {
            Some((record, k)) => {
                let len = self.index.size(record).unwrap_or(0) as usize;
                self.piece(len, k).len()
            }
            None => 0,
        }
    }

    /// The segments of the records `ids`, in the order given.
    pub fn expand(&self, ids: &[u32]) -> Vec<u32> {
        let total: usize = ids.iter().map(|&id| self.of_record(id).len()).sum();
        let mut out = Vec::with_capacity(total);
        for &id in ids {
            out.extend(self.of_record(id));
        }
        out
    }

    /// The segment-level instance of a record-level `inst` over these records: a worker caches
    /// every segment of the records it caches and is assigned every segment of the records it
    /// is assigned. Its batches are as uneven as the records' sizes
    /// ([`ShuffleInstance::new_uneven`]).
    pub fn instance(&self, inst: &ShuffleInstance) -> Result<ShuffleInstance, SegmentError> {
        if inst.points() != self.records() {
            return Err(SegmentError::Records { instance: inst.points(), records: self.records() });
        }
        let n = inst.workers();
        let cache = (0..n).map(|w| self.expand(&inst.cache(w).to_vec())).collect();
        let assignment = (0..n).map(|w| self.expand(&inst.assignment(w).to_vec())).collect();
        Ok(ShuffleInstance::new_uneven(n, self.segments(), cache, assignment)?)
    }

    /// The segment-level plan of a record-level `plan`: transmission `t` becomes one
    /// transmission per segment of its longest part, the `k`-th XORing the `k`-th segment of
    /// every part that has one. It decodes wherever `plan` does, at the cost of padding every
    /// part to the longest in its transmission (for plans that choose the assignment too,
    /// which the segment instance cannot replan).
    pub fn expand_plan(&self, plan: &Plan) -> Plan {
        let mut out = Plan::with_capacity(plan.len(), plan.total_parts());
        let mut parts = Vec::new();
        for t in plan.iter() {
            let longest = t.iter().map(|p| self.of_record(p.point).len()).max().unwrap_or(0);
            for k in 0..longest as u32 {
                parts.clear();
                for p in t {
                    let segs = self.of_record(p.point);
                    if k < segs.end - segs.start {
                        parts.push(Part::new(segs.start + k, p.worker));
                    }
                }
                out.push(&parts);
            }
        }
        out
    }

    /// The padding of a segment-level plan's packets: for every transmission, `S` minus the
    /// real bytes of its longest part (what a packet carries beyond data).
    pub fn padding_of(&self, plan: &Plan) -> u64 {
        plan.iter()
            .map(|t| {
                let longest = t.iter().map(|p| self.real_bytes(p.point)).max().unwrap_or(0);
                (self.segment_bytes - longest) as u64
            })
            .sum()
    }
}

/// Why a segment-level instance cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum SegmentError {
    /// The instance and the records disagree on the number of points.
    #[error("the instance has {instance} points but the index {records} records")]
    Records {
        /// Points of the instance.
        instance: usize,
        /// Records of the index.
        records: usize,
    },
    /// The segment instance is not valid.
    #[error(transparent)]
    Instance(#[from] InstanceError),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn records_split_into_segments_and_back() {
        let index = RecordIndex::from_sizes([10, 0, 4, 9]).unwrap();
        assert_eq!((index.len(), index.total_bytes(), index.max_size()), (4, 23, 10));
        assert_eq!(index.range(2), Some(10..14));
        assert_eq!(index.size(4), None);
        let seg = Segmentation::new(index, 4).unwrap();
        assert_eq!(seg.segments(), 3 + 1 + 1 + 3);
        assert_eq!(seg.of_record(0), 0..3);
        assert_eq!(seg.of_record(1), 3..4);
        assert_eq!(seg.record_of(4), Some((2, 0)));
        assert_eq!(seg.record_of(7), Some((3, 2)));
        assert_eq!(seg.record_of(8), None);
        assert_eq!(seg.real_bytes(2), 2);
        assert_eq!(seg.real_bytes(3), 0, "an empty record is one segment of padding");
        assert_eq!(seg.piece(9, 2), 8..9);
        assert_eq!(seg.expand(&[3, 1]), vec![5, 6, 7, 3]);
        assert!(Segmentation::new(RecordIndex::fixed(2, 3).unwrap(), 0).is_err());
    }

    #[test]
    fn default_segments_follow_the_mean_and_cap_the_count() {
        let of = |records: usize, size: u64| {
            default_segment_bytes(&RecordIndex::from_sizes(std::iter::repeat_n(size, records)).unwrap())
        };
        assert_eq!(of(10, 10), 10, "records of one size are one segment each");
        assert_eq!(of(2000, 4096), 4096);
        let uneven =
            |sizes: &[u64]| default_segment_bytes(&RecordIndex::from_sizes(sizes.iter().copied()).unwrap());
        assert_eq!(uneven(&[10, 20]), 512);
        assert_eq!(uneven(&[100_000, 120_000]), 2048);
        assert_eq!(of(3, 1 << 40), 1 << 20);
        // ImageNet's size: 1.28 million records of 110 KB would be 69 million 2 KiB segments.
        let sizes: Vec<u64> = (0..1_280_000u64).map(|i| 100_000 + (i % 2) * 20_000).collect();
        let s = uneven(&sizes);
        assert_eq!(s, 64 << 10);
        assert!(1_280_000 * 110_000 / s as u64 <= MAX_DEFAULT_SEGMENTS);
    }

    #[test]
    fn an_expanded_plan_decodes_where_the_record_plan_does() {
        let inst = ShuffleInstance::paper_example();
        let planner = ubershuffle_planners::planner_by_name("ubershuffle", &Default::default()).unwrap();
        let plan = planner.plan(&inst, &mut ubershuffle_core::seeded(0)).unwrap();
        let sizes = [5u64, 17, 1, 8, 0, 12, 3, 9, 30];
        let seg = Segmentation::new(RecordIndex::from_sizes(sizes).unwrap(), 4).unwrap();
        let seg_inst = seg.instance(&inst).unwrap();
        let expanded = seg.expand_plan(&plan);
        assert!(ubershuffle_core::verify(&seg_inst, &expanded).unwrap().is_valid());
        assert!(seg.padding_of(&expanded) > 0);
        assert!(matches!(
            Segmentation::new(RecordIndex::fixed(3, 1).unwrap(), 1).unwrap().instance(&inst),
            Err(SegmentError::Records { .. })
        ));
    }
}
