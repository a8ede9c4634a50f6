//! [`PlanError`]: why a planner could not produce a plan for an instance.

/// Why a planner could not produce a plan for an instance.
///
/// Every variant prints as one line naming the scheme; the ones about reach also name the
/// limit and a scheme that fits.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum PlanError {
    /// The planner groups points by exact worker sets and supports at most `max` workers.
    #[error(
        "scheme {planner} supports at most {max} workers, the instance has {workers}: try --scheme {suggestion}"
    )]
    TooManyWorkers {
        /// The planner's name.
        planner: String,
        /// Workers in the instance.
        workers: usize,
        /// The planner's limit.
        max: usize,
        /// A scheme that handles the instance.
        suggestion: &'static str,
    },
    /// The planner's work on this instance would exceed its budget: it stopped at once (or, for
    /// a search whose cost shows only as it runs, when the budget ran out).
    #[error(
        "scheme {planner} is past its reach here: {reach}; its budget is {budget} work units \
         (--time-budget): try --scheme {suggestion} or a larger --time-budget"
    )]
    OverBudget {
        /// The planner's name.
        planner: String,
        /// What grows past the budget, in one phrase (with the numbers that decided it).
        reach: String,
        /// The budget in work units.
        budget: u64,
        /// A scheme that handles the instance within the budget.
        suggestion: &'static str,
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
