//! The first message a TCP cluster's master sends each worker: which job the cluster runs.
//! `ubershuffle worker` is one program for both masters, `ubershuffle master` (the broadcast
//! demo) and `ubershuffle run --transport tcp` (the epoch loop).

use std::time::Duration;

use ubershuffle_transport::{Tag, Transport, TransportError};

/// The tag of the job message (apart from the tags of both jobs).
pub const TAG_JOB_KIND: Tag = 0x0100;

/// What the master asks the workers to do.
// Exhaustive on purpose: both ends of a cluster are the same program, and a new job is a
// change of the cluster protocol that `ubershuffle worker` must handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterJob {
    /// The broadcast demo ([`crate::broadcast_demo`]).
    BroadcastDemo,
    /// The epoch loop (`ubershuffle_runtime::run_worker`).
    EpochLoop {
        /// The master's timeout of every wait, which the worker adopts (a worker must not give
        /// up on a ring peer sooner or later than the master expects).
        timeout: Duration,
        /// Fault injection: leave the run when this epoch's order arrives.
        exit_at_epoch: Option<u32>,
    },
}

/// Why the job message could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The transport failed.
    #[error("waiting for the master's job: {0}")]
    Transport(#[from] TransportError),
    /// The bytes were not a job.
    #[error("the master sent a malformed job message ({0} bytes)")]
    Malformed(usize),
}

/// The longest timeout a job may carry (10^9 s, the CLI's bound on any number of seconds).
const MAX_TIMEOUT_MILLIS: u64 = 1_000_000_000_000;

const DEMO: u8 = 1;
const EPOCH_LOOP: u8 = 2;

impl ClusterJob {
    /// The byte form: a kind byte, then for the epoch loop the timeout in milliseconds (u64)
    /// and the exit epoch (u32, 0 for none), little endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        match *self {
            ClusterJob::BroadcastDemo => vec![DEMO],
            ClusterJob::EpochLoop { timeout, exit_at_epoch } => {
                let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                let mut out = vec![EPOCH_LOOP];
                out.extend_from_slice(&millis.to_le_bytes());
                out.extend_from_slice(&exit_at_epoch.unwrap_or(0).to_le_bytes());
                out
            }
        }
    }

    /// Parses the byte form.
    pub fn from_bytes(bytes: &[u8]) -> Result<ClusterJob, JobError> {
        match bytes {
            [DEMO] => Ok(ClusterJob::BroadcastDemo),
            [EPOCH_LOOP, rest @ ..] if rest.len() == 12 => {
                let mut millis = [0u8; 8];
                millis.copy_from_slice(&rest[..8]);
                let millis = u64::from_le_bytes(millis);
                // A timeout the CLI could not have given (0, or beyond 10^9 s) is malformed.
                if millis == 0 || millis > MAX_TIMEOUT_MILLIS {
                    return Err(JobError::Malformed(bytes.len()));
                }
                let exit = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]);
                Ok(ClusterJob::EpochLoop {
                    timeout: Duration::from_millis(millis),
                    exit_at_epoch: (exit > 0).then_some(exit),
                })
            }
            _ => Err(JobError::Malformed(bytes.len())),
        }
    }

    /// Sends the job to the worker of rank `rank`.
    pub fn send<T: Transport + ?Sized>(&self, t: &mut T, rank: usize) -> Result<(), TransportError> {
        t.send(rank, TAG_JOB_KIND, &self.to_bytes())
    }

    /// A worker's wait for its job (within the transport's timeout).
    pub fn receive<T: Transport + ?Sized>(t: &mut T) -> Result<ClusterJob, JobError> {
        ClusterJob::from_bytes(&t.recv(0, TAG_JOB_KIND)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_round_trip_and_garbage_is_refused() {
        for job in [
            ClusterJob::BroadcastDemo,
            ClusterJob::EpochLoop { timeout: Duration::from_millis(2500), exit_at_epoch: None },
            ClusterJob::EpochLoop { timeout: Duration::from_secs(1), exit_at_epoch: Some(3) },
        ] {
            assert_eq!(ClusterJob::from_bytes(&job.to_bytes()).ok(), Some(job));
        }
        let zero = ClusterJob::EpochLoop { timeout: Duration::ZERO, exit_at_epoch: None }.to_bytes();
        let mut huge = zero.clone();
        huge[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        for bad in [&[][..], &[0], &[DEMO, 0], &[EPOCH_LOOP, 1, 2], &zero, &huge] {
            assert!(ClusterJob::from_bytes(bad).is_err());
        }
    }
}
