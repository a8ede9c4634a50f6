//! Lee et al.'s coded shuffling: one XOR packet per row of every encoding table.

use crate::tables::{encoding_tables, tables_to_plan};
use crate::{Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner};

/// The coded shuffling algorithm of Lee et al. as the UberShuffle paper describes it
/// (Section 2.2, Example 2): group needed points into encoding tables by the exact set of
/// workers caching them and send one packet per table row. The count is deterministic for an
/// instance; Theorem 1 gives its limit as `q` grows ([`crate::theory::theorem1_coded_transmissions`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CodedPlanner;

impl CodedPlanner {
    /// The scheme's name.
    pub const NAME: &'static str = "coded";
    /// What the scheme does.
    pub const DESCRIPTION: &'static str = "Lee et al.'s encoding tables: one XOR packet per table row";
}

impl ShufflePlanner for CodedPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        Ok(tables_to_plan(&encoding_tables(inst, Self::NAME)?))
    }
}
