#![doc = include_str!("../README.md")]

mod assignment;
pub mod broadcast_demo;
mod checkpoint;
pub mod cluster_job;
mod config;
mod config_error;
pub mod cost_model;
mod error;
pub mod files;
mod fingerprint;
pub mod gradient_coding;
pub mod in_process;
mod inbox;
mod learner_spec;
mod master;
mod metrics;
mod phases;
// The master/worker messages: public for this workspace's tests and tools that speak them, not a
// stable API (the protocol changes with the runtime).
#[doc(hidden)]
pub mod protocol;
mod routing;
mod run_data;
pub mod segment_epoch;
pub mod spec;
mod worker;
mod worker_store;

pub use checkpoint::{Checkpoint, ResumePoint};
pub use config::{CheckedRunConfig, RunConfig};
pub use config_error::ConfigError;
pub use cost_model::{CostModel, CostModelError, Prices, Scaling, Work};
pub use error::{ProtocolError, RuntimeError};
pub use files::{Access, write_atomic, write_atomically};
pub use fingerprint::RunFingerprint;
pub use inbox::join_limits;
pub use learner_spec::LearnerSpec;
pub use master::{Master, RunReport};
pub use metrics::{EpochMetrics, metrics_csv};
pub use phases::{Phase, PhaseTimer};
pub use routing::{Routes, route};
pub use run_data::{RunData, ShuffledRecords, SizedRecords};
pub use spec::{PreparedRun, RunSpec};
pub use worker::{WorkerExit, WorkerOptions, WorkerSummary, run_worker};
pub use worker_store::{MemoryStore, ReadRecords, WorkerStore, read_found};
