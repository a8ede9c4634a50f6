//! [`PacketBatch`]: the one byte form of coded packets. Sender and receivers know the plan, so
//! a packet travels as its index in the plan and its payload; the receiver takes the parts from
//! its own copy of the plan ([`Decoder::receive_indexed`](crate::Decoder::receive_indexed)).
//! The runtime's data chunks are an epoch and attempt followed by one batch.

use ubershuffle_core::wire::{ByteReader, push_u32_list};

use crate::{CodecError, Packet};

/// Coded packets of a known plan, read in place: the number of packets `k` (u32 LE), the plan
/// index of each (`k` u32 LE), then the `k` payloads back to back, each of the record width.
/// Framing: `4 + 4 k` bytes ([`PacketBatch::header_len`]) before the payloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketBatch<'a> {
    seqs: Vec<u32>,
    payloads: &'a [u8],
    width: usize,
}

impl<'a> PacketBatch<'a> {
    /// Bytes before the payloads in a batch of `packets` packets.
    pub fn header_len(packets: usize) -> usize {
        4 + 4 * packets
    }

    /// Appends a batch of the packets `seqs`, each payload `width` bytes, which `fill(k, out)`
    /// writes straight into place (no intermediate copy).
    pub fn write(out: &mut Vec<u8>, seqs: &[u32], width: usize, mut fill: impl FnMut(usize, &mut [u8])) {
        out.reserve(Self::header_len(seqs.len()) + seqs.len() * width);
        push_u32_list(out, seqs);
        let start = out.len();
        out.resize(start + seqs.len() * width, 0);
        for (k, payload) in out[start..].chunks_exact_mut(width.max(1)).enumerate() {
            fill(k, payload);
        }
    }

    /// The byte form of encoded packets whose payloads are all `width` bytes.
    pub fn of_packets(packets: &[Packet], width: usize) -> Result<Vec<u8>, CodecError> {
        if let Some(p) = packets.iter().find(|p| p.payload.len() != width) {
            return Err(CodecError::MalformedPacket {
                reason: format!(
                    "packet {} has {} payload bytes, not the width {width}",
                    p.seq,
                    p.payload.len()
                ),
            });
        }
        let seqs: Vec<u32> = packets.iter().map(|p| p.seq).collect();
        let mut out = Vec::new();
        Self::write(&mut out, &seqs, width, |k, slot| slot.copy_from_slice(&packets[k].payload));
        Ok(out)
    }

    /// Reads a batch of payloads of `width` bytes that fills the rest of `r`, without copying
    /// the payloads. Checks the count against the bytes present before allocating, so hostile
    /// input can neither panic nor make it allocate more than its length.
    pub fn read(r: &mut ByteReader<'a>, width: usize) -> Result<Self, CodecError> {
        let malformed = |reason: String| CodecError::MalformedPacket { reason };
        let seqs = r.u32_list().map_err(|e| malformed(e.to_string()))?;
        let expected = seqs.len().saturating_mul(width);
        if r.remaining() != expected {
            return Err(malformed(format!(
                "a batch of {} packets has {} payload bytes, expected {expected}",
                seqs.len(),
                r.remaining()
            )));
        }
        let payloads = r.take(expected).map_err(|e| malformed(e.to_string()))?;
        Ok(PacketBatch { seqs, payloads, width })
    }

    /// Reads a whole buffer as one batch.
    pub fn from_bytes(bytes: &'a [u8], width: usize) -> Result<Self, CodecError> {
        Self::read(&mut ByteReader::new(bytes, "a packet batch"), width)
    }

    /// The plan index of each packet.
    pub fn seqs(&self) -> &[u32] {
        &self.seqs
    }

    /// The payloads, back to back.
    pub fn payloads(&self) -> &'a [u8] {
        self.payloads
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Whether the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// The packets: plan index and payload.
    pub fn packets(&self) -> impl Iterator<Item = (u32, &'a [u8])> + '_ {
        self.seqs.iter().copied().zip(self.payloads.chunks_exact(self.width.max(1)))
    }

    /// Splits into the plan indices and the payloads (to keep them past the buffer's life).
    pub fn into_parts(self) -> (Vec<u32>, &'a [u8]) {
        (self.seqs, self.payloads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_and_hostile_bytes_are_refused() -> Result<(), CodecError> {
        let packets: Vec<Packet> =
            (0..3).map(|k| Packet { seq: 7 - k, parts: Vec::new(), payload: vec![k as u8; 5] }).collect();
        let bytes = PacketBatch::of_packets(&packets, 5)?;
        assert_eq!(bytes.len(), PacketBatch::header_len(3) + 15);
        let batch = PacketBatch::from_bytes(&bytes, 5)?;
        let read: Vec<(u32, Vec<u8>)> = batch.packets().map(|(s, p)| (s, p.to_vec())).collect();
        assert_eq!(read, packets.iter().map(|p| (p.seq, p.payload.clone())).collect::<Vec<_>>());
        assert!(PacketBatch::of_packets(&packets, 4).is_err(), "a payload of another width");
        for cut in 0..bytes.len() {
            assert!(PacketBatch::from_bytes(&bytes[..cut], 5).is_err(), "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(PacketBatch::from_bytes(&huge, 5).is_err());
        assert!(PacketBatch::from_bytes(&[bytes.clone(), vec![0]].concat(), 5).is_err(), "a trailing byte");
        Ok(())
    }
}
