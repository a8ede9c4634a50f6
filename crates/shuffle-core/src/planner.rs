//! [`ShufflePlanner`], the one trait every shuffling scheme implements, and the options the
//! built-in planners share. The built-in planners and their registry live in the `ubershuffle-planners` crate.

use std::time::Duration;

use crate::{Plan, PlanError, SeededRng, ShuffleInstance};

/// Work units to a second of `--time-budget` (a unit: a sub-table probed, a counter updated,
/// forty rows or a few bitset words visited). Planners count their work in these units instead
/// of reading a clock, so a plan depends only on the instance, the seed and the budget, never
/// on the machine's load.
///
/// Meant as the units `ubershuffle-opt` counts per CPU second of its thread on Fig. 3
/// instances where its budget binds (n = 20, q = 3e5 and 1e6): `cargo test --release -p
/// ubershuffle-core --lib calibrate_work_per_second -- --ignored --nocapture` prints the rates
/// and their median on the machine at hand. The value is fixed, not re-measured, because every
/// plan whose budget binds depends on it (docs/shuffling.md, "Work budgets", keeps the last
/// calibration and why the value stays).
pub const WORK_PER_SECOND: f64 = 20e6;

/// A shuffling scheme: turns an instance into a plan of coded transmissions.
///
/// Implementations must return plans that pass [`crate::verify`]; the tests of every built-in
/// planner check that on random instances. Randomised planners draw only from `rng`, so the
/// same seed gives the same plan.
///
/// ```
/// use ubershuffle_core::{Part, Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner};
/// use ubershuffle_core::{GeneratorParams, seeded, verify};
///
/// /// Unicasts every needed point, last worker first.
/// struct Backwards;
///
/// impl ShufflePlanner for Backwards {
///     fn name(&self) -> &str { "backwards" }
///     fn description(&self) -> &str { "unicast every needed point, last worker first" }
///     fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
///         let mut plan = Plan::new();
///         for worker in (0..inst.workers()).rev() {
///             for point in inst.needs(worker) {
///                 plan.push(&[Part::new(point, worker)]);
///             }
///         }
///         Ok(plan)
///     }
/// }
///
/// let inst = GeneratorParams { workers: 4, points: 100, alpha: 0.5, seed: 1 }.check()?.generate();
/// let plan = Backwards.plan(&inst, &mut seeded(0))?;
/// assert!(verify(&inst, &plan)?.is_valid());
/// assert_eq!(plan.len(), inst.uncoded_transmissions());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ShufflePlanner: Send + Sync {
    /// The scheme's name as the command line spells it (`coded`, `ubershuffle`, ...).
    fn name(&self) -> &str;

    /// One line saying what the scheme does, for `--help` and listings.
    fn description(&self) -> &str;

    /// Plans the shuffle of `inst`.
    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError>;

    /// Whether the scheme can plan `inst` within its limits and budget, decided at once
    /// without planning: `Err` is the error [`ShufflePlanner::plan`] would return at once.
    /// A portfolio (`auto` of the planners crate) skips the schemes that do not fit. The
    /// default says yes.
    fn fits(&self, inst: &ShuffleInstance) -> Result<(), PlanError> {
        let _ = inst;
        Ok(())
    }

    /// The scheme's pliable side, if it chooses assignments too ([`crate::pliable`]): the
    /// `pliable-*` schemes return themselves, every other scheme `None`.
    fn as_pliable(&self) -> Option<&dyn crate::pliable::PliablePlanner> {
        None
    }

    /// Plans `inst` and says which scheme made the plan: the scheme itself, or for a portfolio
    /// the member that won, with what every member sent.
    fn plan_explained(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Planned, PlanError> {
        let plan = self.plan(inst, rng)?;
        Ok(Planned {
            tried: vec![Tried::sent(self.name(), plan.len())],
            made_by: self.name().to_string(),
            plan,
        })
    }
}

/// A plan and the scheme that made it ([`ShufflePlanner::plan_explained`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Planned {
    /// The plan.
    pub plan: Plan,
    /// The scheme that made it (for a portfolio, the member that won).
    pub made_by: String,
    /// Every scheme tried, in order, with its count or why it was skipped.
    pub tried: Vec<Tried>,
}

impl Planned {
    /// `plan`, made by `made_by` after trying `tried`.
    pub fn new(plan: Plan, made_by: impl Into<String>, tried: Vec<Tried>) -> Self {
        Planned { plan, made_by: made_by.into(), tried }
    }
}

/// One scheme a planner tried: its count, or why it did not plan.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tried {
    /// The scheme's name.
    pub scheme: String,
    /// Transmissions its plan sent, or the one-line reason it did not plan.
    pub outcome: Result<usize, String>,
}

impl Tried {
    /// A scheme that sent `transmissions`.
    pub fn sent(scheme: &str, transmissions: usize) -> Self {
        Tried { scheme: scheme.to_string(), outcome: Ok(transmissions) }
    }

    /// A scheme that did not plan, and why.
    pub fn skipped(scheme: &str, reason: &PlanError) -> Self {
        Tried { scheme: scheme.to_string(), outcome: Err(reason.to_string()) }
    }
}

/// Options shared by the built-in planners; each planner reads the ones it understands.
///
/// ```
/// use std::time::Duration;
/// use ubershuffle_core::PlannerOptions;
/// let options = PlannerOptions::default().with_time_budget(Duration::from_secs(2));
/// assert_eq!(options.work_budget(), 40_000_000);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PlannerOptions {
    /// The search budget, counted in work units ([`WORK_PER_SECOND`] to a second), not read
    /// from a clock: about this long on the reference machine.
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

    /// The budget in work units.
    pub fn work_budget(&self) -> u64 {
        work_units(self.time_budget)
    }
}

/// `budget` in work units ([`WORK_PER_SECOND`] to a second).
pub fn work_units(budget: Duration) -> u64 {
    (budget.as_secs_f64() * WORK_PER_SECOND) as u64
}
