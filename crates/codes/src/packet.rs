//! [`Packet`]: one coded transmission in bytes (a header naming its parts, then the XOR
//! payload), and its compact binary form.

use ubershuffle_core::Part;

use crate::CodecError;

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

/// Bytes of the fixed part of the binary header: `seq` and the part count.
const FIXED_HEADER: usize = 8;
/// Bytes per part in the binary header: point and worker.
const PART_BYTES: usize = 8;

impl Packet {
    /// The binary form: `seq: u32 LE | parts: u32 LE | (point: u32 LE, worker: u32 LE)* | payload`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.write_to(&mut out);
        out
    }

    /// Appends the binary form to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        for part in &self.parts {
            out.extend_from_slice(&part.point.to_le_bytes());
            // Worker ids of a valid plan fit in 32 bits; anything larger becomes an id no
            // instance has, which the receiving side rejects.
            out.extend_from_slice(&u32::try_from(part.worker).unwrap_or(u32::MAX).to_le_bytes());
        }
        out.extend_from_slice(&self.payload);
    }

    /// Length of the binary form.
    pub fn encoded_len(&self) -> usize {
        FIXED_HEADER + PART_BYTES * self.parts.len() + self.payload.len()
    }

    /// Parses the binary form. Checks the declared part count against the bytes present before
    /// allocating, so hostile input can neither panic nor make it allocate more than its length.
    pub fn from_bytes(bytes: &[u8]) -> Result<Packet, CodecError> {
        let malformed = |reason: &str| CodecError::MalformedPacket { reason: reason.to_string() };
        if bytes.len() < FIXED_HEADER {
            return Err(malformed("shorter than its 8-byte header"));
        }
        let seq = read_u32(bytes, 0);
        let count = read_u32(bytes, 4) as usize;
        let parts_end = count
            .checked_mul(PART_BYTES)
            .and_then(|n| n.checked_add(FIXED_HEADER))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| malformed("declares more parts than its bytes hold"))?;
        if count == 0 {
            return Err(malformed("has no part"));
        }
        let parts = (0..count)
            .map(|k| {
                let at = FIXED_HEADER + k * PART_BYTES;
                Part { point: read_u32(bytes, at), worker: read_u32(bytes, at + 4) as usize }
            })
            .collect();
        Ok(Packet { seq, parts, payload: bytes[parts_end..].to_vec() })
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn binary_round_trip() {
        let p = Packet { seq: 9, parts: vec![Part::new(4, 0), Part::new(1, 2)], payload: vec![1, 2, 3] };
        let bytes = p.to_bytes();
        assert_eq!(bytes.len(), p.encoded_len());
        assert_eq!(Packet::from_bytes(&bytes).unwrap(), p);
    }

    #[test]
    fn hostile_headers_are_errors() {
        assert!(Packet::from_bytes(&[1, 2, 3]).is_err());
        let mut huge = vec![0u8; 8];
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Packet::from_bytes(&huge).unwrap_err().to_string().contains("more parts"));
        assert!(Packet::from_bytes(&[0u8; 8]).unwrap_err().to_string().contains("no part"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Packet::from_bytes(&bytes);
        }
    }
}
