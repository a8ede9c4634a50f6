#![doc = include_str!("../README.md")]

pub mod bounds;
mod carpool;
pub mod examples;
pub mod exchange_policy;
mod generator;
mod instance;
pub mod no_excess;
mod plan;
mod planner;
pub mod planners;
pub mod rng;
pub mod tables;
pub mod theory;
mod verify;
pub mod wire;
mod worker_set;

pub use generator::{
    CheckedGeneratorParams, GeneratorError, GeneratorParams, balanced_assignment, cache_around,
    cache_size_for,
};
pub use instance::{InstanceError, ShuffleInstance};
pub use plan::{Part, Plan};
pub use planner::{
    PlanError, PlannerEntry, PlannerOptions, ShufflePlanner, builtin_names, builtin_planners, planner_by_name,
};
pub use rng::{SeededRng, seeded};
pub use verify::{Peeling, VerifyError, VerifyReport, WorkerShortfall, check_plan, peel, verify};
pub use worker_set::{MAX_SET_WORKERS, WorkerSet};
