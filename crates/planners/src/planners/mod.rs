//! The built-in planners, one file each, and the registry that names them.
//!
//! Which to pick (measured in `docs/shuffling.md`): `auto` tries the ones that fit and keeps
//! the fewest transmissions; up to about 20 workers `ubershuffle-opt` usually wins, from about
//! 30 workers `clique-cover`, and beyond 128 workers only `clique-cover`, `coded` and
//! `uncoded` apply.

mod auto;
mod clique_cover;
mod coded;
mod cycle_packing;
mod pliable_greedy;
mod pliable_hierarchical;
mod ubershuffle;
mod ubershuffle_opt;
mod uncoded;
mod worst_case;

pub use auto::AutoPlanner;
pub use clique_cover::CliqueCoverPlanner;
pub use coded::CodedPlanner;
pub use cycle_packing::CyclePackingPlanner;
pub use pliable_greedy::PliableGreedyPlanner;
pub use pliable_hierarchical::PliableHierarchicalPlanner;
pub use ubershuffle::UberShufflePlanner;
pub use ubershuffle_opt::UberShuffleOptPlanner;
pub use uncoded::UncodedPlanner;
pub use worst_case::WorstCasePlanner;

use crate::{PlannerOptions, ShufflePlanner};

/// A planner built into this crate: its name and description, written once as constants that
/// its [`ShufflePlanner`] implementation and the registry both read, and how options build it.
pub trait BuiltinPlanner: ShufflePlanner + Sized + 'static {
    /// The scheme's name as the command line spells it.
    const NAME: &'static str;
    /// One line saying what the scheme does.
    const DESCRIPTION: &'static str;
    /// The planner, configured by `options`.
    fn build(options: &PlannerOptions) -> Self;
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

impl PlannerEntry {
    /// The entry of built-in planner `P`.
    pub const fn of<P: BuiltinPlanner>() -> Self {
        PlannerEntry { name: P::NAME, description: P::DESCRIPTION, build: build_boxed::<P> }
    }
}

fn build_boxed<P: BuiltinPlanner>(options: &PlannerOptions) -> Box<dyn ShufflePlanner> {
    Box::new(P::build(options))
}

/// Every built-in planner, in the order listings show them. To add one: write
/// `planners/<name>.rs` with a type implementing [`ShufflePlanner`] and [`BuiltinPlanner`],
/// declare it above, and add its entry here; the property tests and the byte round trip then
/// cover it.
static REGISTRY: &[PlannerEntry] = &[
    PlannerEntry::of::<UncodedPlanner>(),
    PlannerEntry::of::<CodedPlanner>(),
    PlannerEntry::of::<UberShufflePlanner>(),
    PlannerEntry::of::<UberShuffleOptPlanner>(),
    PlannerEntry::of::<CliqueCoverPlanner>(),
    PlannerEntry::of::<AutoPlanner>(),
    PlannerEntry::of::<WorstCasePlanner>(),
    PlannerEntry::of::<CyclePackingPlanner>(),
    PlannerEntry::of::<PliableGreedyPlanner>(),
    PlannerEntry::of::<PliableHierarchicalPlanner>(),
];

/// Every built-in planner, in the order listings show them.
pub fn builtin_planners() -> &'static [PlannerEntry] {
    REGISTRY
}

/// No built-in planner has the name asked for.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("unknown scheme '{name}': known schemes are {}", .known.join(", "))]
pub struct UnknownScheme {
    /// The name asked for.
    pub name: String,
    /// The names of the built-in planners.
    pub known: Vec<&'static str>,
}

/// The built-in planner called `name`, built with `options`.
///
/// ```
/// use ubershuffle_core::PlannerOptions;
/// use ubershuffle_planners::planner_by_name;
/// assert_eq!(planner_by_name("coded", &PlannerOptions::default())?.name(), "coded");
/// let err = planner_by_name("codde", &PlannerOptions::default()).err().unwrap();
/// assert!(err.to_string().contains("known schemes are uncoded, coded"));
/// # Ok::<(), ubershuffle_planners::UnknownScheme>(())
/// ```
pub fn planner_by_name(
    name: &str,
    options: &PlannerOptions,
) -> Result<Box<dyn ShufflePlanner>, UnknownScheme> {
    REGISTRY
        .iter()
        .find(|e| e.name == name)
        .map(|e| (e.build)(options))
        .ok_or_else(|| UnknownScheme { name: name.to_string(), known: builtin_names() })
}

/// The names of the built-in planners, in registry order.
pub fn builtin_names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}
