//! Data points as fixed-width byte records: the master's whole data set ([`Records`]) and a
//! worker's cache ([`RecordStore`]).

use crate::CodecError;
use ubershuffle_core::rng::{fill_bytes, seeded};

/// The master's data set: `points` records of `width` bytes each, stored contiguously.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Records {
    width: usize,
    bytes: Vec<u8>,
}

impl Records {
    /// Wraps `bytes` as records of `width` bytes; the length must be a multiple of `width`.
    pub fn from_bytes(width: usize, bytes: Vec<u8>) -> Result<Self, CodecError> {
        if width == 0 {
            return Err(CodecError::ZeroWidth);
        }
        if !bytes.len().is_multiple_of(width) {
            return Err(CodecError::RaggedRecords { len: bytes.len(), width });
        }
        Ok(Records { width, bytes })
    }

    /// `points` records of `width` seeded pseudo-random bytes, for tests and benchmarks.
    pub fn random(points: usize, width: usize, seed: u64) -> Result<Self, CodecError> {
        let mut bytes = vec![0u8; points * width];
        fill_bytes(&mut seeded(seed), &mut bytes);
        Records::from_bytes(width, bytes)
    }

    /// Bytes per record.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.width
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// All records, back to back.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes of record `point`, or `None` if out of range.
    pub fn get(&self, point: u32) -> Option<&[u8]> {
        let start = (point as usize).checked_mul(self.width)?;
        self.bytes.get(start..start + self.width)
    }

    /// A worker's store holding the records `points` (its cache), in a universe of `len()` ids.
    pub fn store_of(&self, points: impl IntoIterator<Item = u32>) -> Result<RecordStore, CodecError> {
        let points = points.into_iter();
        let mut store = RecordStore::new(self.len(), self.width)?;
        store.reserve(points.size_hint().0);
        for p in points {
            let bytes = self.get(p).ok_or(CodecError::UnknownPoint { point: p })?;
            store.insert(p, bytes)?;
        }
        Ok(store)
    }
}

/// The records one worker holds: a set of point ids with their bytes. Lookup is a dense table
/// indexed by point id, so a get is one load and no hashing.
#[derive(Clone, Debug)]
pub struct RecordStore {
    width: usize,
    slot: Vec<u32>,
    ids: Vec<u32>,
    bytes: Vec<u8>,
}

const ABSENT: u32 = u32::MAX;

impl RecordStore {
    /// An empty store for records of `width` bytes with ids below `points`.
    pub fn new(points: usize, width: usize) -> Result<Self, CodecError> {
        if width == 0 {
            return Err(CodecError::ZeroWidth);
        }
        Ok(RecordStore { width, slot: vec![ABSENT; points], ids: Vec::new(), bytes: Vec::new() })
    }

    /// Bytes per record.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The number of ids the store can hold (`q`).
    pub fn universe(&self) -> usize {
        self.slot.len()
    }

    /// Number of records held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids held, in insertion order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Whether `point` is held.
    pub fn contains(&self, point: u32) -> bool {
        self.slot.get(point as usize).is_some_and(|&s| s != ABSENT)
    }

    /// The bytes of `point`, if held.
    pub fn get(&self, point: u32) -> Option<&[u8]> {
        let s = *self.slot.get(point as usize)?;
        (s != ABSENT).then(|| &self.bytes[s as usize * self.width..(s as usize + 1) * self.width])
    }

    /// Makes room for `additional` more records without reallocating, and touches that memory
    /// now so that inserts during decoding do not stop on page faults (measured: a fresh page
    /// per 4 KiB record cost more than the XOR work itself).
    pub fn reserve(&mut self, additional: usize) {
        self.ids.reserve(additional);
        self.bytes.reserve(additional * self.width);
        let len = self.bytes.len();
        self.bytes.resize(len + additional * self.width, 0);
        self.bytes.truncate(len);
    }

    /// Adds `point` with its bytes. Adding a point already held keeps the old bytes and
    /// returns `Ok(false)`.
    pub fn insert(&mut self, point: u32, bytes: &[u8]) -> Result<bool, CodecError> {
        if bytes.len() != self.width {
            return Err(CodecError::WrongWidth { point, len: bytes.len(), width: self.width });
        }
        let universe = self.slot.len();
        let slot = self
            .slot
            .get_mut(point as usize)
            .ok_or(CodecError::PointOutOfRange { point, points: universe })?;
        if *slot != ABSENT {
            return Ok(false);
        }
        *slot = self.ids.len() as u32;
        self.ids.push(point);
        self.bytes.extend_from_slice(bytes);
        Ok(true)
    }

    /// A new store holding only the points of `keep` that this store holds (the cache policy's
    /// tool for evicting what a worker no longer wants).
    pub fn retain_only(&self, keep: &[u32]) -> RecordStore {
        let mut out = RecordStore {
            width: self.width,
            slot: vec![ABSENT; self.slot.len()],
            ids: Vec::new(),
            bytes: Vec::new(),
        };
        for &p in keep {
            if let Some(bytes) = self.get(p) {
                // Cannot fail: same width, id in range.
                let _ = out.insert(p, bytes);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_store() {
        let recs = Records::random(10, 16, 1).unwrap();
        assert_eq!(recs.len(), 10);
        assert!(recs.get(10).is_none());
        let store = recs.store_of([3, 7]).unwrap();
        assert_eq!(store.get(3), recs.get(3));
        assert!(store.get(4).is_none() && !store.contains(99));
        let kept = store.retain_only(&[7, 8]);
        assert_eq!(kept.ids(), &[7]);
        assert_eq!(Records::random(10, 16, 1).unwrap(), recs);
        assert_ne!(Records::random(10, 16, 2).unwrap(), recs);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(matches!(Records::from_bytes(0, vec![]), Err(CodecError::ZeroWidth)));
        assert!(matches!(Records::from_bytes(3, vec![0; 4]), Err(CodecError::RaggedRecords { .. })));
        let mut store = RecordStore::new(4, 2).unwrap();
        assert!(matches!(store.insert(9, &[0, 0]), Err(CodecError::PointOutOfRange { .. })));
        assert!(matches!(store.insert(1, &[0]), Err(CodecError::WrongWidth { .. })));
        assert!(store.insert(1, &[1, 2]).unwrap());
        assert!(!store.insert(1, &[3, 4]).unwrap());
        assert_eq!(store.get(1), Some(&[1u8, 2][..]));
    }
}
