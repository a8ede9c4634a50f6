//! Setting up and resuming a run: the starting state (fresh, from a given partition, or from a
//! matched checkpoint), and the workers' jobs and starting caches.

use std::sync::Arc;

use ubershuffle_codes::Segmentation;
use ubershuffle_core::epoch_chain::{ChainError, EpochChain};
use ubershuffle_learners::Learner;
use ubershuffle_transport::Transport;

use super::membership::lost_worker;
use super::{Master, RunState};
use crate::checkpoint::ResumePoint;
use crate::fingerprint::RunFingerprint;
use crate::protocol::{JobSpec, MasterMessage, TAG_RECEIVED, UnevenJob};
use crate::run_data::ShuffledRecords;
use crate::{CheckedRunConfig, Checkpoint, ConfigError, RuntimeError};

/// A fresh run's state: the starting model and a fresh chain.
pub(super) fn fresh_state(
    config: &CheckedRunConfig,
    fingerprint: RunFingerprint,
    learner: &dyn Learner,
) -> Result<RunState, RuntimeError> {
    let model = learner.initial_model(config.seed).params;
    let chain = EpochChain::new(config.chain_params())?;
    Ok(RunState { fingerprint, chain, model, metrics: Vec::new() })
}

/// The state of a matched checkpoint, its lost workers taken back ([`EpochChain::readmit`];
/// with `keep_places`, into the places the chain kept).
pub(super) fn resumed_state(
    config: &CheckedRunConfig,
    point: ResumePoint,
    keep_places: bool,
) -> Result<RunState, RuntimeError> {
    let Checkpoint { fingerprint, model, chain, alive, metrics } = point.into_checkpoint();
    let mut chain = EpochChain::with_state(config.chain_params(), chain).map_err(|e| {
        let path = config.checkpoint.as_ref().map_or_else(String::new, |p| p.display().to_string());
        RuntimeError::Checkpoint { path, reason: e.to_string() }
    })?;
    if !keep_places {
        let returning: Vec<usize> = (0..alive.len()).filter(|&w| !alive[w]).collect();
        chain.readmit(&returning);
    }
    Ok(RunState { fingerprint, chain, model, metrics })
}

/// The job's description of the records: their width, or (for records of uneven size) 0 and
/// every record's size with the segment size of the packets.
fn job_records(train: &ShuffledRecords, segmentation: &Segmentation) -> (u32, Option<UnevenJob>) {
    match train.fixed() {
        Some(records) => (records.width() as u32, None),
        None => {
            let index = segmentation.index();
            let sizes = (0..index.len() as u32).map(|id| index.size(id).unwrap_or(0)).collect();
            (0, Some(UnevenJob { segment_bytes: segmentation.segment_bytes() as u32, sizes }))
        }
    }
}

/// `ids` in runs whose records add up to at most `bytes` (at least one record a run).
fn runs_within(
    index: &ubershuffle_codes::RecordIndex,
    ids: &[u32],
    bytes: u64,
) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (k, &id) in ids.iter().enumerate() {
        let size = index.size(id).unwrap_or(0);
        if k > start && sum + size > bytes {
            runs.push(start..k);
            (start, sum) = (k, 0);
        }
        sum += size;
    }
    if start < ids.len() {
        runs.push(start..ids.len());
    }
    runs
}

impl<T: Transport> Master<'_, T> {
    /// Starts a fresh run from the given partition instead of a random one: `batches[i]` is
    /// worker `i`'s batch "of the previous epoch" (for instance, blocks of the data in storage
    /// order, which the local policy then keeps), and each cache is that batch plus random other
    /// points, as usual. The batches must partition the points `0..q`, one per worker, each
    /// within the cache capacity. A resumed run keeps its checkpointed state and ignores this.
    pub fn with_start(mut self, batches: Vec<Vec<u32>>) -> Result<Self, RuntimeError> {
        if self.state.chain.completed_epochs() > 0 {
            return Ok(self);
        }
        let chain = EpochChain::starting_from(self.config.chain_params(), batches).map_err(|e| match e {
            ChainError::State(reason) => ConfigError::StartingPartition(reason),
            other => ConfigError::StartingPartition(other.to_string()),
        })?;
        self.state.chain = chain;
        Ok(self)
    }

    /// Tells every worker who it is and sends its starting cache (not part of any epoch; after
    /// a resume, the checkpointed cache). A worker that cannot be reached is lost before the
    /// first epoch.
    pub(super) fn start_workers(&mut self) -> Result<(), RuntimeError> {
        let live = self.members.live();
        self.start_these(&live)?;
        if self.members.live().is_empty() {
            return Err(self.members.no_workers_left("every worker, before the first epoch".into()));
        }
        Ok(())
    }

    /// Starts the workers `workers` (their jobs and starting caches) and waits until they hold
    /// their caches; one that cannot be reached is lost before the next epoch.
    pub(super) fn start_these(&mut self, workers: &[usize]) -> Result<(), RuntimeError> {
        let (record_width, uneven) = job_records(&self.data.train, &self.segmentation);
        for &w in workers {
            let job = JobSpec {
                worker: w as u32,
                workers: self.config.workers as u32,
                points: self.data.train.len() as u32,
                record_width,
                cache_capacity: self.config.cache_capacity as u32,
                seed: self.config.seed,
                chunk_bytes: self.config.chunk_bytes as u64,
                learner: self.config.learner,
                uneven: uneven.clone(),
            };
            let cache = self.state.chain.state().caches[w].clone();
            let sent = self.send(w, &MasterMessage::Job(job)).and_then(|_| {
                let segmentation = Arc::clone(&self.segmentation);
                let index = segmentation.index();
                for run in runs_within(index, &cache, self.config.chunk_bytes as u64) {
                    let ids = cache[run].to_vec();
                    let mut bytes = Vec::with_capacity(index.bytes_of(&ids) as usize);
                    for &id in &ids {
                        self.data.train.append(id, &mut bytes)?;
                    }
                    self.send(w, &MasterMessage::Records { ids, bytes })?;
                }
                Ok(())
            });
            match sent {
                Ok(()) => {}
                Err(RuntimeError::Transport(e)) => match lost_worker(&e) {
                    Some(lost) => {
                        self.members.note_loss(&e, e.is_timeout());
                        self.lose(lost);
                        self.members.lose_before_epoch(lost);
                    }
                    None => return Err(e.into()),
                },
                Err(e) => return Err(e),
            }
        }
        let started: Vec<usize> = workers.iter().copied().filter(|&w| self.members.is_alive(w)).collect();
        self.await_caches(started);
        Ok(())
    }

    /// At an epoch boundary: takes workers that joined while the run went on (over TCP: a
    /// lost worker's process started again, or a spare) into the places of lost ones. Each
    /// gets a batch and a starting cache as at a resume ([`EpochChain::readmit`]), its job and
    /// cache, and the next epoch plans, codes and broadcasts over it too (the workers learn
    /// the new broadcast group first).
    pub(super) fn admit_returning(&mut self) -> Result<(), RuntimeError> {
        let Some(job) = self.newcomer_job else { return Ok(()) };
        let free: Vec<usize> =
            (0..self.config.workers).filter(|&w| !self.members.is_alive(w)).map(|w| w + 1).collect();
        if free.is_empty() {
            return Ok(());
        }
        let present: Vec<usize> = self.members.live().iter().map(|w| w + 1).collect();
        let admitted = self.t.admit_waiting(&free, &present)?;
        // A newcomer that cannot take the job is dropped; its place stays free.
        let returning: Vec<usize> =
            admitted.iter().filter(|&&r| r > 0 && job.send(&mut self.t, r).is_ok()).map(|r| r - 1).collect();
        if returning.is_empty() {
            return Ok(());
        }
        if !self.keep_places {
            self.state.chain.readmit(&returning);
        }
        for &w in &returning {
            self.members.rejoin(w);
            self.disputes.forget(w);
        }
        self.start_these(&returning)
    }

    /// Waits until each of `workers` holds its starting cache (on an emulated cluster those
    /// bytes are still on their way when the last send returns; the first epoch must not pay
    /// for them). A worker that does not answer is lost.
    fn await_caches(&mut self, workers: Vec<usize>) {
        let mut pending = Vec::new();
        for w in workers {
            match self.send(w, &MasterMessage::Sync) {
                Ok(_) => pending.push(w),
                Err(_) => {
                    self.lose(w);
                    self.members.lose_before_epoch(w);
                }
            }
        }
        while !pending.is_empty() {
            let ranks: Vec<usize> = pending.iter().map(|w| w + 1).collect();
            match self.t.recv_any(&ranks, TAG_RECEIVED) {
                Ok((rank, _)) => pending.retain(|&w| w + 1 != rank),
                Err(e) => {
                    self.members.note_loss(&e, e.is_timeout());
                    // The named worker is lost; a timeout names none, so every silent one is.
                    let gone = lost_worker(&e).filter(|w| pending.contains(w));
                    for w in gone.map_or_else(|| std::mem::take(&mut pending), |w| vec![w]) {
                        pending.retain(|&x| x != w);
                        self.lose(w);
                        self.members.lose_before_epoch(w);
                    }
                }
            }
        }
    }
}
