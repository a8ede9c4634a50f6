//! The master/worker epoch loop: the piece that composes planners, codecs, transports and
//! learners into a distributed training run with data shuffling.
//!
//! Each epoch the [`Master`] draws the next assignment (global reshuffle, partial-local or
//! local, from the run's seed), plans it with any [`ubershuffle_core::ShufflePlanner`], verifies the
//! plan by peeling at every worker, routes each transmission (point to point when one worker
//! needs it, broadcast when several do), XOR-encodes the records and sends them; it then waits
//! until every worker holds its packets, collects the updates that arrive before the deadline
//! (stragglers are skipped, as in the UberShuffle paper), aggregates them and measures the
//! held-out loss. Each worker ([`run_worker`]) decodes its packets in any order, checks its new
//! records against the master's checksum, keeps its next cache ([`cache_policy`]), trains, and
//! replies. Every phase is timed ([`EpochMetrics`]). The loop is generic over the transport
//! and the same for every one; [`in_process`] runs a whole cluster on threads.
//!
//! Failures: a worker lost while packets are on their way restarts the epoch with the
//! survivors (delivery falls back to point to point, since the collective broadcast needs every
//! rank); a worker lost later is a straggler for the rest of the epoch; the run stops with a
//! clear error only when no worker is left. A [`Checkpoint`] after every epoch lets a run resume.

pub mod broadcast_demo;
pub mod cache_policy;
mod checkpoint;
pub mod cluster_job;
mod config;
mod error;
pub mod in_process;
mod learner_spec;
mod master;
mod metrics;
pub mod protocol;
pub mod routing;
mod worker;

pub use checkpoint::{Checkpoint, write_atomically};
pub use config::{CheckedRunConfig, ConfigError, RunConfig};
pub use error::{ProtocolError, RuntimeError};
pub use learner_spec::LearnerSpec;
pub use master::{Master, RunData, RunReport};
pub use metrics::{EpochMetrics, metrics_csv};
pub use worker::{WorkerExit, WorkerOptions, WorkerSummary, run_worker};
