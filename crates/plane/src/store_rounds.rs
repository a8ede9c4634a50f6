//! A store's delivery of a routed plan to its receivers, in rounds: each packet goes only to
//! the receivers that decode something from it ([`ubershuffle_runtime::route`]). A packet one receiver
//! decodes goes to it alone, whole (a unicast). A packet travels without its padding: its
//! bytes beyond its longest real part, zero by construction, are not sent, and the receiver
//! puts them back. A packet several receivers decode goes in
//! pieces, one to each of them, and each relays its piece to the others: the UberShuffle
//! paper's pseudo-broadcast (Section 3.1), among that packet's receivers only. The store's
//! uplink carries every packet once; a receiver's downlink carries exactly the packets it
//! decodes from. A packet nobody decodes is not sent.
//!
//! Round `k` is the plan's packets `k P .. (k + 1) P`. Its messages, every one laid out in plan
//! order:
//! - from the store to receiver `r`: each of the round's packets `r` receives, whole if `r` is
//!   its only receiver, else `r`'s piece ([`StoreRounds::store_message`]);
//! - from receiver `r` to receiver `q` (the relay): `r`'s piece of each of the round's packets
//!   both receive ([`StoreRounds::relay_sizes`]).
//!
//! The store holds the whole table; each receiver is sent its part of it
//! ([`StoreRounds::part_for`], [`crate::receiver_part::read_part`]), from which it lays out the
//! same messages: every message's size and layout is known to its sender and its receiver.
//! Nothing here moves bytes over a network: the engine does ([`crate::engine`]).

use std::ops::Range;

use ubershuffle_runtime::Routes;

/// Why a table of receivers, or a message, does not fit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreRoundsError {
    /// The wire form of the table is malformed.
    #[error("the table of receivers is malformed: {0}")]
    Malformed(String),
    /// A buffer has the wrong length for its message.
    #[error("{what} of round {round} has {len} bytes, the table says {wanted}")]
    WrongLength {
        /// Which message.
        what: &'static str,
        /// The round.
        round: usize,
        /// The buffer's bytes.
        len: usize,
        /// The message's bytes.
        wanted: usize,
    },
}

/// Every packet's receivers and the round layout of their messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreRounds {
    receivers: usize,
    width: usize,
    per_round: usize,
    /// Per packet, its receivers' places, increasing (empty: nobody decodes it).
    to: Vec<Vec<u32>>,
    /// Per packet, the bytes it travels with (at most `width`; the rest is zero padding).
    lengths: Vec<u32>,
    /// Per round, whether any of its packets has several receivers (a relay).
    relay: Vec<bool>,
}

/// How the packets of a delivery travel, in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteFigures {
    /// Packets sent whole to their one receiver.
    pub unicast_packets: u64,
    /// Packets sent in pieces to several receivers, who relay them.
    pub multicast_packets: u64,
    /// Packets of the plan nobody decodes from (not sent).
    pub unneeded_packets: u64,
    /// Bytes of the unicast packets (as they travel, without padding).
    pub unicast_bytes: u64,
    /// Bytes of the multicast packets (each counted once, as the store sends it).
    pub multicast_bytes: u64,
}

impl StoreRounds {
    /// The layout for `receivers` receivers of packets of `width` bytes, `per_round` packets per
    /// round, packet `t` decoded by the receivers `to[t]` and travelling with its first
    /// `lengths[t]` bytes.
    pub fn new(
        receivers: usize,
        width: usize,
        per_round: usize,
        mut to: Vec<Vec<u32>>,
        lengths: Vec<u32>,
    ) -> Result<StoreRounds, StoreRoundsError> {
        if lengths.len() != to.len() {
            return Err(StoreRoundsError::Malformed(format!(
                "{} packets but {} lengths",
                to.len(),
                lengths.len()
            )));
        }
        if let Some(t) = lengths.iter().position(|&l| l as usize > width) {
            return Err(StoreRoundsError::Malformed(format!(
                "packet {t} travels with {} bytes, more than its {width}",
                lengths[t]
            )));
        }
        if width == 0 || per_round == 0 {
            return Err(StoreRoundsError::Malformed(format!(
                "packets of {width} bytes, {per_round} per round"
            )));
        }
        for (t, list) in to.iter_mut().enumerate() {
            list.sort_unstable();
            list.dedup();
            if let Some(&bad) = list.iter().find(|&&r| r as usize >= receivers) {
                return Err(StoreRoundsError::Malformed(format!(
                    "packet {t} goes to receiver {bad} of {receivers}"
                )));
            }
        }
        let rounds = to.len().div_ceil(per_round);
        let relay = (0..rounds)
            .map(|k| to[k * per_round..((k + 1) * per_round).min(to.len())].iter().any(|l| l.len() > 1))
            .collect();
        Ok(StoreRounds { receivers, width, per_round, to, lengths, relay })
    }

    /// [`StoreRounds::new`] for a receiver that knows only its own packets (the others' `to`
    /// empty) and is told which rounds have a relay.
    pub fn with_relay(
        receivers: usize,
        width: usize,
        per_round: usize,
        to: Vec<Vec<u32>>,
        lengths: Vec<u32>,
        relay: Vec<bool>,
    ) -> Result<StoreRounds, StoreRoundsError> {
        let mut rounds = StoreRounds::new(receivers, width, per_round, to, lengths)?;
        if relay.len() != rounds.relay.len() {
            return Err(StoreRoundsError::Malformed(format!(
                "{} rounds, {} told whether they relay",
                rounds.relay.len(),
                relay.len()
            )));
        }
        if let Some(k) = (0..relay.len()).find(|&k| rounds.relay[k] && !relay[k]) {
            return Err(StoreRoundsError::Malformed(format!("round {k} has a relay it is said not to have")));
        }
        rounds.relay = relay;
        Ok(rounds)
    }

    /// The layout of a routed plan of `lengths.len()` packets (`routes.needs[r]`: the packets
    /// receiver `r` decodes from).
    pub fn from_routes(
        routes: &Routes,
        lengths: Vec<u32>,
        width: usize,
        per_round: usize,
    ) -> Result<StoreRounds, StoreRoundsError> {
        let packets = lengths.len();
        let mut to = vec![Vec::new(); packets];
        for (r, seqs) in routes.needs.iter().enumerate() {
            for &t in seqs {
                let list = to.get_mut(t as usize).ok_or_else(|| {
                    StoreRoundsError::Malformed(format!("receiver {r} needs packet {t} of {packets}"))
                })?;
                list.push(r as u32);
            }
        }
        StoreRounds::new(routes.needs.len(), width, per_round, to, lengths)
    }

    /// Receivers.
    pub fn receivers(&self) -> usize {
        self.receivers
    }

    /// Bytes per packet (with its padding).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Packets per round.
    pub fn per_round(&self) -> usize {
        self.per_round
    }

    /// Number of rounds.
    pub fn rounds(&self) -> usize {
        self.to.len().div_ceil(self.per_round)
    }

    /// The packets of round `k`.
    pub fn packets(&self, k: usize) -> Range<usize> {
        let start = (k * self.per_round).min(self.to.len());
        start..(start + self.per_round).min(self.to.len())
    }

    /// The receivers of packet `t`, increasing.
    pub fn receivers_of(&self, t: usize) -> &[u32] {
        self.to.get(t).map_or(&[], Vec::as_slice)
    }

    /// The bytes packet `t` travels with.
    pub fn length(&self, t: usize) -> usize {
        self.lengths.get(t).map_or(0, |&l| l as usize)
    }

    /// The packets receiver `r` gets, increasing.
    pub fn needs(&self, r: usize) -> Vec<u32> {
        (0..self.to.len()).filter(|&t| self.to[t].contains(&(r as u32))).map(|t| t as u32).collect()
    }

    /// The bytes of piece `i` of packet `t` (`i` below its number of receivers), within the
    /// bytes it travels with: a lone receiver's piece is all of them.
    pub fn piece(&self, t: usize, i: usize) -> Range<usize> {
        let len = self.lengths.get(t).map_or(0, |&l| l as usize);
        let p = len.div_ceil(self.receivers_of(t).len().max(1));
        (i * p).min(len)..((i + 1) * p).min(len)
    }

    /// Where receiver `r` stands among packet `t`'s receivers.
    fn place(&self, t: usize, r: usize) -> Option<usize> {
        self.receivers_of(t).iter().position(|&x| x as usize == r)
    }

    /// The store's message to `r` in round `k`: per packet `(t, bytes of t)`, in order.
    pub fn store_message(&self, k: usize, r: usize) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        self.packets(k).filter_map(move |t| {
            let i = self.place(t, r)?;
            Some((t, self.piece(t, i)))
        })
    }

    /// The store's bytes to each receiver in round `k`.
    pub fn store_sizes(&self, k: usize) -> Vec<u64> {
        (0..self.receivers).map(|r| self.store_message(k, r).map(|(_, b)| b.len() as u64).sum()).collect()
    }

    /// Round `k`'s relay: bytes from receiver `i` to receiver `j`, `[i][j]`.
    pub fn relay_matrix(&self, k: usize) -> Vec<Vec<u64>> {
        let mut m = vec![vec![0u64; self.receivers]; self.receivers];
        for t in self.packets(k) {
            let list = &self.to[t];
            if list.len() < 2 {
                continue;
            }
            for (i, &a) in list.iter().enumerate() {
                let bytes = self.piece(t, i).len() as u64;
                for &b in list.iter().filter(|&&b| b != a) {
                    m[a as usize][b as usize] += bytes;
                }
            }
        }
        m
    }

    /// Receiver `r`'s relay in round `k`: bytes it sends to each receiver and bytes it receives
    /// from each (its own entries 0).
    pub fn relay_sizes(&self, k: usize, r: usize) -> (Vec<u64>, Vec<u64>) {
        let m = self.relay_matrix(k);
        let sends = m.get(r).cloned().unwrap_or_default();
        let recvs = m.iter().map(|row| row.get(r).copied().unwrap_or(0)).collect();
        (sends, recvs)
    }

    /// Whether round `k` has a relay at all (every receiver takes part in it, or none does).
    pub fn has_relay(&self, k: usize) -> bool {
        self.relay.get(k).copied().unwrap_or(false)
    }

    /// Writes round `k`'s messages from the store into `out`, receiver by receiver, calling
    /// `encode(t, packet)` once per packet sent (`packet`: a scratch buffer of the packet's
    /// width); `out` holds exactly [`StoreRounds::store_sizes`]'s sum.
    pub fn pack_store<E>(
        &self,
        k: usize,
        out: &mut [u8],
        mut encode: impl FnMut(usize, &mut [u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreRoundsError> {
        let sizes = self.store_sizes(k);
        expect_len("the store's messages", k, out.len(), sizes.iter().sum())?;
        // Where each receiver's message goes next.
        let mut cursor = starts(&sizes);
        let mut packet = vec![0u8; self.width];
        for t in self.packets(k) {
            let list = &self.to[t];
            if list.is_empty() {
                continue;
            }
            if let Err(e) = encode(t, &mut packet) {
                return Ok(Err(e));
            }
            for (i, &r) in list.iter().enumerate() {
                let piece = self.piece(t, i);
                let at = cursor[r as usize];
                out[at..at + piece.len()].copy_from_slice(&packet[piece.clone()]);
                cursor[r as usize] += piece.len();
            }
        }
        Ok(Ok(()))
    }

    /// Writes receiver `r`'s relay of round `k` into `out` (every other receiver's bytes in
    /// receiver order, as one all-to-all sends them) from `from_store`, the store's message to
    /// `r` in that round.
    pub fn pack_relay(
        &self,
        k: usize,
        r: usize,
        from_store: &[u8],
        out: &mut [u8],
    ) -> Result<(), StoreRoundsError> {
        self.check_store_message(k, r, from_store)?;
        let (sends, _) = self.relay_sizes(k, r);
        expect_len("the relay's send buffer", k, out.len(), sends.iter().sum())?;
        let mut cursor = starts(&sends);
        let mut at = 0usize;
        for (t, piece) in self.store_message(k, r) {
            let mine = &from_store[at..at + piece.len()];
            at += piece.len();
            let list = &self.to[t];
            if list.len() < 2 {
                continue;
            }
            for &q in list.iter().filter(|&&q| q as usize != r) {
                let c = &mut cursor[q as usize];
                out[*c..*c + mine.len()].copy_from_slice(mine);
                *c += mine.len();
            }
        }
        Ok(())
    }

    /// Receiver `r`'s whole packets of round `k`, from the store's message `from_store` and the
    /// relay's `from_peers` (every other receiver's bytes in receiver order): calls
    /// `take(t, packet)` for each, in order.
    pub fn assemble<E>(
        &self,
        k: usize,
        r: usize,
        from_store: &[u8],
        from_peers: &[u8],
        mut take: impl FnMut(usize, &[u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreRoundsError> {
        self.check_store_message(k, r, from_store)?;
        let (_, recvs) = self.relay_sizes(k, r);
        expect_len("the relay's receive buffer", k, from_peers.len(), recvs.iter().sum())?;
        let mut cursor = starts(&recvs);
        let mut packet = vec![0u8; self.width];
        let mut at = 0usize;
        for (t, mine) in self.store_message(k, r) {
            let list = &self.to[t];
            let own = &from_store[at..at + mine.len()];
            at += mine.len();
            // The padding, zero, put back.
            packet[self.lengths[t] as usize..].fill(0);
            packet[mine].copy_from_slice(own);
            for (i, &q) in list.iter().enumerate().filter(|&(_, &q)| q as usize != r) {
                let piece = self.piece(t, i);
                let c = &mut cursor[q as usize];
                packet[piece.clone()].copy_from_slice(&from_peers[*c..*c + piece.len()]);
                *c += piece.len();
            }
            if let Err(e) = take(t, &packet) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    fn check_store_message(&self, k: usize, r: usize, from_store: &[u8]) -> Result<(), StoreRoundsError> {
        let wanted: usize = self.store_message(k, r).map(|(_, b)| b.len()).sum();
        expect_len("the store's message", k, from_store.len(), wanted as u64)
    }

    /// How the packets travel, in all.
    pub fn figures(&self) -> RouteFigures {
        let mut f = RouteFigures::default();
        for (list, &len) in self.to.iter().zip(&self.lengths) {
            match list.len() {
                0 => f.unneeded_packets += 1,
                1 => {
                    f.unicast_packets += 1;
                    f.unicast_bytes += u64::from(len);
                }
                _ => {
                    f.multicast_packets += 1;
                    f.multicast_bytes += u64::from(len);
                }
            }
        }
        f
    }
}

/// `Ok` when a buffer of `len` bytes holds `what` of round `round`, `wanted` bytes.
fn expect_len(what: &'static str, round: usize, len: usize, wanted: u64) -> Result<(), StoreRoundsError> {
    if len as u64 == wanted {
        return Ok(());
    }
    Err(StoreRoundsError::WrongLength { what, round, len, wanted: wanted as usize })
}

/// Where each of consecutive sections of `sizes` starts.
fn starts(sizes: &[u64]) -> Vec<usize> {
    let mut at = 0usize;
    sizes
        .iter()
        .map(|&s| {
            let here = at;
            at += s as usize;
            here
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A small seeded generator (splitmix64): `below(n)` is in `0..n`.
    struct Draws(u64);

    impl Draws {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        }
    }

    /// A packet's bytes: its index and offset, so that any misplaced byte shows; zero past
    /// its length (the padding).
    fn packet_bytes(s: &StoreRounds, t: usize) -> Vec<u8> {
        let len = s.lengths[t] as usize;
        (0..s.width).map(|i| if i < len { (t * 31 + i * 7 + 1) as u8 } else { 0 }).collect()
    }

    fn random_rounds(seed: u64) -> StoreRounds {
        let mut rng = Draws(seed);
        let n = 1 + rng.below(5);
        let width = 1 + rng.below(39);
        let packets = rng.below(30);
        let to = (0..packets).map(|_| (0..n as u32).filter(|_| rng.below(5) < 2).collect()).collect();
        let lengths = (0..packets).map(|_| rng.below(width + 1) as u32).collect();
        StoreRounds::new(n, width, 1 + rng.below(6), to, lengths).unwrap()
    }

    /// Runs a whole delivery through the layout: the store packs, every receiver relays and
    /// assembles; returns every receiver's packets in the order it took them.
    fn deliver(s: &StoreRounds) -> Vec<Vec<(usize, Vec<u8>)>> {
        let n = s.receivers();
        let mut got = vec![Vec::new(); n];
        for k in 0..s.rounds() {
            let sizes = s.store_sizes(k);
            let mut out = vec![0u8; sizes.iter().sum::<u64>() as usize];
            s.pack_store(k, &mut out, |t, p| {
                p.copy_from_slice(&packet_bytes(s, t));
                Ok::<(), ()>(())
            })
            .unwrap()
            .unwrap();
            let at = starts(&sizes);
            let message = |r: usize| &out[at[r]..at[r] + sizes[r] as usize];
            let relays: Vec<Vec<u8>> = (0..n)
                .map(|r| {
                    let (sends, _) = s.relay_sizes(k, r);
                    let mut buf = vec![0u8; sends.iter().sum::<u64>() as usize];
                    s.pack_relay(k, r, message(r), &mut buf).unwrap();
                    buf
                })
                .collect();
            for (r, packets) in got.iter_mut().enumerate() {
                // What an all-to-all hands r: every sender's section for r, in sender order.
                let mut from_peers = Vec::new();
                for (q, buf) in relays.iter().enumerate() {
                    let (sends, _) = s.relay_sizes(k, q);
                    let a = starts(&sends)[r];
                    from_peers.extend_from_slice(&buf[a..a + sends[r] as usize]);
                }
                s.assemble(k, r, message(r), &from_peers, |t, p| {
                    packets.push((t, p.to_vec()));
                    Ok::<(), ()>(())
                })
                .unwrap()
                .unwrap();
            }
        }
        got
    }

    #[test]
    fn every_receiver_gets_exactly_its_packets_byte_for_byte() {
        let (mut delivered, mut relayed) = (0, 0);
        for seed in 0..300 {
            let s = random_rounds(seed);
            let got = deliver(&s);
            delivered += got.iter().map(Vec::len).sum::<usize>();
            relayed += s.figures().multicast_packets;
            for (r, packets) in got.iter().enumerate() {
                let seqs: Vec<u32> = packets.iter().map(|(t, _)| *t as u32).collect();
                assert_eq!(seqs, s.needs(r), "seed {seed} receiver {r}");
                for (t, p) in packets {
                    assert_eq!(p, &packet_bytes(&s, *t), "seed {seed} receiver {r} packet {t}");
                }
            }
        }
        // The tables are not degenerate: thousands of packets arrive, hundreds of them relayed.
        assert!(delivered > 2000 && relayed > 500, "{delivered} packets delivered, {relayed} multicast");
    }

    #[test]
    fn the_store_sends_each_packet_once_and_receivers_get_only_theirs() {
        // Packet 0 to receiver 1 alone, packet 1 to 0 and 2, packet 2 to nobody, packet 3 to all.
        let to = vec![vec![1], vec![2, 0], vec![], vec![0, 1, 2]];
        let s = StoreRounds::new(3, 12, 2, to, vec![10, 10, 12, 10]).unwrap();
        let store: u64 = (0..s.rounds()).flat_map(|k| s.store_sizes(k)).sum();
        assert_eq!(store, 30, "three packets sent, each once, without their padding");
        assert_eq!(s.store_sizes(0), vec![5, 10, 5]);
        assert_eq!(s.relay_matrix(0), vec![vec![0, 0, 5], vec![0, 0, 0], vec![5, 0, 0]]);
        // Pieces of 4, 4 and 2 bytes among three.
        assert_eq!(s.relay_matrix(1), vec![vec![0, 4, 4], vec![4, 0, 4], vec![2, 2, 0]]);
        assert!(s.has_relay(0) && s.has_relay(1));
        let f = s.figures();
        assert_eq!((f.unicast_packets, f.multicast_packets, f.unneeded_packets), (1, 2, 1));
        assert_eq!((f.unicast_bytes, f.multicast_bytes), (10, 20));
    }

    #[test]
    fn a_table_that_does_not_fit_is_refused() {
        let malformed = |why: &str| format!("the table of receivers is malformed: {why}");
        let e = StoreRounds::new(2, 8, 1, vec![vec![2]], vec![8]).unwrap_err().to_string();
        assert_eq!(e, malformed("packet 0 goes to receiver 2 of 2"));
        let e = StoreRounds::new(2, 8, 1, vec![vec![1]], vec![9]).unwrap_err().to_string();
        assert_eq!(e, malformed("packet 0 travels with 9 bytes, more than its 8"));
        let e = StoreRounds::with_relay(2, 8, 1, vec![vec![0, 1]], vec![8], vec![false]).unwrap_err();
        assert_eq!(e.to_string(), malformed("round 0 has a relay it is said not to have"));
    }

    #[test]
    fn a_message_of_the_wrong_length_is_an_error() {
        let s = StoreRounds::new(2, 8, 1, vec![vec![0, 1]], vec![8]).unwrap();
        let e = s.pack_relay(0, 0, &[0; 3], &mut [0; 4]).unwrap_err().to_string();
        assert!(e.contains("the store's message of round 0 has 3 bytes, the table says 4"), "{e}");
        let e = s.assemble(0, 0, &[0; 4], &[0; 5], |_, _| Ok::<(), ()>(())).unwrap_err().to_string();
        assert!(e.contains("relay's receive buffer"), "{e}");
    }
}
