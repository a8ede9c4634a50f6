//! Coded delivery from a store rank, in rounds: the store plans the next epoch over segments
//! ([`plan_segment_epoch`]), routes it ([`route`]: which training ranks decode from each
//! packet) and encodes each round's messages into a caller's buffer; a training rank relays its
//! pieces and decodes its packets into its record store with the one decoder ([`Decoder`] over
//! a [`SegmentTarget`]). The round layout, who receives what and the relay's messages are the
//! runtime's [`StoreRounds`]: a packet one rank decodes goes to it alone; a packet several
//! decode goes in pieces among them. The store sends each training rank its part of the plan
//! and of the table ([`StoreRounds::part_for`]), from which it lays out the same rounds.

use std::sync::Arc;
use std::time::Duration;

use crate::receiver_part::read_part;
use crate::store_rounds::StoreRounds;
use ubershuffle_codes::{Decoder, SegmentEncoder, SegmentTarget, Segmentation};
use ubershuffle_core::Part;
use ubershuffle_core::Plan;
use ubershuffle_runtime::route;
use ubershuffle_runtime::segment_epoch::{SegmentEpoch, plan_segment_epoch};

use crate::error::{PlaneError, one_line};
use crate::schedule::Schedule;
use crate::store::{LockedStore, locked};

/// What goes wrong in a coded delivery: a plan that cannot be made, a part or a round that does
/// not fit (a peer's bytes, checked), a record store that fails.
type Outcome<T> = Result<T, PlaneError>;

fn bad(message: impl std::fmt::Display) -> PlaneError {
    PlaneError::Internal(message.to_string())
}

/// The bytes of packets in one round on the wire, at the least: small enough that the store's
/// next round travels while the training ranks relay this one (the pipeline fills in one
/// round), large enough that a round's fixed costs stay small beside its bytes on slow links.
pub const WIRE_ROUND_BYTES: u64 = 128 << 10;

/// Packets per round of packets of `segment_bytes`: rounds of [`WIRE_ROUND_BYTES`], and at
/// most `round_bytes` (the memory a round may take). A round is what a receiver holds until it
/// decodes it, so rounds stay small however large the delivery: they cost the engine nothing
/// but a few lookups.
pub fn packets_per_round(segment_bytes: usize, round_bytes: u64) -> usize {
    let width = segment_bytes.max(1) as u64;
    let least = (WIRE_ROUND_BYTES / width).max(1) as usize;
    let most = (round_bytes / width).max(1) as usize;
    least.min(most)
}

/// Per packet of `plan`, the bytes it travels with: its longest real part (the rest is zero
/// padding, not sent).
fn travelling_lengths(plan: &Plan, segmentation: &Segmentation) -> Vec<u32> {
    plan.iter().map(|t| travelling_length(t, segmentation)).collect()
}

/// The bytes a packet of `parts` travels with.
fn travelling_length(parts: &[Part], segmentation: &Segmentation) -> u32 {
    parts.iter().map(|p| segmentation.real_bytes(p.point)).max().unwrap_or(0) as u32
}

/// The share of the uncoded delivery's time on the store's uplink that the planner may search
/// for a better plan. A plan saves at most that whole time (it sends nothing at best), and a
/// coded delivery sends about half the uncoded bytes on the papers' settings: a search of a
/// quarter of it still leaves the delivery's time won when the plan waits on it.
pub const PLAN_SHARE: f64 = 0.25;

/// The planner's search budget for the epoch after `now`'s: [`PLAN_SHARE`] of the time the
/// records the training ranks lack take at `link_rate` bytes per second. It depends on the
/// chain and the setting alone, so the plan stays the seed's.
pub fn search_budget(now: &dyn Schedule, segmentation: &Segmentation, link_rate: f64) -> Outcome<Duration> {
    let next = now.stepped().map_err(bad)?;
    let index = segmentation.index();
    let lacked: u64 = now
        .targets()
        .iter()
        .zip(next.batches())
        .map(|(held, batch)| {
            batch
                .iter()
                .filter(|id| held.binary_search(id).is_err())
                .filter_map(|&id| index.size(id))
                .sum::<u64>()
        })
        .sum();
    Ok(Duration::from_secs_f64(PLAN_SHARE * lacked as f64 / link_rate))
}

/// The store rank's side of one epoch.
pub struct CodedSend {
    /// The planned epoch.
    pub epoch: SegmentEpoch,
    /// The records' segments.
    pub segmentation: Arc<Segmentation>,
    /// Every packet's receivers and the rounds' layout.
    pub rounds: StoreRounds,
}

impl CodedSend {
    /// Plans and routes the epoch after `now`'s (which must be a step of its chain); with a
    /// `link_rate` (the store's uplink, bytes per second), the planner searches at most
    /// [`search_budget`].
    pub fn plan(
        now: &dyn Schedule,
        segmentation: Arc<Segmentation>,
        round_bytes: u64,
        link_rate: f64,
    ) -> Outcome<CodedSend> {
        let most = if link_rate > 0.0 { Some(search_budget(now, &segmentation, link_rate)?) } else { None };
        let (drawn, planner, candidates) = now
            .draw_next(most)
            .map_err(bad)?
            .ok_or_else(|| bad("the next epoch starts a new chain: nothing is cached for it"))?;
        let epoch = plan_segment_epoch(drawn, planner.as_ref(), candidates, &segmentation)
            .map_err(|e| bad(one_line(&e)))?;
        let routes = route(&epoch.segments, &epoch.plan).map_err(|e| bad(one_line(&e)))?;
        let width = segmentation.segment_bytes();
        let lengths = travelling_lengths(&epoch.plan, &segmentation);
        let rounds = StoreRounds::from_routes(&routes, lengths, width, packets_per_round(width, round_bytes))
            .map_err(|e| bad(one_line(&e)))?;
        Ok(CodedSend { epoch, segmentation, rounds })
    }

    /// Whether every packet sent is one whole segment for one training rank (an uncoded plan):
    /// then the records go whole instead, unencoded, written straight into each rank's store.
    pub fn is_unicasts(&self) -> bool {
        (0..self.epoch.plan.len())
            .all(|t| self.rounds.receivers_of(t).len() <= 1 && self.epoch.plan.transmission(t).len() <= 1)
    }

    /// The records whose segments the sent packets carry (what the store must hold to
    /// encode them), sorted.
    pub fn records(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..self.epoch.plan.len())
            .filter(|&t| !self.rounds.receivers_of(t).is_empty())
            .flat_map(|t| self.epoch.plan.transmission(t))
            .filter_map(|part| self.segmentation.record_of(part.point).map(|(record, _)| record))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Checks that `store` holds every record the plan names (once, before the first round is
    /// encoded).
    pub fn check(&self, store: &LockedStore) -> Outcome<()> {
        let store = locked(&store.0);
        SegmentEncoder::check(&self.epoch.plan, &self.segmentation, &*store).map_err(|e| bad(one_line(&e)))
    }

    /// Encodes round `k`'s messages from `store` into `out`: every training rank's, in rank
    /// order (exactly [`StoreRounds::store_sizes`]'s bytes). The plan was checked against the
    /// store before ([`CodedSend::check`]).
    pub fn encode_into(&self, store: &LockedStore, k: usize, out: &mut [u8]) -> Outcome<()> {
        let store = locked(&store.0);
        let encoder = SegmentEncoder::checked(&self.epoch.plan, &self.segmentation, &*store);
        self.rounds
            .pack_store(k, out, |t, packet| encoder.encode_into(t, packet))
            .map_err(|e| bad(one_line(&e)))?
            .map_err(|e| bad(one_line(&e)))
    }
}

/// A training rank's side of one epoch: its decoder, kept across rounds, and the rounds'
/// layout.
pub struct CodedReceive {
    /// The decoder, writing into the rank's record store.
    pub decoder: Decoder<SegmentTarget<LockedStore>>,
    /// The rounds as this rank sees them.
    pub rounds: StoreRounds,
    /// The index in the whole plan of each packet the decoder knows (increasing).
    pub seqs: Vec<u32>,
    /// This rank's place among the training ranks.
    pub rank: usize,
    /// The records it lacks and receives.
    pub new_records: Vec<u32>,
    /// Padding bytes of its packets.
    pub padding_bytes: u64,
}

impl CodedReceive {
    /// The decoder of `rank` for its `part` of the store's delivery ([`StoreRounds::part_for`]:
    /// the packets it decodes from, over `segmentation`), from the rank's target in `now` (its
    /// cache) to its batch in `next`.
    pub fn new(
        now: &dyn Schedule,
        next: &dyn Schedule,
        part: &[u8],
        segmentation: Arc<Segmentation>,
        store: LockedStore,
        rank: usize,
    ) -> Outcome<CodedReceive> {
        let cache = now.targets().into_iter().nth(rank).ok_or_else(|| bad(format!("no rank {rank}")))?;
        let batch = next.batches().into_iter().nth(rank).ok_or_else(|| bad(format!("no rank {rank}")))?;
        let ranks = now.targets().len();
        let wanted: Vec<u32> = batch.into_iter().filter(|id| cache.binary_search(id).is_err()).collect();
        let wanted_segments = segmentation.expand(&wanted);
        let known = segmentation.expand(&cache);
        let width = segmentation.segment_bytes();
        // A plan's packets each bring some rank a segment it lacks.
        let max_packets = segmentation.segments().saturating_mul(ranks);
        let part =
            read_part(part, rank, ranks, width, max_packets, |parts| travelling_length(parts, &segmentation))
                .map_err(|e| bad(format!("the store's plan: {}", one_line(&e))))?;
        if let Some(p) = part.plan.iter().flatten().find(|p| p.point as usize >= segmentation.segments()) {
            return Err(bad(format!(
                "the store's plan names segment {} of {}",
                p.point,
                segmentation.segments()
            )));
        }
        let padding_bytes = segmentation.padding_of(&part.plan);
        // Their pages first: a full file system is an error here, not SIGBUS mid-decoding.
        locked(&store.0).reserve_all(&wanted)?;
        let target = SegmentTarget::new(Arc::clone(&segmentation), store, &cache, &wanted);
        let decoder = Decoder::over(rank, &part.plan, target, known, wanted_segments)
            .map_err(|e| bad(format!("the store's plan: {}", one_line(&e))))?;
        Ok(CodedReceive {
            decoder,
            rounds: part.rounds,
            seqs: part.seqs,
            rank,
            new_records: wanted,
            padding_bytes,
        })
    }

    /// Writes this rank's relay of round `k` into `out` from the store's message.
    pub fn pack_relay(&self, k: usize, from_store: &[u8], out: &mut [u8]) -> Outcome<()> {
        self.rounds.pack_relay(k, self.rank, from_store, out).map_err(|e| bad(one_line(&e)))
    }

    /// Decodes round `k`'s packets from the store's message and the relay's bytes.
    pub fn decode(&mut self, k: usize, from_store: &[u8], from_peers: &[u8]) -> Outcome<()> {
        let (decoder, seqs) = (&mut self.decoder, &self.seqs);
        self.rounds
            .assemble(k, self.rank, from_store, from_peers, |t, packet| {
                // Its place among the packets the decoder knows (the part has every packet
                // this rank receives).
                let local = seqs
                    .binary_search(&(t as u32))
                    .map_err(|_| bad(format!("packet {t} is not in this rank's part")))?;
                decoder
                    .receive_indexed(local as u32, packet)
                    .map_err(|e| bad(format!("decoding packet {t}: {}", one_line(&e))))
            })
            .map_err(|e| bad(one_line(&e)))?
    }
}

/// What a receiver's coded delivery brought, once every round is decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Packets it needed.
    pub packets_needed: u64,
    /// Of which coded (several parts).
    pub coded_packets_needed: u64,
    /// The records it did not hold and now does.
    pub new_records: Vec<u32>,
    /// Padding bytes of its packets.
    pub padding_bytes: u64,
}

impl CodedReceive {
    /// After the last round: what arrived, or which record is still incomplete.
    pub fn finish(&self) -> Outcome<Received> {
        let incomplete = self.decoder.store().incomplete();
        if let Some(first) = incomplete.first() {
            return Err(bad(format!(
                "the coded delivery left record {first} incomplete ({} records in all)",
                incomplete.len()
            )));
        }
        Ok(Received {
            packets_needed: self.decoder.packets_needed() as u64,
            coded_packets_needed: self.decoder.coded_packets_needed() as u64,
            new_records: self.new_records.clone(),
            padding_bytes: self.padding_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_128_kib_and_never_above_round_bytes() {
        assert_eq!(packets_per_round(512, 16 << 20), 256);
        // The memory cap wins: 64 KiB rounds.
        assert_eq!(packets_per_round(512, 64 << 10), 128);
        // Segments larger than a round: one per round.
        assert_eq!(packets_per_round(1 << 20, 16 << 20), 1);
    }
}
