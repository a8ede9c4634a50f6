//! The engine: the data plane's protocol as one state machine with no IO of its own, in the
//! manner of quinn-proto and rustls. Events go in through [`Engine::handle`] (a message
//! arrived from a peer, a peer's connection ended, the caller asked for an epoch, an
//! all-reduce began or ended, records were read from the source, time passed); what the
//! engine wants done comes out of [`Engine::poll_transmit`] (bytes for a peer) and
//! [`Engine::poll_output`] (an epoch's records are local, records to read from the source, the
//! first failure), and [`Engine::next_timeout`] says when to call it again with no event. The
//! drivers ([`crate::driver`]) own the sockets, the threads and the clock; the engine decides
//! everything: the start-up agreement on settings and content, what moves, the streams and
//! their credit, liveness, yielding to the gradients, and closing.
//!
//! # The protocol, peer mode
//! Every rank holds its batch; each epoch the records that change rank go rank to rank.
//! - **Start.** Every rank sends every other a [`Message::Hello`]: the protocol's version, its
//!   rank, its settings, its data set's index fingerprint, whether it reads a source, and
//!   whether its record store could be made. A difference fails every rank with one line
//!   naming it, before anything moves. When two ranks or more read sources, each then sends a
//!   digest of a sample of the records' bytes ([`Message::Content`]).
//! - **Epochs.** The caller asks for epoch `e` with the chain's schedule at `e`. If the engine
//!   delivered `e` from `e - 1` ahead (a *step*), the records are already local: the engine
//!   lets go of what `e` no longer needs and starts delivering `e + 1` at once. Otherwise (a
//!   start, a resume, a jump: a *catch-up*) every rank tells every other what it holds
//!   ([`Message::Holdings`]). Either way every rank computes the same [`Moves`] (who sends which
//!   records to whom; what no rank holds is read from the source by the rank that needs it).
//! - **Streams and credit.** The records one rank sends another travel as one byte stream, in
//!   id order, cut into [`Message::Data`] chunks. A sender sends only what its receiver has
//!   granted ([`Message::Credit`]): TCP pushes, so the receiver holds its senders back itself.
//!   Without yielding, a receiver grants its streams whole at once (the bytes land in its
//!   mapped record store, so nothing is buffered); yielding, it grants a few chunks at a time,
//!   when the gradient pace ([`Pace`]) says their bytes will not meet an all-reduce, and a
//!   sender sends nothing while its own all-reduce is in flight. Every credit carries the
//!   receiver's chain digest, so ranks on different chains stop at their first stream.
//! - **Liveness.** Every message counts as a heartbeat; a connection with nothing to say for a
//!   period carries a [`Message::Beat`] ([`Liveness`]). A peer silent for `timeout` is named
//!   ([`PlaneError::Silent`]); one whose connection ends without a word died
//!   ([`PlaneError::PeerLost`]); one that closed says so ([`Message::Close`]); one whose plane
//!   failed says why ([`Message::GiveUp`]), so a chain of failures names the first.
//!
//! # The protocol, store mode
//! One rank, the store, reads the source and serves; the others train. A training rank asks
//! the store for each epoch ([`Message::Want`]): a step of the chain, or a catch-up from what it
//! holds (the first training rank sends its sampler's state, from which the store restores its
//! chain). Once every training rank has asked, the store answers each with its part
//! ([`Message::Part`]): records sent whole, or its share of a coded delivery planned ahead
//! (the store's `Serving`): the store's message of each round (each packet only to the ranks that decode
//! it: whole to a lone receiver, in pieces to several), the pieces relayed among the receivers,
//! each round decoded as its pieces land (a training rank's `TrainerDelivery`). Training ranks that have no
//! source learn the data set's index from the store ([`Message::Index`]) and make their record
//! stores then.
//!
//! What a peer sends is checked for shape before it is used (a stream's bytes against its
//! credit, its records and its epoch; every message's fields against their bounds); a peer
//! that breaks the protocol fails the delivery it took part in, named.

mod delivery;
mod figures;
mod gate;
mod serving;
mod setup;
mod streams;
mod trainer;
mod work;

use std::collections::VecDeque;
use std::sync::Arc;

use ubershuffle_codes::{RecordIndex, Segmentation};

use crate::coded::CodedSend;
use crate::error::{PlaneError, bounded_line};
use crate::liveness::Liveness;
use crate::schedule::Schedule;
use crate::store::{SharedStore, locked};
use crate::wire::{Cause, MAX_TEXT, Message};
#[allow(unused_imports)] // for the docs above
use crate::{moves::Moves, pace::Pace};
use delivery::Delivery;
pub use figures::{Figure, Figures};
use gate::Gate;
use serving::Serving;
use setup::Setup;
use trainer::TrainerDelivery;
use work::Work;

/// How a rank's engine is set up. The caller checks the values once; every rank of a plane
/// must give the same `settings`.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// This rank.
    pub rank: usize,
    /// Ranks in the plane.
    pub world: usize,
    /// Seconds a peer may be silent before it counts as dead.
    pub timeout: f64,
    /// What the plane is called where its errors are read (`"ShuffleGroup"`).
    pub plane: String,
    /// The settings every rank must share, by name, each value as the caller shows it.
    pub settings: Vec<(String, String)>,
    /// Whether this rank reads records from a source.
    pub reads_source: bool,
    /// Why this rank's record store could not be made (the engine tells every rank, then
    /// fails).
    pub store_error: Option<String>,
    /// Bytes of a data message.
    pub chunk_bytes: u64,
    /// Whether deliveries yield to the gradients' all-reduces.
    pub yield_to_gradients: bool,
    /// Store mode: the store's rank (`None`: peer mode).
    pub store_rank: Option<usize>,
    /// Store mode: bytes of a segment of coded delivery.
    pub segment_bytes: usize,
    /// Store mode: bytes a round may take, at the most.
    pub round_bytes: u64,
    /// Store mode: the store's uplink in bytes per second, against which the planner's search
    /// is weighed ([`crate::coded::PLAN_SHARE`]); 0 leaves the schedule's own budget alone.
    pub link_rate: f64,
}

/// What this rank is in the plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Peer,
    Store,
    Trainer { store: usize },
}

impl EngineConfig {
    fn role(&self) -> Role {
        match self.store_rank {
            None => Role::Peer,
            Some(s) if s == self.rank => Role::Store,
            Some(store) => Role::Trainer { store },
        }
    }
}

/// Bytes of a data message while yielding: a chunk once granted cannot be withdrawn, so it is
/// what an all-reduce may meet on a link (128 KiB takes 10 ms at 100 Mbit/s).
pub const YIELD_CHUNK_BYTES: u64 = 128 << 10;
/// Chunks of a stream a yielding receiver grants ahead of what has landed.
pub const YIELD_CHUNKS_AHEAD: u64 = 2;

/// Something that happened, for the engine.
pub enum Input {
    /// A whole message arrived from `from` (a frame's payload, authenticated by the driver).
    Message {
        /// The peer.
        from: usize,
        /// The message's bytes.
        bytes: Vec<u8>,
    },
    /// `peer`'s connection ended (read or write failed, or it closed without a word).
    Lost {
        /// The peer.
        peer: usize,
        /// What the connection said.
        detail: String,
    },
    /// The caller asks for the records of the schedule's epoch (a training rank).
    SetEpoch(Box<dyn Schedule>),
    /// The records a [`Output::ReadSource`] named were read (their count and bytes), or not.
    SourceRead {
        /// The epoch they were read for.
        epoch: u64,
        /// Records and bytes read, or why not.
        result: Result<(u64, u64), String>,
    },
    /// The digest of this rank's sample of the records' bytes ([`Output::NeedContent`]).
    Content(u64),
    /// The record store made for the index the store sent ([`Output::NeedStore`]), or why not.
    Store(Result<SharedStore, String>),
    /// The sampler's state ([`Output::NeedState`]).
    State(Vec<u8>),
    /// The chain restored ([`Output::Restore`]), or why not.
    Restored(Result<Box<dyn Schedule>, String>),
    /// A plan made ([`Output::Plan`]): its epoch, the digest it starts from, the plan or why
    /// not, and the planner's seconds.
    Planned {
        /// The epoch planned.
        epoch: u64,
        /// The chain digest of the epoch before.
        digest: u64,
        /// The plan.
        result: Result<Box<CodedSend>, String>,
        /// The planner's seconds.
        seconds: f64,
    },
    /// A step's all-reduce began (the first bucket's hook).
    AllReduceBegan,
    /// The step's all-reduce ended, having sent and received `wire_bytes` at this rank.
    AllReduceEnded {
        /// Bytes on the wire at this rank.
        wire_bytes: f64,
    },
    /// Whether the training thread waits for the delivery (then nothing is held).
    TrainingWaits(bool),
    /// The caller closes the plane.
    Close,
    /// The driver failed on this rank's side (the source could not be read).
    Fail(PlaneError),
}

/// What the engine wants the caller to know or do.
pub enum Output {
    /// Every rank agreed on the settings and the data set.
    Agreed,
    /// The caller should compute the digest of this rank's content sample and give it back
    /// ([`Input::Content`]).
    NeedContent,
    /// Make this rank's record store for a data set of these offsets ([`Input::Store`]).
    NeedStore {
        /// `records + 1` offsets.
        offsets: Vec<u64>,
    },
    /// Give the sampler's state ([`Input::State`]): the first training rank's catch-up.
    NeedState,
    /// Restore the chain from a training rank's state at `epoch` ([`Input::Restored`]).
    Restore {
        /// The state, as the training rank sent it.
        state: Vec<u8>,
        /// The epoch to stand at.
        epoch: u64,
    },
    /// Plan the coded delivery of the epoch after `schedule`'s ([`Input::Planned`]), off the
    /// engine's thread.
    Plan {
        /// The chain at the epoch before.
        schedule: Box<dyn Schedule>,
        /// The records' segments.
        segmentation: Arc<Segmentation>,
        /// Bytes a round may take.
        round_bytes: u64,
        /// The store's uplink in bytes per second (0: not weighed).
        link_rate: f64,
    },
    /// The records of `epoch` are local (the answer to [`Input::SetEpoch`]).
    Ready {
        /// The epoch.
        epoch: u64,
        /// What its delivery moved and cost.
        figures: Box<Figures>,
    },
    /// The store sent an epoch.
    Served(Box<Figures>),
    /// Every training rank closed: the store's serving is over.
    Finished,
    /// Read these records from the source into the store, then report ([`Input::SourceRead`]).
    ReadSource {
        /// The epoch they are read for.
        epoch: u64,
        /// The records, sorted.
        ids: Vec<u32>,
    },
    /// A delivery that ended without being asked for (at close), with its figures.
    Unasked {
        /// Its epoch.
        epoch: u64,
        /// Its figures.
        figures: Box<Figures>,
    },
    /// The plane failed (the first failure; every call after it fails with it too).
    Failed(PlaneError),
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Agreed => f.write_str("Agreed"),
            Output::NeedContent => f.write_str("NeedContent"),
            Output::NeedStore { offsets } => {
                write!(f, "NeedStore({} records)", offsets.len().saturating_sub(1))
            }
            Output::NeedState => f.write_str("NeedState"),
            Output::Restore { epoch, .. } => write!(f, "Restore(epoch {epoch})"),
            Output::Plan { schedule, .. } => write!(f, "Plan(after epoch {})", schedule.epoch()),
            Output::Ready { epoch, .. } => write!(f, "Ready({epoch})"),
            Output::Served(_) => f.write_str("Served"),
            Output::Finished => f.write_str("Finished"),
            Output::ReadSource { epoch, ids } => write!(f, "ReadSource({epoch}, {} records)", ids.len()),
            Output::Unasked { epoch, .. } => write!(f, "Unasked({epoch})"),
            Output::Failed(e) => write!(f, "Failed({e})"),
        }
    }
}

/// Bytes for one peer.
#[derive(Debug)]
pub struct Transmit {
    /// The peer.
    pub to: usize,
    /// A message's bytes (a frame's payload).
    pub bytes: Vec<u8>,
}

/// One rank's engine (see the module's docs).
pub struct Engine {
    cfg: EngineConfig,
    role: Role,
    /// The record store (a store-mode training rank without a source makes it once the store
    /// sent the index).
    store: Option<SharedStore>,
    index: RecordIndex,
    now: f64,
    setup: Setup,
    live: Liveness,
    gate: Gate,
    /// Peers that closed their plane.
    peer_closed: Vec<bool>,
    /// The last epoch each peer's caller took, as its close said (`Some(None)`: none, or its
    /// connection ended without a close; `None`: not yet known).
    closed_after: Vec<Option<Option<u64>>>,
    /// The last epoch this rank's caller took.
    taken: Option<u64>,
    failure: Option<PlaneError>,
    closed: bool,
    /// The epoch asked for and not answered yet.
    asked: Option<Box<dyn Schedule>>,
    /// The delivery in flight, or done and not asked for yet.
    delivery: Option<Work>,
    /// The store's serving.
    serving: Option<Serving>,
    /// Whether the sampler's state was asked for (the first training rank's catch-up).
    asked_state: bool,
    /// Messages for deliveries not started yet (a faster peer's holdings or credit).
    early: VecDeque<(usize, Vec<u8>)>,
    transmits: VecDeque<Transmit>,
    outputs: VecDeque<Output>,
    /// Bytes of every message but records, sent and received.
    control: (u64, u64),
    /// Whether the caller says its training thread waits for the delivery.
    training_waits: bool,
}

/// The most messages kept for deliveries not started yet (per peer, a few are all a correct
/// peer ever sends ahead).
const MAX_EARLY: usize = 16;

impl Engine {
    /// The engine of `cfg.rank`, its records in `store` (`None`: a store-mode training rank
    /// without a source, which makes its store once the store sent the index). Its hellos are
    /// queued at once.
    pub fn new(cfg: EngineConfig, store: Option<SharedStore>, now: f64) -> Engine {
        let index = match &store {
            Some(s) => locked(s).index().clone(),
            None => {
                RecordIndex::from_sizes(std::iter::empty()).unwrap_or_else(|_| unreachable!("no records"))
            }
        };
        let mut live = Liveness::new(cfg.world, cfg.timeout, now);
        live.forget(cfg.rank);
        let setup = Setup::new(&cfg, store.as_ref().map(|_| &index));
        let gate = Gate::new(cfg.yield_to_gradients);
        let world = cfg.world;
        let role = cfg.role();
        let serving =
            (role == Role::Store).then(|| Serving::new(cfg.rank, world, cfg.round_bytes, cfg.chunk_bytes));
        let mut engine = Engine {
            cfg,
            role,
            store,
            index,
            now,
            setup,
            live,
            gate,
            peer_closed: vec![false; world],
            closed_after: vec![None; world],
            taken: None,
            failure: None,
            closed: false,
            asked: None,
            delivery: None,
            serving,
            asked_state: false,
            early: VecDeque::new(),
            transmits: VecDeque::new(),
            outputs: VecDeque::new(),
            control: (0, 0),
            training_waits: false,
        };
        let hello = engine.setup.hello(&engine.cfg);
        for peer in engine.peers() {
            engine.send(peer, hello.encode());
        }
        engine.after_setup_step();
        engine
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.cfg.rank
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The store's view of its training ranks' closes: `None` until every one of them closed
    /// or was lost; then the last epoch all their callers had taken (`Some(None)`: one took
    /// none, or was lost).
    pub fn closed_after(&self) -> Option<Option<u64>> {
        let trainers = (0..self.cfg.world).filter(|&r| Some(r) != self.cfg.store_rank && r != self.cfg.rank);
        trainers
            .map(|r| self.closed_after[r])
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().min().flatten())
    }

    /// The first failure, if any.
    pub fn failure(&self) -> Option<&PlaneError> {
        self.failure.as_ref()
    }

    /// Whether no delivery is in flight (none started, or the last one ended).
    pub fn is_idle(&self) -> bool {
        self.delivery.as_ref().is_none_or(Work::is_done) && self.serving.as_ref().is_none_or(Serving::is_idle)
    }

    /// Whether the plane was closed here.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// This rank's record store, once made.
    pub fn record_store(&self) -> Option<SharedStore> {
        self.store.clone()
    }

    /// Bytes of control messages (everything but records) sent and received so far.
    pub fn control_bytes(&self) -> (u64, u64) {
        self.control
    }

    /// The other ranks.
    fn peers(&self) -> impl Iterator<Item = usize> + use<> {
        let me = self.cfg.rank;
        (0..self.cfg.world).filter(move |&p| p != me)
    }

    /// The record store, once made.
    fn store(&self) -> Result<SharedStore, PlaneError> {
        self.store.clone().ok_or_else(|| PlaneError::Internal("this rank has no record store yet".into()))
    }

    /// Handles one event at `now` (seconds of the caller's monotonic clock).
    pub fn handle(&mut self, now: f64, input: Input) {
        self.now = self.now.max(now);
        let result = self.on_input(input);
        if let Err(e) = result {
            self.fail(e);
        }
        self.progress();
    }

    fn on_input(&mut self, input: Input) -> Result<(), PlaneError> {
        match input {
            Input::Message { from, bytes } => return self.on_message(from, bytes),
            Input::Lost { peer, detail } => {
                if let Some(said) = self.closed_after.get_mut(peer) {
                    said.get_or_insert(None);
                }
                self.on_lost(peer, detail);
                return Ok(());
            }
            Input::SetEpoch(schedule) => {
                self.on_set_epoch(schedule);
                return Ok(());
            }
            Input::SourceRead { epoch, result } => match (&mut self.delivery, &mut self.serving) {
                (_, Some(serving)) => serving.source_read(epoch, result)?,
                (Some(d), None) if d.epoch() == epoch => d.source_read(result)?,
                _ => {}
            },
            Input::Content(digest) => {
                let bytes = Message::Content { digest }.encode();
                for peer in self.peers() {
                    self.send(peer, bytes.clone());
                }
                self.setup.own_content(digest);
                self.after_setup_step();
            }
            Input::Store(result) => {
                let store = result.map_err(PlaneError::Store)?;
                self.index = locked(&store).index().clone();
                self.store = Some(store);
                self.setup.store_made(&self.index);
                self.after_setup_step();
            }
            Input::State(state) => {
                if let Some(Work::Trainer(d)) = self.delivery.as_mut() {
                    d.give_state(state);
                }
            }
            Input::Restored(result) => {
                if let Some(s) = self.serving.as_mut() {
                    s.restored(result);
                }
            }
            Input::Planned { epoch, digest, result, seconds } => {
                if let Some(s) = self.serving.as_mut() {
                    s.planned(epoch, digest, result, seconds);
                }
            }
            Input::AllReduceBegan => {
                let delivering = !self.is_idle();
                self.gate.began(self.now, delivering);
            }
            Input::AllReduceEnded { wire_bytes } => self.gate.ended(self.now, wire_bytes),
            Input::TrainingWaits(waits) => self.training_waits = waits,
            Input::Close => self.close(),
            Input::Fail(e) => return Err(e),
        }
        Ok(())
    }

    /// Time passed: heartbeats, silences, held streams. Call it at [`Engine::next_timeout`].
    pub fn tick(&mut self, now: f64) {
        self.now = self.now.max(now);
        self.progress();
    }

    /// When to call [`Engine::tick`] next, at the latest (seconds of the caller's clock).
    pub fn next_timeout(&self) -> Option<f64> {
        if self.closed || self.failure.is_some() {
            return None;
        }
        let gate = self.gate.wake_at();
        match (self.live.next_due(), gate) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next bytes to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next chunk of records for `peer`, if its stream has one its credit and the gate
    /// allow. The driver asks when `peer`'s connection has room for more, so a delivery's
    /// records are read from the store (or encoded) only as fast as the link takes them.
    pub fn poll_data(&mut self, peer: usize, now: f64) -> Option<Transmit> {
        self.now = self.now.max(now);
        if self.closed || self.failure.is_some() {
            return None;
        }
        let store = self.store.clone()?;
        let chunk = match (&mut self.delivery, &mut self.serving) {
            (_, Some(s)) => s.next_chunk(peer, &store, self.now, &mut self.gate),
            (Some(d), None) => d.next_chunk(peer, &store, self.now, &mut self.gate),
            (None, None) => Ok(None),
        };
        match chunk {
            Ok(Some(bytes)) => {
                self.live.sent(peer, self.now);
                self.progress();
                Some(Transmit { to: peer, bytes })
            }
            Ok(None) => None,
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// The next thing the caller should know or do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Queues `bytes` for `peer` (a control message).
    fn send(&mut self, peer: usize, bytes: Vec<u8>) {
        self.control.0 += bytes.len() as u64;
        self.live.sent(peer, self.now);
        self.transmits.push_back(Transmit { to: peer, bytes });
    }

    /// What this rank is doing, in words, for errors.
    fn doing(&self) -> String {
        if !self.setup.is_done() {
            return "waiting for the start-up agreement".into();
        }
        if let Some(s) = &self.serving {
            return s.doing();
        }
        match &self.delivery {
            Some(d) if !d.is_done() => d.doing(),
            _ => match &self.asked {
                Some(s) => format!("waiting for epoch {}", s.epoch()),
                None => "between deliveries".into(),
            },
        }
    }

    fn on_message(&mut self, from: usize, bytes: Vec<u8>) -> Result<(), PlaneError> {
        let handled = self.handle_message(from, &bytes);
        crate::buffers::give(bytes);
        handled
    }

    fn handle_message(&mut self, from: usize, bytes: &[u8]) -> Result<(), PlaneError> {
        if from >= self.cfg.world || from == self.cfg.rank || self.closed || self.failure.is_some() {
            return Ok(());
        }
        self.live.heard(from, self.now);
        let message = match Message::decode(bytes) {
            Ok(m) => m,
            Err(e) => return Err(self.protocol(from, format!("an unreadable message: {e}"))),
        };
        if !matches!(message, Message::Data { .. }) {
            self.control.1 += bytes.len() as u64;
        }
        match message {
            Message::Beat => {}
            Message::Close { taken } => {
                self.peer_closed[from] = true;
                self.closed_after[from] = Some((taken != u64::MAX).then_some(taken));
                self.live.forget(from);
                if let Some(s) = self.serving.as_mut() {
                    // A training rank that closes ends the job's serving: the store serves
                    // no epoch without every rank, and ends once no rank takes one in.
                    s.closed(from);
                }
                if self.needs(from) {
                    let (plane, me, doing) = (self.cfg.plane.clone(), self.cfg.rank, self.doing());
                    return Err(PlaneError::PeerClosed { rank: from, plane, me, doing });
                }
            }
            Message::GiveUp { cause, reason } => {
                self.peer_closed[from] = true;
                self.live.forget(from);
                let doing = self.doing();
                let reason = bounded_line(&reason, MAX_TEXT);
                // The caller's mistakes fail every rank alike; a failure names who stopped.
                return Err(match cause {
                    Cause::Mismatch => PlaneError::Mismatch(reason),
                    Cause::Store if reason.starts_with("rank ") => PlaneError::Store(reason),
                    Cause::Store => PlaneError::Store(format!("rank {from}: {reason}")),
                    Cause::Failure => PlaneError::PeerFailed { rank: from, me: self.cfg.rank, doing, reason },
                });
            }
            Message::Hello(h) => {
                let lacks_index = h.index.is_none();
                self.setup.hello_from(from, h, &self.cfg)?;
                if lacks_index && self.role == Role::Store && self.cfg.store_error.is_none() {
                    let offsets = self.index.offsets().to_vec();
                    self.send(from, Message::Index { offsets }.encode());
                }
                self.after_setup_step();
            }
            Message::Content { digest } => {
                self.setup.content_from(from, digest, &self.cfg)?;
                self.after_setup_step();
            }
            Message::Index { offsets } => {
                if self.role != (Role::Trainer { store: from }) || self.store.is_some() {
                    return Err(self.protocol(from, "an index this rank did not ask for".into()));
                }
                if offsets.first() != Some(&0) || offsets.windows(2).any(|w| w[1] < w[0]) {
                    return Err(self.protocol(from, "offsets that do not start at 0 or decrease".into()));
                }
                self.setup.index_from(from, &offsets)?;
                self.outputs.push_back(Output::NeedStore { offsets });
            }
            Message::Want { .. } | Message::Credit { .. } if self.role == Role::Store => {
                let serving =
                    self.serving.as_mut().ok_or_else(|| PlaneError::Internal("no serving".into()))?;
                if let Err(f) = serving.on_message(from, bytes) {
                    let doing = serving.doing();
                    return Err(f.at(from, self.cfg.rank, doing));
                }
            }
            Message::Want { .. } => {
                return Err(self.protocol(from, "a request to a rank that does not serve".into()));
            }
            Message::Holdings { .. }
            | Message::Credit { .. }
            | Message::Data { .. }
            | Message::Part { .. } => {
                drop(message);
                self.on_delivery_message(from, bytes)?;
            }
        }
        Ok(())
    }

    /// A message of a delivery: to the one in flight, or kept until its delivery starts.
    fn on_delivery_message(&mut self, from: usize, bytes: &[u8]) -> Result<(), PlaneError> {
        let epoch = match Message::decode(bytes) {
            Ok(
                Message::Holdings { epoch, .. }
                | Message::Credit { epoch, .. }
                | Message::Data { epoch, .. }
                | Message::Part { epoch, .. },
            ) => epoch,
            _ => return Ok(()),
        };
        let store = self.store()?;
        match self.delivery.as_mut() {
            Some(d) if d.epoch() == epoch && d.takes(bytes) => {
                if let Err(f) = d.on_message(from, bytes, &store, &self.index, self.now) {
                    return Err(f.at(from, self.cfg.rank, d.doing()));
                }
            }
            _ => {
                if self.early.iter().filter(|(p, _)| *p == from).count() >= MAX_EARLY {
                    return Err(self.protocol(
                        from,
                        format!("messages for epoch {epoch}, which no delivery here expects"),
                    ));
                }
                // Rare (a peer a step ahead): kept as a copy, the buffer goes back.
                self.early.push_back((from, bytes.to_vec()));
            }
        }
        Ok(())
    }

    fn on_lost(&mut self, peer: usize, detail: String) {
        if peer >= self.cfg.world || self.peer_closed[peer] || self.closed || self.failure.is_some() {
            return;
        }
        // At the store, once a training rank closed the job is ending: a rank whose connection
        // ends with nothing left to send it (its process exited before its close was out) has
        // ended as a close would.
        let ending = self.serving.as_ref().is_some_and(Serving::any_closed);
        if ending && !self.needs(peer) {
            self.peer_closed[peer] = true;
            self.live.forget(peer);
            if let Some(s) = self.serving.as_mut() {
                s.closed(peer);
            }
            return;
        }
        let doing = self.doing();
        let detail = bounded_line(&detail, 200);
        self.fail(PlaneError::PeerLost { rank: peer, me: self.cfg.rank, doing, detail });
    }

    fn protocol(&self, rank: usize, what: String) -> PlaneError {
        PlaneError::Protocol { rank, what, me: self.cfg.rank, doing: self.doing() }
    }

    /// Whether this rank is waiting on `peer` now (at start, or in a delivery not done).
    fn needs(&self, peer: usize) -> bool {
        !self.setup.is_done()
            || self.delivery.as_ref().is_some_and(|d| d.needs(peer))
            || self.serving.as_ref().is_some_and(|s| s.needs(peer))
    }

    fn after_setup_step(&mut self) {
        if self.failure.is_some() {
            return;
        }
        match self.setup.advance() {
            Err(e) => self.fail(e),
            Ok(setup::Step::NeedContent) => self.outputs.push_back(Output::NeedContent),
            Ok(setup::Step::Agreed) => self.outputs.push_back(Output::Agreed),
            Ok(setup::Step::Waiting) => {}
        }
    }

    fn on_set_epoch(&mut self, schedule: Box<dyn Schedule>) {
        if let Some(e) = &self.failure {
            let e = e.clone();
            self.outputs.push_back(Output::Failed(e));
            return;
        }
        if self.closed {
            let doing = format!("asking for epoch {}", schedule.epoch());
            let e = PlaneError::Closed { plane: self.cfg.plane.clone(), me: self.cfg.rank, doing };
            self.outputs.push_back(Output::Failed(e));
            return;
        }
        let trainers = if self.role == Role::Peer { self.cfg.world } else { self.cfg.world - 1 };
        if self.role == Role::Store || schedule.targets().len() != trainers {
            let e = PlaneError::Mismatch(format!(
                "rank {} asks for epoch {} of a schedule of {} ranks; the plane trains {trainers} (the store serves, it does not ask)",
                self.cfg.rank,
                schedule.epoch(),
                schedule.targets().len()
            ));
            self.outputs.push_back(Output::Failed(e));
            return;
        }
        self.asked = Some(schedule);
    }

    /// Moves everything on as far as it goes: the delivery asked for, the next one, credit,
    /// data, heartbeats, silences.
    fn progress(&mut self) {
        if self.closed || self.failure.is_some() {
            return;
        }
        if let Some((rank, seconds)) = self.live.silent(self.now) {
            let doing = self.doing();
            let e = PlaneError::Silent { rank, seconds, timeout: self.cfg.timeout, me: self.cfg.rank, doing };
            return self.fail(e);
        }
        if self.setup.is_done()
            && let Err(e) = self.deliveries()
        {
            return self.fail(e);
        }
        for peer in self.live.beats_due(self.now) {
            self.send(peer, Message::Beat.encode());
        }
    }

    /// This rank's place among the training ranks.
    fn place(&self) -> usize {
        match self.cfg.store_rank {
            Some(s) if self.cfg.rank > s => self.cfg.rank - 1,
            _ => self.cfg.rank,
        }
    }

    /// Starts what the asked epoch needs, moves the delivery in flight on, answers the ask
    /// when its records are local; at the store, serves.
    fn deliveries(&mut self) -> Result<(), PlaneError> {
        let store = self.store()?;
        let segment_bytes = self.segment_bytes();
        if let Some(serving) = self.serving.as_mut() {
            let mut asks = Vec::new();
            serving.pump(&store, &self.index, self.now, &mut asks)?;
            for f in serving.take_served() {
                self.outputs.push_back(Output::Served(Box::new(f)));
            }
            if serving.is_over() {
                self.outputs.push_back(Output::Finished);
            }
            let (segmentation, round_bytes) =
                (serving.segmentation(&self.index, segment_bytes)?, serving.round_bytes());
            for ask in asks {
                match ask {
                    serving::Ask::Send(to, bytes) => self.send(to, bytes),
                    serving::Ask::Read(epoch, ids) => {
                        self.outputs.push_back(Output::ReadSource { epoch, ids })
                    }
                    serving::Ask::Restore(state, epoch) => {
                        self.outputs.push_back(Output::Restore { state, epoch })
                    }
                    serving::Ask::Plan(schedule) => self.outputs.push_back(Output::Plan {
                        schedule,
                        segmentation: Arc::clone(&segmentation),
                        round_bytes,
                        link_rate: self.cfg.link_rate,
                    }),
                }
            }
            return Ok(());
        }
        loop {
            // While the caller waits for an epoch, nothing is held for the gradients.
            self.gate.training_waits(self.asked.is_some() || self.training_waits);
            let mut moved = false;
            if self.delivery.is_none()
                && let Some(asked) = self.asked.as_ref()
            {
                // Nothing in flight: this epoch is caught up to.
                let held = locked(&store).held_ids();
                let work = match self.role {
                    Role::Trainer { store: s } => Work::Trainer(Box::new(TrainerDelivery::new(
                        &self.cfg,
                        s,
                        self.segment_bytes(),
                        None,
                        asked.boxed_copy(),
                        held,
                        self.now,
                    ))),
                    _ => {
                        let d = Delivery::catch_up(&self.cfg, asked.as_ref(), held, self.now)?;
                        for (to, bytes) in d.opening_messages() {
                            self.send(to, bytes);
                        }
                        Work::Peer(Box::new(d))
                    }
                };
                self.delivery = Some(work);
                self.replay_early()?;
                moved = true;
            }
            if let Some(Work::Trainer(d)) = self.delivery.as_ref()
                && d.needs_state()
            {
                if !self.asked_state {
                    self.asked_state = true;
                    self.outputs.push_back(Output::NeedState);
                }
            } else if let Some(d) = self.delivery.as_mut() {
                let out = d.pump(&self.cfg, &self.index, &store, self.now, &mut self.gate)?;
                for t in out {
                    match t {
                        delivery::Out::Send(to, bytes) => self.send(to, bytes),
                        delivery::Out::ReadSource(epoch, ids) => {
                            self.outputs.push_back(Output::ReadSource { epoch, ids });
                        }
                    }
                }
            }
            if self.delivery.as_ref().is_some_and(Work::is_done) && self.asked.is_some() {
                moved |= self.answer()?;
            }
            // A delivery that needs a peer that closed cannot end.
            if let Some(peer) = (0..self.cfg.world).find(|&p| self.peer_closed[p] && self.needs(p)) {
                let doing = self.doing();
                let plane = self.cfg.plane.clone();
                return Err(PlaneError::PeerClosed { rank: peer, plane, me: self.cfg.rank, doing });
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// Bytes of a segment of coded delivery: the setting, or the default for the records.
    fn segment_bytes(&self) -> usize {
        if self.cfg.segment_bytes > 0 {
            self.cfg.segment_bytes
        } else {
            ubershuffle_codes::default_segment_bytes(&self.index)
        }
    }

    /// The delivery is done: if it is the one asked for, answer and start the next; if not,
    /// drop it (its records stay) and let the ask catch up.
    fn answer(&mut self) -> Result<bool, PlaneError> {
        let (Some(d), Some(asked)) = (self.delivery.take(), self.asked.take()) else { return Ok(false) };
        if d.epoch() != asked.epoch() || d.target_digest() != asked.digest() {
            // Not what was asked (a resume, a jump): the ask catches up from what is held.
            self.outputs
                .push_back(Output::Unasked { epoch: d.epoch(), figures: Box::new(d.figures(&self.index)) });
            self.asked = Some(asked);
            return Ok(true);
        }
        let mut figures = d.figures(&self.index);
        let targets = asked.targets();
        let mine = &targets[self.place()];
        {
            let shared = self.store()?;
            let mut store = locked(&shared);
            figures.count("peak_held_bytes", store.held_bytes());
            store.retain(mine);
            figures.count("held_records", store.held_ids().len() as u64);
            figures.count("held_bytes", store.held_bytes());
        }
        figures.extend(self.gate.take());
        let (sent, received) = self.control;
        figures.count("control_bytes_sent", sent);
        figures.count("control_bytes_received", received);
        let epoch = asked.epoch();
        self.taken = Some(epoch);
        self.outputs.push_back(Output::Ready { epoch, figures: Box::new(figures) });
        // The next epoch's delivery, from this one's records, at once.
        let next = asked.stepped().map_err(PlaneError::Internal)?;
        let work = match self.role {
            Role::Trainer { store } => Work::Trainer(Box::new(TrainerDelivery::new(
                &self.cfg,
                store,
                self.segment_bytes(),
                Some(asked.boxed_copy()),
                next,
                Vec::new(),
                self.now,
            ))),
            _ => {
                Work::Peer(Box::new(Delivery::step(&self.cfg, &self.index, asked.as_ref(), next, self.now)?))
            }
        };
        self.delivery = Some(work);
        self.replay_early()?;
        Ok(true)
    }

    /// Hands the messages kept for later to the delivery just started.
    fn replay_early(&mut self) -> Result<(), PlaneError> {
        let early: Vec<(usize, Vec<u8>)> = self.early.drain(..).collect();
        for (from, bytes) in early {
            self.on_delivery_message(from, &bytes)?;
        }
        Ok(())
    }

    /// The first failure: every peer still there is told why (unless this rank closed), the
    /// caller is told, and every call after it fails with it.
    fn fail(&mut self, error: PlaneError) {
        if self.failure.is_some() || self.closed {
            return;
        }
        tracing::warn!(rank = self.cfg.rank, "the data plane failed: {error}");
        let cause = match &error {
            PlaneError::Mismatch(_) => Cause::Mismatch,
            PlaneError::Store(_) if !self.setup.is_done() => Cause::Store,
            _ => Cause::Failure,
        };
        // A peer that closed is the end of a job (the delivery no one asked for stops): every
        // other rank heard the same close, and hears nothing from this one.
        if !matches!(error, PlaneError::PeerClosed { .. }) {
            let reason =
                Message::GiveUp { cause, reason: bounded_line(&error.to_string(), MAX_TEXT) }.encode();
            for peer in self.peers().collect::<Vec<_>>() {
                if !self.peer_closed[peer] {
                    self.send(peer, reason.clone());
                }
            }
        }
        self.failure = Some(error.clone());
        self.asked = None;
        self.outputs.push_back(Output::Failed(error));
    }

    /// Closes the plane here: every peer is told (also after a peer's close cut a delivery no
    /// one asked for: the end of a job, which told no one); an epoch asked for fails.
    fn close(&mut self) {
        if self.closed {
            return;
        }
        let ending = matches!(self.failure, Some(PlaneError::PeerClosed { .. }));
        if self.failure.is_none() || ending {
            for peer in self.peers().collect::<Vec<_>>() {
                if !self.peer_closed[peer] {
                    self.send(peer, Message::Close { taken: self.taken.unwrap_or(u64::MAX) }.encode());
                }
            }
            if let Some(d) = self.delivery.take().filter(Work::is_done) {
                // With the all-reduces of the epoch it ran behind.
                let mut figures = d.figures(&self.index);
                figures.extend(self.gate.take());
                self.outputs.push_back(Output::Unasked { epoch: d.epoch(), figures: Box::new(figures) });
            }
        }
        if let Some(asked) = self.asked.take() {
            let doing = format!("waiting for epoch {}", asked.epoch());
            let e = PlaneError::Closed { plane: self.cfg.plane.clone(), me: self.cfg.rank, doing };
            self.outputs.push_back(Output::Failed(e));
        }
        self.closed = true;
    }
}
