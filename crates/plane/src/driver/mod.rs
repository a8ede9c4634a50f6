//! The I/O driver over TCP: [`Plane`] owns the engine, the connections and their threads, and
//! the clock; the caller's threads (Python's, with the GIL released) only hand it requests and
//! wait for answers.
//!
//! Threads: one runs the engine (every event in turn: messages, answers, timers); per peer one
//! reads frames off its connection and one writes the frames the engine hands it; one reads
//! records from the source. Why threads per peer and not an event loop (mio, tokio): with
//! blocking sockets the kernel does the waiting and the sealed framing of `crates/transport`
//! is reused as it is; a plane of up to a few hundred ranks has a few hundred threads per
//! rank, each asleep but for its link's bytes (docs/transport.md has the measurements that
//! chose it, and the reach).
//!
//! The engine hands a peer's writer records only while fewer than [`QUEUED_CHUNKS`] chunks
//! wait for that connection, so a delivery is read from the record store as fast as the link
//! takes it and no faster.

pub mod host;
pub mod mesh;
pub mod outside;
mod source;

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::write_frame_on;

use crate::engine::{Engine, EngineConfig, Figures, Input, Output};
use crate::error::PlaneError;
use crate::schedule::Schedule;
use crate::store::SharedStore;
use mesh::{Link, MAX_MESSAGE};
pub use source::Hooks;

/// Chunks queued for one connection at the most before the engine waits for its writer.
pub const QUEUED_CHUNKS: usize = 4;

/// What the engine's thread is told.
enum Event {
    /// From a connection.
    Net(Input),
    /// A peer's writer has room again.
    Drained,
    /// From the caller.
    Call(Call),
    /// From the source's reader.
    Source(Input),
}

/// The figures of deliveries that ended without being asked for, by epoch.
type Unasked = Vec<(u64, Box<Figures>)>;

/// A caller's request.
enum Call {
    SetEpoch(Box<dyn Schedule>, Sender<Result<Box<Figures>, PlaneError>>),
    Agreed(Sender<Result<(), PlaneError>>),
    Idle(Sender<()>),
    IsIdle(Sender<bool>),
    Gradients(Input),
    Failure(Sender<Option<PlaneError>>),
    Serve(Sender<Result<Vec<Figures>, PlaneError>>),
    ClosedAfter(Sender<Option<Option<u64>>>),
    Close(Sender<Unasked>),
}

/// One peer's writer: its queue and how full it is.
struct Writer {
    tx: Option<Sender<Vec<u8>>>,
    queued: Arc<AtomicUsize>,
}

/// The plane of one rank over TCP (see the module's docs). Every method may be called from
/// any thread; the blocking ones wait on the engine's thread.
pub struct Plane {
    tx: Sender<Event>,
    engine: Mutex<Option<JoinHandle<()>>>,
    /// Disconnected once every link's writer has ended (each holds a sender).
    writers_ended: Mutex<Option<Receiver<()>>>,
    rank: usize,
}

/// The most [`Plane::close`] waits for the links' writers to put out what is queued (the
/// close messages, records already handed over), so that a process that exits right after
/// closing does not cut its peers off mid-message.
const FLUSH_SECONDS: f64 = 5.0;

impl Plane {
    /// Starts the engine of `cfg` over `links` (from [`mesh::link_up`]), its records in
    /// `store` (`None`: a store-mode training rank without a source, which makes it through
    /// `hooks` once the store sent the index), asking `hooks` for what only the caller can do.
    /// The start-up agreement runs at once ([`Plane::wait_agreed`]).
    pub fn start(
        cfg: EngineConfig,
        store: Option<SharedStore>,
        links: Vec<Option<Link>>,
        reader: Box<dyn Hooks>,
    ) -> Result<Plane, PlaneError> {
        let (tx, rx) = channel::<Event>();
        let rank = cfg.rank;
        let mut writers = Vec::new();
        let (writing, writers_ended) = channel::<()>();
        for link in links {
            let Some(link) = link else {
                writers.push(Writer { tx: None, queued: Arc::new(AtomicUsize::new(0)) });
                continue;
            };
            writers.push(spawn_link(link, rank, tx.clone(), writing.clone())?);
        }
        drop(writing);
        let source_tx = source::spawn(reader, tx.clone())?;
        let clock = Instant::now();
        let engine = Engine::new(cfg, store, 0.0);
        let events = tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ubershuffle-engine-{rank}"))
            .spawn(move || run(engine, rx, writers, source_tx, events, clock))
            .map_err(|e| PlaneError::Internal(format!("cannot start the engine's thread: {e}")))?;
        Ok(Plane {
            tx,
            engine: Mutex::new(Some(thread)),
            writers_ended: Mutex::new(Some(writers_ended)),
            rank,
        })
    }

    fn call<T>(&self, make: impl FnOnce(Sender<T>) -> Call, doing: &str) -> Result<T, PlaneError> {
        let (reply, answer) = channel();
        let gone = || PlaneError::Closed { plane: "plane".into(), me: self.rank, doing: doing.into() };
        self.tx.send(Event::Call(make(reply))).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())
    }

    /// Waits for the start-up agreement: `Ok` once every rank agreed on the settings and the
    /// data set, or the first difference.
    pub fn wait_agreed(&self) -> Result<(), PlaneError> {
        self.call(Call::Agreed, "starting")?
    }

    /// Makes the records of `schedule`'s epoch local (waiting as long as the peers it waits on
    /// are alive), then starts the next epoch's delivery; returns what the epoch's delivery
    /// moved and cost.
    pub fn set_epoch(&self, schedule: Box<dyn Schedule>) -> Result<Box<Figures>, PlaneError> {
        let doing = format!("asking for epoch {}", schedule.epoch());
        self.call(|r| Call::SetEpoch(schedule, r), &doing)?
    }

    /// The store's loop: serves the training ranks' requests until every one of them closed;
    /// returns the figures of every epoch served, or the first failure.
    pub fn serve(&self) -> Result<Vec<Figures>, PlaneError> {
        self.call(Call::Serve, "serving")?
    }

    /// The store's view of its training ranks' closes: the last epoch all their callers had
    /// taken, once every one of them closed or was lost, waiting at most `wait` for it
    /// (`None`: one took none, was lost, or had not closed in time).
    pub fn closed_after(&self, wait: Duration) -> Option<u64> {
        let until = Instant::now() + wait;
        loop {
            match self.call(Call::ClosedAfter, "asking") {
                Ok(Some(taken)) => return taken,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                _ => return None,
            }
        }
    }

    /// Waits until the delivery in flight has ended (or failed, or the plane closed).
    pub fn wait_idle(&self) {
        let _ = self.call(Call::Idle, "waiting for the delivery");
    }

    /// Whether no delivery is in flight now.
    pub fn is_idle(&self) -> bool {
        self.call(Call::IsIdle, "asking").unwrap_or(true)
    }

    /// A step's all-reduce began.
    pub fn allreduce_began(&self) {
        let _ = self.tx.send(Event::Call(Call::Gradients(Input::AllReduceBegan)));
    }

    /// The step's all-reduce ended, `wire_bytes` on the wire at this rank.
    pub fn allreduce_ended(&self, wire_bytes: f64) {
        let _ = self.tx.send(Event::Call(Call::Gradients(Input::AllReduceEnded { wire_bytes })));
    }

    /// Whether the training thread waits for the delivery (then nothing is held).
    pub fn training_waits(&self, waits: bool) {
        let _ = self.tx.send(Event::Call(Call::Gradients(Input::TrainingWaits(waits))));
    }

    /// Waits for the plane's first failure (`None` once it closed cleanly): for a thread that
    /// logs it as it happens.
    pub fn next_failure(&self) -> Option<PlaneError> {
        self.call(Call::Failure, "watching").ok().flatten()
    }

    /// Closes the plane: every peer is told, an epoch asked for fails, the connections end.
    /// Returns the figures of a delivery that ended without being asked for. Safe from any
    /// thread, and more than once.
    pub fn close(&self) -> Unasked {
        let unasked = self.call(Call::Close, "closing").unwrap_or_default();
        let handle = self.engine.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        // The engine's thread dropped the writers' queues: each writer puts out what it holds
        // and ends.
        let ended = self.writers_ended.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(ended) = ended {
            // Nothing is sent on it: it answers once the last writer ended, or at the bound.
            let _ = ended.recv_timeout(Duration::from_secs_f64(FLUSH_SECONDS));
        }
        unasked
    }
}

impl Drop for Plane {
    fn drop(&mut self) {
        self.close();
    }
}

/// Starts `link`'s reader and writer; returns the writer's handle.
fn spawn_link(
    link: Link,
    rank: usize,
    events: Sender<Event>,
    writing: Sender<()>,
) -> Result<Writer, PlaneError> {
    let Link { peer, mut reader, mut writer, mut opening, mut sealing } = link;
    let queued = Arc::new(AtomicUsize::new(0));
    // Unbounded: control messages never wait (a frozen peer's queue grows by a beat a period
    // until its silence is named); records wait on `queued`.
    let (tx, rx) = channel::<Vec<u8>>();
    let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .map(drop)
            .map_err(|e| PlaneError::Internal(format!("cannot start a link's thread: {e}")))
    };
    let read_events = events.clone();
    spawn(
        format!("ubershuffle-read-{peer}"),
        Box::new(move || {
            loop {
                let buffer = crate::buffers::take(0);
                match opening.read_frame_into(&mut reader, MAX_MESSAGE, buffer) {
                    Ok(frame) => {
                        let input = Input::Message { from: peer, bytes: frame.payload };
                        if read_events.send(Event::Net(input)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = read_events.send(Event::Net(Input::Lost { peer, detail: e.to_string() }));
                        return;
                    }
                }
            }
        }),
    )?;
    let counter = Arc::clone(&queued);
    spawn(
        format!("ubershuffle-write-{peer}"),
        Box::new(move || {
            // Held while this writer runs: its end disconnects the plane's `writers_ended`.
            let _writing = writing;
            for bytes in rx {
                let sent = write_frame_on(
                    Some(&mut sealing),
                    &mut writer,
                    (FrameKind::Message, rank as u32, 0),
                    &[&bytes],
                );
                crate::buffers::give(bytes);
                if counter.fetch_sub(1, Ordering::AcqRel) <= QUEUED_CHUNKS {
                    let _ = events.send(Event::Drained);
                }
                if let Err(e) = sent {
                    // The reader says why the connection ended (the peer's close, which may
                    // still wait in the socket, or its death): a broken pipe only stops writing.
                    tracing::debug!("rank {rank}'s link to rank {peer} stopped writing: {e}");
                    return;
                }
            }
            let _ = writer.flush();
            let _ = writer.shutdown(std::net::Shutdown::Both);
        }),
    )?;
    Ok(Writer { tx: Some(tx), queued })
}

/// The engine's thread: every event in turn, then whatever the engine wants done.
fn run(
    mut engine: Engine,
    rx: Receiver<Event>,
    mut writers: Vec<Writer>,
    source: Sender<source::Job>,
    events: Sender<Event>,
    clock: Instant,
) {
    let now = || clock.elapsed().as_secs_f64();
    let mut waiting: VecDeque<Sender<Result<Box<Figures>, PlaneError>>> = VecDeque::new();
    let mut agreed: Option<Result<(), PlaneError>> = None;
    let mut agree_waiters: Vec<Sender<Result<(), PlaneError>>> = Vec::new();
    let mut idle_waiters: Vec<Sender<()>> = Vec::new();
    let mut failure_waiters: Vec<Sender<Option<PlaneError>>> = Vec::new();
    let mut unasked: Unasked = Vec::new();
    let mut closing: Option<Sender<Unasked>> = None;
    let mut served: Vec<Figures> = Vec::new();
    let mut serving: Vec<Sender<Result<Vec<Figures>, PlaneError>>> = Vec::new();
    let mut finished = false;
    loop {
        let event = match engine.next_timeout() {
            Some(at) => {
                let wait = Duration::from_secs_f64((at - now()).max(0.0));
                match rx.recv_timeout(wait) {
                    Ok(e) => Some(e),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            None => match rx.recv() {
                Ok(e) => Some(e),
                Err(_) => return,
            },
        };
        let t = now();
        match event {
            None => engine.tick(t),
            Some(Event::Net(input) | Event::Source(input)) => engine.handle(t, input),
            Some(Event::Drained) => engine.tick(t),
            Some(Event::Call(call)) => match call {
                Call::SetEpoch(schedule, reply) => {
                    waiting.push_back(reply);
                    engine.handle(t, Input::SetEpoch(schedule));
                }
                Call::Agreed(reply) => match &agreed {
                    Some(r) => {
                        let _ = reply.send(r.clone());
                    }
                    None => agree_waiters.push(reply),
                },
                Call::Idle(reply) => idle_waiters.push(reply),
                Call::IsIdle(reply) => {
                    let _ = reply.send(engine.is_idle());
                }
                Call::Gradients(input) => engine.handle(t, input),
                Call::Failure(reply) => match engine.failure() {
                    Some(e) => {
                        let _ = reply.send(Some(e.clone()));
                    }
                    None if engine.is_closed() => {
                        let _ = reply.send(None);
                    }
                    None => failure_waiters.push(reply),
                },
                Call::Serve(reply) => match engine.failure() {
                    Some(PlaneError::PeerClosed { .. }) => {
                        let _ = reply.send(Ok(std::mem::take(&mut served)));
                    }
                    Some(e) => {
                        let _ = reply.send(Err(e.clone()));
                    }
                    None if finished || engine.is_closed() => {
                        let _ = reply.send(Ok(std::mem::take(&mut served)));
                    }
                    None => serving.push(reply),
                },
                Call::ClosedAfter(reply) => {
                    let _ = reply.send(engine.closed_after());
                }
                Call::Close(reply) => {
                    engine.handle(t, Input::Close);
                    closing = Some(reply);
                }
            },
        }
        // What the engine wants sent: control first, then records while the links have room.
        while let Some(out) = engine.poll_transmit() {
            queue(&mut writers, out.to, out.bytes);
        }
        for peer in 0..writers.len() {
            while writers[peer].tx.is_some() && writers[peer].queued.load(Ordering::Acquire) < QUEUED_CHUNKS {
                let Some(out) = engine.poll_data(peer, now()) else { break };
                queue(&mut writers, peer, out.bytes);
            }
        }
        while let Some(out) = engine.poll_transmit() {
            queue(&mut writers, out.to, out.bytes);
        }
        while let Some(output) = engine.poll_output() {
            match output {
                Output::Agreed => {
                    agreed = Some(Ok(()));
                    for w in agree_waiters.drain(..) {
                        let _ = w.send(Ok(()));
                    }
                }
                Output::NeedContent => {
                    let _ = source.send(source::Job::Content);
                }
                Output::NeedStore { offsets } => {
                    let _ = source.send(source::Job::OpenStore(offsets));
                }
                Output::NeedState => {
                    let _ = source.send(source::Job::State);
                }
                Output::Restore { state, epoch } => {
                    let _ = source.send(source::Job::Restore(state, epoch));
                }
                Output::Plan { schedule, segmentation, round_bytes, link_rate } => {
                    let settings = (round_bytes, link_rate);
                    if let Err(e) = source::plan(schedule, segmentation, settings, events.clone()) {
                        engine.handle(now(), Input::Fail(e));
                    }
                }
                Output::Served(figures) => served.push(*figures),
                Output::Finished => {
                    finished = true;
                    for w in serving.drain(..) {
                        let _ = w.send(Ok(std::mem::take(&mut served)));
                    }
                }
                Output::ReadSource { epoch, ids } => {
                    if let Some(store) = engine.record_store() {
                        let _ = source.send(source::Job::Read(epoch, ids, store));
                    }
                }
                Output::Ready { figures, .. } => {
                    if let Some(w) = waiting.pop_front() {
                        let _ = w.send(Ok(figures));
                    }
                }
                Output::Unasked { epoch, figures } => unasked.push((epoch, figures)),
                Output::Failed(e) => {
                    if agreed.is_none() {
                        agreed = Some(Err(e.clone()));
                        for w in agree_waiters.drain(..) {
                            let _ = w.send(Err(e.clone()));
                        }
                    }
                    for w in waiting.drain(..) {
                        let _ = w.send(Err(e.clone()));
                    }
                    for w in failure_waiters.drain(..) {
                        let _ = w.send(Some(e.clone()));
                    }
                    // A training rank that closed mid-delivery ends serving too, quietly.
                    let quiet = matches!(e, PlaneError::PeerClosed { .. });
                    for w in serving.drain(..) {
                        let _ = w.send(if quiet { Ok(std::mem::take(&mut served)) } else { Err(e.clone()) });
                    }
                }
            }
        }
        if engine.failure().is_some() || engine.is_closed() || engine.is_idle() {
            for w in idle_waiters.drain(..) {
                let _ = w.send(());
            }
        }
        if let Some(reply) = closing.take() {
            for w in failure_waiters.drain(..) {
                let _ = w.send(engine.failure().cloned());
            }
            for w in serving.drain(..) {
                let _ = w.send(Ok(std::mem::take(&mut served)));
            }
            // The writers send what is queued (the close), then end their connections.
            for w in &mut writers {
                w.tx = None;
            }
            let _ = reply.send(std::mem::take(&mut unasked));
            return;
        }
    }
}

/// Hands `bytes` to `peer`'s writer.
fn queue(writers: &mut [Writer], peer: usize, bytes: Vec<u8>) {
    let Some(w) = writers.get_mut(peer) else { return };
    let Some(tx) = &w.tx else { return };
    w.queued.fetch_add(1, Ordering::AcqRel);
    if tx.send(bytes).is_err() {
        w.tx = None;
    }
}
