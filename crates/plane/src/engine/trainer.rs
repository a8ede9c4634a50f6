//! [`TrainerDelivery`]: a training rank's side of a store-mode delivery. It asks the store for
//! the epoch ([`Message::Want`]: a step from the epoch before, or a catch-up from what it
//! holds), and the store answers with its part ([`Message::Part`]): records sent whole, one
//! stream from the store; or coded packets, in rounds. A coded round comes as the store's
//! message to this rank (every packet it alone decodes, whole, and its piece of every packet
//! several decode) and the other receivers' pieces, relayed: as soon as the store's message of
//! a round is here this rank relays its pieces to the other receivers, and once every piece of
//! the round is here it decodes the round into its record store. Each stream flows under this
//! rank's credit, so it holds at most a window of each.

use std::sync::Arc;

use ubershuffle_codes::{RecordIndex, Segmentation};

use crate::coded::CodedReceive;
use crate::error::PlaneError;
use crate::schedule::Schedule;
use crate::store::{LockedStore, SharedStore};
use crate::wire::Message;

use super::gate::Gate;
use super::streams::{ByteStream, Fault, RecordStream, check_data};
use super::{EngineConfig, Figure, Figures, YIELD_CHUNK_BYTES, YIELD_CHUNKS_AHEAD};

/// Bytes of a buffered stream a receiver grants ahead of what it used, when not yielding.
pub(super) const WINDOW_BYTES: u64 = 4 << 20;

/// How the store sends this epoch.
enum Phase {
    /// Asked, no answer yet.
    Asked,
    /// Records sent whole.
    Whole(RecordStream),
    /// Coded rounds.
    Coded(Box<Coded>),
}

/// A coded delivery's rounds at this rank.
struct Coded {
    receive: CodedReceive,
    /// Per round: bytes of the store's message to this rank, and where it ends in the stream.
    store_end: Vec<u64>,
    /// Per round and training rank (by place): where this round's relay from it ends.
    relay_in_end: Vec<Vec<u64>>,
    /// Per round and place: bytes of this rank's relay to it.
    relay_out: Vec<Vec<u64>>,
    from_store: ByteStream,
    relay_in: Vec<ByteStream>,
    relay_out_streams: Vec<ByteStream>,
    /// Rounds whose relay is made, and rounds decoded.
    relayed: usize,
    decoded: usize,
    part_bytes: u64,
    decode_seconds: f64,
    scratch: Vec<u8>,
}

/// A training rank's delivery of one epoch in store mode (see the module's docs).
pub(super) struct TrainerDelivery {
    epoch: u64,
    catch_up: bool,
    /// This rank's place among the training ranks, and their ranks by place.
    place: usize,
    trainers: Vec<usize>,
    store: usize,
    target: Box<dyn Schedule>,
    /// A step's schedule of the epoch before.
    from: Option<Box<dyn Schedule>>,
    base: u64,
    /// A catch-up's holdings when it asked.
    held: Vec<u32>,
    want: Option<Message<'static>>,
    asked: bool,
    /// Relay credit that came before this rank's part (by place).
    early_credit: Vec<u64>,
    phase: Phase,
    chunk: u64,
    segment_bytes: usize,
    started: f64,
    answered: Option<f64>,
    finished: Option<f64>,
    /// A coded delivery's new records, and its packets, coded packets and padding bytes.
    new_records: Vec<u32>,
    received: (u64, u64, u64),
}

impl TrainerDelivery {
    /// A step from `now` to `next`, or (`from` = `None`) a catch-up to `next` from `held`;
    /// `state` the sampler's state when this rank must send it (the first training rank's
    /// catch-up), which the caller gives before it starts ([`TrainerDelivery::give_state`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        cfg: &EngineConfig,
        store: usize,
        segment_bytes: usize,
        from: Option<Box<dyn Schedule>>,
        next: Box<dyn Schedule>,
        held: Vec<u32>,
        now: f64,
    ) -> TrainerDelivery {
        let trainers: Vec<usize> = (0..cfg.world).filter(|&r| r != store).collect();
        let place = place_of(cfg.rank, store, cfg.world).unwrap_or(0);
        let catch_up = from.is_none();
        let base = from.as_ref().map_or_else(|| next.digest(), |f| f.digest());
        let epoch = next.epoch();
        let chunk =
            if cfg.yield_to_gradients { cfg.chunk_bytes.min(YIELD_CHUNK_BYTES) } else { cfg.chunk_bytes };
        let want = (!(catch_up && place == 0)).then(|| Message::Want {
            epoch,
            digest: base,
            catch_up,
            held: if catch_up { held.clone() } else { Vec::new() },
            state: Vec::new(),
        });
        TrainerDelivery {
            epoch,
            catch_up,
            place,
            trainers,
            store,
            target: next,
            from,
            base,
            held,
            want,
            asked: false,
            early_credit: vec![0; cfg.world],
            phase: Phase::Asked,
            chunk: chunk.max(1),
            segment_bytes,
            started: now,
            answered: None,
            finished: None,
            new_records: Vec::new(),
            received: (0, 0, 0),
        }
    }

    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// `rank`'s place among the training ranks (every rank but the store), if it trains.
    fn place_of(&self, rank: usize) -> Option<usize> {
        place_of(rank, self.store, self.trainers.len() + 1)
    }

    pub(super) fn target_digest(&self) -> u64 {
        self.target.digest()
    }

    /// Whether it waits for the sampler's state before it can ask.
    pub(super) fn needs_state(&self) -> bool {
        self.catch_up && self.want.is_none() && !self.asked
    }

    /// The first training rank's sampler state, for its catch-up's request.
    pub(super) fn give_state(&mut self, state: Vec<u8>) {
        self.want = Some(Message::Want {
            epoch: self.epoch,
            digest: self.base,
            catch_up: true,
            held: self.held.clone(),
            state,
        });
    }

    /// The request to send the store, once.
    pub(super) fn take_want(&mut self) -> Option<(usize, Vec<u8>)> {
        let m = self.want.take()?;
        self.asked = true;
        Some((self.store, m.encode()))
    }

    pub(super) fn is_done(&self) -> bool {
        self.finished.is_some()
    }

    pub(super) fn doing(&self) -> String {
        let what = if self.catch_up { "catching up to" } else { "receiving" };
        match self.phase {
            Phase::Asked => format!("waiting for the store's answer for epoch {}", self.epoch),
            _ => format!("{what} epoch {}'s delivery", self.epoch),
        }
    }

    /// Whether it still waits on `peer`.
    pub(super) fn needs(&self, peer: usize) -> bool {
        if self.is_done() {
            return false;
        }
        if peer == self.store {
            return true;
        }
        match &self.phase {
            Phase::Coded(c) => self
                .place_of(peer)
                .is_some_and(|q| !c.relay_in[q].is_done() || !c.relay_out_streams[q].is_done()),
            _ => false,
        }
    }

    /// A message of this delivery from `from`.
    pub(super) fn on_message(
        &mut self,
        from: usize,
        bytes: &[u8],
        store: &SharedStore,
        index: &RecordIndex,
        now: f64,
    ) -> Result<(), Fault> {
        match Message::decode(bytes).map_err(|e| Fault::Peer(e.to_string()))? {
            Message::Part { coded, bytes: part, .. } => {
                if from != self.store || !matches!(self.phase, Phase::Asked) {
                    return Err(Fault::Peer("a part of a delivery it does not serve".into()));
                }
                self.answered = Some(now);
                self.phase = if coded {
                    let mut c = self.coded(&part, store, index)?;
                    for (s, &early) in c.relay_out_streams.iter_mut().zip(&self.early_credit) {
                        super::streams::check_credit(early, s.total, 0)?;
                        s.granted = early;
                    }
                    Phase::Coded(Box::new(c))
                } else {
                    let ids = self.whole_ids();
                    crate::store::locked(store).reserve_all(&ids).map_err(PlaneError::from)?;
                    Phase::Whole(RecordStream::new(&ids, index.bytes_of(&ids)))
                };
                self.check_done(store, now)?;
                Ok(())
            }
            Message::Data { offset, bytes, .. } => {
                let q = self.place_of(from);
                match &mut self.phase {
                    Phase::Whole(s) if from == self.store => {
                        check_data(offset, bytes.len(), s.done, s.granted)?;
                        s.write(bytes, store)?;
                    }
                    Phase::Coded(c) => {
                        let stream = if from == self.store {
                            &mut c.from_store
                        } else {
                            let q = q.ok_or_else(|| {
                                Fault::Peer("records from a rank outside the plane's training ranks".into())
                            })?;
                            &mut c.relay_in[q]
                        };
                        stream.receive(offset, bytes)?;
                        advance(c, self.place)?;
                    }
                    _ => return Err(Fault::Peer("records before the store's answer".into())),
                }
                self.check_done(store, now)?;
                Ok(())
            }
            Message::Credit { upto, digest, .. } => {
                if digest != self.base {
                    return Err(PlaneError::Mismatch(format!(
                        "rank {from}'s epoch chain differs from rank {}'s at epoch {}'s delivery",
                        self.trainers[self.place], self.epoch
                    ))
                    .into());
                }
                let q = self.place_of(from).ok_or_else(|| Fault::Peer("credit from the store".into()))?;
                let Phase::Coded(c) = &mut self.phase else {
                    // A rank that had its part first: its credit waits for this rank's part.
                    if matches!(self.phase, Phase::Asked) && upto >= self.early_credit[q] {
                        self.early_credit[q] = upto;
                        return Ok(());
                    }
                    return Err(Fault::Peer("credit for a stream this rank does not send".into()));
                };
                let s = &mut c.relay_out_streams[q];
                super::streams::check_credit(upto, s.total, s.granted)?;
                s.granted = upto;
                Ok(())
            }
            _ => Err(Fault::Peer("a message a training rank's delivery does not take".into())),
        }
    }

    /// The records the store sends whole: what this rank's target lacks (of its holdings at a
    /// catch-up, of the epoch before at a step).
    fn whole_ids(&self) -> Vec<u32> {
        let target = &self.target.targets()[self.place];
        let had = match &self.from {
            Some(f) => f.targets()[self.place].clone(),
            None => self.held.clone(),
        };
        target.iter().copied().filter(|id| had.binary_search(id).is_err()).collect()
    }

    fn coded(&self, part: &[u8], store: &SharedStore, index: &RecordIndex) -> Result<Coded, Fault> {
        let from = self.from.as_ref().ok_or_else(|| Fault::Peer("coded packets for a catch-up".into()))?;
        let segmentation = Segmentation::new(index.clone(), self.segment_bytes)
            .map(Arc::new)
            .map_err(|e| PlaneError::Internal(e.to_string()))?;
        let receive = CodedReceive::new(
            from.as_ref(),
            self.target.as_ref(),
            part,
            segmentation,
            LockedStore(Arc::clone(store)),
            self.place,
        )
        .map_err(|e| Fault::Peer(e.to_string()))?;
        let (rounds, places) = (receive.rounds.rounds(), self.trainers.len());
        let mut store_end = Vec::with_capacity(rounds);
        let mut relay_in_end = Vec::with_capacity(rounds);
        let mut relay_out = Vec::with_capacity(rounds);
        let (mut at, mut ins) = (0u64, vec![0u64; places]);
        for k in 0..rounds {
            at += receive.rounds.store_sizes(k).get(self.place).copied().unwrap_or(0);
            store_end.push(at);
            let (sends, recvs) = if receive.rounds.has_relay(k) {
                receive.rounds.relay_sizes(k, self.place)
            } else {
                (vec![0; places], vec![0; places])
            };
            for (q, n) in recvs.iter().enumerate() {
                ins[q] += n;
            }
            relay_in_end.push(ins.clone());
            relay_out.push(sends);
        }
        let outs: Vec<u64> = (0..places).map(|q| relay_out.iter().map(|r| r[q]).sum()).collect();
        Ok(Coded {
            from_store: ByteStream::new(at),
            relay_in: ins.iter().map(|&n| ByteStream::new(n)).collect(),
            relay_out_streams: outs.iter().map(|&n| ByteStream::new(n)).collect(),
            receive,
            store_end,
            relay_in_end,
            relay_out,
            relayed: 0,
            decoded: 0,
            part_bytes: part.len() as u64,
            decode_seconds: 0.0,
            scratch: Vec::new(),
        })
    }

    /// The credit this rank grants: to the store, and to every rank that relays to it. A
    /// stream of records sent whole lands in the record store, so it is granted whole (a few
    /// chunks at a time while yielding); a coded stream is held until its round is decoded,
    /// so it is granted a window ahead of the rounds decoded.
    pub(super) fn grant(&mut self, now: f64, gate: &mut Gate) -> Vec<(usize, Vec<u8>)> {
        let yielding = gate.enabled();
        let (epoch, base, chunk) = (self.epoch, self.base, self.chunk);
        let ahead = YIELD_CHUNKS_AHEAD * chunk;
        // Per stream: its sender, and its granted, done, total and the most it may be granted.
        let mut streams: Vec<(usize, u64, u64, u64, u64)> = Vec::new();
        match &self.phase {
            Phase::Asked => return Vec::new(),
            Phase::Whole(s) => {
                let cap = if yielding { s.done + ahead } else { s.total };
                streams.push((self.store, s.granted, s.done, s.total, cap));
            }
            Phase::Coded(c) => {
                let window = if yielding { ahead } else { WINDOW_BYTES.max(2 * chunk) };
                let last = c.decoded.checked_sub(1);
                let used = last.map_or(0, |k| c.store_end[k]);
                let s = &c.from_store;
                streams.push((self.store, s.granted, s.done, s.total, used + window));
                for (q, s) in c.relay_in.iter().enumerate() {
                    let used = last.map_or(0, |k| c.relay_in_end[k][q]);
                    streams.push((self.trainers[q], s.granted, s.done, s.total, used + window));
                }
            }
        }
        let mut in_flight: u64 = streams.iter().map(|&(_, g, d, _, _)| g - d).sum();
        let mut grants = Vec::new();
        for (i, &(peer, granted, done, total, cap)) in streams.iter().enumerate() {
            let want = cap.min(total);
            if want <= granted || (yielding && granted - done >= chunk) {
                continue;
            }
            let more = want - granted;
            if !gate.may_post(now, (in_flight + more) as f64) {
                break;
            }
            in_flight += more;
            grants.push((i, peer, want));
        }
        let mut out = Vec::new();
        for (i, peer, want) in grants {
            match &mut self.phase {
                Phase::Whole(s) => s.granted = want,
                Phase::Coded(c) if i == 0 => c.from_store.granted = want,
                Phase::Coded(c) => c.relay_in[i - 1].granted = want,
                Phase::Asked => {}
            }
            out.push((peer, Message::Credit { epoch, digest: base, upto: want }.encode()));
        }
        out
    }

    /// The next chunk of this rank's relay to `peer`, if made and within its credit.
    pub(super) fn next_chunk(&mut self, peer: usize, now: f64, gate: &mut Gate) -> Option<Vec<u8>> {
        let q = self.place_of(peer)?;
        let Phase::Coded(c) = &mut self.phase else { return None };
        let s = &mut c.relay_out_streams[q];
        if s.granted.min(s.total) <= s.done || s.held() == 0 || !gate.may_post(now, 0.0) {
            return None;
        }
        s.next_chunk(self.epoch, self.chunk)
    }

    /// After a chunk went or bytes arrived: whether the delivery is done.
    pub(super) fn check_done(&mut self, store: &SharedStore, now: f64) -> Result<(), PlaneError> {
        if self.finished.is_some() {
            return Ok(());
        }
        let done = match &mut self.phase {
            Phase::Asked => false,
            Phase::Whole(s) => {
                if s.total == 0 && !s.is_done() {
                    s.write(&[], store).map_err(|f| f.at(self.store, 0, String::new()))?;
                }
                s.is_done()
            }
            Phase::Coded(c) => {
                c.decoded == c.store_end.len() && c.relay_out_streams.iter().all(ByteStream::is_done)
            }
        };
        if done {
            if let Phase::Coded(c) = &self.phase {
                let got = c.receive.finish()?;
                self.received = (got.packets_needed, got.coded_packets_needed, got.padding_bytes);
                self.new_records = got.new_records;
            }
            self.finished = Some(now);
        }
        Ok(())
    }

    /// What it moved and cost.
    pub(super) fn figures(&self, index: &RecordIndex) -> Figures {
        let mut f = Figures::default();
        f.set("kind", Figure::Word(if self.catch_up { "catch-up" } else { "step" }));
        let (received, sent, part) = match &self.phase {
            Phase::Whole(s) => (s.done, 0, 0),
            Phase::Coded(c) => (
                c.from_store.done + c.relay_in.iter().map(|s| s.done).sum::<u64>(),
                c.relay_out_streams.iter().map(|s| s.done).sum(),
                c.part_bytes,
            ),
            Phase::Asked => (0, 0, 0),
        };
        let new_records: Vec<u32> = match &self.phase {
            Phase::Whole(s) => s.ids.clone(),
            _ => self.new_records.clone(),
        };
        f.count("bytes_received", received);
        f.count("round_bytes_received", received);
        f.count("bytes_sent", sent);
        f.count("part_bytes", part);
        f.count("records_received", new_records.len() as u64);
        f.count("record_bytes_received", index.bytes_of(&new_records));
        f.count("source_records", 0);
        f.count("source_bytes", 0);
        let (packets, coded, padding) = self.received;
        let whole = matches!(self.phase, Phase::Whole(_));
        f.count("packets", if whole { new_records.len() as u64 } else { packets });
        f.count("coded_packets", coded);
        f.count("padding_bytes", padding);
        let answered = self.answered.unwrap_or(self.started);
        f.real("answer_wait_seconds", answered - self.started);
        if let Phase::Coded(c) = &self.phase {
            f.real("decode_seconds", c.decode_seconds);
        }
        f.real("transfer_seconds", self.finished.unwrap_or(self.started) - self.started);
        f
    }
}

/// Moves a coded delivery on: relays every round whose store message is here, decodes every
/// round whose pieces are all here, and drops what no longer serves.
fn advance(c: &mut Coded, place: usize) -> Result<(), Fault> {
    let rounds = c.store_end.len();
    let start_of = |ends: &[u64], k: usize| if k == 0 { 0 } else { ends[k - 1] };
    while c.relayed < rounds && c.from_store.has(c.store_end[c.relayed]) {
        let k = c.relayed;
        let out: u64 = c.relay_out[k].iter().sum();
        if out > 0 {
            let (from, to) = (start_of(&c.store_end, k), c.store_end[k]);
            c.scratch.clear();
            c.scratch.resize(out as usize, 0);
            let message = c.from_store.slice(from, to);
            c.receive.pack_relay(k, message, &mut c.scratch).map_err(Fault::Whole)?;
            let mut at = 0usize;
            for (q, &n) in c.relay_out[k].iter().enumerate() {
                if n > 0 {
                    c.relay_out_streams[q].push(&c.scratch[at..at + n as usize]);
                    at += n as usize;
                }
            }
        }
        c.relayed += 1;
    }
    while c.decoded < c.relayed {
        let k = c.decoded;
        let ready = (0..c.relay_in.len()).all(|q| q == place || c.relay_in[q].has(c.relay_in_end[k][q]));
        if !ready {
            break;
        }
        let started = std::time::Instant::now();
        let (from, to) = (start_of(&c.store_end, k), c.store_end[k]);
        c.scratch.clear();
        for q in 0..c.relay_in.len() {
            let begin = if k == 0 { 0 } else { c.relay_in_end[k - 1][q] };
            let end = c.relay_in_end[k][q];
            if end > begin {
                c.scratch.extend_from_slice(c.relay_in[q].slice(begin, end));
            }
        }
        let message = c.from_store.slice(from, to);
        c.receive.decode(k, message, &c.scratch).map_err(Fault::Whole)?;
        c.decode_seconds += started.elapsed().as_secs_f64();
        c.from_store.drop_before(to);
        for q in 0..c.relay_in.len() {
            c.relay_in[q].drop_before(c.relay_in_end[k][q]);
        }
        c.decoded += 1;
    }
    Ok(())
}

/// `rank`'s place among the training ranks of a plane of `world` ranks whose store is `store`
/// (every rank but the store, in order), if it trains.
pub(super) fn place_of(rank: usize, store: usize, world: usize) -> Option<usize> {
    match rank {
        r if r >= world || r == store => None,
        r if r > store => Some(r - 1),
        r => Some(r),
    }
}
