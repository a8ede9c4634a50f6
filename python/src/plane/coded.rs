//! Coded delivery from a store rank, in rounds: the store plans the next epoch over segments
//! ([`plan_segment_epoch`]) and encodes each round's packets into a caller's buffer; a
//! training rank decodes each round's buffer into its record store with the one decoder
//! ([`Decoder`] over a [`SegmentTarget`]). Round `k` is the packets `k P .. (k + 1) P` of the
//! plan, `P` the packets that fit in the round's bytes, so both ends know every round's size
//! from the plan alone.

use std::sync::Arc;

use ubershuffle_codes::{Decoder, SegmentEncoder, SegmentTarget, Segmentation};
use ubershuffle_core::Plan;
use ubershuffle_runtime::exchange::{SegmentEpoch, plan_segment_epoch};

use crate::errors::{Failure, Outcome, bad, one_line};
use crate::sampler::SamplerCore;
use crate::store::{MappedStore, SharedStore};

/// Packets per round for segments of `segment_bytes` in rounds of `round_bytes`.
pub fn packets_per_round(segment_bytes: usize, round_bytes: u64) -> usize {
    (round_bytes / segment_bytes.max(1) as u64).max(1) as usize
}

/// The packets of round `k` of a plan of `packets` packets.
pub fn round_range(packets: usize, per_round: usize, k: usize) -> std::ops::Range<usize> {
    let start = (k * per_round).min(packets);
    start..(start + per_round).min(packets)
}

/// The store rank's side of one epoch.
pub struct CodedSend {
    pub epoch: SegmentEpoch,
    pub segmentation: Arc<Segmentation>,
    pub per_round: usize,
}

impl CodedSend {
    /// Plans the epoch after `now`'s (which must be a step of its chain).
    pub fn plan(now: &SamplerCore, segmentation: Arc<Segmentation>, round_bytes: u64) -> Outcome<CodedSend> {
        let (drawn, planner, candidates) = now
            .draw_next()?
            .ok_or_else(|| bad("the next epoch starts a new chain: nothing is cached for it"))?;
        let epoch = plan_segment_epoch(drawn, planner.as_ref(), candidates, &segmentation)
            .map_err(|e| Failure::Internal(one_line(&e)))?;
        let per_round = packets_per_round(segmentation.segment_bytes(), round_bytes);
        Ok(CodedSend { epoch, segmentation, per_round })
    }

    /// Number of rounds.
    pub fn rounds(&self) -> usize {
        self.epoch.plan.len().div_ceil(self.per_round)
    }

    /// The records whose segments the plan's packets carry (what the store must hold to
    /// encode them), sorted.
    pub fn records(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .epoch
            .plan
            .iter()
            .flatten()
            .filter_map(|part| self.segmentation.record_of(part.point).map(|(record, _)| record))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Encodes round `k`'s packets from `store` into `out` (exactly the round's bytes).
    pub fn encode_into(&self, store: &MappedStore, k: usize, out: &mut [u8]) -> Outcome<()> {
        let seqs = round_range(self.epoch.plan.len(), self.per_round, k);
        let width = self.segmentation.segment_bytes();
        if out.len() != seqs.len() * width {
            return Err(bad(format!(
                "round {k} needs {} bytes, the buffer has {}",
                seqs.len() * width,
                out.len()
            )));
        }
        let encoder = SegmentEncoder::new(&self.epoch.plan, &self.segmentation, store)
            .map_err(|e| bad(one_line(&e)))?;
        for (seq, chunk) in seqs.zip(out.chunks_exact_mut(width)) {
            encoder.encode_into(seq, chunk).map_err(|e| bad(one_line(&e)))?;
        }
        Ok(())
    }
}

/// A training rank's side of one epoch: its decoder, kept across rounds.
pub struct CodedReceive {
    pub decoder: Decoder<SegmentTarget<SharedStore>>,
    pub packets: usize,
    pub per_round: usize,
    pub width: usize,
    pub new_records: Vec<u32>,
    pub padding_bytes: u64,
}

impl CodedReceive {
    /// The decoder of `rank` for `plan` (the store's, over `segmentation`), from the rank's
    /// target in `now` (its cache) to its batch in `next`.
    pub fn new(
        now: &SamplerCore,
        next: &SamplerCore,
        plan: Plan,
        segmentation: Arc<Segmentation>,
        store: SharedStore,
        rank: usize,
        round_bytes: u64,
    ) -> Outcome<CodedReceive> {
        let cache = now.targets().into_iter().nth(rank).ok_or_else(|| bad(format!("no rank {rank}")))?;
        let batch = next.batches().into_iter().nth(rank).ok_or_else(|| bad(format!("no rank {rank}")))?;
        let wanted: Vec<u32> = batch.into_iter().filter(|id| cache.binary_search(id).is_err()).collect();
        let wanted_segments = segmentation.expand(&wanted);
        let known = segmentation.expand(&cache);
        let width = segmentation.segment_bytes();
        let packets = plan.len();
        let padding_bytes = segmentation.padding_of(&plan);
        // Their pages first: a full file system is an error here, not SIGBUS mid-decoding.
        crate::store::locked(&store.0).reserve_all(&wanted)?;
        let target = SegmentTarget::new(Arc::clone(&segmentation), store, &cache, &wanted);
        let decoder = Decoder::over(rank, &plan, target, known, wanted_segments)
            .map_err(|e| Failure::Internal(format!("the store's plan: {}", one_line(&e))))?;
        let per_round = packets_per_round(width, round_bytes);
        Ok(CodedReceive { decoder, packets, per_round, width, new_records: wanted, padding_bytes })
    }

    /// Number of rounds.
    pub fn rounds(&self) -> usize {
        self.packets.div_ceil(self.per_round)
    }

    /// Decodes round `k`'s packets from `buffer`.
    pub fn decode(&mut self, k: usize, buffer: &[u8]) -> Outcome<()> {
        let seqs = round_range(self.packets, self.per_round, k);
        if buffer.len() != seqs.len() * self.width {
            return Err(bad(format!(
                "round {k} carries {} bytes, the buffer has {}",
                seqs.len() * self.width,
                buffer.len()
            )));
        }
        for (seq, payload) in seqs.zip(buffer.chunks_exact(self.width)) {
            self.decoder
                .receive_indexed(seq as u32, payload)
                .map_err(|e| Failure::Internal(format!("decoding packet {seq}: {}", one_line(&e))))?;
        }
        Ok(())
    }
}
