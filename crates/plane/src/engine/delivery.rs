//! [`Delivery`]: one epoch's records moving to the ranks that need them (peer mode): a step
//! from the epoch before (every rank's holdings are the chain's targets) or a catch-up (every
//! rank says what it holds). Both end in the same [`Moves`] at every rank, carried as one byte
//! stream per pair of ranks under the receiver's credit, written straight into the record
//! store as the bytes land.

use ubershuffle_codes::RecordIndex;

use crate::error::PlaneError;
use crate::moves::{Holding, Moves};
use crate::schedule::Schedule;
use crate::store::{SharedStore, locked};
use crate::wire::Message;

use super::gate::Gate;
pub(super) use super::streams::Fault;
use super::streams::{RecordStream, check_credit, check_data};
use super::{EngineConfig, Figure, Figures, YIELD_CHUNK_BYTES, YIELD_CHUNKS_AHEAD};

/// What a delivery asks the engine to do besides sending control messages.
pub(super) enum Out {
    /// A control message for a peer.
    Send(usize, Vec<u8>),
    /// Records to read from the source.
    ReadSource(u64, Vec<u32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Step,
    CatchUp,
}

#[derive(Debug)]
enum Source {
    None,
    Due(Vec<u32>),
    Reading,
    Done(u64, u64),
}

/// One epoch's delivery at one rank (see the module's docs).
pub(super) struct Delivery {
    epoch: u64,
    kind: Kind,
    me: usize,
    /// The schedule delivered to.
    target: Box<dyn Schedule>,
    /// The chain digest every peer's credit and holdings must carry: for a step, where it
    /// starts; for a catch-up, the epoch caught up to.
    base: u64,
    /// A catch-up's holdings, as they arrive.
    holdings: Vec<Option<Vec<u32>>>,
    moves: Option<Moves>,
    out: Vec<RecordStream>,
    inc: Vec<RecordStream>,
    source: Source,
    opening: Vec<(usize, Vec<u8>)>,
    started: f64,
    finished: Option<f64>,
    records_received: u64,
    chunk: u64,
    /// Credit that came before the streams were known (a catch-up's faster peers).
    early_credit: Vec<u64>,
}

impl Delivery {
    /// A catch-up to `target` from what this rank holds (`held`): it tells every peer first.
    pub(super) fn catch_up(
        cfg: &EngineConfig,
        target: &dyn Schedule,
        held: Vec<u32>,
        now: f64,
    ) -> Result<Delivery, PlaneError> {
        let base = target.digest();
        let message = Message::Holdings { epoch: target.epoch(), digest: base, ids: held.clone() }.encode();
        let opening = (0..cfg.world).filter(|&p| p != cfg.rank).map(|p| (p, message.clone())).collect();
        let mut holdings = vec![None; cfg.world];
        holdings[cfg.rank] = Some(held);
        Ok(Delivery::new(cfg, target.boxed_copy(), Kind::CatchUp, base, holdings, opening, now))
    }

    /// The step from `now` (whose records every rank holds) to `next`.
    pub(super) fn step(
        cfg: &EngineConfig,
        index: &RecordIndex,
        now: &dyn Schedule,
        next: Box<dyn Schedule>,
        at: f64,
    ) -> Result<Delivery, PlaneError> {
        let holdings = now.targets().into_iter().map(Some).collect();
        let mut d = Delivery::new(cfg, next, Kind::Step, now.digest(), holdings, Vec::new(), at);
        d.plan(index)?;
        Ok(d)
    }

    fn new(
        cfg: &EngineConfig,
        target: Box<dyn Schedule>,
        kind: Kind,
        base: u64,
        holdings: Vec<Option<Vec<u32>>>,
        opening: Vec<(usize, Vec<u8>)>,
        now: f64,
    ) -> Delivery {
        let chunk =
            if cfg.yield_to_gradients { cfg.chunk_bytes.min(YIELD_CHUNK_BYTES) } else { cfg.chunk_bytes };
        Delivery {
            epoch: target.epoch(),
            kind,
            me: cfg.rank,
            target,
            base,
            holdings,
            moves: None,
            out: Vec::new(),
            inc: Vec::new(),
            source: Source::None,
            opening,
            started: now,
            finished: None,
            records_received: 0,
            chunk: chunk.max(1),
            early_credit: vec![0; cfg.world],
        }
    }

    /// The epoch delivered.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The digest of the schedule delivered to.
    pub(super) fn target_digest(&self) -> u64 {
        self.target.digest()
    }

    /// The messages to send as it starts (a catch-up's holdings).
    pub(super) fn opening_messages(&self) -> Vec<(usize, Vec<u8>)> {
        self.opening.clone()
    }

    /// Whether every record arrived, every stream went out and the source was read.
    pub(super) fn is_done(&self) -> bool {
        self.finished.is_some()
    }

    /// What it is doing, in words.
    pub(super) fn doing(&self) -> String {
        match self.kind {
            Kind::Step => format!("delivering epoch {}", self.epoch),
            Kind::CatchUp => format!("catching up to epoch {}", self.epoch),
        }
    }

    /// Whether it still waits on `peer`.
    pub(super) fn needs(&self, peer: usize) -> bool {
        if self.is_done() {
            return false;
        }
        if self.moves.is_none() {
            return self.holdings.get(peer).is_some_and(Option::is_none);
        }
        self.out.get(peer).is_some_and(|s| !s.is_done()) || self.inc.get(peer).is_some_and(|s| !s.is_done())
    }

    /// Whether this delivery takes a message of this kind.
    pub(super) fn takes(&self, bytes: &[u8]) -> bool {
        match Message::decode(bytes) {
            Ok(Message::Holdings { .. }) => self.kind == Kind::CatchUp,
            Ok(Message::Credit { .. } | Message::Data { .. }) => true,
            _ => false,
        }
    }

    /// Once every holding is known: the moves, the streams, the source's records.
    fn plan(&mut self, index: &RecordIndex) -> Result<(), PlaneError> {
        let holdings: Vec<Holding> =
            self.holdings.iter().map(|h| Holding::Some(h.clone().unwrap_or_default())).collect();
        let targets: Vec<Holding> = self.target.targets().into_iter().map(Holding::Some).collect();
        let moves = Moves::plan(index, &holdings, &targets, self.me)
            .map_err(|e| PlaneError::Internal(e.to_string()))?;
        let world = holdings.len();
        self.out = (0..world)
            .map(|p| RecordStream::new(moves.sends_to(p), index.bytes_of(moves.sends_to(p))))
            .collect();
        for (peer, (s, &early)) in self.out.iter_mut().zip(&self.early_credit).enumerate() {
            if early > s.total {
                let (me, doing) = (self.me, format!("catching up to epoch {}", self.epoch));
                let what = format!("credit up to byte {early} of a stream of {} bytes", s.total);
                return Err(PlaneError::Protocol { rank: peer, what, me, doing });
            }
            s.granted = early;
        }
        self.inc = (0..world)
            .map(|p| RecordStream::new(moves.recvs_from(p), index.bytes_of(moves.recvs_from(p))))
            .collect();
        self.source = match moves.source() {
            [] => Source::Done(0, 0),
            ids => Source::Due(ids.to_vec()),
        };
        self.moves = Some(moves);
        Ok(())
    }

    /// A message of this delivery from `from`.
    pub(super) fn on_message(
        &mut self,
        from: usize,
        bytes: &[u8],
        store: &SharedStore,
        now: f64,
    ) -> Result<(), Fault> {
        match Message::decode(bytes).map_err(|e| Fault::Peer(e.to_string()))? {
            Message::Holdings { epoch, digest, ids } => {
                if digest != self.base {
                    return Err(PlaneError::Mismatch(format!(
                        "rank {from}'s epoch chain differs from rank {}'s at epoch {epoch} (the same seed, policy, \
                         fraction, extra_cache or alpha and scheme on every rank, and the same state loaded?)",
                        self.me
                    ))
                    .into());
                }
                let slot =
                    self.holdings.get_mut(from).ok_or_else(|| Fault::Peer("holdings from no rank".into()))?;
                if slot.is_some() {
                    return Err(Fault::Peer(format!("its holdings for epoch {epoch} twice")));
                }
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Fault::Peer("holdings out of order".into()));
                }
                *slot = Some(ids);
                Ok(())
            }
            Message::Credit { epoch, digest, upto } => {
                if digest != self.base {
                    return Err(PlaneError::Mismatch(format!(
                        "rank {from}'s epoch chain differs from rank {}'s at the start of epoch {epoch}'s delivery \
                         (the same seed, policy, fraction, extra_cache or alpha and scheme on every rank?)",
                        self.me
                    ))
                    .into());
                }
                if self.moves.is_none() {
                    // A peer that heard every holding first: its credit waits for the streams.
                    let slot = self
                        .early_credit
                        .get_mut(from)
                        .ok_or_else(|| Fault::Peer("credit from no rank".into()))?;
                    if upto < *slot {
                        return Err(Fault::Peer(format!("credit up to byte {upto}, {slot} granted before")));
                    }
                    *slot = upto;
                    return Ok(());
                }
                let s = self.out.get_mut(from).ok_or_else(|| Fault::Peer("credit from no rank".into()))?;
                check_credit(upto, s.total, s.granted)?;
                s.granted = upto;
                Ok(())
            }
            Message::Data { epoch, offset, bytes } => {
                let s = self.inc.get_mut(from).ok_or_else(|| Fault::Peer("records from no rank".into()))?;
                check_data(offset, bytes.len(), s.done, s.granted).map_err(|f| match f {
                    Fault::Peer(w) => Fault::Peer(format!("epoch {epoch}: {w}")),
                    whole => whole,
                })?;
                let landed = s.write(bytes, store)?;
                self.records_received += landed;
                self.check_done(now);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Moves the delivery on: the moves once every holding is known, the credit this rank
    /// grants, the source's records.
    pub(super) fn pump(
        &mut self,
        cfg: &EngineConfig,
        index: &RecordIndex,
        store: &SharedStore,
        now: f64,
        gate: &mut Gate,
        out: &mut Vec<Out>,
    ) -> Result<(), PlaneError> {
        if self.is_done() {
            return Ok(());
        }
        if self.moves.is_none() {
            if self.holdings.iter().any(Option::is_none) {
                return Ok(());
            }
            self.plan(index)?;
        }
        if let Source::Due(ids) = &self.source {
            let ids = ids.clone();
            let mut wanted: Vec<u32> = self.inc.iter().flat_map(|s| s.ids.iter().copied()).collect();
            wanted.extend_from_slice(&ids);
            // Their pages first: a full file system is an error here, not SIGBUS mid-stream.
            locked(store).reserve_all(&wanted)?;
            out.push(Out::ReadSource(self.epoch, ids));
            self.source = Source::Reading;
        }
        if matches!(self.source, Source::None) {
            self.source = Source::Done(0, 0);
        }
        // Streams of empty records only are done at once.
        for s in &mut self.inc {
            if s.total == 0 && !s.is_done() {
                s.write(&[], store).map_err(|f| f.at(0, cfg.rank, String::new()))?;
            }
        }
        self.grant(cfg, now, gate, out);
        self.check_done(now);
        Ok(())
    }

    /// Grants credit on the streams coming to this rank: whole at once, or while yielding a
    /// few chunks ahead of what landed, when the gate lets it.
    fn grant(&mut self, cfg: &EngineConfig, now: f64, gate: &mut Gate, out: &mut Vec<Out>) {
        let yielding = gate.enabled();
        let mut in_flight: u64 = self.inc.iter().map(|s| s.granted - s.done).sum();
        for (peer, s) in self.inc.iter_mut().enumerate() {
            if s.granted >= s.total {
                continue;
            }
            let want =
                if yielding { (s.done + YIELD_CHUNKS_AHEAD * self.chunk).min(s.total) } else { s.total };
            // While yielding, a grant waits until at most one chunk of it is left in flight.
            if want <= s.granted || (yielding && s.granted - s.done >= self.chunk) {
                continue;
            }
            let more = want - s.granted;
            if !gate.may_post(now, (in_flight + more) as f64) {
                return;
            }
            in_flight += more;
            s.granted = want;
            let _ = cfg;
            let m = Message::Credit { epoch: self.epoch, digest: self.base, upto: want };
            out.push(Out::Send(peer, m.encode()));
        }
    }

    /// The next chunk of the stream to `peer`, if its credit and the gate allow.
    pub(super) fn next_chunk(
        &mut self,
        peer: usize,
        store: &SharedStore,
        now: f64,
        gate: &mut Gate,
    ) -> Result<Option<Vec<u8>>, PlaneError> {
        let (epoch, chunk) = (self.epoch, self.chunk);
        let Some(s) = self.out.get_mut(peer) else { return Ok(None) };
        if s.granted.min(s.total) <= s.done || !gate.may_post(now, 0.0) {
            return Ok(None);
        }
        let bytes = s.next_chunk(epoch, chunk, store)?;
        self.check_done(now);
        Ok(bytes)
    }

    /// The source's records were read (or not).
    pub(super) fn source_read(&mut self, result: Result<(u64, u64), String>) -> Result<(), PlaneError> {
        match result {
            Ok((records, bytes)) => {
                self.source = Source::Done(records, bytes);
                Ok(())
            }
            Err(e) => Err(PlaneError::Source(e)),
        }
    }

    fn check_done(&mut self, now: f64) {
        if self.finished.is_some() || self.moves.is_none() {
            return;
        }
        // Empty streams out: nothing to send but the cursor.
        for s in &mut self.out {
            s.pass_if_empty();
        }
        let streams = self.inc.iter().chain(&self.out).all(RecordStream::is_done);
        if streams && matches!(self.source, Source::Done(..)) {
            self.finished = Some(now);
        }
    }

    /// What it moved and cost.
    pub(super) fn figures(&self, index: &RecordIndex) -> Figures {
        let mut f = Figures::default();
        f.set("kind", Figure::Word(if self.kind == Kind::Step { "step" } else { "catch-up" }));
        let m = self.moves.as_ref().map(|m| m.figures(index)).unwrap_or_default();
        let (source_records, source_bytes) = match self.source {
            Source::Done(r, b) => (r, b),
            _ => (0, 0),
        };
        f.count("bytes_sent", self.out.iter().map(|s| s.done).sum());
        f.count("bytes_received", self.inc.iter().map(|s| s.done).sum());
        f.count("records_received", m.records_received);
        f.count("record_bytes_received", m.bytes_received);
        f.count("records_sent", m.records_sent);
        f.count("source_records", source_records);
        f.count("source_bytes", source_bytes);
        f.count("padding_bytes", 0);
        f.count("packets", m.records_received);
        f.count("coded_packets", 0);
        f.real("transfer_seconds", self.finished.unwrap_or(self.started) - self.started);
        f
    }
}
