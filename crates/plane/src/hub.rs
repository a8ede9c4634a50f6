//! [`Hub`]: the engines of several ranks in one process, wired to each other by queues, on one
//! virtual clock: the same protocol as over sockets, tested without a network and run at
//! hundreds of ranks on one core. Messages between two ranks arrive in the order sent (as on
//! a TCP connection); every step hands every queued message over, then lets every rank send
//! what its streams' credit allows.
//!
//! The hub counts what each rank sends and receives and the engine's own CPU time per rank,
//! so a test can say how control bytes and work grow with the number of ranks.

use std::collections::VecDeque;
use std::time::Instant;

use crate::coded::CodedSend;
use crate::engine::{Engine, Figures, Input, Output};
use crate::schedule::Schedule;
use crate::store::SharedStore;

/// What a rank's caller does when its engine asks what only the caller can do: `read(rank,
/// ids)` writes records into that rank's store and returns their count and bytes;
/// `content(rank)` is the digest of the rank's content sample; `open_store`, `state` and
/// `restore` serve store mode (a training rank's store made from the store's index, the first
/// training rank's sampler state, the store's chain restored from it).
pub trait Caller {
    /// Reads `ids` into `rank`'s store.
    fn read(&mut self, rank: usize, ids: &[u32]) -> Result<(u64, u64), String>;
    /// `rank`'s content digest.
    fn content(&mut self, rank: usize) -> u64;
    /// Makes `rank`'s record store for `offsets`.
    fn open_store(&mut self, rank: usize, offsets: &[u64]) -> Result<SharedStore, String> {
        let _ = (rank, offsets);
        Err("no record store can be made here".into())
    }
    /// `rank`'s sampler state.
    fn state(&mut self, rank: usize) -> Result<Vec<u8>, String> {
        let _ = rank;
        Err("no sampler state here".into())
    }
    /// The chain restored from `state` at `epoch`.
    fn restore(&mut self, state: &[u8], epoch: u64) -> Result<Box<dyn Schedule>, String> {
        let _ = (state, epoch);
        Err("no chain can be restored here".into())
    }
}

/// Per rank: bytes sent and received, split into records and the rest, and the engine's CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Bytes of data messages sent.
    pub data_sent: u64,
    /// Bytes of every other message sent.
    pub control_sent: u64,
    /// Messages sent.
    pub messages_sent: u64,
    /// Seconds this rank's engine spent handling events (wall time of its calls).
    pub engine_seconds: f64,
}

/// A message between two ranks: from, to, its bytes, whether it carries records.
type Queued = (usize, usize, Vec<u8>, bool);

/// A slow path: the pair `(from, to)`, the first message it holds (`None`: every message), and
/// what waits.
struct Slow {
    pair: (usize, usize),
    first: Option<fn(&[u8]) -> bool>,
    held: VecDeque<Queued>,
}

/// The engines of one process (see the module's docs).
pub struct Hub {
    engines: Vec<Option<Engine>>,
    /// The slow paths.
    delayed: Vec<Slow>,
    queue: VecDeque<Queued>,
    now: f64,
    outputs: Vec<Vec<Output>>,
    traffic: Vec<Traffic>,
    /// What the store served, by rank.
    served: Vec<Vec<Figures>>,
}

/// Chunks a rank may hand out per peer per step (a connection's queue).
const CHUNKS_PER_STEP: usize = 4;

impl Hub {
    /// The hub of `engines` (rank `r` at place `r`), at virtual time `now`.
    pub fn new(engines: Vec<Engine>, now: f64) -> Hub {
        let world = engines.len();
        Hub {
            engines: engines.into_iter().map(Some).collect(),
            delayed: Vec::new(),
            queue: VecDeque::new(),
            now,
            outputs: (0..world).map(|_| Vec::new()).collect(),
            traffic: vec![Traffic::default(); world],
            served: (0..world).map(|_| Vec::new()).collect(),
        }
    }

    /// The virtual time.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Rank `rank`'s engine, while it lives.
    pub fn engine(&self, rank: usize) -> Option<&Engine> {
        self.engines.get(rank).and_then(Option::as_ref)
    }

    /// What each rank sent so far.
    pub fn traffic(&self) -> &[Traffic] {
        &self.traffic
    }

    /// Hands `input` to `rank`'s engine.
    pub fn input(&mut self, rank: usize, input: Input) {
        let now = self.now;
        self.with(rank, |e| e.handle(now, input));
    }

    /// Takes what `rank`'s engine said so far (its answers, failures, reads already done).
    pub fn take_outputs(&mut self, rank: usize) -> Vec<Output> {
        std::mem::take(&mut self.outputs[rank])
    }

    /// Kills `rank`: its engine is gone without a word; every other rank's connection to it
    /// ends.
    pub fn kill(&mut self, rank: usize) {
        self.engines[rank] = None;
        self.queue.retain(|(from, to, _, _)| *from != rank && *to != rank);
        for peer in 0..self.engines.len() {
            if peer != rank {
                let now = self.now;
                self.with(peer, |e| {
                    e.handle(now, Input::Lost { peer: rank, detail: "connection reset".into() })
                });
            }
        }
    }

    /// Freezes `rank`: it stays connected but handles nothing (a stopped process); returns its
    /// engine to thaw it with [`Hub::thaw`].
    pub fn freeze(&mut self, rank: usize) -> Option<Engine> {
        self.queue.retain(|(_, to, _, _)| *to != rank);
        self.engines[rank].take()
    }

    /// Moves virtual time on by `seconds`: from one engine's timer to the next, every engine
    /// ticked and every message handed over at each (heartbeats go both ways meanwhile).
    pub fn advance(&mut self, seconds: f64, caller: &mut dyn Caller) {
        let until = self.now + seconds;
        loop {
            let next = self.engines.iter().flatten().filter_map(Engine::next_timeout).fold(until, f64::min);
            // Time always moves: a timer already due is served a microsecond on.
            self.now = next.max(self.now + 1e-6).min(until);
            let now = self.now;
            for r in 0..self.engines.len() {
                self.with(r, |e| e.tick(now));
            }
            self.run(caller);
            if self.now >= until {
                return;
            }
        }
    }

    fn with(&mut self, rank: usize, f: impl FnOnce(&mut Engine)) {
        let Some(engine) = self.engines.get_mut(rank).and_then(Option::as_mut) else { return };
        let start = Instant::now();
        f(engine);
        self.traffic[rank].engine_seconds += start.elapsed().as_secs_f64();
        self.collect(rank);
    }

    /// Queues what `rank`'s engine wants sent.
    fn collect(&mut self, rank: usize) {
        let Some(engine) = self.engines.get_mut(rank).and_then(Option::as_mut) else { return };
        while let Some(t) = engine.poll_transmit() {
            self.traffic[rank].control_sent += t.bytes.len() as u64;
            self.traffic[rank].messages_sent += 1;
            self.queue.push_back((rank, t.to, t.bytes, false));
        }
        while let Some(o) = engine.poll_output() {
            self.outputs[rank].push(o);
        }
    }

    /// Runs until nothing moves: every message handed over, every stream sent as its credit
    /// allows, every read from the source done by `caller`. Returns the steps taken.
    pub fn run(&mut self, caller: &mut dyn Caller) -> usize {
        let mut steps = 0;
        loop {
            let mut moved = false;
            while let Some(m) = self.queue.pop_front() {
                let slow = self.delayed.iter_mut().find(|s| {
                    s.pair == (m.0, m.1) && (s.first.is_none_or(|f| f(&m.2)) || !s.held.is_empty())
                });
                if let Some(s) = slow {
                    s.held.push_back(m);
                    continue;
                }
                let (from, to, bytes, _) = m;
                moved = true;
                let now = self.now;
                self.with(to, |e| e.handle(now, Input::Message { from, bytes }));
            }
            for r in 0..self.engines.len() {
                moved |= self.serve_outputs(r, caller);
                moved |= self.pull_data(r);
            }
            steps += 1;
            if !moved {
                return steps;
            }
        }
    }

    /// Does what `rank`'s engine asked of its caller (plans are made here, at once).
    fn serve_outputs(&mut self, rank: usize, caller: &mut dyn Caller) -> bool {
        let mut moved = false;
        let outputs = std::mem::take(&mut self.outputs[rank]);
        for o in outputs {
            let now = self.now;
            let input = match o {
                Output::ReadSource { epoch, ids } => {
                    Input::SourceRead { epoch, result: caller.read(rank, &ids) }
                }
                Output::NeedContent => Input::Content(caller.content(rank)),
                Output::NeedStore { offsets } => Input::Store(caller.open_store(rank, &offsets)),
                Output::NeedState => match caller.state(rank) {
                    Ok(state) => Input::State(state),
                    Err(e) => Input::Fail(crate::PlaneError::Internal(e)),
                },
                Output::Restore { state, epoch } => Input::Restored(caller.restore(&state, epoch)),
                Output::Plan { schedule, segmentation, round_bytes, link_rate } => {
                    let started = Instant::now();
                    let result = CodedSend::plan(schedule.as_ref(), segmentation, round_bytes, link_rate)
                        .map(Box::new)
                        .map_err(|e| e.to_string());
                    Input::Planned {
                        epoch: schedule.epoch() + 1,
                        digest: schedule.digest(),
                        result,
                        seconds: started.elapsed().as_secs_f64(),
                    }
                }
                Output::Served(f) => {
                    self.served[rank].push(*f);
                    continue;
                }
                other => {
                    self.outputs[rank].push(other);
                    continue;
                }
            };
            self.with(rank, |e| e.handle(now, input));
            moved = true;
        }
        moved
    }

    /// What the store `rank` served so far.
    pub fn take_served(&mut self, rank: usize) -> Vec<Figures> {
        std::mem::take(&mut self.served[rank])
    }

    /// Lets `rank` send a few chunks to every peer.
    fn pull_data(&mut self, rank: usize) -> bool {
        let world = self.engines.len();
        let now = self.now;
        let mut moved = false;
        for peer in (0..world).filter(|&p| p != rank) {
            if self.engines[peer].is_none() {
                continue;
            }
            for _ in 0..CHUNKS_PER_STEP {
                let Some(engine) = self.engines.get_mut(rank).and_then(Option::as_mut) else { return moved };
                let start = Instant::now();
                let t = engine.poll_data(peer, now);
                self.traffic[rank].engine_seconds += start.elapsed().as_secs_f64();
                let Some(t) = t else { break };
                self.traffic[rank].data_sent += t.bytes.len() as u64;
                self.traffic[rank].messages_sent += 1;
                self.queue.push_back((rank, t.to, t.bytes, true));
                moved = true;
            }
            self.collect(rank);
        }
        moved
    }

    /// Holds back what `from` sends `to` (in order) until [`Hub::release`].
    pub fn delay(&mut self, from: usize, to: usize) {
        self.delayed.push(Slow { pair: (from, to), first: None, held: VecDeque::new() });
    }

    /// Holds back what `from` sends `to` from the first message `first` picks (by its bytes)
    /// on, in order, until [`Hub::release`].
    pub fn delay_from(&mut self, from: usize, to: usize, first: fn(&[u8]) -> bool) {
        self.delayed.push(Slow { pair: (from, to), first: Some(first), held: VecDeque::new() });
    }

    /// Lets what `from` sends `to` through again, what was held first.
    pub fn release(&mut self, from: usize, to: usize) {
        if let Some(i) = self.delayed.iter().position(|s| s.pair == (from, to)) {
            let slow = self.delayed.remove(i);
            for m in slow.held.into_iter().rev() {
                self.queue.push_front(m);
            }
        }
    }

    /// Puts a frozen rank's engine back.
    pub fn thaw(&mut self, rank: usize, engine: Engine) {
        self.engines[rank] = Some(engine);
    }
}
