//! [`RuntimeError`]: why a run stopped.

use ubershuffle_codes::{CodecError, DecodeError};
use ubershuffle_core::wire::WireError;
use ubershuffle_core::{InstanceError, PlanError, VerifyError};
use ubershuffle_learners::LearnerError;
use ubershuffle_transport::TransportError;

use crate::config_error::ConfigError;

/// What a loss by timeout may mean, for the message.
fn no_workers_hint(timed_out: bool) -> &'static str {
    if timed_out {
        " (a timeout: the workers may be alive but slower than the transport's timeout, e.g. a \
         message that takes longer than the timeout on an emulated link; raise the timeout or the \
         link rate, or lower the chunk size)"
    } else {
        ""
    }
}

/// Why a master or worker stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Moving bytes failed in a way the loop does not survive.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// An epoch's instance was invalid (a bug: the master builds it).
    #[error("invalid epoch instance: {0}")]
    Instance(#[from] InstanceError),
    /// The planner failed.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The epoch chain refused a state or a scheme (its planning and verification errors
    /// arrive as [`RuntimeError::Plan`], [`RuntimeError::Verify`], [`RuntimeError::Pliable`]).
    #[error(transparent)]
    Chain(ubershuffle_core::epoch_chain::ChainError),
    /// A plan was malformed or did not decode.
    #[error("the plan failed verification: {0}")]
    Verify(#[from] VerifyError),
    /// A pliable planner's choice broke its constraint or did not decode.
    #[error("the pliable plan failed verification: {0}")]
    Pliable(#[from] ubershuffle_core::pliable::PliableError),
    /// The learner failed.
    #[error(transparent)]
    Learner(#[from] LearnerError),
    /// Records or packets were malformed.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A worker could not decode its records.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message did not parse.
    #[error("malformed message: {0}")]
    Wire(#[from] WireError),
    /// A peer broke the protocol (an unexpected message, a wrong epoch, a bad checksum).
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// An epoch was restarted more often than it had workers (each restart drops one, so
    /// this is never reached by losses alone).
    #[error("epoch {epoch} was attempted {attempts} times, more than it had workers")]
    TooManyAttempts {
        /// The epoch.
        epoch: usize,
        /// Its attempts.
        attempts: u32,
    },
    /// A worker reported that it failed.
    #[error("worker {worker} failed: {message}")]
    WorkerFailed {
        /// The worker (0-based; rank - 1).
        worker: usize,
        /// Its one-line message.
        message: String,
    },
    /// Every worker was lost: departed, stalled, or slower than the timeout.
    #[error("no worker is left in the run (lost: {lost}); the last loss: {cause}{hint}", hint = no_workers_hint(*.timed_out))]
    NoWorkersLeft {
        /// The workers lost, e.g. "2, 5".
        lost: String,
        /// What the last loss was (the transport's error).
        cause: String,
        /// Whether that loss was a timeout (the worker may be alive but slow), not a departure.
        timed_out: bool,
    },
    /// A worker heard nothing from the master for too long.
    #[error(
        "the master sent nothing for {waited:?} (2 x its timeout): it is frozen or gone, or its link is down or too slow for the timeout"
    )]
    MasterSilent {
        /// How long the worker waited.
        waited: std::time::Duration,
    },
    /// A size or a file passed a stated cap (the memory or input limits).
    #[error(transparent)]
    Limit(#[from] ubershuffle_core::limits::LimitError),
    /// Bad configuration.
    #[error("invalid run configuration: {0}")]
    Config(#[from] ConfigError),
    /// Reading or writing a checkpoint failed.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl From<ubershuffle_core::epoch_chain::ChainError> for RuntimeError {
    fn from(e: ubershuffle_core::epoch_chain::ChainError) -> Self {
        use ubershuffle_core::epoch_chain::ChainError;
        match e {
            ChainError::Plan(p) => RuntimeError::Plan(p),
            ChainError::Verify(v) => RuntimeError::Verify(v),
            ChainError::Pliable(p) => RuntimeError::Pliable(p),
            ChainError::Instance(i) => RuntimeError::Instance(i),
            other => RuntimeError::Chain(other),
        }
    }
}

impl From<crate::segment_epoch::SegmentEpochError> for RuntimeError {
    fn from(e: crate::segment_epoch::SegmentEpochError) -> Self {
        use crate::segment_epoch::SegmentEpochError;
        use ubershuffle_codes::SegmentError;
        match e {
            SegmentEpochError::Chain(c) => c.into(),
            SegmentEpochError::Verify(v) => RuntimeError::Verify(v),
            SegmentEpochError::Segment(SegmentError::Instance(i)) => RuntimeError::Instance(i),
            SegmentEpochError::Segment(s) => {
                RuntimeError::Codec(CodecError::MalformedPacket { reason: s.to_string() })
            }
        }
    }
}

/// How a peer broke the protocol.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The master sent an epoch message before telling the worker its job.
    #[error("the master sent {0} before the job")]
    BeforeJob(&'static str),
    /// A message that has no place during an epoch.
    #[error("unexpected message during an epoch")]
    UnexpectedDuringEpoch,
    /// A worker's decoded records do not match the master's checksum.
    #[error("worker {worker}: decoded records have checksum {decoded:08x}, the master's is {expected:08x}")]
    Checksum {
        /// The worker (0-based).
        worker: u32,
        /// What the worker computed.
        decoded: u32,
        /// What the master sent.
        expected: u32,
    },
    /// A broadcast group that does not fit the cluster or leaves this worker out.
    #[error("the master announced broadcast group {workers:?}, which does not fit rank {rank}")]
    BroadcastGroup {
        /// The workers announced.
        workers: Vec<u32>,
        /// This worker's rank.
        rank: usize,
    },
    /// The order said the model comes by broadcast, and none came.
    #[error("the order's model was to come by broadcast; none arrived")]
    ModelMissing,
    /// A broadcast of another epoch or attempt.
    #[error(
        "a broadcast of epoch {epoch} attempt {attempt} arrived during epoch {current_epoch} attempt {current_attempt}"
    )]
    StaleBroadcast {
        /// The broadcast's epoch.
        epoch: u32,
        /// The broadcast's attempt.
        attempt: u32,
        /// The epoch under way.
        current_epoch: u32,
        /// The attempt under way.
        current_attempt: u32,
    },
    /// Records whose bytes do not fit the job's record sizes.
    #[error("{records} records in {bytes} bytes do not have the job's record sizes")]
    RecordBytes {
        /// Records listed.
        records: usize,
        /// Bytes present.
        bytes: usize,
    },
    /// A job whose records are neither of one width nor of listed sizes, one per point.
    #[error("a job of {points} points gives records of {width} bytes and {} sizes", sizes.map_or("no".to_string(), |n| n.to_string()))]
    JobRecords {
        /// The job's points.
        points: u32,
        /// Its record width (0: uneven).
        width: u32,
        /// How many sizes it lists, if any.
        sizes: Option<usize>,
    },
    /// An order whose plan indices and transmissions disagree.
    #[error("an order lists {indices} plan indices for {transmissions} transmissions")]
    OrderIndices {
        /// Indices listed.
        indices: usize,
        /// Transmissions in the plan.
        transmissions: usize,
    },
    /// The master asked a worker to hold its update for a time that is no duration.
    #[error("the master asked to hold the update for {seconds} s")]
    HoldTime {
        /// The seconds asked for.
        seconds: f64,
    },
    /// An unknown message kind byte.
    #[error("unknown {what} kind {kind}")]
    UnknownKind {
        /// "message", "update", "learner".
        what: &'static str,
        /// The byte.
        kind: u8,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::epoch_chain::ChainError;

    #[test]
    fn a_planner_s_refusal_through_the_chain_stays_a_plan_error() {
        let refused =
            PlanError::TooManyWorkers { planner: "x".into(), workers: 200, max: 128, suggestion: "y" };
        assert!(matches!(RuntimeError::from(ChainError::Plan(refused)), RuntimeError::Plan(_)));
        let state = ChainError::State("no".into());
        assert!(matches!(RuntimeError::from(state), RuntimeError::Chain(_)));
    }
}
