//! [`ShufflePlanner`], the one trait every shuffling scheme implements, its error type, and the
//! registry of built-in planners by name.

use std::time::Duration;

use crate::planners;
use crate::{Plan, SeededRng, ShuffleInstance};

/// Why a planner could not produce a plan for an instance.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum PlanError {
    /// The planner groups points by worker sets and supports at most `max` workers.
    #[error("scheme {planner} supports at most {max} workers, the instance has {workers}")]
    TooManyWorkers {
        /// The planner's name.
        planner: String,
        /// Workers in the instance.
        workers: usize,
        /// The planner's limit.
        max: usize,
    },
    /// The instance is outside the model the planner is built for.
    #[error("scheme {planner} does not apply to this instance: {reason}")]
    Unsupported {
        /// The planner's name.
        planner: String,
        /// What the instance lacks, in one line.
        reason: String,
    },
    /// The planner failed for a reason of its own (a plugin's error, say).
    #[error("scheme {planner} failed: {reason}")]
    Failed {
        /// The planner's name.
        planner: String,
        /// What went wrong, in one line.
        reason: String,
    },
}

/// A shuffling scheme: turns an instance into a plan of coded transmissions.
///
/// Implementations must return plans that pass [`crate::verify`]; the tests of every built-in
/// planner check that on random instances. Randomised planners draw only from `rng`, so the
/// same seed gives the same plan.
pub trait ShufflePlanner: Send + Sync {
    /// The scheme's name as the command line spells it (`coded`, `ubershuffle`, ...).
    fn name(&self) -> &str;

    /// One line saying what the scheme does, for `--help` and listings.
    fn description(&self) -> &str;

    /// Plans the shuffle of `inst`.
    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError>;
}

/// Options shared by the built-in planners; each planner reads the ones it understands.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannerOptions {
    /// Wall-clock budget for planners that search (improving local search and the like).
    pub time_budget: Duration,
}

impl Default for PlannerOptions {
    fn default() -> Self {
        PlannerOptions { time_budget: Duration::from_secs(10) }
    }
}

impl PlannerOptions {
    /// These options with the search budget set to `budget`.
    #[must_use]
    pub fn with_time_budget(mut self, budget: Duration) -> Self {
        self.time_budget = budget;
        self
    }
}

/// A built-in planner in the registry: its name, what it does, and how to build it.
#[derive(Clone, Copy)]
pub struct PlannerEntry {
    /// The scheme's name.
    pub name: &'static str,
    /// One line saying what it does.
    pub description: &'static str,
    /// Builds the planner with the given options.
    pub build: fn(&PlannerOptions) -> Box<dyn ShufflePlanner>,
}

/// Every built-in planner, in the order listings show them. Registering a new planner is one
/// line here plus its file under `planners/`.
pub fn builtin_planners() -> &'static [PlannerEntry] {
    planners::REGISTRY
}

/// The built-in planner called `name`, built with `options`.
pub fn planner_by_name(name: &str, options: &PlannerOptions) -> Option<Box<dyn ShufflePlanner>> {
    builtin_planners().iter().find(|e| e.name == name).map(|e| (e.build)(options))
}

/// The names of the built-in planners, comma-separated, for error messages.
pub fn builtin_names() -> String {
    builtin_planners().iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}
