//! The built-in planners, one file each, and the registry that names them.

mod coded;
mod uncoded;

pub use coded::CodedPlanner;
pub use uncoded::UncodedPlanner;

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
];
