//! The coded data shuffling problem of distributed learning, and the machinery every scheme
//! shares.
//!
//! A master holds `q` data points; `n` workers each cache at most `s` of them. Each epoch the
//! master draws a new balanced assignment `D_i`, and must deliver to every worker the points of
//! `D_i` it does not cache, by broadcasting XORs of points that the workers decode with their
//! caches. This crate holds:
//!
//! - [`ShuffleInstance`]: one epoch's caches and assignment, validated, with its JSON form;
//!   [`GeneratorParams`] draws seeded instances in the UberShuffle paper's model;
//! - [`Plan`] (transmissions, each an XOR of tagged points) and [`ShufflePlanner`], the trait
//!   every scheme implements, with the built-in planners in [`planners`] and a registry by name;
//! - [`verify`]: symbolic peeling at every worker, which every plan must pass;
//! - [`bounds`] and [`theory`]: lower bounds and the papers' closed forms to print beside counts;
//! - [`scale`]: every scheme on one instance, verified, timed and beside its bound (the `scale`
//!   experiment's measurement).
//!
//! [`no_excess`] holds Attia-Tandon's no-excess storage model (the shuffle matrix, eq. (43),
//! cycle packing) and [`exchange_policy`] the local, partial-local and global exchange of
//! partitioned data, whose epochs any planner can plan.
//!
//! ```
//! use ubershuffle_core::{GeneratorParams, PlannerOptions, planner_by_name, seeded, verify};
//! let inst = GeneratorParams { workers: 5, points: 1000, alpha: 0.4, seed: 1 }.check()?.generate();
//! let coded = planner_by_name("coded", &PlannerOptions::default())?;
//! let plan = coded.plan(&inst, &mut seeded(1))?;
//! assert!(verify(&inst, &plan)?.is_valid());
//! assert!(plan.len() < inst.uncoded_transmissions());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
mod point_set;
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
