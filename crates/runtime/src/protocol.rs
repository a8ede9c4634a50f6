//! The messages of the epoch loop and their byte forms.
//!
//! Everything the master sends a worker travels point to point with tag [`TAG_MASTER`] and
//! starts with a kind byte ([`MasterMessage`]); coded packets needed by several workers travel
//! in the transport's broadcast as a [`DataChunk`]; workers answer with [`TAG_UPDATE`]
//! ([`UpdateReport`]). Every message of an epoch carries the epoch and the attempt, so a late
//! message of an abandoned attempt is recognised and dropped. Parsing checks every length
//! first: a malformed message is an error, never a panic.

use std::sync::Arc;

use ubershuffle_codes::{PacketBatch, RecordIndex, Segmentation};
use ubershuffle_core::Plan;
use ubershuffle_core::wire::{
    ByteReader, decode_plan, encode_plan, push_bytes, push_f64, push_u32, push_u32_list, push_u64,
};
use ubershuffle_transport::Tag;

use crate::{LearnerSpec, ProtocolError, RuntimeError};

/// Tag of every message from the master to a worker.
pub const TAG_MASTER: Tag = 1;
/// Tag of a worker's report to the master.
pub const TAG_UPDATE: Tag = 2;
/// Tag of a worker's "every packet of this epoch has arrived" (an [`EpochAck`]); the master's
/// transmit time ends with the last one.
pub const TAG_RECEIVED: Tag = 3;

/// A worker's acknowledgement that it holds every packet of an epoch attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochAck {
    /// The epoch.
    pub epoch: u32,
    /// The attempt.
    pub attempt: u32,
}

impl EpochAck {
    /// The byte form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        push_u32(&mut out, self.epoch);
        push_u32(&mut out, self.attempt);
        out
    }

    /// Parses the byte form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RuntimeError> {
        let mut r = ByteReader::new(bytes, "an epoch acknowledgement");
        let ack = EpochAck { epoch: r.u32()?, attempt: r.u32()? };
        r.finish()?;
        Ok(ack)
    }
}

/// What a worker is asked to be, sent once when it joins.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// The worker's index (its rank minus one).
    pub worker: u32,
    /// Number of workers at the start.
    pub workers: u32,
    /// Number of data points `q`.
    pub points: u32,
    /// Bytes per record; 0 for records of uneven size (see `uneven`).
    pub record_width: u32,
    /// Points a worker may cache (`s`).
    pub cache_capacity: u32,
    /// The run's seed (for the cache policy and local SGD orders).
    pub seed: u64,
    /// The bytes of coded packets per data message (the largest broadcast a ring peer relays
    /// follows from it: the worker bounds its inbox by it).
    pub chunk_bytes: u64,
    /// What to train.
    pub learner: LearnerSpec,
    /// Records of uneven size: every record's size, and the segments their packets carry.
    pub uneven: Option<UnevenJob>,
}

/// The records of a job whose records differ in size (sent after the rest of the job, which
/// says 0 bytes per record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnevenJob {
    /// Bytes per segment: the payload of every coded packet.
    pub segment_bytes: u32,
    /// Every record's size, in order.
    pub sizes: Vec<u64>,
}

impl JobSpec {
    /// How the job's records read in the master's messages: of one width, or split into
    /// segments (checked: a peer's sizes).
    pub fn shape(&self) -> Result<RecordShape, RuntimeError> {
        match &self.uneven {
            None if self.record_width > 0 => Ok(RecordShape::Fixed(self.record_width as usize)),
            Some(u) if self.record_width == 0 && u.sizes.len() == self.points as usize => {
                let index = RecordIndex::from_sizes(u.sizes.iter().copied())?;
                let segments = Segmentation::new(index, u.segment_bytes as usize)?;
                Ok(RecordShape::Segmented(Arc::new(segments)))
            }
            _ => Err(ProtocolError::JobRecords {
                points: self.points,
                width: self.record_width,
                sizes: self.uneven.as_ref().map(|u| u.sizes.len()),
            }
            .into()),
        }
    }
}

/// How a worker reads the records in the master's messages.
#[derive(Clone, Debug, Default)]
pub enum RecordShape {
    /// Before the job: no record is expected.
    #[default]
    Unknown,
    /// Records, and coded packets, of this many bytes.
    Fixed(usize),
    /// Records of these sizes; coded packets carry their segments.
    Segmented(Arc<Segmentation>),
}

impl RecordShape {
    /// Bytes per coded packet (0 before the job).
    pub fn packet_bytes(&self) -> usize {
        match self {
            RecordShape::Unknown => 0,
            RecordShape::Fixed(width) => *width,
            RecordShape::Segmented(s) => s.segment_bytes(),
        }
    }

    /// The bytes of the records `ids` together (`None` before the job, or for an id out of
    /// range).
    pub fn bytes_of(&self, ids: &[u32]) -> Option<u64> {
        match self {
            RecordShape::Unknown => None,
            RecordShape::Fixed(width) => Some(ids.len() as u64 * *width as u64),
            RecordShape::Segmented(s) => {
                ids.iter().try_fold(0u64, |sum, &id| s.index().size(id).map(|size| sum + size))
            }
        }
    }
}

/// One epoch's instructions for one worker.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochOrder {
    /// The epoch, from 1.
    pub epoch: u32,
    /// The attempt at this epoch, from 0 (a worker's failure restarts the epoch).
    pub attempt: u32,
    /// The master's model, in the learner's byte form; empty when the master broadcast it just
    /// before ([`MasterMessage::ModelFollows`]).
    pub model: Vec<u8>,
    /// The worker's new batch `D_i`, sorted.
    pub batch: Vec<u32>,
    /// The plan's transmissions this worker needs, in plan order, and their indices in the
    /// plan (the indices data chunks carry).
    pub plan: Plan,
    /// Plan index of each transmission of `plan`.
    pub seqs: Vec<u32>,
    /// How many broadcasts of data chunks follow (every worker takes part in all of them).
    pub broadcasts: u32,
    /// How many point-to-point data chunks follow for this worker.
    pub unicasts: u32,
    /// Checksum of the worker's new records ([`records_checksum`]).
    pub checksum: u32,
    /// Emulated straggling: hold the update this many seconds before sending it (the straggler
    /// model's verdict, played out on the wire: a real rank sleeps, an emulated one's clock moves
    /// on; see `ubershuffle_learners::straggler::straggler_hold`).
    pub hold_seconds: f64,
}

/// Coded packets: plan indices and their payloads, back to back.
#[derive(Clone, Debug, PartialEq)]
pub struct DataChunk {
    /// The epoch.
    pub epoch: u32,
    /// The attempt.
    pub attempt: u32,
    /// Plan index of each packet.
    pub seqs: Vec<u32>,
    /// `seqs.len()` payloads of the record width.
    pub payloads: Vec<u8>,
}

/// A message from the master to a worker.
#[derive(Clone, Debug, PartialEq)]
pub enum MasterMessage {
    /// Who the worker is (first message).
    Job(JobSpec),
    /// Records for the worker's starting cache (before the first epoch, or after a resume).
    Records {
        /// Their ids.
        ids: Vec<u32>,
        /// Their bytes, back to back.
        bytes: Vec<u8>,
    },
    /// The next epoch.
    Order(EpochOrder),
    /// Coded packets for this worker alone.
    Data(DataChunk),
    /// The run is over.
    Stop,
    /// Reply with an [`EpochAck`] of epoch 0 once everything sent before has arrived (the
    /// master waits for the starting caches to land, so that no epoch is charged for them).
    Sync,
    /// The model for the next epoch follows in a broadcast: take part in it. The next order
    /// then carries an empty model.
    ModelFollows {
        /// The epoch whose model it is.
        epoch: u32,
        /// The attempt.
        attempt: u32,
    },
    /// The workers (0-based, increasing) that take part in every broadcast from now on: the
    /// broadcast group, re-formed by the survivors after a loss. Until the first such message,
    /// every worker of the job does.
    Members(Vec<u32>),
}

/// The name of broadcast `chunk` of an attempt (chunk 0: the model; 1, 2, ...: the data
/// chunks, in order), which every rank of the broadcast passes to the transport. Names grow
/// from each broadcast of a run to the next, so that what an abandoned broadcast left behind
/// is told apart from the next one's messages.
pub fn broadcast_name(epoch: u32, attempt: u32, chunk: u32) -> u64 {
    (u64::from(epoch) << 40) | (u64::from(attempt.min(0xffff)) << 24) | u64::from(chunk.min(0xff_ffff))
}

/// A worker's reply at the end of an epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateReport {
    /// The epoch.
    pub epoch: u32,
    /// The attempt.
    pub attempt: u32,
    /// The update or the failure.
    pub outcome: UpdateOutcome,
}

/// What a worker's epoch gave.
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateOutcome {
    /// The learner's update and what the epoch cost at the worker.
    Done {
        /// The update's byte form.
        update: Vec<u8>,
        /// Seconds spent decoding (XOR work and bookkeeping) on the worker's clock.
        decode_seconds: f64,
        /// Seconds spent in local training on the worker's clock.
        train_seconds: f64,
        /// Payload bytes received this epoch (broadcasts and unicasts).
        received_bytes: u64,
    },
    /// The worker cannot go on; the message says why in one line.
    Failed(String),
}

const JOB: u8 = 1;
const RECORDS: u8 = 2;
const ORDER: u8 = 3;
const DATA: u8 = 4;
const STOP: u8 = 5;
const SYNC: u8 = 6;
const MODEL_FOLLOWS: u8 = 7;
const MEMBERS: u8 = 8;

impl DataChunk {
    /// Appends the byte form.
    pub fn write(&self, out: &mut Vec<u8>) {
        push_u32(out, self.epoch);
        push_u32(out, self.attempt);
        let width = self.payloads.len().checked_div(self.seqs.len()).unwrap_or(0);
        let mut payloads = self.payloads.chunks_exact(width.max(1));
        PacketBatch::write(out, &self.seqs, width, |_, slot| {
            if let Some(payload) = payloads.next() {
                slot.copy_from_slice(payload);
            }
        });
    }

    /// The byte form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + 4 * self.seqs.len() + self.payloads.len());
        self.write(&mut out);
        out
    }

    /// Parses the byte form; `width` is the record width (the rest of the bytes must be
    /// exactly one payload per index).
    pub fn read(r: &mut ByteReader<'_>, width: usize) -> Result<Self, RuntimeError> {
        let DataChunkRef { epoch, attempt, batch } = DataChunkRef::read(r, width)?;
        let (seqs, payloads) = batch.into_parts();
        Ok(DataChunk { epoch, attempt, seqs, payloads: payloads.to_vec() })
    }

    /// Parses a whole buffer (a broadcast).
    pub fn from_bytes(bytes: &[u8], width: usize) -> Result<Self, RuntimeError> {
        DataChunk::read(&mut ByteReader::new(bytes, "a data chunk"), width)
    }

    /// The packets: plan index and payload.
    pub fn packets(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let width = self.payloads.len().checked_div(self.seqs.len()).unwrap_or(0);
        self.seqs.iter().copied().zip(self.payloads.chunks_exact(width.max(1)))
    }
}

/// The byte form of a [`DataChunk`] whose payloads `fill(k, out)` writes straight into the
/// message (no intermediate copy): as a broadcast buffer, or with `point_to_point` as a
/// [`MasterMessage::Data`]. After the epoch and attempt comes the workspace's one packet form,
/// a [`PacketBatch`].
pub fn data_chunk_bytes(
    epoch: u32,
    attempt: u32,
    seqs: &[u32],
    width: usize,
    point_to_point: bool,
    fill: impl FnMut(usize, &mut [u8]),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + PacketBatch::header_len(seqs.len()) + seqs.len() * width);
    if point_to_point {
        out.push(DATA);
    }
    push_u32(&mut out, epoch);
    push_u32(&mut out, attempt);
    PacketBatch::write(&mut out, seqs, width, fill);
    out
}

/// The header bytes [`data_chunk_bytes`] puts before `packets` payloads: the epoch, the
/// attempt, the packet count and each packet's sequence number (u32 each), and for a
/// point-to-point message its kind byte. What the transport adds per frame below the message
/// is the transport's ([`ubershuffle_transport::frame`]).
pub fn data_chunk_framing(packets: usize, point_to_point: bool) -> usize {
    12 + 4 * packets + usize::from(point_to_point)
}

/// A [`DataChunk`] read in place: the payloads stay in the received buffer (a worker copies
/// only the packets it needs out of a broadcast).
#[derive(Clone, Debug, PartialEq)]
pub struct DataChunkRef<'a> {
    /// The epoch.
    pub epoch: u32,
    /// The attempt.
    pub attempt: u32,
    /// The packets: plan indices and payloads of the record width.
    pub batch: PacketBatch<'a>,
}

impl<'a> DataChunkRef<'a> {
    /// Parses the byte form of a [`DataChunk`] without copying its payloads.
    pub fn read(r: &mut ByteReader<'a>, width: usize) -> Result<Self, RuntimeError> {
        let epoch = r.u32()?;
        let attempt = r.u32()?;
        let batch = PacketBatch::read(r, width)?;
        Ok(DataChunkRef { epoch, attempt, batch })
    }

    /// Parses a whole buffer (a broadcast).
    pub fn from_bytes(bytes: &'a [u8], width: usize) -> Result<Self, RuntimeError> {
        DataChunkRef::read(&mut ByteReader::new(bytes, "a data chunk"), width)
    }

    /// The packets: plan index and payload.
    pub fn packets(&self) -> impl Iterator<Item = (u32, &'a [u8])> + '_ {
        self.batch.packets()
    }
}

impl MasterMessage {
    /// The byte form.
    pub fn to_bytes(&self) -> Result<Vec<u8>, RuntimeError> {
        let mut out = Vec::new();
        match self {
            MasterMessage::Job(job) => {
                out.push(JOB);
                push_u32(&mut out, job.worker);
                push_u32(&mut out, job.workers);
                push_u32(&mut out, job.points);
                push_u32(&mut out, job.record_width);
                push_u32(&mut out, job.cache_capacity);
                push_u64(&mut out, job.seed);
                push_u64(&mut out, job.chunk_bytes);
                job.learner.write(&mut out);
                if let Some(u) = &job.uneven {
                    push_u32(&mut out, u.segment_bytes);
                    let sizes: Vec<u8> = u.sizes.iter().flat_map(|s| s.to_le_bytes()).collect();
                    push_bytes(&mut out, &sizes);
                }
            }
            MasterMessage::Records { ids, bytes } => {
                out.push(RECORDS);
                push_u32_list(&mut out, ids);
                out.extend_from_slice(bytes);
            }
            MasterMessage::Order(o) => {
                out.push(ORDER);
                push_u32(&mut out, o.epoch);
                push_u32(&mut out, o.attempt);
                push_bytes(&mut out, &o.model);
                push_u32_list(&mut out, &o.batch);
                push_bytes(&mut out, &encode_plan(&o.plan)?);
                push_u32_list(&mut out, &o.seqs);
                push_u32(&mut out, o.broadcasts);
                push_u32(&mut out, o.unicasts);
                push_u32(&mut out, o.checksum);
                push_f64(&mut out, o.hold_seconds);
            }
            MasterMessage::Data(chunk) => {
                out.push(DATA);
                chunk.write(&mut out);
            }
            MasterMessage::Stop => out.push(STOP),
            MasterMessage::Sync => out.push(SYNC),
            MasterMessage::ModelFollows { epoch, attempt } => {
                out.push(MODEL_FOLLOWS);
                push_u32(&mut out, *epoch);
                push_u32(&mut out, *attempt);
            }
            MasterMessage::Members(workers) => {
                out.push(MEMBERS);
                push_u32_list(&mut out, workers);
            }
        }
        Ok(out)
    }

    /// Parses the byte form; `shape` says how the job's records read (data and records
    /// messages need it).
    pub fn from_bytes(bytes: &[u8], shape: &RecordShape) -> Result<Self, RuntimeError> {
        let mut r = ByteReader::new(bytes, "a message from the master");
        let width = shape.packet_bytes();
        let message = match r.take(1)?[0] {
            JOB => {
                let mut job = JobSpec {
                    worker: r.u32()?,
                    workers: r.u32()?,
                    points: r.u32()?,
                    record_width: r.u32()?,
                    cache_capacity: r.u32()?,
                    seed: r.u64()?,
                    chunk_bytes: r.u64()?,
                    learner: LearnerSpec::read(&mut r)?,
                    uneven: None,
                };
                if job.record_width == 0 {
                    let segment_bytes = r.u32()?;
                    let sizes = r.bytes()?;
                    if sizes.len() % 8 != 0 {
                        return Err(
                            ProtocolError::JobRecords { points: job.points, width: 0, sizes: None }.into()
                        );
                    }
                    let sizes = sizes
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                        .collect();
                    job.uneven = Some(UnevenJob { segment_bytes, sizes });
                }
                MasterMessage::Job(job)
            }
            RECORDS => {
                let ids = r.u32_list()?;
                let bytes = r.take(r.remaining())?.to_vec();
                if shape.bytes_of(&ids) != Some(bytes.len() as u64) {
                    return Err(ProtocolError::RecordBytes { records: ids.len(), bytes: bytes.len() }.into());
                }
                MasterMessage::Records { ids, bytes }
            }
            ORDER => {
                let order = EpochOrder {
                    epoch: r.u32()?,
                    attempt: r.u32()?,
                    model: r.bytes()?.to_vec(),
                    batch: r.u32_list()?,
                    plan: decode_plan(r.bytes()?)?,
                    seqs: r.u32_list()?,
                    broadcasts: r.u32()?,
                    unicasts: r.u32()?,
                    checksum: r.u32()?,
                    hold_seconds: r.f64()?,
                };
                if order.seqs.len() != order.plan.len() {
                    return Err(ProtocolError::OrderIndices {
                        indices: order.seqs.len(),
                        transmissions: order.plan.len(),
                    }
                    .into());
                }
                MasterMessage::Order(order)
            }
            DATA => return Ok(MasterMessage::Data(DataChunk::read(&mut r, width)?)),
            STOP => MasterMessage::Stop,
            SYNC => MasterMessage::Sync,
            MODEL_FOLLOWS => MasterMessage::ModelFollows { epoch: r.u32()?, attempt: r.u32()? },
            MEMBERS => MasterMessage::Members(r.u32_list()?),
            other => {
                return Err(ProtocolError::UnknownKind { what: "message", kind: other }.into());
            }
        };
        r.finish()?;
        Ok(message)
    }
}

const DONE: u8 = 1;
const FAILED: u8 = 2;

impl UpdateReport {
    /// The byte form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        push_u32(&mut out, self.epoch);
        push_u32(&mut out, self.attempt);
        match &self.outcome {
            UpdateOutcome::Done { update, decode_seconds, train_seconds, received_bytes } => {
                out.push(DONE);
                push_bytes(&mut out, update);
                push_f64(&mut out, *decode_seconds);
                push_f64(&mut out, *train_seconds);
                push_u64(&mut out, *received_bytes);
            }
            UpdateOutcome::Failed(message) => {
                out.push(FAILED);
                push_bytes(&mut out, message.as_bytes());
            }
        }
        out
    }

    /// Parses the byte form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RuntimeError> {
        let mut r = ByteReader::new(bytes, "an update report");
        let epoch = r.u32()?;
        let attempt = r.u32()?;
        let outcome = match r.take(1)?[0] {
            DONE => UpdateOutcome::Done {
                update: r.bytes()?.to_vec(),
                decode_seconds: r.f64()?,
                train_seconds: r.f64()?,
                received_bytes: r.u64()?,
            },
            FAILED => UpdateOutcome::Failed(String::from_utf8_lossy(r.bytes()?).into_owned()),
            other => return Err(ProtocolError::UnknownKind { what: "update", kind: other }.into()),
        };
        r.finish()?;
        Ok(UpdateReport { epoch, attempt, outcome })
    }
}

/// The checksum a worker's new records must match: CRC32C over each record's id (little
/// endian) and bytes, in increasing id order.
pub fn records_checksum<'a>(records: impl IntoIterator<Item = (u32, &'a [u8])>) -> u32 {
    records.into_iter().fold(0, |crc, (id, bytes)| records_checksum_append(crc, id, bytes))
}

/// [`records_checksum`] of the records so far (`crc`) and record `id` after them.
pub fn records_checksum_append(crc: u32, id: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c_append(crc, &id.to_le_bytes()), bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_core::Part;

    #[test]
    fn the_stated_framing_is_the_data_messages_header() {
        for (packets, width, p2p) in [(0, 8, false), (3, 16, true), (5, 4096, false)] {
            let bytes = data_chunk_bytes(2, 1, &vec![9; packets], width, p2p, |_, _| {});
            assert_eq!(bytes.len(), packets * width + data_chunk_framing(packets, p2p));
        }
    }

    fn order() -> EpochOrder {
        let mut plan = Plan::new();
        plan.push(&[Part::new(4, 0), Part::new(1, 2)]);
        EpochOrder {
            epoch: 3,
            attempt: 1,
            model: vec![1, 2, 3],
            batch: vec![1, 5],
            plan,
            seqs: vec![7],
            broadcasts: 2,
            unicasts: 1,
            checksum: 99,
            hold_seconds: 0.5,
        }
    }

    #[test]
    fn broadcast_names_grow_through_a_run() {
        let order = [(1, 0, 0), (1, 0, 1), (1, 0, 700), (1, 1, 0), (1, 1, 3), (2, 0, 0), (9, 4, 1)];
        let names: Vec<u64> = order.iter().map(|&(e, a, c)| broadcast_name(e, a, c)).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    }

    #[test]
    fn messages_round_trip() {
        let learner = LearnerSpec::LinearRegression { features: 3, step_size: 0.1, local_passes: 2 };
        let job = JobSpec {
            worker: 2,
            workers: 4,
            points: 100,
            record_width: 32,
            cache_capacity: 50,
            seed: 9,
            chunk_bytes: 4096,
            learner,
            uneven: None,
        };
        let uneven = JobSpec {
            record_width: 0,
            points: 3,
            uneven: Some(UnevenJob { segment_bytes: 2, sizes: vec![3, 0, 5] }),
            ..job.clone()
        };
        assert!(job.shape().is_ok());
        let segments = uneven.shape().unwrap();
        assert_eq!((segments.packet_bytes(), segments.bytes_of(&[0, 2])), (2, Some(8)));
        let records = MasterMessage::Records { ids: vec![2, 1], bytes: vec![7; 5] };
        assert_eq!(MasterMessage::from_bytes(&records.to_bytes().unwrap(), &segments).unwrap(), records);
        let wrong = MasterMessage::Records { ids: vec![2], bytes: vec![7; 4] };
        assert!(MasterMessage::from_bytes(&wrong.to_bytes().unwrap(), &segments).is_err());
        assert!(JobSpec { points: 4, ..uneven.clone() }.shape().is_err(), "a size per point");
        assert!(JobSpec { record_width: 0, ..job.clone() }.shape().is_err(), "no width, no sizes");
        let chunk = DataChunk { epoch: 3, attempt: 1, seqs: vec![7, 9], payloads: vec![5; 8] };
        for m in [
            MasterMessage::Job(job),
            MasterMessage::Job(uneven),
            MasterMessage::Records { ids: vec![1, 2], bytes: vec![0; 8] },
            MasterMessage::Order(order()),
            MasterMessage::Data(chunk.clone()),
            MasterMessage::Stop,
            MasterMessage::Sync,
            MasterMessage::ModelFollows { epoch: 3, attempt: 1 },
            MasterMessage::Members(vec![0, 2]),
        ] {
            assert_eq!(MasterMessage::from_bytes(&m.to_bytes().unwrap(), &RecordShape::Fixed(4)).unwrap(), m);
        }
        assert_eq!(DataChunk::from_bytes(&chunk.to_bytes(), 4).unwrap(), chunk);
        assert_eq!(chunk.packets().map(|(s, p)| (s, p.len())).collect::<Vec<_>>(), vec![(7, 4), (9, 4)]);
        for outcome in [
            UpdateOutcome::Done {
                update: vec![1],
                decode_seconds: 0.1,
                train_seconds: 0.2,
                received_bytes: 5,
            },
            UpdateOutcome::Failed("checksum".into()),
        ] {
            let r = UpdateReport { epoch: 1, attempt: 0, outcome };
            assert_eq!(UpdateReport::from_bytes(&r.to_bytes()).unwrap(), r);
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let four = RecordShape::Fixed(4);
        assert!(MasterMessage::from_bytes(&[], &four).is_err());
        assert!(MasterMessage::from_bytes(&[42], &four).is_err());
        let mut bytes = MasterMessage::Order(order()).to_bytes().unwrap();
        bytes.pop();
        assert!(MasterMessage::from_bytes(&bytes, &four).is_err());
        let records = MasterMessage::Records { ids: vec![1], bytes: vec![0; 4] }.to_bytes().unwrap();
        assert!(
            MasterMessage::from_bytes(&records, &RecordShape::Unknown).is_err(),
            "records before the job"
        );
        let chunk = DataChunk { epoch: 1, attempt: 0, seqs: vec![1], payloads: vec![0; 3] };
        assert!(DataChunk::from_bytes(&chunk.to_bytes(), 4).is_err());
        assert!(UpdateReport::from_bytes(&[0; 9]).is_err());
    }

    #[test]
    fn checksum_depends_on_ids_and_bytes() {
        let a = records_checksum([(1, &[1u8, 2][..]), (2, &[3u8][..])]);
        assert_eq!(a, records_checksum([(1, &[1u8, 2][..]), (2, &[3u8][..])]));
        assert_ne!(a, records_checksum([(1, &[1u8, 2][..]), (3, &[3u8][..])]));
        assert_ne!(a, records_checksum([(1, &[1u8, 2][..]), (2, &[4u8][..])]));
    }
}
