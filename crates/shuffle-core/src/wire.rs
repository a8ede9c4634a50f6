//! Compact byte forms of instances and plans: how they cross the plugin boundary, and how a
//! master sends a plan's headers to its workers.
//!
//! Compact and exact, so that a million-point instance crosses the boundary as a few memory
//! copies rather than tens of megabytes of JSON. Every integer is a little-endian `u32`.
//!
//! Instance (`encode_instance`):
//!
//! ```text
//! "USI1"                              4 bytes of magic
//! n  q                                workers, points
//! |C_0| ids...  ...  |C_{n-1}| ids... every worker's cache, ids sorted
//! |D_0| ids...  ...  |D_{n-1}| ids... every worker's new batch, ids sorted
//! ```
//!
//! Plan (`encode_plan`):
//!
//! ```text
//! "USP1"                              4 bytes of magic
//! T                                   transmissions
//! k  point worker  point worker ...   per transmission: k parts, then k (point, worker) pairs
//! ```
//!
//! Decoding checks every length against the bytes left before allocating, rejects trailing
//! bytes, and validates an instance as [`ShuffleInstance::new`] does; whether a plan decodes is
//! [`crate::verify`]'s question.

use crate::{InstanceError, Part, Plan, ShuffleInstance};

const INSTANCE_MAGIC: &[u8; 4] = b"USI1";
const PLAN_MAGIC: &[u8; 4] = b"USP1";

/// Why bytes are not an instance or a plan in the layouts above.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The bytes do not start with the expected magic.
    #[error("the bytes are not {what} (they do not start with {expected:?})")]
    BadMagic {
        /// `"an instance"` or `"a plan"`.
        what: &'static str,
        /// The magic expected.
        expected: &'static str,
    },
    /// The bytes end before the layout does.
    #[error("{what} ends early: {needed} more bytes expected at byte {offset} of {len}")]
    Truncated {
        /// `"an instance"` or `"a plan"`.
        what: &'static str,
        /// Where the missing bytes should start.
        offset: usize,
        /// How many were expected there.
        needed: usize,
        /// How many bytes there are in all.
        len: usize,
    },
    /// Bytes follow the end of the layout.
    #[error("{what} has {extra} bytes after its end")]
    TrailingBytes {
        /// `"an instance"` or `"a plan"`.
        what: &'static str,
        /// How many.
        extra: usize,
    },
    /// A count does not fit the layout's 32-bit integers.
    #[error("{what} is too large for the byte form: {count} {unit}")]
    TooLarge {
        /// `"an instance"` or `"a plan"`.
        what: &'static str,
        /// The count that does not fit.
        count: usize,
        /// What was counted.
        unit: &'static str,
    },
    /// The decoded caches and assignment are not a valid instance.
    #[error("invalid instance: {0}")]
    Instance(#[from] InstanceError),
}

/// `inst` in the instance layout above.
pub fn encode_instance(inst: &ShuffleInstance) -> Vec<u8> {
    let ids: usize = (0..inst.workers()).map(|w| inst.cache(w).len() + inst.assignment(w).len()).sum();
    let mut out = Vec::with_capacity(4 * (3 + 2 * inst.workers() + ids));
    out.extend_from_slice(INSTANCE_MAGIC);
    // A valid instance has fewer than 2^32 points, so every count below fits in a u32.
    push_u32(&mut out, inst.workers() as u32);
    push_u32(&mut out, inst.points() as u32);
    for list in
        (0..inst.workers()).map(|w| inst.cache(w)).chain((0..inst.workers()).map(|w| inst.assignment(w)))
    {
        push_u32(&mut out, list.len() as u32);
        for id in list {
            push_u32(&mut out, id);
        }
    }
    out
}

/// Parses and validates the instance layout above.
pub fn decode_instance(bytes: &[u8]) -> Result<ShuffleInstance, WireError> {
    let mut r = ByteReader::new(bytes, "an instance");
    r.magic(INSTANCE_MAGIC, "USI1")?;
    let workers = r.u32()? as usize;
    let points = r.u32()? as usize;
    // Bound every allocation by the bytes present: each worker has two lists of at least a
    // 4-byte length, and each point is in some batch, so costs 4 bytes there.
    let least = workers.saturating_mul(8).saturating_add(points.saturating_mul(4));
    if least > r.remaining() {
        return Err(r.truncated(least));
    }
    let cache = (0..workers).map(|_| r.u32_list()).collect::<Result<Vec<_>, _>>()?;
    let assignment = (0..workers).map(|_| r.u32_list()).collect::<Result<Vec<_>, _>>()?;
    r.finish()?;
    Ok(ShuffleInstance::new(workers, points, cache, assignment)?)
}

/// `plan` in the plan layout above.
pub fn encode_plan(plan: &Plan) -> Result<Vec<u8>, WireError> {
    let too_large = |count, unit| WireError::TooLarge { what: "a plan", count, unit };
    let transmissions = u32::try_from(plan.len()).map_err(|_| too_large(plan.len(), "transmissions"))?;
    let mut out = Vec::with_capacity(8 + 4 * plan.len() + 8 * plan.total_parts());
    out.extend_from_slice(PLAN_MAGIC);
    push_u32(&mut out, transmissions);
    for parts in plan.iter() {
        push_u32(&mut out, u32::try_from(parts.len()).map_err(|_| too_large(parts.len(), "parts"))?);
        for part in parts {
            push_u32(&mut out, part.point);
            push_u32(&mut out, u32::try_from(part.worker).map_err(|_| too_large(part.worker, "workers"))?);
        }
    }
    Ok(out)
}

/// Parses the plan layout above.
pub fn decode_plan(bytes: &[u8]) -> Result<Plan, WireError> {
    let mut r = ByteReader::new(bytes, "a plan");
    r.magic(PLAN_MAGIC, "USP1")?;
    let transmissions = r.u32()? as usize;
    if transmissions > r.remaining() / 4 {
        return Err(r.truncated(transmissions.saturating_mul(4)));
    }
    let mut plan = Plan::with_capacity(transmissions, (r.remaining() - 4 * transmissions) / 8);
    let mut parts = Vec::new();
    for _ in 0..transmissions {
        let count = r.u32()? as usize;
        let raw = r.take(count.checked_mul(8).ok_or(WireError::TooLarge {
            what: "a plan",
            count,
            unit: "parts",
        })?)?;
        parts.clear();
        parts.extend(raw.chunks_exact(8).map(|c| Part {
            point: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            worker: u32::from_le_bytes([c[4], c[5], c[6], c[7]]) as usize,
        }));
        plan.push(&parts);
    }
    r.finish()?;
    Ok(plan)
}

/// Appends `value` as a little-endian `u32`.
pub fn push_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends `value` as a little-endian `u64`.
pub fn push_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends `value` as a little-endian `f64`.
pub fn push_f64(out: &mut Vec<u8>, value: f64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a `u32` length and then `list`'s `u32`s. Panics only if the list has 2^32 entries or
/// more (callers' lists are point ids, which are 32-bit).
pub fn push_u32_list(out: &mut Vec<u8>, list: &[u32]) {
    push_u32(out, u32::try_from(list.len()).unwrap_or(u32::MAX));
    for &v in list {
        push_u32(out, v);
    }
}

/// Appends a `u32` length and then `bytes`.
pub fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    push_u32(out, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(bytes);
}

/// A cursor over bytes being decoded: every read checks the length left first, so hostile
/// input gives a [`WireError`], never a panic or an allocation larger than the input.
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader of `bytes`, which are `what` (for error messages: `"an epoch order"`).
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        ByteReader { bytes, at: 0, what }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn truncated(&self, needed: usize) -> WireError {
        WireError::Truncated { what: self.what, offset: self.at, needed, len: self.bytes.len() }
    }

    /// The next `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        if len > self.remaining() {
            return Err(self.truncated(len));
        }
        let slice = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(slice)
    }

    /// Checks that the next four bytes are `magic` (`expected` names it in the error).
    pub fn magic(&mut self, magic: &[u8; 4], expected: &'static str) -> Result<(), WireError> {
        match self.take(4) {
            Ok(found) if found == magic => Ok(()),
            _ => Err(WireError::BadMagic { what: self.what, expected }),
        }
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }

    /// A little-endian `f64`.
    pub fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// A `u32` length, then that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// A length, then that many `u32`s.
    pub fn u32_list(&mut self) -> Result<Vec<u32>, WireError> {
        let len = self.u32()? as usize;
        let raw = self.take(len.checked_mul(4).ok_or_else(|| self.truncated(usize::MAX))?)?;
        Ok(raw.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// Checks that every byte was read.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(WireError::TrailingBytes { what: self.what, extra }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{ShuffleInstance, arbitrary_instance};

    fn sample_plan() -> Plan {
        let mut plan = Plan::new();
        plan.push(&[Part::new(4, 0), Part::new(1, 2)]);
        plan.push(&[Part::new(0, 1)]);
        plan
    }

    #[test]
    fn instances_round_trip() {
        for inst in [ShuffleInstance::paper_example(), arbitrary_instance(7, 300, 0.3, 4)] {
            assert_eq!(decode_instance(&encode_instance(&inst)).unwrap(), inst);
        }
    }

    #[test]
    fn the_instance_layout_is_as_documented() {
        let inst = ShuffleInstance::new(2, 2, vec![vec![1], vec![]], vec![vec![0], vec![1]]).unwrap();
        let words: Vec<u32> = [2, 2, 1, 1, 0, 1, 0, 1, 1].to_vec();
        let mut expected = b"USI1".to_vec();
        expected.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        assert_eq!(encode_instance(&inst), expected);
    }

    #[test]
    fn plans_round_trip_in_the_documented_layout() {
        let plan = sample_plan();
        let bytes = encode_plan(&plan).unwrap();
        let words: Vec<u32> = [2, 2, 4, 0, 1, 2, 1, 0, 1].to_vec();
        let mut expected = b"USP1".to_vec();
        expected.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        assert_eq!(bytes, expected);
        assert_eq!(decode_plan(&bytes).unwrap(), plan);
        assert_eq!(decode_plan(&encode_plan(&Plan::new()).unwrap()).unwrap(), Plan::new());
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error_not_a_panic() {
        let inst_bytes = encode_instance(&ShuffleInstance::paper_example());
        let plan_bytes = encode_plan(&sample_plan()).unwrap();
        for cut in 0..inst_bytes.len() {
            assert!(decode_instance(&inst_bytes[..cut]).is_err(), "instance cut at {cut}");
        }
        for cut in 0..plan_bytes.len() {
            assert!(decode_plan(&plan_bytes[..cut]).is_err(), "plan cut at {cut}");
        }
        let mut longer = plan_bytes.clone();
        longer.push(0);
        assert!(decode_plan(&longer).unwrap_err().to_string().contains("1 bytes after its end"));
        assert!(decode_plan(&inst_bytes).unwrap_err().to_string().contains("not a plan"));
        // A huge count must be refused before anything is allocated for it.
        let mut huge = b"USP1".to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert!(matches!(decode_plan(&huge), Err(WireError::Truncated { .. })));
        for (workers, points) in [(u32::MAX, 9), (1, u32::MAX)] {
            let mut huge = b"USI1".to_vec();
            huge.extend(workers.to_le_bytes());
            huge.extend(points.to_le_bytes());
            huge.extend([0; 64]);
            assert!(matches!(decode_instance(&huge), Err(WireError::Truncated { .. })));
        }
        // Flipping any byte gives an error or a different (valid) instance, never a panic.
        for i in 0..inst_bytes.len() {
            let mut bad = inst_bytes.clone();
            bad[i] ^= 0x5a;
            let _ = decode_instance(&bad);
        }
    }

    #[test]
    fn invalid_instances_are_refused_with_the_instance_error() {
        let inst = ShuffleInstance::paper_example();
        let mut bytes = encode_instance(&inst);
        // Point count 9 -> 8: point 8 is now out of range.
        bytes[8..12].copy_from_slice(&8u32.to_le_bytes());
        assert!(decode_instance(&bytes).unwrap_err().to_string().starts_with("invalid instance"));
    }
}
