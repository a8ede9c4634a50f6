//! Planning one epoch's coded delivery of records of uneven size, the call the runtime's epoch
//! loop and the data plane's store (`ubershuffle_plane`) share: the chain's drawn epoch, planned on its segment-level instance ([`Segmentation::instance`]) and verified there.
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
    /// The workers of the instances, as the chain numbers them (instance worker `k` is
    /// `live[k]`).
    pub live: Vec<usize>,
    /// Their batches before the epoch (the chain's, for measuring how random the new ones are).
    pub previous: Vec<Vec<u32>>,
    /// The record-level caches and the assignment the workers get (what the chain commits).
    pub records: ShuffleInstance,
    /// The segment-level instance the plan delivers (workers that receive nothing count as
    /// holding their new batch: [`plan_segment_epoch_without`]).
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
    plan_segment_epoch_without(drawn, planner, candidates, segmentation, &[])
}

/// [`plan_segment_epoch`] for an epoch whose workers at the instance's places `absent`
/// receive nothing (ranks lost while the chain keeps their places): the assignment is drawn
/// (or, by a pliable scheme, chosen) over every worker, but the delivery counts each absent
/// worker as holding its new batch, so no packet is planned for it (a pliable scheme's parts
/// for it are taken out of its packets, and packets left empty dropped).
pub fn plan_segment_epoch_without(
    drawn: DrawnEpoch,
    planner: &dyn ShufflePlanner,
    candidates: Option<Randomness>,
    segmentation: &Segmentation,
    absent: &[usize],
) -> Result<SegmentEpoch, SegmentEpochError> {
    let (epoch, live, previous) = (drawn.epoch, drawn.live.clone(), drawn.previous.clone());
    // Records of one size with every worker receiving: the segment instance is the records'
    // own, and a pliable plan verified on the records needs no second check.
    let as_records = segmentation.segments() == segmentation.records() && absent.is_empty();
    let (records, segments, plan, made_by) = if planner.as_pliable().is_some() {
        let planned = drawn.plan(planner, candidates)?;
        planned.verify()?;
        if as_records {
            let segments = planned.instance.clone();
            (planned.instance, segments, planned.plan, planned.made_by)
        } else {
            let delivered = receiving(&planned.instance, absent)?;
            let segments = segmentation.instance(delivered.as_ref().unwrap_or(&planned.instance))?;
            let plan = without_parts_of(&segmentation.expand_plan(&planned.plan), absent);
            verify(&segments, &plan)?.ensure_valid()?;
            (planned.instance, segments, plan, planned.made_by)
        }
    } else {
        let records = drawn.instance.clone();
        let segments = match receiving(&records, absent)? {
            None if as_records => records.clone(),
            delivered => segmentation.instance(delivered.as_ref().unwrap_or(&records))?,
        };
        let planned = drawn.plan_derived(planner, &segments)?;
        verify(&segments, &planned.plan)?.ensure_valid()?;
        (records, segments, planned.plan, planned.made_by)
    };
    let padding_bytes = segmentation.padding_of(&plan);
    Ok(SegmentEpoch { epoch, live, previous, records, segments, plan, made_by, padding_bytes })
}

/// `inst` with every worker of `absent` holding its batch in its cache (it needs nothing);
/// `None` when no worker is absent.
fn receiving(inst: &ShuffleInstance, absent: &[usize]) -> Result<Option<ShuffleInstance>, SegmentError> {
    if absent.is_empty() {
        return Ok(None);
    }
    let n = inst.workers();
    let cache = (0..n)
        .map(|w| {
            let mut c = inst.cache(w).to_vec();
            if absent.contains(&w) {
                c.extend(inst.needs(w));
                c.sort_unstable();
            }
            c
        })
        .collect();
    let assignment = (0..n).map(|w| inst.assignment(w).to_vec()).collect();
    Ok(Some(ShuffleInstance::new_uneven(n, inst.points(), cache, assignment)?))
}

/// `plan` without the parts meant for the workers of `absent` (transmissions left without a
/// part are dropped).
fn without_parts_of(plan: &Plan, absent: &[usize]) -> Plan {
    if absent.is_empty() {
        return plan.clone();
    }
    let mut out = Plan::with_capacity(plan.len(), plan.total_parts());
    let mut parts = Vec::new();
    for t in plan.iter() {
        parts.clear();
        parts.extend(t.iter().filter(|p| !absent.contains(&p.worker)).copied());
        if !parts.is_empty() {
            out.push(&parts);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_codes::{RecordIndex, default_segment_bytes};
    use ubershuffle_core::PlannerOptions;
    use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
    use ubershuffle_core::exchange_policy::ExchangePolicy;
    use ubershuffle_planners::planner_by_name;

    fn chain(points: usize) -> EpochChain {
        let params = ChainParams::new(4, points, ExchangePolicy::Global, 3).with_alpha(0.5).unwrap();
        EpochChain::new(params).unwrap()
    }

    #[test]
    fn fixed_and_pliable_schemes_plan_segments_that_verify() {
        let sizes: Vec<u64> = (0..40u64).map(|i| 1 + (i * 7919) % 300).collect();
        let seg = Segmentation::new(RecordIndex::from_sizes(sizes).unwrap(), 32).unwrap();
        let chain = chain(40);
        for scheme in ["coded", "auto", "pliable-greedy"] {
            let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
            let drawn = chain.draw(&chain.all_workers(), 0).unwrap();
            let e = plan_segment_epoch(drawn, planner.as_ref(), None, &seg).unwrap();
            assert_eq!(e.segments.points(), seg.segments());
            assert!(
                verify(&e.segments, &e.plan).unwrap().is_valid(),
                "{scheme}: every rank decodes its segments"
            );
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

    #[test]
    fn records_of_one_size_plan_exactly_as_records() {
        let chain = chain(160);
        let index = RecordIndex::fixed(160, 64).unwrap();
        let seg = Segmentation::new(index.clone(), default_segment_bytes(&index)).unwrap();
        for scheme in ["uncoded", "coded", "ubershuffle", "clique-cover", "pliable-greedy"] {
            let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
            let records = chain.draw(&chain.all_workers(), 0).unwrap().plan(planner.as_ref(), None).unwrap();
            let drawn = chain.draw(&chain.all_workers(), 0).unwrap();
            let e = plan_segment_epoch(drawn, planner.as_ref(), None, &seg).unwrap();
            assert_eq!((e.plan, e.padding_bytes), (records.plan, 0), "{scheme}");
            assert_eq!(e.records, records.instance, "{scheme}");
        }
    }

    #[test]
    fn absent_workers_receive_nothing_and_the_rest_decode() {
        let sizes: Vec<u64> = (0..60u64).map(|i| (i * 37) % 90).collect();
        let seg = Segmentation::new(RecordIndex::from_sizes(sizes).unwrap(), 16).unwrap();
        let chain = chain(60);
        for scheme in ["coded", "pliable-greedy"] {
            let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
            let plan = |absent: &[usize]| {
                let drawn = chain.draw(&chain.all_workers(), 0).unwrap();
                plan_segment_epoch_without(drawn, planner.as_ref(), None, &seg, absent).unwrap()
            };
            let (all, e) = (plan(&[]), plan(&[1, 3]));
            assert_eq!(e.records, all.records, "{scheme}: the assignment is drawn over every worker");
            assert!(e.segments.needs(1).is_empty() && e.segments.needs(3).is_empty());
            assert_eq!(e.segments.needs(0), all.segments.needs(0));
            assert!(e.plan.iter().all(|t| t.iter().all(|p| p.worker != 1 && p.worker != 3)), "{scheme}");
            assert!(verify(&e.segments, &e.plan).unwrap().is_valid());
            assert!(e.plan.len() < all.plan.len(), "{scheme}");
        }
    }
}
