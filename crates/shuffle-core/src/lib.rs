#![doc = include_str!("../README.md")]

// Word-level bitset helpers: public for the planners crate, not a stable API.
#[doc(hidden)]
pub mod bits;
pub mod epoch_chain;
pub mod exchange_policy;
mod generator;
mod instance;
pub mod limits;
mod plan;
mod plan_error;
mod planner;
pub mod pliable;
mod point_set;
pub mod rng;
pub mod theory;
mod verify;
pub mod wire;
mod worker_set;

pub use generator::{
    CheckedGeneratorParams, GeneratorError, GeneratorParams, arbitrary_instance, balanced_assignment,
    cache_around, cache_size_for,
};
pub use instance::{InstanceError, ShuffleInstance};
pub use plan::{Part, Plan};
pub use plan_error::PlanError;
pub use planner::{Planned, PlannerOptions, ShufflePlanner, Tried, WORK_PER_SECOND, work_units};
pub use point_set::{PointIter, PointSet};
pub use rng::{SeededRng, seeded};
pub use verify::{Peeling, VerifyError, VerifyReport, WorkerShortfall, check_plan, peel, verify};
pub use worker_set::WorkerSet;
