//! Lee et al.'s coded shuffling: one XOR packet per row of every encoding table.

use super::BuiltinPlanner;
use crate::tables::EncodingTables;
use crate::{Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner};

/// The coded shuffling algorithm of Lee et al. as the UberShuffle paper describes it
/// (Section 2.2, Example 2): group needed points into encoding tables by the exact set of
/// workers caching them and send one packet per table row. The count is deterministic for an
/// instance; Theorem 1 gives its limit as `q` grows ([`crate::theory::theorem1_coded_transmissions`]).
///
/// Reach: any number of workers (tables are keyed by worker bitsets sized at run time). At
/// cluster scale almost every table holds one point and the count approaches uncoded's.
#[derive(Clone, Copy, Debug, Default)]
pub struct CodedPlanner;

impl BuiltinPlanner for CodedPlanner {
    const NAME: &'static str = "coded";
    const DESCRIPTION: &'static str = "Lee et al.'s encoding tables: one XOR packet per table row";

    fn build(_options: &PlannerOptions) -> Self {
        Self
    }
}

impl ShufflePlanner for CodedPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
        Ok(EncodingTables::of(inst).to_plan())
    }
}
