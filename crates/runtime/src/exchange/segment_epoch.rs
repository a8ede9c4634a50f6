//! Planning one epoch's coded delivery of records of uneven size, the call both data planes
//! share (the TCP exchange's master and `ubershuffle.torch`'s store rank): the chain's drawn
//! epoch, planned on its segment-level instance ([`Segmentation::instance`]) and verified there.
//! Encoding ([`ubershuffle_codes::SegmentEncoder`]) and decoding
//! ([`ubershuffle_codes::SegmentTarget`] under the one [`ubershuffle_codes::Decoder`]) work on
//! the plan this returns.

use ubershuffle_codes::{SegmentError, Segmentation};
use ubershuffle_core::epoch_chain::{ChainError, DrawnEpoch};
use ubershuffle_core::pliable::Randomness;
use ubershuffle_core::{Plan, ShuffleInstance, ShufflePlanner, VerifyError, verify};

/// One epoch's coded delivery over the segments of records of uneven size.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SegmentEpoch {
    /// The epoch, from 1.
    pub epoch: usize,
    /// The record-level caches and the assignment the workers get.
    pub records: ShuffleInstance,
    /// The segment-level instance the plan delivers.
    pub segments: ShuffleInstance,
    /// The plan over segments, verified on [`SegmentEpoch::segments`].
    pub plan: Plan,
    /// The scheme that made it (a portfolio's winning member).
    pub made_by: String,
    /// Bytes of its packets beyond the longest real part of each ([`Segmentation::padding_of`]).
    pub padding_bytes: u64,
}

/// Why an epoch's segment delivery cannot be planned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentEpochError {
    /// The chain refused the scheme, or the planner failed.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// The segment instance could not be made.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The plan does not decode (a planner's bug: never sent).
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// Plans `drawn` over the segments of `segmentation`: a fixed-assignment scheme plans the
/// segment instance itself; a pliable one chooses the assignment on records (within
/// `candidates`) and its record plan is expanded to segments
/// ([`Segmentation::expand_plan`]). Either way the plan is verified on the segment instance.
pub fn plan_segment_epoch(
    drawn: DrawnEpoch,
    planner: &dyn ShufflePlanner,
    candidates: Option<Randomness>,
    segmentation: &Segmentation,
) -> Result<SegmentEpoch, SegmentEpochError> {
    let epoch = drawn.epoch;
    let (records, segments, plan, made_by) = if planner.as_pliable().is_some() {
        let planned = drawn.plan(planner, candidates)?;
        planned.verify()?;
        let segments = segmentation.instance(&planned.instance)?;
        let plan = segmentation.expand_plan(&planned.plan);
        (planned.instance, segments, plan, planned.made_by)
    } else {
        let records = drawn.instance.clone();
        let segments = segmentation.instance(&records)?;
        let planned = drawn.plan_derived(planner, &segments)?;
        (records, segments, planned.plan, planned.made_by)
    };
    verify(&segments, &plan)?.ensure_valid()?;
    let padding_bytes = segmentation.padding_of(&plan);
    Ok(SegmentEpoch { epoch, records, segments, plan, made_by, padding_bytes })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_codes::RecordIndex;
    use ubershuffle_core::PlannerOptions;
    use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
    use ubershuffle_core::exchange_policy::ExchangePolicy;
    use ubershuffle_planners::planner_by_name;

    #[test]
    fn fixed_and_pliable_schemes_plan_segments_that_verify() {
        let sizes: Vec<u64> = (0..40u64).map(|i| 1 + (i * 7919) % 300).collect();
        let seg = Segmentation::new(RecordIndex::from_sizes(sizes).unwrap(), 32).unwrap();
        let params = ChainParams::new(4, 40, ExchangePolicy::Global, 3).with_alpha(0.5).unwrap();
        let chain = EpochChain::new(params).unwrap();
        for scheme in ["coded", "auto", "pliable-greedy"] {
            let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
            let drawn = chain.draw(&chain.all_workers(), 0).unwrap();
            let e = plan_segment_epoch(drawn, planner.as_ref(), None, &seg).unwrap();
            assert_eq!(e.segments.points(), seg.segments());
            assert!(e.plan.len() <= e.segments.uncoded_transmissions(), "{scheme}");
            let again = plan_segment_epoch(
                chain.draw(&chain.all_workers(), 0).unwrap(),
                planner.as_ref(),
                None,
                &seg,
            )
            .unwrap();
            assert_eq!(again.plan, e.plan, "{scheme}: the same seed, the same plan");
        }
    }
}
