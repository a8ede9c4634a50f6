#![doc = include_str!("../README.md")]

mod batch;
mod decode;
mod encode;
mod packet;
mod records;
pub mod xor;

pub use batch::PacketBatch;
pub use decode::{DecodeError, Decoded, Decoder};
pub use encode::Encoder;
pub use packet::Packet;
pub use records::{RecordStore, Records};

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
    /// A packet's bytes do not parse.
    #[error("malformed packet: {reason}")]
    MalformedPacket {
        /// What is wrong, in one line.
        reason: String,
    },
}
