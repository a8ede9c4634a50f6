//! [`Packet`]: one coded transmission as the encoder makes it: its index in the plan, the
//! parts it XORs, and the payload. On the wire, packets travel as a
//! [`PacketBatch`](crate::PacketBatch) (index and payload; the receiver knows the plan).

use ubershuffle_core::Part;

/// One coded transmission: its index in the plan, the parts it XORs, and the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The index of the transmission in the plan.
    pub seq: u32,
    /// The points XORed into the payload, each tagged with the worker meant to learn it.
    pub parts: Vec<Part>,
    /// The XOR of the parts' records.
    pub payload: Vec<u8>,
}
