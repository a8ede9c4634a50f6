//! Pliable shuffling: the master chooses the next assignment and the code together, within a
//! randomness constraint (after Song, Fragouli and Zhao, "A pliable index coding approach to
//! data shuffling", arXiv 1701.05540).
//!
//! Every other scheme takes the next epoch's assignment as given (uniformly random) and then
//! codes. SGD does not need a particular assignment, only a random enough one: here a
//! [`PliableRequest`] gives every point a few *candidates* drawn uniformly at random
//! ([`Randomness`]), and a [`PliablePlanner`] picks each point's owner among them and the
//! packets that deliver the batches, so that points go where they are cached or where one
//! packet can serve many workers. [`verify_pliable`] checks the constraint, full batches and
//! decoding; [`RandomnessStats`] and [`OwnerFrequencies`] measure how random the chosen
//! assignments are. `ubershuffle_planners::PaperSetting` is the paper's own model (every batch new to its worker).
//!
//! The planners are `pliable-greedy` and `pliable-hierarchical` of the `ubershuffle-planners`
//! crate; both are in its registry, and [`crate::ShufflePlanner::as_pliable`] reaches their
//! pliable side. Given a fixed
//! instance through [`crate::ShufflePlanner::plan`] they plan it as a request with one
//! candidate per point.
//!
//! `ubershuffle_planners::planners::PliableGreedyPlanner`'s documentation shows a request
//! planned and verified.

mod menu;
mod randomness;
mod request;
mod verify;

pub use menu::{CacherBits, Candidates, Menu};
pub use randomness::{OwnerFrequencies, ParseRandomnessError, Randomness, RandomnessStats};
pub use request::{MAX_LAYER_ENTRIES, PliableError, PliableRequest};
pub use verify::{PliableReport, RandomnessJson, verify_choice, verify_pliable};

use crate::{Plan, PlanError, SeededRng, ShuffleInstance};

/// A pliable planner's answer: the assignment it chose (as an instance with the request's
/// caches) and the plan that delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PliablePlan {
    /// The request's caches and the chosen assignment.
    pub instance: ShuffleInstance,
    /// The transmissions.
    pub plan: Plan,
    /// What made the plan (the planner, or the part of it whose plan won).
    pub made_by: String,
}

impl PliablePlan {
    /// The chosen assignment and its plan.
    pub fn new(instance: ShuffleInstance, plan: Plan, made_by: impl Into<String>) -> Self {
        PliablePlan { instance, plan, made_by: made_by.into() }
    }
}

/// A scheme that chooses the assignment as well as the code. Implementations must return
/// plans that pass [`verify_pliable`]; randomised ones draw only from `rng`.
pub trait PliablePlanner: Send + Sync {
    /// Chooses an assignment within the request's constraint and plans its delivery.
    fn plan_pliable(&self, request: &PliableRequest, rng: &mut SeededRng) -> Result<PliablePlan, PlanError>;
}
