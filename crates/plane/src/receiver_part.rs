//! What one receiver is told of a store's delivery ([`StoreRounds`]): only the packets it
//! decodes from, their parts and their receivers, and which rounds have a relay, in a compact
//! wire form (LEB128 varints, packet indices and points as differences). Each receiver gets its
//! own part, so the store's uplink carries each packet's description about as often as the
//! packet itself (once for a unicast) and a receiver reads nothing about packets it never sees.
//!
//! A receiver lays out its rounds from its part alone: its messages from the store and its
//! relay with every other receiver involve only packets it receives. Whether a round has a
//! relay at all (every receiver then takes part in it) is the one fact about the others'
//! packets it needs, and the part carries it.

use ubershuffle_core::{Part, Plan};

use crate::store_rounds::{StoreRounds, StoreRoundsError};

/// A receiver's part of a delivery, read back: its packets as a plan of their own, where each
/// of them stands in the whole plan, and the rounds laid out for it.
#[derive(Clone, Debug)]
pub struct ReceiverPart {
    /// The receiver's packets, in order (their parts name this receiver as their worker: the
    /// wire form carries only the points).
    pub plan: Plan,
    /// The index in the whole plan of each packet of [`ReceiverPart::plan`].
    pub seqs: Vec<u32>,
    /// The rounds as this receiver sees them (other receivers' packets left out).
    pub rounds: StoreRounds,
}

impl StoreRounds {
    /// Receiver `r`'s part of the delivery of `plan` (which this table routes).
    pub fn part_for(&self, r: usize, plan: &Plan) -> Vec<u8> {
        let mut out = Vec::new();
        let relay: Vec<usize> = (0..self.rounds()).filter(|&k| self.has_relay(k)).collect();
        for v in [self.receivers(), self.width(), self.per_round(), plan.len(), relay.len()] {
            put(&mut out, v as u64);
        }
        let mut prev = 0usize;
        for &k in &relay {
            put(&mut out, (k - prev) as u64);
            prev = k;
        }
        let mine = self.needs(r);
        put(&mut out, mine.len() as u64);
        let (mut next_seq, mut point) = (0u64, 0i64);
        for &t in &mine {
            let (t, receivers) = (t as usize, self.receivers_of(t as usize));
            put(&mut out, t as u64 - next_seq);
            next_seq = t as u64 + 1;
            let parts = plan.transmission(t);
            put(&mut out, parts.len() as u64);
            for p in parts {
                put(&mut out, zigzag(i64::from(p.point) - point));
                point = i64::from(p.point);
            }
            put_receivers(&mut out, self.receivers(), receivers);
        }
        out
    }
}

/// Reads receiver `r`'s part ([`StoreRounds::part_for`]) for `receivers` receivers of packets
/// of `width` bytes, of a plan of at most `max_packets` packets; `length(parts)` gives the bytes
/// a packet of those parts travels with.
pub fn read_part(
    bytes: &[u8],
    r: usize,
    receivers: usize,
    width: usize,
    max_packets: usize,
    length: impl Fn(&[Part]) -> u32,
) -> Result<ReceiverPart, StoreRoundsError> {
    let malformed = |why: String| StoreRoundsError::Malformed(why);
    let mut words = Words { bytes, at: 0 };
    let head: Vec<u64> = (0..5).map(|_| words.next("the header")).collect::<Result<_, _>>()?;
    let (per_round, packets, relays) = (head[2] as usize, head[3] as usize, head[4] as usize);
    if head[0] as usize != receivers || head[1] as usize != width {
        return Err(malformed(format!(
            "it is for {} receivers and packets of {} bytes; this rank expects {receivers} and {width}",
            head[0], head[1]
        )));
    }
    if packets > max_packets {
        return Err(malformed(format!("{packets} packets, more than a plan can have here ({max_packets})")));
    }
    if per_round == 0 || relays > packets {
        return Err(malformed(format!("{per_round} packets per round, {relays} rounds with a relay")));
    }
    let rounds = packets.div_ceil(per_round);
    let mut relay = vec![false; rounds];
    let mut k = 0usize;
    for i in 0..relays {
        k = k.saturating_add(words.next("the rounds with a relay")? as usize);
        if k >= rounds || (i > 0 && relay[k]) {
            return Err(malformed(format!("round {k} of {rounds} has a relay")));
        }
        relay[k] = true;
    }
    let count = words.next("the packets")? as usize;
    if count > packets {
        return Err(malformed(format!("{count} packets of {packets}")));
    }
    let (mut plan, mut seqs) = (Plan::new(), Vec::with_capacity(count));
    let (mut to, mut lengths) = (vec![Vec::new(); packets], vec![0u32; packets]);
    let (mut next_seq, mut point) = (0u64, 0i64);
    for _ in 0..count {
        let t = next_seq.saturating_add(words.next("a packet")?);
        if t >= packets as u64 {
            return Err(malformed(format!("packet {t} of {packets}")));
        }
        next_seq = t + 1;
        let n_parts = words.next("a packet's parts")? as usize;
        if n_parts == 0 || n_parts > receivers.max(1) * 64 {
            return Err(malformed(format!("packet {t} has {n_parts} parts")));
        }
        let mut parts = Vec::with_capacity(n_parts);
        for _ in 0..n_parts {
            point = point.saturating_add(unzigzag(words.next("a part")?));
            let p = u32::try_from(point).map_err(|_| malformed(format!("packet {t} has a part {point}")))?;
            parts.push(Part::new(p, r));
        }
        let list = read_receivers(&mut words, r, receivers)
            .map_err(|why| malformed(format!("packet {t}: {why}")))?;
        lengths[t as usize] = length(&parts);
        to[t as usize] = list;
        plan.push(&parts);
        seqs.push(t as u32);
    }
    if words.at != bytes.len() {
        return Err(malformed(format!("{} bytes after its last packet", bytes.len() - words.at)));
    }
    let rounds = StoreRounds::with_relay(receivers, width, per_round, to, lengths, relay)?;
    Ok(ReceiverPart { plan, seqs, rounds })
}

/// Up to this many receivers, a packet's receivers go as one bit mask.
const MASK_RECEIVERS: usize = 64;

/// Appends a packet's receivers `list` (which holds the receiver the part is for) among
/// `receivers`: a bit mask when there are at most [`MASK_RECEIVERS`] (one byte for up to 7),
/// else their number (a lone receiver is the part's own, said by the number alone) and places.
fn put_receivers(out: &mut Vec<u8>, receivers: usize, list: &[u32]) {
    if receivers <= MASK_RECEIVERS {
        put(out, list.iter().fold(0u64, |m, &q| m | 1 << q));
        return;
    }
    put(out, list.len() as u64);
    if list.len() > 1 {
        for &q in list {
            put(out, u64::from(q));
        }
    }
}

/// The receivers of [`put_receivers`], increasing; an error says why they do not fit.
fn read_receivers(words: &mut Words<'_>, r: usize, receivers: usize) -> Result<Vec<u32>, String> {
    let list: Vec<u32> = if receivers <= MASK_RECEIVERS {
        let mask = words.next("a packet's receivers").map_err(reason)?;
        if receivers < 64 && mask >> receivers != 0 {
            return Err(format!("its receivers {mask:#x} are not among {receivers}"));
        }
        (0..receivers as u32).filter(|&q| mask >> q & 1 == 1).collect()
    } else {
        match words.next("a packet's receivers").map_err(reason)? as usize {
            1 => vec![r as u32],
            n if n >= 2 && n <= receivers => (0..n)
                .map(|_| words.next("a receiver").map(|q| q as u32))
                .collect::<Result<_, _>>()
                .map_err(reason)?,
            n => return Err(format!("{n} receivers of {receivers}")),
        }
    };
    if !list.contains(&(r as u32)) {
        return Err(format!("it is in receiver {r}'s part but not for it"));
    }
    Ok(list)
}

/// Why `e` happened, without the "malformed" its caller adds again.
fn reason(e: StoreRoundsError) -> String {
    match e {
        StoreRoundsError::Malformed(why) => why,
        other => other.to_string(),
    }
}

/// Appends `v` as a LEB128 varint.
fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Varints read from a byte slice.
struct Words<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Words<'_> {
    fn next(&mut self, what: &str) -> Result<u64, StoreRoundsError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .bytes
                .get(self.at)
                .ok_or_else(|| StoreRoundsError::Malformed(format!("it ends before {what}")))?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(StoreRoundsError::Malformed(format!("a number in {what} runs past 64 bits")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A plan of four packets over points of width 8 and its table for three receivers.
    fn example() -> (Plan, StoreRounds) {
        let mut plan = Plan::new();
        plan.push(&[Part::new(5, 1)]);
        plan.push(&[Part::new(3, 0), Part::new(9, 2)]);
        plan.push(&[Part::new(2, 1)]);
        plan.push(&[Part::new(7, 0), Part::new(1, 1), Part::new(4, 2)]);
        let to = vec![vec![1], vec![0, 2], vec![], vec![0, 1, 2]];
        let rounds = StoreRounds::new(3, 8, 1, to, vec![8, 6, 8, 7]).unwrap();
        (plan, rounds)
    }

    fn length_of(parts: &[Part]) -> u32 {
        match parts.first().map(|p| p.point) {
            Some(3) => 6,
            Some(7) => 7,
            _ => 8,
        }
    }

    #[test]
    fn a_receiver_reads_back_its_packets_and_lays_out_its_rounds_as_the_store_does() {
        let (plan, whole) = example();
        for r in 0..3 {
            let part = read_part(&whole.part_for(r, &plan), r, 3, 8, 100, length_of).unwrap();
            assert_eq!(part.seqs, whole.needs(r));
            for (local, &t) in part.seqs.iter().enumerate() {
                let points = |p: &[Part]| p.iter().map(|x| x.point).collect::<Vec<_>>();
                assert_eq!(points(part.plan.transmission(local)), points(plan.transmission(t as usize)));
            }
            for k in 0..whole.rounds() {
                assert_eq!(part.rounds.store_sizes(k)[r], whole.store_sizes(k)[r], "round {k}");
                assert_eq!(part.rounds.relay_sizes(k, r), whole.relay_sizes(k, r), "round {k}");
                assert_eq!(part.rounds.has_relay(k), whole.has_relay(k), "round {k}");
            }
        }
    }

    #[test]
    fn many_receivers_go_by_number_and_place() {
        let mut plan = Plan::new();
        plan.push(&[Part::new(0, 69)]);
        plan.push(&[Part::new(1, 3), Part::new(2, 69)]);
        let to = vec![vec![69], vec![3, 69]];
        let whole = StoreRounds::new(70, 8, 2, to, vec![8, 8]).unwrap();
        let part = read_part(&whole.part_for(69, &plan), 69, 70, 8, 100, |_| 8).unwrap();
        assert_eq!(part.seqs, vec![0, 1]);
        assert_eq!(part.rounds.receivers_of(1), &[3, 69]);
        assert_eq!(part.rounds.relay_sizes(0, 69), whole.relay_sizes(0, 69));
    }

    #[test]
    fn a_part_is_small_and_bad_bytes_are_one_line_errors() {
        let (plan, whole) = example();
        let bytes = whole.part_for(1, &plan);
        // Header 5, relay rounds 1 and 3: 2, count 1, packets 0 (gap, parts, point, receivers'
        // mask: 4) and 3 (gap, parts, three points, mask: 6).
        assert_eq!(bytes.len(), 5 + 2 + 1 + 4 + 6);
        let malformed = |why: &str| format!("the table of receivers is malformed: {why}");
        for (bad, want) in [
            (
                read_part(&bytes, 1, 4, 8, 100, length_of),
                "it is for 3 receivers and packets of 8 bytes; this rank expects 4 and 8",
            ),
            (
                read_part(&bytes[..bytes.len() - 1], 1, 3, 8, 100, length_of),
                "packet 3: it ends before a packet's receivers",
            ),
            (
                read_part(&[bytes.clone(), vec![0]].concat(), 1, 3, 8, 100, length_of),
                "1 bytes after its last packet",
            ),
            (
                read_part(&bytes, 1, 3, 9, 100, length_of),
                "it is for 3 receivers and packets of 8 bytes; this rank expects 3 and 9",
            ),
            (
                read_part(&bytes, 0, 3, 8, 100, length_of),
                "packet 0: it is in receiver 0's part but not for it",
            ),
            (read_part(&bytes, 1, 3, 8, 3, length_of), "4 packets, more than a plan can have here (3)"),
        ] {
            assert_eq!(bad.unwrap_err().to_string(), malformed(want));
        }
    }
}
