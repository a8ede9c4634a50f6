//! The built-in planners, one file each, and the registry that names them.

mod coded;
mod cycle_packing;
mod ubershuffle;
mod ubershuffle_opt;
mod uncoded;
mod worst_case;

pub use coded::CodedPlanner;
pub use cycle_packing::CyclePackingPlanner;
pub use ubershuffle::UberShufflePlanner;
pub use ubershuffle_opt::UberShuffleOptPlanner;
pub use uncoded::UncodedPlanner;
pub use worst_case::WorstCasePlanner;

use crate::planner::PlannerEntry;

/// Every built-in planner. To add one: write `planners/<name>.rs` with a type implementing
/// [`crate::ShufflePlanner`], declare it above, and add its entry here.
pub(crate) static REGISTRY: &[PlannerEntry] = &[
    PlannerEntry {
        name: UncodedPlanner::NAME,
        description: UncodedPlanner::DESCRIPTION,
        build: |_| Box::new(UncodedPlanner),
    },
    PlannerEntry {
        name: CodedPlanner::NAME,
        description: CodedPlanner::DESCRIPTION,
        build: |_| Box::new(CodedPlanner),
    },
    PlannerEntry {
        name: UberShufflePlanner::NAME,
        description: UberShufflePlanner::DESCRIPTION,
        build: |_| Box::new(UberShufflePlanner),
    },
    PlannerEntry {
        name: UberShuffleOptPlanner::NAME,
        description: UberShuffleOptPlanner::DESCRIPTION,
        build: |options| Box::new(UberShuffleOptPlanner::new(options.time_budget)),
    },
    PlannerEntry {
        name: WorstCasePlanner::NAME,
        description: WorstCasePlanner::DESCRIPTION,
        build: |_| Box::new(WorstCasePlanner),
    },
    PlannerEntry {
        name: CyclePackingPlanner::NAME,
        description: CyclePackingPlanner::DESCRIPTION,
        build: |_| Box::new(CyclePackingPlanner),
    },
];
