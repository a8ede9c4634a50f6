//! Encoding: a plan plus the master's records gives one packet per transmission.

use ubershuffle_core::Plan;

use crate::xor::xor_into;
use crate::{CodecError, Packet, Records};

/// Turns the transmissions of a plan into packets from the master's records.
///
/// ```
/// use ubershuffle_codes::{Encoder, Records};
/// use ubershuffle_core::{Part, Plan};
/// let records = Records::from_bytes(2, vec![1, 2, 3, 4, 5, 6])?;
/// let mut plan = Plan::new();
/// plan.push(&[Part::new(0, 1), Part::new(2, 0)]);
/// let packet = Encoder::new(&plan, &records)?.packet(0);
/// assert_eq!(packet.payload, vec![1 ^ 5, 2 ^ 6]);
/// # Ok::<(), ubershuffle_codes::CodecError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Encoder<'a> {
    plan: &'a Plan,
    records: &'a Records,
}

impl<'a> Encoder<'a> {
    /// An encoder for `plan` over `records`; every point the plan names must exist.
    pub fn new(plan: &'a Plan, records: &'a Records) -> Result<Self, CodecError> {
        for parts in plan.iter() {
            if parts.is_empty() {
                return Err(CodecError::MalformedPacket { reason: "a transmission has no part".into() });
            }
            if let Some(p) = parts.iter().find(|p| p.point as usize >= records.len()) {
                return Err(CodecError::UnknownPoint { point: p.point });
            }
        }
        Ok(Encoder { plan, records })
    }

    /// Bytes per payload.
    pub fn width(&self) -> usize {
        self.records.width()
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.plan.len()
    }

    /// Whether the plan sends nothing.
    pub fn is_empty(&self) -> bool {
        self.plan.is_empty()
    }

    /// Writes the payload of transmission `seq` into `out` (`out.len()` must be the width).
    pub fn encode_into(&self, seq: usize, out: &mut [u8]) {
        let mut parts = self.plan.transmission(seq).iter().map(|p| self.record(p.point));
        if let Some(first) = parts.next() {
            out.copy_from_slice(first);
        }
        for record in parts {
            xor_into(out, record);
        }
    }

    /// The packet of transmission `seq`.
    pub fn packet(&self, seq: usize) -> Packet {
        let mut payload = vec![0u8; self.width()];
        self.encode_into(seq, &mut payload);
        Packet { seq: seq as u32, parts: self.plan.transmission(seq).to_vec(), payload }
    }

    /// Every packet, in plan order.
    pub fn packets(&self) -> impl ExactSizeIterator<Item = Packet> + '_ {
        (0..self.len()).map(|seq| self.packet(seq))
    }

    fn record(&self, point: u32) -> &[u8] {
        // Checked in `new`: every point of the plan is in range.
        let width = self.records.width();
        &self.records.as_bytes()[point as usize * width..(point as usize + 1) * width]
    }
}
