//! [`Serving`]: the store's side of store mode. The store answers the training ranks'
//! requests, one epoch at a time, once every training rank has asked for it: a catch-up
//! (a start, a resume, a jump) from what each holds, its records sent whole, the store's chain
//! restored from the first training rank's sampler state; or a step of the chain, its coded
//! delivery planned ahead (while the epoch before travels and the ranks train) over the
//! records' segments and sent in rounds, each training rank its part of the plan and its
//! message of each round, encoded as the links take them. The store reads from the source
//! only the records a delivery sends, when it sends them, and keeps them.

use std::sync::Arc;

use ubershuffle_codes::{RecordIndex, Segmentation};

use crate::coded::CodedSend;
use crate::error::PlaneError;
use crate::schedule::Schedule;
use crate::store::{LockedStore, SharedStore, locked};
use crate::wire::Message;

use super::gate::Gate;
use super::streams::{ByteStream, Fault, RecordStream, check_credit};
use super::{Figure, Figures};

/// Bytes of encoded rounds the store keeps for one training rank at the most before it waits
/// for that rank's credit (it keeps encoding while the rank that is furthest behind still has
/// less than a round waiting).
const HELD_PER_RANK: u64 = 8 << 20;

/// A plan made: its epoch, the chain digest it starts from, the plan or why not, and the
/// planner's seconds.
type Planned = (u64, u64, Result<Box<CodedSend>, String>, f64);

/// A training rank's request.
#[derive(Debug)]
struct Want {
    epoch: u64,
    digest: u64,
    catch_up: bool,
    held: Vec<u32>,
    state: Vec<u8>,
}

/// What the store asks its caller to do for it.
pub(super) enum Ask {
    /// Plan the coded delivery of the epoch after `schedule`'s.
    Plan(Box<dyn Schedule>),
    /// Restore the chain from a training rank's sampler state at `epoch`.
    Restore(Vec<u8>, u64),
    /// Read these records from the source.
    Read(u64, Vec<u32>),
    /// A control message for a rank.
    Send(usize, Vec<u8>),
}

/// How the current epoch goes out.
enum Sending {
    /// Records whole, a stream per training rank.
    Whole(Vec<RecordStream>),
    /// Coded rounds, a stream per training rank.
    Coded { send: Box<CodedSend>, streams: Vec<ByteStream>, encoded: usize, encode_seconds: f64 },
}

/// The epoch being served.
struct Serve {
    epoch: u64,
    catch_up: bool,
    base: u64,
    /// The schedule served (the store stands there once it is sent).
    target: Box<dyn Schedule>,
    /// Records the source must give first (`None` once read).
    reading: Option<Vec<u32>>,
    source: (u64, u64),
    sending: Sending,
    part_bytes: u64,
    plan_wait: f64,
    plan_seconds: f64,
    started: f64,
    /// When every training rank had asked.
    all_in: f64,
}

/// The store's side (see the module's docs).
pub(super) struct Serving {
    /// The training ranks, by place.
    trainers: Vec<usize>,
    /// The store's own rank.
    me: usize,
    round_bytes: u64,
    chunk: u64,
    /// The chain where the store stands (the last epoch sent), once known.
    schedule: Option<Box<dyn Schedule>>,
    wants: Vec<Option<Want>>,
    /// When every training rank had asked for the epoch to serve.
    all_in: Option<f64>,
    current: Option<Serve>,
    /// A restore asked for, and its answer.
    restoring: Option<u64>,
    restored: Option<Result<Box<dyn Schedule>, String>>,
    /// The plan asked for (its epoch and the chain digest it starts from), and the plans made.
    planning: Option<(u64, u64)>,
    planned: Option<Planned>,
    /// Training ranks that closed.
    closed: Vec<bool>,
    /// Figures of the epochs served.
    served: Vec<Figures>,
    /// Whether serving ended.
    over: bool,
    last_end: f64,
}

impl Serving {
    /// The store `me` of `world` ranks, coding in rounds of at most `round_bytes`, data
    /// messages of `chunk` bytes.
    pub(super) fn new(me: usize, world: usize, round_bytes: u64, chunk: u64) -> Serving {
        let trainers: Vec<usize> = (0..world).filter(|&r| r != me).collect();
        let n = trainers.len();
        Serving {
            trainers,
            me,
            round_bytes,
            chunk: chunk.max(1),
            schedule: None,
            wants: (0..n).map(|_| None).collect(),
            all_in: None,
            current: None,
            restoring: None,
            restored: None,
            planning: None,
            planned: None,
            closed: vec![false; n],
            served: Vec::new(),
            over: false,
            last_end: 0.0,
        }
    }

    fn place(&self, rank: usize) -> Result<usize, Fault> {
        super::trainer::place_of(rank, self.me, self.trainers.len() + 1)
            .ok_or_else(|| Fault::Peer("a message from no training rank".into()))
    }

    /// What the store is doing, in words.
    pub(super) fn doing(&self) -> String {
        match &self.current {
            Some(s) => format!("serving epoch {}", s.epoch),
            None => "waiting for the training ranks' requests".into(),
        }
    }

    /// Whether it waits on `rank` now.
    pub(super) fn needs(&self, rank: usize) -> bool {
        let Ok(q) = self.place(rank) else { return false };
        match &self.current {
            Some(s) => match &s.sending {
                Sending::Whole(streams) => !streams[q].is_sent(),
                Sending::Coded { streams, .. } => !streams[q].is_done(),
            },
            None => false,
        }
    }

    /// Whether a training rank closed.
    pub(super) fn any_closed(&self) -> bool {
        self.closed.iter().any(|&c| c)
    }

    /// Whether serving just ended (said once): a training rank closed, no epoch is being
    /// sent, and every other training rank closed too or asks for an epoch that will not come.
    /// A rank still taking the last epoch in (the bytes in flight, its relayed pieces) is
    /// waited for: closing now would cut its delivery.
    pub(super) fn is_over(&mut self) -> bool {
        if self.over || !self.any_closed() || self.current.is_some() {
            return false;
        }
        if !self.closed.iter().zip(&self.wants).all(|(&closed, want)| closed || want.is_some()) {
            return false;
        }
        self.over = true;
        true
    }

    /// A training rank closed: what the epoch being sent still had for it is dropped.
    pub(super) fn closed(&mut self, rank: usize) {
        let Ok(q) = self.place(rank) else { return };
        self.closed[q] = true;
        if let Some(s) = self.current.as_mut() {
            match &mut s.sending {
                Sending::Whole(streams) => streams[q].abandon(),
                Sending::Coded { streams, .. } => streams[q].abandon(),
            }
        }
    }

    /// Whether nothing is being served.
    pub(super) fn is_idle(&self) -> bool {
        self.current.is_none()
    }

    /// The figures of the epochs served so far.
    pub(super) fn take_served(&mut self) -> Vec<Figures> {
        std::mem::take(&mut self.served)
    }

    /// The answer to a restore.
    pub(super) fn restored(&mut self, result: Result<Box<dyn Schedule>, String>) {
        self.restored = Some(result);
    }

    /// A plan made (by the caller, off the engine's thread).
    pub(super) fn planned(
        &mut self,
        epoch: u64,
        digest: u64,
        result: Result<Box<CodedSend>, String>,
        seconds: f64,
    ) {
        if self.planning == Some((epoch, digest)) {
            self.planning = None;
        }
        self.planned = Some((epoch, digest, result, seconds));
    }

    /// The records read from the source.
    pub(super) fn source_read(
        &mut self,
        epoch: u64,
        result: Result<(u64, u64), String>,
    ) -> Result<(), PlaneError> {
        let Some(s) = self.current.as_mut().filter(|s| s.epoch == epoch) else { return Ok(()) };
        let (records, bytes) = result.map_err(PlaneError::Source)?;
        s.source = (records, bytes);
        s.reading = None;
        Ok(())
    }

    /// A message from training rank `from`.
    pub(super) fn on_message(&mut self, from: usize, bytes: &[u8]) -> Result<(), Fault> {
        let q = self.place(from)?;
        match Message::decode(bytes).map_err(|e| Fault::Peer(e.to_string()))? {
            Message::Want { epoch, digest, catch_up, held, state } => {
                if self.wants[q].is_some() {
                    return Err(Fault::Peer(format!(
                        "a second request (for epoch {epoch}) before the first was served"
                    )));
                }
                if held.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Fault::Peer("holdings out of order".into()));
                }
                self.wants[q] = Some(Want { epoch, digest, catch_up, held, state });
                Ok(())
            }
            Message::Credit { epoch, digest, upto } => {
                let Some(s) = self.current.as_mut().filter(|s| s.epoch == epoch) else {
                    return Err(Fault::Peer(format!(
                        "credit for epoch {epoch}, which the store is not serving"
                    )));
                };
                if digest != s.base {
                    return Err(PlaneError::Mismatch(format!(
                        "rank {from}'s epoch chain differs from the store's at epoch {epoch}'s delivery"
                    ))
                    .into());
                }
                match &mut s.sending {
                    Sending::Whole(streams) => {
                        let x = &mut streams[q];
                        check_credit(upto, x.total, x.granted)?;
                        x.granted = upto;
                    }
                    Sending::Coded { streams, .. } => {
                        let x = &mut streams[q];
                        check_credit(upto, x.total, x.granted)?;
                        x.granted = upto;
                    }
                }
                Ok(())
            }
            _ => Err(Fault::Peer("a message the store does not take".into())),
        }
    }

    /// Moves serving on: starts the epoch every training rank asked for, once its plan or
    /// restore is there; ends the epoch sent.
    pub(super) fn pump(
        &mut self,
        store: &SharedStore,
        index: &RecordIndex,
        now: f64,
        asks: &mut Vec<Ask>,
    ) -> Result<(), PlaneError> {
        if self.current.is_none() {
            self.start(store, index, now, asks)?;
        }
        if let Some(s) = &self.current
            && s.reading.is_none()
            && s.done()
        {
            let s = self.current.take().ok_or_else(|| PlaneError::Internal("no epoch served".into()))?;
            self.finish(s, now);
        }
        Ok(())
    }

    /// Starts the epoch asked for, if every training rank that has not closed asked.
    fn start(
        &mut self,
        store: &SharedStore,
        index: &RecordIndex,
        now: f64,
        asks: &mut Vec<Ask>,
    ) -> Result<(), PlaneError> {
        if self.any_closed() {
            return Ok(());
        }
        let open: Vec<usize> = (0..self.trainers.len()).collect();
        if open.iter().any(|&q| self.wants[q].is_none()) {
            return Ok(());
        }
        let all_in = *self.all_in.get_or_insert(now);
        let wants: Vec<&Want> = open.iter().filter_map(|&q| self.wants[q].as_ref()).collect();
        let (epoch, catch_up) = (wants[0].epoch, wants[0].catch_up);
        if wants.iter().any(|w| w.epoch != epoch || w.catch_up != catch_up) {
            let asked: Vec<(u64, bool)> = wants.iter().map(|w| (w.epoch, w.catch_up)).collect();
            return Err(PlaneError::Mismatch(format!(
                "the training ranks disagree: they ask for (epoch, catch-up) {asked:?}"
            )));
        }
        let (target, base, from) = if catch_up {
            // The chain restored from the first training rank's state.
            match self.restored.take() {
                None => {
                    if self.restoring != Some(epoch) {
                        let state = self.wants[0].as_ref().map(|w| w.state.clone()).unwrap_or_default();
                        self.restoring = Some(epoch);
                        asks.push(Ask::Restore(state, epoch));
                    }
                    return Ok(());
                }
                Some(result) => {
                    self.restoring = None;
                    let restored = result.map_err(PlaneError::Mismatch)?;
                    let digest = restored.digest();
                    (restored, digest, None)
                }
            }
        } else {
            let Some(now_sched) = self.schedule.as_ref() else {
                return Err(PlaneError::Mismatch(format!(
                    "the training ranks ask for epoch {epoch} before catching up to an epoch"
                )));
            };
            if now_sched.epoch() + 1 != epoch {
                return Err(PlaneError::Mismatch(format!(
                    "the training ranks ask for epoch {epoch}, the store stands at epoch {}",
                    now_sched.epoch()
                )));
            }
            let next = now_sched.stepped().map_err(PlaneError::Internal)?;
            (next, now_sched.digest(), Some(now_sched.boxed_copy()))
        };
        for (&q, w) in open.iter().zip(&wants) {
            if w.digest != base {
                return Err(PlaneError::Mismatch(format!(
                    "rank {}'s epoch chain differs from the store's at epoch {epoch} (the same seed, policy, \
                     fraction, extra_cache or alpha and scheme on every rank?)",
                    self.trainers[q]
                )));
            }
        }
        let coded = !catch_up && from.as_ref().is_some_and(|f| !f.next_starts_a_chain());
        let mut plan = None;
        let mut plan_seconds = 0.0;
        if coded {
            let from = from
                .as_ref()
                .ok_or_else(|| PlaneError::Internal("a step without its epoch before".into()))?;
            match self.planned.take() {
                Some((e, d, result, seconds)) if e == epoch && d == base => {
                    plan = Some(result.map_err(PlaneError::Internal)?);
                    plan_seconds = seconds;
                }
                other => {
                    // Not planned ahead (or for another chain): plan now.
                    drop(other);
                    if self.planning != Some((epoch, base)) {
                        self.planning = Some((epoch, base));
                        asks.push(Ask::Plan(from.boxed_copy()));
                    }
                    return Ok(());
                }
            }
        }
        let targets = target.targets();
        // An uncoded plan's packets are the records the ranks lack, cut in segments: they go
        // whole, as a catch-up's do, at one copy into each rank's store and no encoding.
        let plan = plan.filter(|send| !send.is_unicasts());
        let sending = match plan {
            Some(send) => {
                let streams = (0..self.trainers.len())
                    .map(|q| {
                        ByteStream::new(
                            (0..send.rounds.rounds()).map(|k| send.rounds.store_sizes(k)[q]).sum(),
                        )
                    })
                    .collect();
                Sending::Coded { send, streams, encoded: 0, encode_seconds: 0.0 }
            }
            None => {
                let had: Vec<Vec<u32>> = match &from {
                    Some(f) => f.targets(),
                    None => wants.iter().map(|w| w.held.clone()).collect(),
                };
                let streams = (0..self.trainers.len())
                    .map(|q| {
                        let ids: Vec<u32> = targets[q]
                            .iter()
                            .copied()
                            .filter(|id| had[q].binary_search(id).is_err())
                            .collect();
                        let total = index.bytes_of(&ids);
                        RecordStream::new(&ids, total)
                    })
                    .collect();
                Sending::Whole(streams)
            }
        };
        // What the sent records need from the source, read before the first byte goes.
        let needed: Vec<u32> = match &sending {
            Sending::Whole(streams) => {
                let mut ids: Vec<u32> = streams.iter().flat_map(|s| s.ids.iter().copied()).collect();
                ids.sort_unstable();
                ids.dedup();
                ids
            }
            Sending::Coded { send, .. } => send.records(),
        };
        let missing: Vec<u32> = {
            let s = locked(store);
            needed.into_iter().filter(|&id| !s.is_held(id)).collect()
        };
        let mut part_bytes = 0;
        for (q, &rank) in self.trainers.iter().enumerate() {
            let (coded, bytes) = match &sending {
                Sending::Coded { send, .. } => (true, send.rounds.part_for(q, &send.epoch.plan)),
                Sending::Whole(_) => (false, Vec::new()),
            };
            part_bytes += bytes.len() as u64;
            asks.push(Ask::Send(rank, Message::Part { epoch, coded, bytes }.encode()));
        }
        let reading = if missing.is_empty() {
            None
        } else {
            asks.push(Ask::Read(epoch, missing.clone()));
            Some(missing)
        };
        self.all_in = None;
        for w in &mut self.wants {
            *w = None;
        }
        // The next step is planned while this one travels (its plan is ready when the ranks
        // ask, not planned then: with no training between epochs, that wait was a quarter of
        // a coded delivery on loopback).
        if !target.next_starts_a_chain() {
            self.plan_after(&*target, asks);
        }
        self.current = Some(Serve {
            epoch,
            catch_up,
            base,
            target,
            reading,
            source: (0, 0),
            sending,
            part_bytes,
            plan_wait: now - all_in,
            plan_seconds,
            started: now,
            all_in,
        });
        Ok(())
    }

    /// The epoch sent: figures, and the chain moved on.
    fn finish(&mut self, s: Serve, now: f64) {
        let mut f = Figures::default();
        f.count("epoch", s.epoch);
        f.set("kind", Figure::Word(if s.catch_up { "catch-up" } else { "step" }));
        f.count("source_records", s.source.0);
        f.count("source_bytes", s.source.1);
        f.count("part_bytes", s.part_bytes);
        f.real("transfer_seconds", now - s.started);
        f.real("request_wait_seconds", s.all_in - self.last_end.min(s.all_in));
        f.real("plan_seconds", s.plan_wait);
        f.real("plan_ahead_seconds", s.plan_seconds);
        match &s.sending {
            Sending::Whole(streams) => {
                f.set("sent", Figure::Word("whole"));
                f.count("bytes_sent", streams.iter().map(|x| x.done).sum());
                f.count("records_sent", streams.iter().map(|x| x.ids.len() as u64).sum());
                // One round of unicasts: each training rank's bytes, nothing relayed.
                f.set("round_store_bytes", Figure::Table(vec![streams.iter().map(|x| x.done).collect()]));
                f.set("round_relay_bytes", Figure::Tables(Vec::new()));
            }
            Sending::Coded { send, streams, encode_seconds, .. } => {
                f.set("sent", Figure::Word("coded"));
                f.count("bytes_sent", streams.iter().map(|x| x.done).sum());
                coded_figures(&mut f, send);
                f.real("encode_seconds", *encode_seconds);
            }
        }
        self.served.push(f);
        self.last_end = now;
        // The store stands at the epoch sent; the next step's plan was asked for when this
        // one started.
        self.schedule = Some(s.target);
    }

    /// Asks for the plan of the step after `target`'s epoch, unless it is being made or made.
    fn plan_after(&mut self, target: &dyn Schedule, asks: &mut Vec<Ask>) {
        let next = (target.epoch() + 1, target.digest());
        let made = self.planned.as_ref().is_some_and(|(e, d, ..)| (*e, *d) == next);
        if self.planning != Some(next) && !made {
            self.planning = Some(next);
            asks.push(Ask::Plan(target.boxed_copy()));
        }
    }

    /// The next chunk for training rank `rank`, encoding rounds as the links take them.
    pub(super) fn next_chunk(
        &mut self,
        rank: usize,
        store: &SharedStore,
        now: f64,
        gate: &mut Gate,
    ) -> Result<Option<Vec<u8>>, PlaneError> {
        let Ok(q) = self.place(rank) else { return Ok(None) };
        let chunk = self.chunk;
        let Some(s) = self.current.as_mut() else { return Ok(None) };
        if s.reading.is_some() {
            return Ok(None);
        }
        let _ = gate;
        let epoch = s.epoch;
        let out = match &mut s.sending {
            Sending::Whole(streams) => streams[q].next_chunk(epoch, chunk, store)?,
            Sending::Coded { send, streams, encoded, encode_seconds } => {
                let rounds = send.rounds.rounds();
                if *encoded == 0 && streams.iter().all(|x| x.done == 0 && x.held() == 0) {
                    // Every record the plan names is here (read before the first round).
                    send.check(&LockedStore(Arc::clone(store)))?;
                }
                // Encode the next round while the rank furthest along has little left and no
                // rank holds too much.
                while *encoded < rounds
                    && streams[q].held() < chunk.max(1)
                    && streams.iter().all(|x| x.held() < HELD_PER_RANK)
                {
                    let started = std::time::Instant::now();
                    let sizes = send.rounds.store_sizes(*encoded);
                    let mut out = vec![0u8; sizes.iter().sum::<u64>() as usize];
                    send.encode_into(&LockedStore(Arc::clone(store)), *encoded, &mut out)?;
                    let mut at = 0usize;
                    for (x, &n) in streams.iter_mut().zip(&sizes) {
                        x.push(&out[at..at + n as usize]);
                        at += n as usize;
                    }
                    *encoded += 1;
                    *encode_seconds += started.elapsed().as_secs_f64();
                }
                streams[q].next_chunk(epoch, chunk)
            }
        };
        let _ = now;
        Ok(out)
    }

    /// Segments of `segment_bytes` of the data set, for coded deliveries.
    pub(super) fn segmentation(
        &self,
        index: &RecordIndex,
        segment_bytes: usize,
    ) -> Result<Arc<Segmentation>, PlaneError> {
        Segmentation::new(index.clone(), segment_bytes)
            .map(Arc::new)
            .map_err(|e| PlaneError::Internal(e.to_string()))
    }

    /// Rounds' memory bound, for planning.
    pub(super) fn round_bytes(&self) -> u64 {
        self.round_bytes
    }
}

impl Serve {
    fn done(&self) -> bool {
        match &self.sending {
            Sending::Whole(streams) => streams.iter().all(RecordStream::is_sent),
            Sending::Coded { send, streams, encoded, .. } => {
                // Every receiver closed, or every round made and sent.
                streams.iter().all(|x| x.abandoned)
                    || (*encoded == send.rounds.rounds() && streams.iter().all(ByteStream::is_done))
            }
        }
    }
}

/// A coded epoch's figures: the plan's, and how its packets travelled.
fn coded_figures(f: &mut Figures, send: &CodedSend) {
    let e = &send.epoch;
    let width = send.segmentation.segment_bytes() as u64;
    let routes = send.rounds.figures();
    f.count("packets", e.plan.len() as u64);
    f.count("coded_packets", e.plan.iter().filter(|t| t.len() > 1).count() as u64);
    f.count("uncoded_packets", e.segments.uncoded_transmissions() as u64);
    f.count("record_uncoded_transmissions", e.records.uncoded_transmissions() as u64);
    f.count("padding_bytes", e.padding_bytes);
    f.count("data_bytes", e.plan.len() as u64 * width - e.padding_bytes);
    f.count("segment_bytes", width);
    f.set("made_by", Figure::Text(e.made_by.clone()));
    f.count("unicast_packets", routes.unicast_packets);
    f.count("multicast_packets", routes.multicast_packets);
    f.count("unneeded_packets", routes.unneeded_packets);
    f.count("unicast_bytes", routes.unicast_bytes);
    f.count("multicast_bytes", routes.multicast_bytes);
    let rounds = send.rounds.rounds();
    f.set("round_store_bytes", Figure::Table((0..rounds).map(|k| send.rounds.store_sizes(k)).collect()));
    f.set("round_relay_bytes", Figure::Tables((0..rounds).map(|k| send.rounds.relay_matrix(k)).collect()));
}
