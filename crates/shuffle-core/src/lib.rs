#![doc = include_str!("../README.md")]

mod bits;
pub mod bounds;
mod carpool;
pub mod exchange_policy;
mod generator;
mod instance;
pub mod limits;
pub mod no_excess;
mod packing;
mod plan;
mod plan_error;
mod planner;
pub mod planners;
pub mod pliable;
mod point_set;
mod receiver_packing;
mod requests;
pub mod rng;
pub mod scale;
mod tables;
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
pub use planners::{PlannerEntry, UnknownScheme, builtin_names, builtin_planners, planner_by_name};
pub use point_set::{PointIter, PointSet};
pub use rng::{SeededRng, seeded};
pub use verify::{Peeling, VerifyError, VerifyReport, WorkerShortfall, check_plan, peel, verify};
pub use worker_set::WorkerSet;
