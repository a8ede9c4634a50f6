//! Where a worker keeps its records. A learner's worker keeps records of one width in memory
//! (a [`RecordStore`], decoded record by record); records of uneven size, and the records of a
//! data plane whose caller reads them itself (the Python package's shared-memory store), live
//! in a [`WorkerStore`], which the worker decodes into segment by segment
//! ([`ubershuffle_codes::SegmentTarget`]).

use ubershuffle_codes::{CodecError, RecordIndex, RecordSource, RecordStore, RecordWriter, UnevenStore};

/// Reads whole records.
pub trait ReadRecords {
    /// Hands the records `ids`, each held whole, to `read` in the order given.
    fn read(&self, ids: &[u32], read: &mut dyn FnMut(&[&[u8]])) -> Result<(), CodecError>;
}

/// Hands the records `ids` to `read` as `get` finds them, in order; each must be found.
pub fn read_found<'a>(
    ids: &[u32],
    get: impl Fn(u32) -> Option<&'a [u8]>,
    read: &mut dyn FnMut(&[&[u8]]),
) -> Result<(), CodecError> {
    let views = ids
        .iter()
        .map(|&id| get(id).ok_or(CodecError::UnknownPoint { point: id }))
        .collect::<Result<Vec<_>, _>>()?;
    read(&views);
    Ok(())
}

impl ReadRecords for RecordStore {
    fn read(&self, ids: &[u32], read: &mut dyn FnMut(&[&[u8]])) -> Result<(), CodecError> {
        read_found(ids, |id| self.get(id), read)
    }
}

/// A worker's store of records decoded segment by segment (see the module's docs). The
/// worker tells it which cache each epoch attempt starts from and when the caller has taken an
/// epoch, so a store shared with the caller drops records only when the caller no longer
/// reads them.
pub trait WorkerStore: RecordWriter + ReadRecords + Send {
    /// Stores record `id` whole (its starting cache).
    fn put(&mut self, id: u32, bytes: &[u8]) -> Result<(), CodecError>;

    /// An epoch attempt starts from `cache` (sorted: the cache the master assumes): after
    /// this call the store holds every record of it. Records outside it may go.
    fn start_epoch(&mut self, cache: &[u32]) -> Result<(), CodecError>;

    /// The caller has taken an epoch that started from `before` and keeps `after` (both
    /// sorted) for the next one. Records outside `after` may go, but until the next
    /// [`WorkerStore::start_epoch`] the store must be able to hold `before` again: a master
    /// that loses another worker restarts the epoch from the cache before it.
    fn taken(&mut self, before: &[u32], after: &[u32]) -> Result<(), CodecError>;
}

/// Records of uneven size in the worker's memory (the store of a worker whose sink keeps
/// none): a record is dropped when an epoch starts from a cache without it.
#[derive(Debug)]
pub struct MemoryStore {
    index: RecordIndex,
    records: UnevenStore,
}

impl MemoryStore {
    /// An empty store for the records of `index`.
    pub fn new(index: RecordIndex) -> Self {
        MemoryStore { index, records: UnevenStore::new() }
    }

    fn expect(&mut self, id: u32) -> Result<(), CodecError> {
        let size =
            self.index.size(id).ok_or(CodecError::PointOutOfRange { point: id, points: self.index.len() })?;
        self.records.expect(id, size);
        Ok(())
    }
}

impl RecordSource for MemoryStore {
    fn size(&self, id: u32) -> Option<u64> {
        self.records.size(id)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        self.records.xor_piece_into(id, at, dst)
    }
}

impl RecordWriter for MemoryStore {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError> {
        self.expect(id)?;
        self.records.write_at(id, at, bytes)
    }

    fn complete(&mut self, id: u32) -> Result<(), CodecError> {
        self.records.complete(id)
    }
}

impl ReadRecords for MemoryStore {
    fn read(&self, ids: &[u32], read: &mut dyn FnMut(&[&[u8]])) -> Result<(), CodecError> {
        read_found(ids, |id| self.records.get(id), read)
    }
}

impl WorkerStore for MemoryStore {
    fn put(&mut self, id: u32, bytes: &[u8]) -> Result<(), CodecError> {
        let size =
            self.index.size(id).ok_or(CodecError::PointOutOfRange { point: id, points: self.index.len() })?;
        if bytes.len() as u64 != size {
            return Err(CodecError::WrongSize { point: id, len: bytes.len(), size });
        }
        self.write_at(id, 0, bytes)?;
        self.complete(id)
    }

    fn start_epoch(&mut self, cache: &[u32]) -> Result<(), CodecError> {
        if let Some(&missing) = cache.iter().find(|&&id| self.records.get(id).is_none()) {
            return Err(CodecError::UnknownPoint { point: missing });
        }
        self.records.retain(cache);
        Ok(())
    }

    fn taken(&mut self, _before: &[u32], _after: &[u32]) -> Result<(), CodecError> {
        // Both caches stay until the next epoch starts from one of them.
        Ok(())
    }
}

/// A [`WorkerStore`] borrowed as the records a [`ubershuffle_codes::SegmentTarget`] decodes
/// into.
pub(crate) struct Borrowed<'a>(pub(crate) &'a mut dyn WorkerStore);

impl RecordSource for Borrowed<'_> {
    fn size(&self, id: u32) -> Option<u64> {
        self.0.size(id)
    }

    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        self.0.xor_piece_into(id, at, dst)
    }
}

impl RecordWriter for Borrowed<'_> {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError> {
        self.0.write_at(id, at, bytes)
    }

    fn complete(&mut self, id: u32) -> Result<(), CodecError> {
        self.0.complete(id)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_memory_store_keeps_the_cache_an_epoch_starts_from() {
        let mut store = MemoryStore::new(RecordIndex::from_sizes([3, 0, 5]).unwrap());
        store.put(0, b"abc").unwrap();
        store.put(1, b"").unwrap();
        assert!(store.put(2, b"ab").is_err());
        store.write_at(2, 0, b"hello").unwrap();
        store.complete(2).unwrap();
        let mut seen = Vec::new();
        store.read(&[2, 0], &mut |views| seen = views.iter().map(|v| v.to_vec()).collect()).unwrap();
        assert_eq!(seen, vec![b"hello".to_vec(), b"abc".to_vec()]);
        store.taken(&[0, 1], &[0, 2]).unwrap();
        store.start_epoch(&[0, 2]).unwrap();
        assert!(store.read(&[1], &mut |_| {}).is_err(), "dropped: not in the cache the epoch starts from");
        assert!(store.start_epoch(&[1]).is_err(), "a cache it does not hold");
    }
}
