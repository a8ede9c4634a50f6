#![doc = include_str!("../README.md")]

mod batch;
mod decode;
mod encode;
mod packet;
mod records;
mod segment_codec;
mod segments;
pub mod xor;

pub use batch::PacketBatch;
pub use decode::{DecodeError, DecodeStore, Decoded, Decoder};
pub use encode::Encoder;
pub use packet::Packet;
pub use records::{RecordStore, Records};
pub use segment_codec::{
    RecordSource, RecordWriter, SegmentEncoder, SegmentTarget, UnevenRecords, UnevenStore, copy_piece_of,
    xor_piece_of,
};
pub use segments::{MAX_DEFAULT_SEGMENTS, RecordIndex, SegmentError, Segmentation, default_segment_bytes};

/// Why records or packets are malformed.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum CodecError {
    /// Records must have at least one byte.
    #[error("records must be at least one byte wide")]
    ZeroWidth,
    /// The data length is not a multiple of the record width.
    #[error("{len} bytes do not divide into records of {width} bytes")]
    RaggedRecords {
        /// Bytes given.
        len: usize,
        /// Record width.
        width: usize,
    },
    /// A record has the wrong number of bytes.
    #[error("record {point} has {len} bytes, records are {width} bytes")]
    WrongWidth {
        /// The point.
        point: u32,
        /// Bytes given.
        len: usize,
        /// Record width.
        width: usize,
    },
    /// A point id beyond the store's universe.
    #[error("point {point} is out of range (the store holds ids below {points})")]
    PointOutOfRange {
        /// The point.
        point: u32,
        /// The universe size.
        points: usize,
    },
    /// A point the records do not have.
    #[error("point {point} is not in the records")]
    UnknownPoint {
        /// The point.
        point: u32,
    },
    /// Record sizes add up past `u64::MAX` bytes.
    #[error("the records' sizes add up past 2^64 bytes")]
    TooManyBytes,
    /// More records than 32-bit ids allow.
    #[error("{records} records is more than 32-bit ids allow")]
    TooManyRecords {
        /// Records given.
        records: usize,
    },
    /// More segments than 32-bit ids allow.
    #[error(
        "{bytes} bytes in segments of {segment_bytes} bytes make more than 2^32 segments: use larger segments"
    )]
    TooManySegments {
        /// The segment size.
        segment_bytes: usize,
        /// The records' bytes.
        bytes: u64,
    },
    /// A record's bytes differ in length from the index's size.
    #[error("record {point} has {len} bytes, the index says {size}")]
    WrongSize {
        /// The record.
        point: u32,
        /// Bytes given.
        len: usize,
        /// The index's size.
        size: u64,
    },
    /// A decoded segment has non-zero bytes where its record ends (a corrupt packet or cache).
    #[error("segment {segment} decodes with non-zero padding past its record's end")]
    DirtyPadding {
        /// The segment.
        segment: u32,
    },
    /// A packet's bytes do not parse.
    #[error("malformed packet: {reason}")]
    MalformedPacket {
        /// What is wrong, in one line.
        reason: String,
    },
}
