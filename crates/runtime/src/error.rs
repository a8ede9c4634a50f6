//! [`RuntimeError`]: why a run stopped.

use ubershuffle_codes::{CodecError, DecodeError};
use ubershuffle_core::wire::WireError;
use ubershuffle_core::{InstanceError, PlanError, VerifyError};
use ubershuffle_learners::LearnerError;
use ubershuffle_transport::TransportError;

/// What a loss by timeout may mean, for the message.
fn no_workers_hint(timed_out: bool) -> &'static str {
    if timed_out {
        " (a timeout: the workers may be alive but slower than --timeout, e.g. a message that \
         takes longer than --timeout on an emulated link; raise --timeout or --bandwidth, or lower --chunk-bytes)"
    } else {
        ""
    }
}

/// Why a master or worker stopped.
#[derive(Debug, thiserror::Error)]
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
    /// A plan was malformed or did not decode.
    #[error("the plan failed verification: {0}")]
    Verify(#[from] VerifyError),
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
    Protocol(String),
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
        "the master sent nothing for {waited:?} (2 x its --timeout): it is frozen or gone, or its link is down"
    )]
    MasterSilent {
        /// How long the worker waited.
        waited: std::time::Duration,
    },
    /// Bad configuration.
    #[error("invalid run configuration: {0}")]
    Config(String),
    /// Reading or writing a checkpoint failed.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}
