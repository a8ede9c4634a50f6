//! The worker's side of the epoch loop: receive the order, decode the coded packets, check the
//! new records against the master's checksum, keep the next cache, train, reply.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ubershuffle_codes::{DecodeStore, Decoder, RecordStore, SegmentTarget, Segmentation};
use ubershuffle_core::limits::Limits;
use ubershuffle_learners::{Learner, LearnerError, LocalStep, Model};
use ubershuffle_transport::{Transport, TransportError};

use crate::cost_model::{Prices, Work};
use crate::phases::{Phase, Stopwatch};
use crate::protocol::{
    DataChunkRef, EpochAck, EpochOrder, JobSpec, MasterMessage, RecordShape, TAG_MASTER, TAG_RECEIVED,
    TAG_UPDATE, UpdateOutcome, UpdateReport, broadcast_name, records_checksum,
};
use crate::worker_store::{Borrowed, MemoryStore, ReadRecords, WorkerStore};
use crate::{ProtocolError, RuntimeError};
use ubershuffle_core::epoch_chain::next_cache;

/// How a worker behaves. Every wait derives from the transport's timeout `T` (over TCP, the
/// master's `--timeout`, sent with the job): a wait on one message lasts at most `T`, and the
/// worker gives up on a master it has heard nothing from for `2 T` (see [`run_worker`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// Fault injection for tests and demonstrations: leave the run, as a killed process would
    /// (dropping every connection), on receiving this epoch's order.
    pub exit_at_epoch: Option<u32>,
    /// The cost model's prices of the worker's computing, charged to its transport's clock (an
    /// emulated cluster in charged mode; other clocks ignore charges).
    pub prices: Option<Prices>,
}

impl WorkerOptions {
    /// Leaves the run, as if killed, on receiving `epoch`'s order.
    pub fn with_exit_at_epoch(mut self, epoch: Option<u32>) -> Self {
        self.exit_at_epoch = epoch;
        self
    }

    /// Charges computing at `prices`.
    pub fn with_prices(mut self, prices: Option<Prices>) -> Self {
        self.prices = prices;
        self
    }
}

/// How a worker's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerExit {
    /// The master said stop.
    Stopped,
    /// It left on purpose ([`WorkerOptions::exit_at_epoch`], or its record sink was closed).
    InjectedFailure,
}

/// What a worker did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerSummary {
    /// The worker's index (rank - 1).
    pub worker: usize,
    /// Epochs it completed.
    pub epochs: usize,
    /// How it ended.
    pub exit: WorkerExit,
}

/// The worker's state once the master has said who it is.
struct Joined {
    job: JobSpec,
    /// How the job's records read in the master's messages.
    shape: RecordShape,
    learner: Box<dyn Learner>,
    /// The records held: the cache, and after a finished epoch also what that epoch's cache
    /// policy will drop (until the next epoch's order, see [`Finished`]).
    store: Held,
    /// The starting cache, sorted (the cache before any finished epoch).
    starting: Vec<u32>,
    /// The last epoch this worker finished.
    finished: Option<Finished>,
    /// The ranks of the broadcast group, the master first: every rank until the master
    /// announces a smaller group ([`MasterMessage::Members`]) after a loss.
    group: Vec<usize>,
}

/// An epoch the worker finished: its update may still be discarded by the master, which
/// restarts the epoch when another worker is lost after this one replied. The cache the
/// master then assumes is the one from before the epoch, so the worker keeps both until the
/// next order says which.
struct Finished {
    epoch: u32,
    /// The cache at the start of the epoch.
    before: Vec<u32>,
    /// The cache the policy keeps after it.
    after: Vec<u32>,
}

impl Joined {
    /// The cache the master assumes at the start of `epoch`: the one before the last finished
    /// epoch if the master restarts that epoch, else the one after it.
    fn cache_at(&self, epoch: u32) -> Vec<u32> {
        match &self.finished {
            Some(f) if f.epoch == epoch => f.before.clone(),
            Some(f) => f.after.clone(),
            None => self.starting.clone(),
        }
    }
}

/// Where a worker's records are.
enum Held {
    /// Records of one width in the worker's memory, decoded record by record.
    Memory(RecordStore),
    /// Records of uneven size in a [`WorkerStore`], decoded segment by segment.
    Segments { store: Box<dyn WorkerStore>, segmentation: Arc<Segmentation> },
}

impl Held {
    /// The store for the job's records, in memory.
    fn for_job(job: &JobSpec, shape: &RecordShape) -> Result<Held, RuntimeError> {
        let points = job.points as usize;
        Ok(match shape {
            RecordShape::Fixed(width) => Held::Memory(RecordStore::new(points, *width)?),
            RecordShape::Segmented(segmentation) => {
                let store = Box::new(MemoryStore::new(segmentation.index().clone()));
                Held::Segments { store, segmentation: Arc::clone(segmentation) }
            }
            RecordShape::Unknown => return Err(ProtocolError::BeforeJob("records").into()),
        })
    }

    /// Stores a record of the starting cache.
    fn put(&mut self, id: u32, bytes: &[u8]) -> Result<(), RuntimeError> {
        match self {
            Held::Memory(store) => store.insert(id, bytes).map(|_| ())?,
            Held::Segments { store, .. } => store.put(id, bytes)?,
        }
        Ok(())
    }

    /// The records, to read.
    fn records(&self) -> &dyn ReadRecords {
        match self {
            Held::Memory(store) => store,
            Held::Segments { store, .. } => store.as_ref(),
        }
    }
}

/// Runs a worker until the master says stop. Transport trouble inside an epoch (a peer that
/// died, a broadcast that timed out) abandons that attempt and waits for the master's next
/// order; losing the master, or a failure of the worker's own (a record that does not match the
/// master's checksum), ends the run with an error (reported to the master first when possible).
///
/// A frozen master is noticed within `2 T` (`T` the transport's timeout): the worker gives up
/// once `2 T` have passed on its transport's clock since the later of the last message that
/// came from the master (an order, a data chunk, a broadcast) and the update it sent last
/// ([`RuntimeError::MasterSilent`]).
/// The master must therefore send the next order within `2 T` of the last update it waits for:
/// a master that plans longer needs a longer `--timeout`.
pub fn run_worker<T: Transport>(mut t: T, options: &WorkerOptions) -> Result<WorkerSummary, RuntimeError> {
    let result = work(&mut t, options);
    if let Err(e) = &result {
        t.leave(&e.to_string());
    }
    result
}

/// [`run_worker`]'s loop: what the worker knows between messages.
struct WorkerLoop<'o> {
    options: &'o WorkerOptions,
    worker: usize,
    /// How long the worker waits for the master before it gives up on it.
    patience: Duration,
    joined: Option<Joined>,
    epochs: usize,
    /// A message that interrupted an epoch, handled next.
    next: Option<MasterMessage>,
    /// The model of the next epoch, when the master broadcast it.
    model: Option<Vec<u8>>,
    /// The last sign of the master (or the end of this worker's own work), from which the
    /// patience runs, on the transport's clock.
    heard: Instant,
}

fn work<T: Transport>(t: &mut T, options: &WorkerOptions) -> Result<WorkerSummary, RuntimeError> {
    let mut state = WorkerLoop {
        options,
        worker: t.rank().saturating_sub(1),
        patience: t.timeout().saturating_mul(2),
        joined: None,
        epochs: 0,
        next: None,
        model: None,
        heard: t.now(),
    };
    loop {
        let message = state.next_message(t)?;
        if let Some(summary) = state.handle(t, message)? {
            return Ok(summary);
        }
    }
}

impl WorkerLoop<'_> {
    fn summary(&self, exit: WorkerExit) -> WorkerSummary {
        WorkerSummary { worker: self.worker, epochs: self.epochs, exit }
    }

    /// The interrupting message, or the master's next one within the patience left.
    fn next_message<T: Transport>(&mut self, t: &mut T) -> Result<MasterMessage, RuntimeError> {
        if let Some(m) = self.next.take() {
            return Ok(m);
        }
        let patience = self.patience;
        let left =
            self.heard.checked_add(patience).map_or(patience, |end| end.saturating_duration_since(t.now()));
        let shape = self.joined.as_ref().map(|j| j.shape.clone()).unwrap_or_default();
        match recv_master(t, &shape, left) {
            Ok(m) => {
                self.heard = t.now();
                Ok(m)
            }
            Err(RuntimeError::Transport(e)) if e.is_timeout() && e.peer() == Some(0) => {
                Err(RuntimeError::MasterSilent { waited: t.now().saturating_duration_since(self.heard) })
            }
            Err(e) => Err(e),
        }
    }

    /// Handles one message; `Some` when the run is over for this worker.
    fn handle<T: Transport>(
        &mut self,
        t: &mut T,
        message: MasterMessage,
    ) -> Result<Option<WorkerSummary>, RuntimeError> {
        match message {
            MasterMessage::Job(job) => {
                check_job(&job)?;
                let shape = job.shape()?;
                let learner = job.learner.build()?;
                let params = learner.parameter_count();
                let limits = crate::inbox::at_worker(params, job.chunk_bytes as usize, shape.packet_bytes());
                let peers: Vec<usize> = (1..t.size()).filter(|&r| r != t.rank()).collect();
                t.limit_inbox(&peers, limits);
                let store = Held::for_job(&job, &shape)?;
                let group = (0..t.size()).collect();
                let starting = Vec::new();
                self.joined = Some(Joined { job, shape, learner, store, starting, finished: None, group });
            }
            MasterMessage::Records { ids, bytes } => {
                let j = self.joined.as_mut().ok_or_else(|| not_joined("records"))?;
                let mut at = 0;
                for &id in &ids {
                    let size = j.shape.bytes_of(&[id]).unwrap_or(0) as usize;
                    let record = bytes
                        .get(at..at + size)
                        .ok_or(ProtocolError::RecordBytes { records: ids.len(), bytes: bytes.len() })?;
                    j.store.put(id, record)?;
                    at += size;
                }
                j.starting.extend_from_slice(&ids);
                j.starting.sort_unstable();
                j.starting.dedup();
            }
            MasterMessage::Order(order) => return self.on_order(t, &order),
            MasterMessage::Data(_) => {} // a late packet of an abandoned attempt
            MasterMessage::Stop => return Ok(Some(self.summary(WorkerExit::Stopped))),
            MasterMessage::Sync => {
                t.send(0, TAG_RECEIVED, &EpochAck { epoch: 0, attempt: 0 }.to_bytes())?;
            }
            MasterMessage::Members(workers) => self.on_members(t, &workers)?,
            MasterMessage::ModelFollows { epoch, attempt } => self.on_model_follows(t, epoch, attempt)?,
        }
        Ok(None)
    }

    /// Runs the ordered epoch: received -> decoded -> trained, then the update goes out.
    fn on_order<T: Transport>(
        &mut self,
        t: &mut T,
        order: &EpochOrder,
    ) -> Result<Option<WorkerSummary>, RuntimeError> {
        if self.options.exit_at_epoch == Some(order.epoch) {
            return Ok(Some(self.summary(WorkerExit::InjectedFailure)));
        }
        let j = self.joined.as_mut().ok_or_else(|| not_joined("an epoch order"))?;
        let model = self.model.take();
        match run_epoch(t, j, order, model.as_deref(), &mut self.heard, self.options.prices) {
            Ok(EpochEnd::Done) => {
                self.epochs += 1;
                self.heard = t.now();
            }
            Ok(EpochEnd::Interrupted(m)) => self.next = Some(m),
            Err(Failure::Transport(e)) if e.peer() == Some(0) && !e.is_timeout() => {
                // The master may have finished while this worker straggled: its stop is then
                // waiting in the mailbox, before the news that it is gone.
                let last = t.recv(0, TAG_MASTER).map_err(RuntimeError::from);
                return match last.and_then(|bytes| MasterMessage::from_bytes(&bytes, &j.shape)) {
                    Ok(MasterMessage::Stop) => Ok(Some(self.summary(WorkerExit::Stopped))),
                    _ => Err(e.into()),
                };
            }
            Err(Failure::Transport(_)) => {} // the master restarts the epoch; wait for it
            Err(Failure::Own(e)) => {
                let failed = UpdateOutcome::Failed(e.to_string().replace('\n', " "));
                let report = UpdateReport { epoch: order.epoch, attempt: order.attempt, outcome: failed };
                let _ = t.send(0, TAG_UPDATE, &report.to_bytes());
                return Err(e);
            }
        }
        Ok(None)
    }

    /// Takes the broadcast group the master announced after a loss or a rejoin.
    fn on_members<T: Transport>(&mut self, t: &mut T, workers: &[u32]) -> Result<(), RuntimeError> {
        let j = self.joined.as_mut().ok_or_else(|| not_joined("a broadcast group"))?;
        let group = broadcast_group(workers, t.rank(), t.size())?;
        // Workers taken back in while the run goes on linked to this one when they joined:
        // take those links before the group's first broadcast. One that did not come makes that
        // broadcast fail naming it, and the master goes on without it.
        let added: Vec<usize> = group.iter().copied().filter(|r| !j.group.contains(r)).collect();
        if !added.is_empty() {
            let _ = t.await_links(&added);
        }
        j.group = group;
        Ok(())
    }

    /// Takes part in the model's broadcast before the order.
    fn on_model_follows<T: Transport>(
        &mut self,
        t: &mut T,
        epoch: u32,
        attempt: u32,
    ) -> Result<(), RuntimeError> {
        let group = self.joined.as_ref().map_or_else(|| (0..t.size()).collect(), |j| j.group.clone());
        let mut buf = Vec::new();
        match t.broadcast_turned(0, &group, (broadcast_name(epoch, attempt, 0), attempt), &mut buf) {
            Ok(()) => {
                self.heard = t.now();
                self.model = Some(buf);
            }
            Err(e) if e.peer() == Some(0) && !e.is_timeout() => return Err(e.into()),
            // Another worker was lost: the master restarts the epoch.
            Err(_) => self.model = None,
        }
        Ok(())
    }
}

/// Refuses a job whose store (a slot per point, the cache's records) would pass the memory cap
/// ([`ubershuffle_core::limits`]), before allocating it: the sizes come from a peer. Records of
/// uneven size count as the largest of them would.
fn check_job(job: &JobSpec) -> Result<(), RuntimeError> {
    let limits = Limits::from_env()?;
    let slots = u64::from(job.points).saturating_mul(8);
    let cache = match &job.uneven {
        None => u64::from(job.cache_capacity).saturating_mul(u64::from(job.record_width)),
        Some(u) => {
            // The largest `cache_capacity` sizes.
            let mut sizes = u.sizes.clone();
            let take = (job.cache_capacity as usize).min(sizes.len());
            if take > 0 && take < sizes.len() {
                sizes.select_nth_unstable_by(take - 1, |a, b| b.cmp(a));
            }
            sizes.iter().take(take).fold(0u64, |sum, &s| sum.saturating_add(s))
        }
    };
    let records = cache.saturating_mul(2);
    let what = format!("the master's job ({} points, caches of {} records)", job.points, job.cache_capacity);
    Ok(limits.check_memory(&what, slots.saturating_add(records))?)
}

/// The ranks of the broadcast group the master announced (`workers`, 0-based), the master
/// first; checked, as it comes from a peer: increasing, existing ranks, this worker among them.
fn broadcast_group(workers: &[u32], rank: usize, size: usize) -> Result<Vec<usize>, RuntimeError> {
    let group: Vec<usize> = std::iter::once(0).chain(workers.iter().map(|&w| w as usize + 1)).collect();
    let fits = group.windows(2).all(|w| w[0] < w[1]) && group.last().is_some_and(|&r| r < size);
    if !fits || !group.contains(&rank) {
        return Err(ProtocolError::BroadcastGroup { workers: workers.to_vec(), rank }.into());
    }
    Ok(group)
}

fn not_joined(what: &'static str) -> RuntimeError {
    ProtocolError::BeforeJob(what).into()
}

fn recv_master<T: Transport>(
    t: &mut T,
    shape: &RecordShape,
    wait: Duration,
) -> Result<MasterMessage, RuntimeError> {
    MasterMessage::from_bytes(&t.recv_within(0, TAG_MASTER, wait)?, shape)
}

/// How an epoch attempt ended.
enum EpochEnd {
    /// Update sent.
    Done,
    /// A newer order (or a stop) arrived before this attempt's data did.
    Interrupted(MasterMessage),
}

/// Why an epoch attempt failed: the network (the master will restart the epoch), or the
/// worker itself (fatal).
enum Failure {
    Transport(TransportError),
    Own(RuntimeError),
}

impl<E: Into<RuntimeError>> From<E> for Failure {
    fn from(e: E) -> Self {
        match e.into() {
            RuntimeError::Transport(t) => Failure::Transport(t),
            other => Failure::Own(other),
        }
    }
}

/// The payloads this worker needs from one attempt's packets, kept until every packet has
/// arrived and decoded then, so that the master's transmit time is moving bytes and
/// `decode_seconds` is decoding (the received phase).
struct Received {
    /// `(index in the order's plan, payload)`.
    needed: Vec<(u32, Vec<u8>)>,
    /// Every payload byte that arrived, needed or not.
    bytes: u64,
}

/// What the trained phase sends: the update's bytes and the work that made it.
struct Trained {
    update: Vec<u8>,
}

/// One epoch attempt at a worker, phase by phase: received -> decoded -> trained, then the
/// update goes out.
fn run_epoch<T: Transport>(
    t: &mut T,
    j: &mut Joined,
    order: &EpochOrder,
    broadcast_model: Option<&[u8]>,
    heard: &mut Instant,
    prices: Option<Prices>,
) -> Result<EpochEnd, Failure> {
    let received = match receive(t, j, order, heard, prices)? {
        Ok(received) => received,
        // The store is untouched so far: the next order finds the cache where it was.
        Err(interrupt) => return Ok(EpochEnd::Interrupted(interrupt)),
    };
    t.send(0, TAG_RECEIVED, &EpochAck { epoch: order.epoch, attempt: order.attempt }.to_bytes())?;
    // Decoding and training are timed on the transport's clock: on an emulated cluster, what a
    // node of its own would spend (its thread's CPU time, or the cost model's price), however
    // many emulated nodes share this machine's cores.
    let mut watch = Stopwatch::start(t, prices);
    let received_bytes = received.bytes;
    decode(t, j, order, received, &mut watch)?;
    release_old(j)?;
    let trained = train(t, j, order, broadcast_model, &mut watch)?;
    if order.hold_seconds != 0.0 {
        // A value from the peer: checked, never trusted to convert.
        let hold = Duration::try_from_secs_f64(order.hold_seconds)
            .map_err(|_| RuntimeError::from(ProtocolError::HoldTime { seconds: order.hold_seconds }))?;
        t.pass(hold);
    }
    let report = UpdateReport {
        epoch: order.epoch,
        attempt: order.attempt,
        outcome: UpdateOutcome::Done {
            update: trained.update,
            decode_seconds: watch.timer.spent(Phase::Decode).as_secs_f64(),
            train_seconds: watch.timer.spent(Phase::Train).as_secs_f64(),
            received_bytes,
        },
    };
    t.send(0, TAG_UPDATE, &report.to_bytes())?;
    Ok(EpochEnd::Done)
}

/// The received phase: the order's broadcasts, then its point-to-point chunks. Between the
/// order and the first broadcast only what receiving needs: every rank takes part in each
/// pseudo-broadcast's ring, so work here holds up the whole cluster. `Err` inside: a newer
/// order (or a stop) came first.
fn receive<T: Transport>(
    t: &mut T,
    j: &Joined,
    order: &EpochOrder,
    heard: &mut Instant,
    prices: Option<Prices>,
) -> Result<Result<Received, MasterMessage>, Failure> {
    let width = j.shape.packet_bytes();
    let mut keeper = Keeper::new(order, prices);
    for k in 0..order.broadcasts {
        let mut buf = Vec::new();
        let name = broadcast_name(order.epoch, order.attempt, k + 1);
        t.broadcast_turned(0, &j.group, (name, order.attempt), &mut buf)?;
        *heard = t.now();
        let chunk = DataChunkRef::from_bytes(&buf, width)?;
        check_current(chunk.epoch, chunk.attempt, order)?;
        keeper.keep(t, &mut chunk.packets());
    }
    let mut unicasts = 0;
    while unicasts < order.unicasts {
        let bytes = t.recv(0, TAG_MASTER)?;
        *heard = t.now();
        match MasterMessage::from_bytes(&bytes, &j.shape)? {
            MasterMessage::Data(chunk) if (chunk.epoch, chunk.attempt) == (order.epoch, order.attempt) => {
                keeper.keep(t, &mut chunk.packets());
                unicasts += 1;
            }
            MasterMessage::Data(_) => {}
            // The master abandoned this attempt (a worker was lost): what it sends next.
            interrupt @ (MasterMessage::Order(_)
            | MasterMessage::Stop
            | MasterMessage::Sync
            | MasterMessage::Members(_)
            | MasterMessage::ModelFollows { .. }) => return Ok(Err(interrupt)),
            _ => return Err(RuntimeError::from(ProtocolError::UnexpectedDuringEpoch).into()),
        }
    }
    Ok(Ok(keeper.received))
}

/// Keeps the payloads of the packets a worker needs and charges their copies.
struct Keeper {
    /// Index in the order's plan of each sequence number the worker needs.
    local: HashMap<u32, usize>,
    prices: Option<Prices>,
    received: Received,
}

impl Keeper {
    fn new(order: &EpochOrder, prices: Option<Prices>) -> Keeper {
        let local = order.seqs.iter().enumerate().map(|(k, &s)| (s, k)).collect();
        let received = Received { needed: Vec::with_capacity(order.seqs.len()), bytes: 0 };
        Keeper { local, prices, received }
    }

    fn keep<T: Transport>(&mut self, t: &mut T, packets: &mut dyn Iterator<Item = (u32, &[u8])>) {
        let mut copied = 0;
        for (seq, payload) in packets {
            self.received.bytes += payload.len() as u64;
            if let Some(&k) = self.local.get(&seq) {
                self.received.needed.push((k as u32, payload.to_vec()));
                copied += payload.len() as u64;
            }
        }
        if let Some(prices) = &self.prices {
            t.charge(prices.cost(&Work { copied_bytes: copied, ..Work::default() }));
        }
    }
}

/// The decoded phase: peels the packets into the new records, checks them against the
/// master's checksum, and keeps the next cache (the store holds both until the epoch is
/// decoded: [`WorkerStore::taken`]).
fn decode<T: Transport>(
    t: &mut T,
    j: &mut Joined,
    order: &EpochOrder,
    received: Received,
    watch: &mut Stopwatch,
) -> Result<(), Failure> {
    let worker = j.job.worker;
    let old_cache = j.cache_at(order.epoch);
    j.finished = None;
    let (checksum, work) = match &mut j.store {
        Held::Memory(store) => decode_records(store, worker, order, &old_cache, received)?,
        Held::Segments { store, segmentation } => {
            decode_segments(store.as_mut(), segmentation, worker, order, &old_cache, received)?
        }
    };
    if checksum != order.checksum {
        let mismatch = ProtocolError::Checksum { worker, decoded: checksum, expected: order.checksum };
        return Err(RuntimeError::from(mismatch).into());
    }
    let capacity = j.job.cache_capacity as usize;
    let kept = next_cache(&old_cache, &order.batch, capacity, j.job.seed, order.epoch, worker);
    j.finished = Some(Finished { epoch: order.epoch, before: old_cache, after: kept });
    watch.lap(t, Phase::Decode, work);
    Ok(())
}

/// What decoding an epoch gave: the checksum of the new records, and the work.
type DecodedEpoch = (u32, Work);

/// Hands the payloads this worker kept to `decoder` (each with its transmission's parts from
/// the order); returns the bytes XORed.
fn feed<S: DecodeStore>(
    decoder: &mut Decoder<S>,
    order: &EpochOrder,
    received: Received,
) -> Result<u64, Failure> {
    let mut xored = 0;
    for (k, payload) in &received.needed {
        let transmission = order.plan.transmission(*k as usize);
        xored += (transmission.len() * payload.len()) as u64;
        decoder.receive(*k, transmission, payload)?;
    }
    Ok(xored)
}

/// [`decode`] into records of one width in memory, record by record. The decoder starts from
/// the cache the master assumes, copied out of `store` (tens of MB: work that must not stand
/// between the order and the broadcasts, so it runs once the packets have arrived).
fn decode_records(
    store: &mut RecordStore,
    worker: u32,
    order: &EpochOrder,
    old_cache: &[u32],
    received: Received,
) -> Result<DecodedEpoch, Failure> {
    let width = store.width();
    if store.len() != old_cache.len() {
        *store = store.retain_only(old_cache); // the old cache is a subset of the store
    }
    let wanted: Vec<u32> = order.batch.iter().copied().filter(|&p| !store.contains(p)).collect();
    let cache = std::mem::replace(store, RecordStore::new(0, width)?);
    let mut decoder = Decoder::new(worker as usize, &order.plan, cache, wanted)?;
    let xored = feed(&mut decoder, order, received)?;
    let decoded = decoder.finish()?;
    let checksum = records_checksum(decoded.new_records());
    *store = decoded.into_store();
    let work = Work {
        xored_bytes: xored,
        // The cache restored into the decoder's store.
        copied_bytes: (old_cache.len() * width) as u64,
        peeled_parts: order.plan.iter().map(|p| p.len() as u64).sum(),
        checksummed_bytes: (order.batch.len() * width) as u64,
        kept_points: (old_cache.len() + order.batch.len()) as u64,
        ..Work::default()
    };
    Ok((checksum, work))
}

/// [`decode`] into a [`WorkerStore`], segment by segment: the one decoder over a
/// [`SegmentTarget`] writes each learned segment into its record's place in the store.
fn decode_segments(
    store: &mut dyn WorkerStore,
    segmentation: &Arc<Segmentation>,
    worker: u32,
    order: &EpochOrder,
    old_cache: &[u32],
    received: Received,
) -> Result<DecodedEpoch, Failure> {
    store.start_epoch(old_cache)?;
    let wanted: Vec<u32> =
        order.batch.iter().copied().filter(|p| old_cache.binary_search(p).is_err()).collect();
    let target = SegmentTarget::new(Arc::clone(segmentation), Borrowed(&mut *store), old_cache, &wanted);
    let known = target.known_segments();
    let mut decoder =
        Decoder::over(worker as usize, &order.plan, target, known, segmentation.expand(&wanted))?;
    let xored = feed(&mut decoder, order, received)?;
    let target = decoder.finish()?.into_store();
    if let Some(&point) = target.incomplete().first() {
        return Err(RuntimeError::from(ubershuffle_codes::CodecError::UnknownPoint { point }).into());
    }
    drop(target);
    let mut checksum = 0;
    store.read(&wanted, &mut |views| {
        checksum = records_checksum(wanted.iter().copied().zip(views.iter().copied()))
    })?;
    let work = Work {
        xored_bytes: xored,
        peeled_parts: order.plan.iter().map(|p| p.len() as u64).sum(),
        checksummed_bytes: segmentation.index().bytes_of(&wanted),
        kept_points: (old_cache.len() + order.batch.len()) as u64,
        ..Work::default()
    };
    Ok((checksum, work))
}

/// Tells a store of records of uneven size that the epoch is decoded: it lets go of what the
/// next cache does not keep.
fn release_old(j: &mut Joined) -> Result<(), RuntimeError> {
    let Some(finished) = &j.finished else { return Ok(()) };
    if let Held::Segments { store, .. } = &mut j.store {
        store.taken(&finished.before, &finished.after)?;
    }
    Ok(())
}

/// The trained phase: the local update on the new batch from the epoch's model.
fn train<T: Transport>(
    t: &mut T,
    j: &Joined,
    order: &EpochOrder,
    broadcast_model: Option<&[u8]>,
    watch: &mut Stopwatch,
) -> Result<Trained, Failure> {
    // An empty model in the order: the master broadcast it before the order.
    let model_bytes = match (&order.model, broadcast_model) {
        (m, _) if !m.is_empty() => m.as_slice(),
        (_, Some(m)) => m,
        (_, None) => return Err(RuntimeError::from(ProtocolError::ModelMissing).into()),
    };
    let model = Model::from_bytes(model_bytes, j.learner.parameter_count())?;
    let step = LocalStep { epoch: order.epoch as usize, worker: j.job.worker as usize, seed: j.job.seed };
    // Replaced by the update once the store hands the batch over.
    let mut trained = Err(LearnerError::InvalidParameter("the batch was not read".into()));
    j.store
        .records()
        .read(&order.batch, &mut |batch| trained = j.learner.local_update(&model, batch, step))?;
    let update = trained?.to_bytes();
    let work = Work {
        coordinates: j.job.learner.update_work(order.batch.len()),
        copied_bytes: (model_bytes.len() + update.len()) as u64,
        ..Work::default()
    };
    watch.lap(t, Phase::Train, work);
    Ok(Trained { update })
}

fn check_current(epoch: u32, attempt: u32, order: &EpochOrder) -> Result<(), RuntimeError> {
    if (epoch, attempt) != (order.epoch, order.attempt) {
        return Err(ProtocolError::StaleBroadcast {
            epoch,
            attempt,
            current_epoch: order.epoch,
            current_attempt: order.attempt,
        }
        .into());
    }
    Ok(())
}
