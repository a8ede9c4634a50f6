//! [`Decoder`]: one worker's peeling decoder. It takes packets in any order, XORs out what it
//! knows, and returns exactly its new records, byte for byte, or a typed error.
//!
//! The decoder is scheduled from the plan's headers (which the master sends before the
//! payloads): symbolic peeling at this worker tells which transmissions it needs and which
//! intermediate points it must keep (the two-step decoding of Attia-Tandon's ignored worker).
//! Every other packet is dropped on arrival, so a worker never buffers what it cannot use.

use std::collections::HashMap;

use ubershuffle_core::{Part, Plan, VerifyError, peel};

use crate::xor::xor_into;
use crate::{CodecError, Packet, RecordStore};

/// Why a worker cannot return its new records.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The plan itself does not let this worker decode these points.
    #[error("the plan does not let worker {worker} decode point {} ({} points in all)", .points[0], .points.len())]
    Undecodable {
        /// The worker.
        worker: usize,
        /// The points it can never decode, sorted.
        points: Vec<u32>,
    },
    /// Decoding ended before the packets for these points arrived.
    #[error("worker {worker} is still missing point {} ({} points in all)", .points[0], .points.len())]
    Missing {
        /// The worker.
        worker: usize,
        /// The points not yet decoded, sorted.
        points: Vec<u32>,
    },
    /// A packet's header differs from the plan's transmission with the same index.
    #[error("packet {seq} names other parts than transmission {seq} of the plan")]
    HeaderMismatch {
        /// The packet's index.
        seq: u32,
    },
    /// A packet's payload has the wrong length.
    #[error("packet {seq} has a {len}-byte payload, records are {width} bytes")]
    WrongWidth {
        /// The packet's index.
        seq: u32,
        /// Its payload length.
        len: usize,
        /// The record width.
        width: usize,
    },
    /// The plan is malformed.
    #[error(transparent)]
    Plan(#[from] VerifyError),
    /// A record-level error.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// A transmission this worker needs: its parts and the point it yields here.
#[derive(Debug)]
struct Scheduled {
    parts: Vec<Part>,
    learns: u32,
    done: bool,
}

/// A payload that arrived before the points it must be combined with.
#[derive(Debug)]
struct Buffered {
    payload: Vec<u8>,
    missing: usize,
}

/// Marks a transmission this worker does not need in `Decoder::by_seq`.
const NOT_NEEDED: u32 = u32::MAX;

/// Where a decoder finds the points it knows and keeps the points it learns: a worker's
/// [`RecordStore`] of fixed-width records, or a [`SegmentTarget`](crate::SegmentTarget) over
/// records of uneven size.
pub trait DecodeStore {
    /// Bytes per point (every payload's length).
    fn width(&self) -> usize;
    /// Point ids run below this.
    fn universe(&self) -> usize;
    /// Whether `point` is known.
    fn contains(&self, point: u32) -> bool;
    /// XORs the bytes of the known point `point` into `dst` (`width()` bytes); a point
    /// shorter than the width is zero-padded.
    fn xor_known_into(&self, point: u32, dst: &mut [u8]) -> Result<(), CodecError>;
    /// Keeps a learned point (`width()` bytes); `Ok(false)` if it was known already.
    fn insert(&mut self, point: u32, bytes: &[u8]) -> Result<bool, CodecError>;
}

impl DecodeStore for RecordStore {
    fn width(&self) -> usize {
        RecordStore::width(self)
    }

    fn universe(&self) -> usize {
        RecordStore::universe(self)
    }

    fn contains(&self, point: u32) -> bool {
        RecordStore::contains(self, point)
    }

    fn xor_known_into(&self, point: u32, dst: &mut [u8]) -> Result<(), CodecError> {
        let known = self.get(point).ok_or(CodecError::UnknownPoint { point })?;
        if known.len() != dst.len() {
            return Err(CodecError::WrongWidth { point, len: dst.len(), width: known.len() });
        }
        xor_into(dst, known);
        Ok(())
    }

    fn insert(&mut self, point: u32, bytes: &[u8]) -> Result<bool, CodecError> {
        RecordStore::insert(self, point, bytes)
    }
}

/// One worker's decoder, over its store `S` (by default a [`RecordStore`]).
#[derive(Debug)]
pub struct Decoder<S = RecordStore> {
    worker: usize,
    store: S,
    wanted: Vec<u32>,
    /// For every transmission of the plan, its index in `scheduled`, or `NOT_NEEDED`.
    by_seq: Vec<u32>,
    scheduled: Vec<Scheduled>,
    waiting_on: HashMap<u32, Vec<u32>>,
    buffered: HashMap<u32, Buffered>,
    scratch: Vec<u8>,
}

impl Decoder<RecordStore> {
    /// A decoder for `worker`, which holds `store` (its cache) and must end holding `wanted`.
    /// Fails at once, with [`DecodeError::Undecodable`], if the plan cannot deliver `wanted`.
    pub fn new(
        worker: usize,
        plan: &Plan,
        mut store: RecordStore,
        wanted: impl IntoIterator<Item = u32>,
    ) -> Result<Self, DecodeError> {
        let known = store.ids().to_vec();
        let wanted: Vec<u32> = wanted.into_iter().collect();
        // Room for every point it will learn, so decoding never moves the cache in memory.
        store.reserve(wanted.len());
        Decoder::over(worker, plan, store, known, wanted)
    }

    /// Gives up on this plan and hands back the store: the cache plus whatever was decoded so
    /// far (a worker whose epoch was restarted restores its cache from it).
    pub fn abandon(self) -> RecordStore {
        self.store
    }
}

impl<S: DecodeStore> Decoder<S> {
    /// A decoder for `worker` over `store`, which knows the points `known` (its cache) and
    /// must end knowing `wanted`. Fails at once, with [`DecodeError::Undecodable`], if the plan
    /// cannot deliver `wanted`.
    pub fn over(
        worker: usize,
        plan: &Plan,
        store: S,
        known: impl IntoIterator<Item = u32>,
        wanted: impl IntoIterator<Item = u32>,
    ) -> Result<Self, DecodeError> {
        let wanted: Vec<u32> = wanted.into_iter().collect();
        let peeling = peel(store.universe(), plan, known)?;
        let schedule =
            peeling.schedule(plan, &wanted).map_err(|points| DecodeError::Undecodable { worker, points })?;
        let mut by_seq = vec![NOT_NEEDED; plan.len()];
        let scheduled: Vec<Scheduled> = schedule
            .into_iter()
            .enumerate()
            .map(|(k, (seq, learns))| {
                by_seq[seq] = k as u32;
                Scheduled { parts: plan.transmission(seq).to_vec(), learns, done: false }
            })
            .collect();
        let mut wanted = wanted;
        wanted.sort_unstable();
        wanted.dedup();
        Ok(Decoder {
            worker,
            scratch: vec![0; store.width()],
            store,
            wanted,
            by_seq,
            scheduled,
            waiting_on: HashMap::new(),
            buffered: HashMap::new(),
        })
    }

    /// The worker this decoder serves.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// How many packets this worker needs from the plan.
    pub fn packets_needed(&self) -> usize {
        self.scheduled.len()
    }

    /// The packets this worker needs (plan indices, increasing): its peeling schedule's.
    pub fn needed(&self) -> Vec<u32> {
        (0..self.by_seq.len() as u32).filter(|&t| self.by_seq[t as usize] != NOT_NEEDED).collect()
    }

    /// Of the packets this worker needs, those that XOR several points.
    pub fn coded_packets_needed(&self) -> usize {
        self.scheduled.iter().filter(|s| s.parts.len() > 1).count()
    }

    /// Whether packet `seq` is one this worker needs (the others can be dropped unread).
    pub fn needs_packet(&self, seq: u32) -> bool {
        self.entry(seq).is_some_and(|s| !s.done)
    }

    fn entry(&self, seq: u32) -> Option<&Scheduled> {
        let k = *self.by_seq.get(seq as usize)?;
        self.scheduled.get(k as usize)
    }

    /// Takes a packet.
    pub fn receive_packet(&mut self, packet: &Packet) -> Result<(), DecodeError> {
        self.receive(packet.seq, &packet.parts, &packet.payload)
    }

    /// Takes the payload of transmission `seq` whose header names `parts` (checked against the
    /// plan's). Packets this worker does not need, and repeats, are ignored; the rest are
    /// decoded now or buffered until the points they need arrive.
    pub fn receive(&mut self, seq: u32, parts: &[Part], payload: &[u8]) -> Result<(), DecodeError> {
        if self.entry(seq).is_some_and(|entry| entry.parts != parts) {
            return Err(DecodeError::HeaderMismatch { seq });
        }
        self.receive_indexed(seq, payload)
    }

    /// Takes every packet of a [`PacketBatch`](crate::PacketBatch) (plan indices and payloads,
    /// the wire form), as [`Decoder::receive_indexed`] does.
    pub fn receive_batch(&mut self, batch: &crate::PacketBatch<'_>) -> Result<(), DecodeError> {
        batch.packets().try_for_each(|(seq, payload)| self.receive_indexed(seq, payload))
    }

    /// Takes the payload of transmission `seq`, its parts taken from the plan (the wire form
    /// carries none). Packets this worker does not need, and repeats, are ignored.
    pub fn receive_indexed(&mut self, seq: u32, payload: &[u8]) -> Result<(), DecodeError> {
        let width = self.store.width();
        if payload.len() != width {
            return Err(DecodeError::WrongWidth { seq, len: payload.len(), width });
        }
        let Some(entry) = self.entry(seq) else { return Ok(()) };
        if entry.done || self.buffered.contains_key(&seq) {
            return Ok(());
        }
        let missing: Vec<u32> = entry
            .parts
            .iter()
            .map(|p| p.point)
            .filter(|&p| p != entry.learns && !self.store.contains(p))
            .collect();
        if missing.is_empty() {
            self.scratch.copy_from_slice(payload);
            return self.decode_scratch(seq);
        }
        for &p in &missing {
            self.waiting_on.entry(p).or_default().push(seq);
        }
        self.buffered.insert(seq, Buffered { payload: payload.to_vec(), missing: missing.len() });
        Ok(())
    }

    /// Decodes the payload in `scratch` as transmission `seq`, then every buffered packet
    /// that this unblocks.
    fn decode_scratch(&mut self, seq: u32) -> Result<(), DecodeError> {
        let mut unblocked = Vec::new();
        self.decode_one(seq, &mut unblocked)?;
        while let Some(next) = unblocked.pop() {
            if let Some(buffered) = self.buffered.remove(&next) {
                self.scratch.copy_from_slice(&buffered.payload);
                self.decode_one(next, &mut unblocked)?;
            }
        }
        Ok(())
    }

    /// XORs the known parts of `seq` out of `scratch`, stores the point it yields, and lists
    /// the buffered packets that were waiting only for that point.
    fn decode_one(&mut self, seq: u32, unblocked: &mut Vec<u32>) -> Result<(), DecodeError> {
        let Some(entry) = self.by_seq.get(seq as usize).and_then(|&k| self.scheduled.get_mut(k as usize))
        else {
            return Ok(());
        };
        entry.done = true;
        let learns = entry.learns;
        for part in entry.parts.iter().filter(|p| p.point != learns) {
            self.store.xor_known_into(part.point, &mut self.scratch)?;
        }
        self.store.insert(learns, &self.scratch)?;
        for waiting in self.waiting_on.remove(&learns).unwrap_or_default() {
            if let Some(b) = self.buffered.get_mut(&waiting) {
                b.missing -= 1;
                if b.missing == 0 {
                    unblocked.push(waiting);
                }
            }
        }
        Ok(())
    }

    /// The store as it stands (the cache plus what was decoded so far).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Ends decoding: the new records, or the points still missing.
    pub fn finish(self) -> Result<Decoded<S>, DecodeError> {
        let missing: Vec<u32> = self.wanted.iter().copied().filter(|&p| !self.store.contains(p)).collect();
        if !missing.is_empty() {
            return Err(DecodeError::Missing { worker: self.worker, points: missing });
        }
        Ok(Decoded { worker: self.worker, store: self.store, wanted: self.wanted })
    }
}

/// A worker's records after decoding: its cache, the intermediate points it learned, and the
/// new points it wanted.
#[derive(Debug)]
pub struct Decoded<S = RecordStore> {
    worker: usize,
    store: S,
    wanted: Vec<u32>,
}

impl Decoded<RecordStore> {
    /// The points it wanted, sorted, each with its bytes.
    pub fn new_records(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.wanted.iter().filter_map(|&p| self.store.get(p).map(|b| (p, b)))
    }
}

impl<S: DecodeStore> Decoded<S> {
    /// The worker.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The points it wanted, sorted.
    pub fn wanted(&self) -> &[u32] {
        &self.wanted
    }

    /// Everything the worker holds now (cache, intermediate and new points).
    pub fn into_store(self) -> S {
        self.store
    }
}
