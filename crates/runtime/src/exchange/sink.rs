//! [`RecordSink`]: where a worker hands the records it holds and receives, for a caller that
//! trains on them itself (the data plane of [`super`]).

use ubershuffle_codes::{CodecError, RecordSource};

use crate::RuntimeError;
use crate::protocol::{JobSpec, RecordShape};
use crate::worker_store::{ReadRecords, WorkerStore};

/// What one epoch brought a worker.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct DeliveryFigures {
    /// Payload bytes that arrived in the epoch's packets (broadcasts this worker took part in
    /// included, needed or not).
    pub received_bytes: u64,
    /// The plan's transmissions this worker needed.
    pub packets: usize,
    /// Of those, the coded ones (the XOR of several records).
    pub coded_packets: usize,
    /// Seconds from the epoch's order to the last of its packets.
    pub receive_seconds: f64,
    /// Seconds decoding and checking the new records.
    pub decode_seconds: f64,
    /// Of the needed packets' bytes, those beyond their records' data (records of uneven size
    /// travel in fixed-size segments; 0 for records of one size).
    pub padding_bytes: u64,
}

/// One epoch's delivery at a worker: its new batch, the records of it that were not cached
/// (decoded and checked against the master's checksum), and the cache it keeps for the next.
pub struct Delivery<'a> {
    /// The epoch, from 1.
    pub epoch: u32,
    /// The attempt (above 0 when the master restarted the epoch after losing a worker).
    pub attempt: u32,
    /// The batch, sorted.
    pub batch: &'a [u32],
    /// The records of the batch that were not cached, sorted.
    pub new_ids: Vec<u32>,
    /// Where their bytes are.
    pub store: &'a dyn ReadRecords,
    /// The cache the worker keeps for the next epoch, sorted.
    pub cache_after: &'a [u32],
    /// What the epoch cost.
    pub figures: DeliveryFigures,
}

impl Delivery<'_> {
    /// The first new record whose bytes differ from `truth`'s (a data set's), if any: a check
    /// of what the worker decoded beyond the master's checksum (tests, experiments).
    pub fn first_differing(&self, truth: &dyn RecordSource) -> Result<Option<u32>, CodecError> {
        let mut differing = None;
        self.store.read(&self.new_ids, &mut |records| {
            differing = self.new_ids.iter().zip(records).find_map(|(&id, record)| {
                let mut diff = record.to_vec();
                let same = truth.size(id) == Some(record.len() as u64)
                    && truth.xor_piece_into(id, 0, &mut diff).is_ok()
                    && diff.iter().all(|&b| b == 0);
                (!same).then_some(id)
            });
        })?;
        Ok(differing)
    }
}

/// The ids and figures, not the records.
impl std::fmt::Debug for Delivery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("epoch", &self.epoch)
            .field("attempt", &self.attempt)
            .field("batch", &self.batch.len())
            .field("new_ids", &self.new_ids.len())
            .field("cache_after", &self.cache_after.len())
            .field("figures", &self.figures)
            .finish_non_exhaustive()
    }
}

/// Receives what a worker holds and gets, in order: its job, its starting cache (again after a
/// resume of the master), each epoch's delivery, and announcements of the broadcast group. An
/// error ends the worker's run (the master hears of it as the worker's failure).
pub trait RecordSink: Send {
    /// The master's job for this worker (its index, the data set's size and record width).
    fn joined(&mut self, job: &JobSpec) -> Result<(), RuntimeError> {
        let _ = job;
        Ok(())
    }

    /// The store the worker keeps the job's records in (`shape` says how they read), or
    /// `None` for one in the worker's memory. A store of the sink's own is where the caller
    /// reads the records: the worker decodes straight into it.
    fn store(
        &mut self,
        job: &JobSpec,
        shape: &RecordShape,
    ) -> Result<Option<Box<dyn WorkerStore>>, RuntimeError> {
        let _ = (job, shape);
        Ok(None)
    }

    /// Records of the starting cache: `ids` and their bytes back to back.
    fn starting_records(&mut self, ids: &[u32], bytes: &[u8]) -> Result<(), RuntimeError> {
        let _ = (ids, bytes);
        Ok(())
    }

    /// The starting cache is complete (every record of it was handed to
    /// [`RecordSink::starting_records`]).
    fn cache_ready(&mut self) {}

    /// One epoch's delivery; the worker acknowledges the epoch to the master only once this
    /// returns (with a store of the sink's own, after telling it the caller has taken the
    /// epoch: [`WorkerStore::taken`]).
    fn epoch(&mut self, delivery: Delivery<'_>) -> Result<(), RuntimeError>;

    /// The master announced the broadcast group `workers` (0-based): after a loss, without the
    /// lost; after a rejoin, with the returning.
    fn members(&mut self, workers: &[u32]) {
        let _ = workers;
    }
}

/// A sink that keeps nothing (a worker that only trains its learner).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSink;

impl RecordSink for NoSink {
    fn epoch(&mut self, _delivery: Delivery<'_>) -> Result<(), RuntimeError> {
        Ok(())
    }
}
