//! [`RunData`]: the records a run shuffles and the records its loss is measured on.

use std::fmt;
use std::sync::Arc;

use ubershuffle_codes::{CodecError, RecordIndex, RecordSource, Records};

/// The training and held-out records the master holds.
#[derive(Clone, Debug)]
pub struct RunData {
    /// The data set being shuffled: record `i` is data point `i`.
    pub train: ShuffledRecords,
    /// Records the loss is measured on.
    pub held_out: Records,
}

/// The records a run shuffles: of one width in memory (what every learner reads), or of any
/// size from any source (the data plane's, whose caller trains on them itself).
#[derive(Clone, Debug)]
pub enum ShuffledRecords {
    /// Records of one width.
    Fixed(Records),
    /// Records of any size.
    Sized(SizedRecords),
}

impl From<Records> for ShuffledRecords {
    fn from(records: Records) -> Self {
        ShuffledRecords::Fixed(records)
    }
}

impl ShuffledRecords {
    /// Number of records.
    pub fn len(&self) -> usize {
        match self {
            ShuffledRecords::Fixed(r) => r.len(),
            ShuffledRecords::Sized(r) => r.index.len(),
        }
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of one width, when they are.
    pub fn fixed(&self) -> Option<&Records> {
        match self {
            ShuffledRecords::Fixed(r) => Some(r),
            ShuffledRecords::Sized(_) => None,
        }
    }

    /// Where every record lies.
    pub fn index(&self) -> Result<RecordIndex, CodecError> {
        match self {
            ShuffledRecords::Fixed(r) => RecordIndex::fixed(r.len(), r.width()),
            ShuffledRecords::Sized(r) => Ok(r.index.clone()),
        }
    }

    /// The records' bytes, for the codec.
    pub fn source(&self) -> &(dyn RecordSource + Send + Sync) {
        match self {
            ShuffledRecords::Fixed(r) => r,
            ShuffledRecords::Sized(r) => r.source.as_ref(),
        }
    }

    /// Appends record `id`'s bytes to `out`.
    pub fn append(&self, id: u32, out: &mut Vec<u8>) -> Result<(), CodecError> {
        match self {
            ShuffledRecords::Fixed(r) => {
                out.extend_from_slice(r.get(id).ok_or(CodecError::UnknownPoint { point: id })?);
                Ok(())
            }
            ShuffledRecords::Sized(r) => r.append(id, out),
        }
    }

    /// A digest of the records (their count, sizes and a CRC32C of their bytes), for a
    /// checkpoint's fingerprint. A source that no longer gives a record says so in the digest.
    pub fn digest(&self) -> String {
        match self {
            ShuffledRecords::Fixed(r) => fixed_digest(r),
            ShuffledRecords::Sized(r) => {
                let mut crc = 0;
                let mut record = Vec::new();
                for id in 0..r.index.len() as u32 {
                    record.clear();
                    if let Err(e) = r.append(id, &mut record) {
                        return format!("unreadable ({e})");
                    }
                    crc = crc32c::crc32c_append(crc, &record);
                }
                format!("{} records of {} bytes:{crc:08x}", r.index.len(), r.index.total_bytes())
            }
        }
    }
}

/// [`ShuffledRecords::digest`] of records of one width.
pub(crate) fn fixed_digest(r: &Records) -> String {
    format!("{}x{}:{:08x}", r.len(), r.width(), crc32c::crc32c(r.as_bytes()))
}

impl PartialEq for ShuffledRecords {
    /// Fixed records by their bytes; records of any size only when they share their source.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ShuffledRecords::Fixed(a), ShuffledRecords::Fixed(b)) => a == b,
            (ShuffledRecords::Sized(a), ShuffledRecords::Sized(b)) => {
                a.index == b.index && Arc::ptr_eq(&a.source, &b.source)
            }
            _ => false,
        }
    }
}

/// Records of any size: where each lies ([`RecordIndex`]) and a source of their bytes (a
/// data set in memory, a rank's record store), which must hold every record of the index at
/// its size.
#[derive(Clone)]
pub struct SizedRecords {
    index: RecordIndex,
    source: Arc<dyn RecordSource + Send + Sync>,
}

impl SizedRecords {
    /// The records of `index`, read from `source`; refuses a source that lacks one of them or
    /// holds it at another size.
    pub fn new(index: RecordIndex, source: Arc<dyn RecordSource + Send + Sync>) -> Result<Self, CodecError> {
        for id in 0..index.len() as u32 {
            let size = index.size(id).unwrap_or(0);
            match source.size(id) {
                Some(len) if len == size => {}
                Some(len) => return Err(CodecError::WrongSize { point: id, len: len as usize, size }),
                None => return Err(CodecError::UnknownPoint { point: id }),
            }
        }
        Ok(SizedRecords { index, source })
    }

    /// Where every record lies.
    pub fn index(&self) -> &RecordIndex {
        &self.index
    }

    /// Appends record `id`'s bytes to `out`.
    pub fn append(&self, id: u32, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let size = self.index.size(id).ok_or(CodecError::UnknownPoint { point: id })? as usize;
        let start = out.len();
        out.resize(start + size, 0);
        self.source.xor_piece_into(id, 0, &mut out[start..])
    }
}

/// The sizes, not the bytes.
impl fmt::Debug for SizedRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SizedRecords({} records, {} bytes)", self.index.len(), self.index.total_bytes())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_codes::UnevenRecords;

    #[test]
    fn sized_records_read_what_their_source_holds() {
        let uneven = UnevenRecords::from_records([&b"abc"[..], b"", b"de"]).unwrap();
        let index = uneven.index().clone();
        let records = ShuffledRecords::Sized(SizedRecords::new(index.clone(), Arc::new(uneven)).unwrap());
        let mut out = Vec::new();
        records.append(2, &mut out).unwrap();
        records.append(0, &mut out).unwrap();
        assert_eq!(out, b"deabc");
        assert_eq!((records.len(), records.fixed().is_none()), (3, true));
        assert!(records.digest().starts_with("3 records of 5 bytes:"));
        let short = UnevenRecords::from_records([&b"ab"[..], b"", b"de"]).unwrap();
        assert!(matches!(SizedRecords::new(index, Arc::new(short)), Err(CodecError::WrongSize { .. })));
        let fixed: ShuffledRecords = Records::from_bytes(2, b"abcd".to_vec()).unwrap().into();
        assert_eq!(fixed.index().unwrap(), RecordIndex::fixed(2, 2).unwrap());
        assert_eq!(fixed.digest(), format!("2x2:{:08x}", crc32c::crc32c(b"abcd")));
    }
}
