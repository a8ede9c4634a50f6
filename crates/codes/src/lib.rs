//! Turning shuffle plans into bytes and back.
//!
//! A data point is a fixed-width byte record ([`Records`] at the master, a [`RecordStore`] at a
//! worker). [`Encoder`] XORs the records of each transmission of a [`ubershuffle_core::Plan`] into a
//! [`Packet`] (a header naming its parts plus the payload); a worker's [`Decoder`] takes packets
//! in any order and returns exactly its new records, byte for byte. The XOR kernel in [`xor`]
//! works a word at a time.
//!
//! The codec needs no linear algebra. Gradient codes live in `ubershuffle-gradient-codes`, coded
//! map-shuffle-reduce in `ubershuffle-msr`.
//!
//! ```
//! use ubershuffle_codes::{Decoder, Encoder, Records};
//! use ubershuffle_core::{planner_by_name, seeded, PlannerOptions, ShuffleInstance};
//! let inst = ShuffleInstance::paper_example();
//! let plan = planner_by_name("coded", &PlannerOptions::default())?.plan(&inst, &mut seeded(0))?;
//! let records = Records::random(inst.points(), 64, 1)?;
//! let encoder = Encoder::new(&plan, &records)?;
//! let mut decoder = Decoder::new(2, &plan, records.store_of(inst.cache(2))?, inst.needs(2))?;
//! for packet in encoder.packets() {
//!     decoder.receive_packet(&packet)?;
//! }
//! for (point, bytes) in decoder.finish()?.new_records() {
//!     assert_eq!(Some(bytes), records.get(point));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decode;
mod encode;
mod packet;
mod records;
pub mod xor;

pub use decode::{DecodeError, Decoded, Decoder};
pub use encode::Encoder;
pub use packet::Packet;
pub use records::{RecordStore, Records};

/// Why records or packets are malformed.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
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
