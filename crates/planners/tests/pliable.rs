//! The pliable planners in their own mode: on random requests over every randomness level, the
//! chosen assignment keeps the constraint, every batch is full, every worker decodes, and the
//! plan is deterministic under the seed.
//!
//! The registry's property tests (`tests/planners.rs`, the codec's round trip) give every
//! planner fixed instances; a pliable planner plans those as a request with one candidate per
//! point, so they cover that case. The choice of assignments is covered here.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use proptest::prelude::*;
use ubershuffle_core::pliable::{PliableRequest, Randomness, verify_pliable};
use ubershuffle_core::{
    GeneratorParams, PlanError, PlannerOptions, ShuffleInstance, ShufflePlanner, arbitrary_instance, seeded,
};
use ubershuffle_planners::PaperSetting;
use ubershuffle_planners::{builtin_planners, planner_by_name};

/// Every registered planner with a pliable side.
fn pliable_planners() -> Vec<Box<dyn ShufflePlanner>> {
    builtin_planners()
        .iter()
        .map(|e| (e.build)(&PlannerOptions::default()))
        .filter(|p| p.as_pliable().is_some())
        .collect()
}

/// Plans `request` with every pliable planner and checks the answer; returns the counts.
fn check_request(request: &PliableRequest, seed: u64) -> Vec<usize> {
    let mut counts = Vec::new();
    for planner in pliable_planners() {
        let pliable = planner.as_pliable().unwrap();
        let planned = match pliable.plan_pliable(request, &mut seeded(seed)) {
            Err(PlanError::OverBudget { .. }) => continue,
            planned => planned.unwrap(),
        };
        let report = verify_pliable(request, &planned).unwrap();
        assert!(report.is_valid(), "{}: {:?}", planner.name(), report.decoding);
        assert!(planned.plan.len() <= report.uncoded_transmissions, "{}", planner.name());
        assert_eq!(planned, pliable.plan_pliable(request, &mut seeded(seed)).unwrap(), "{}", planner.name());
        if request.is_fresh() {
            for w in 0..request.workers() {
                assert!(planned.instance.assignment(w).iter().all(|p| !request.caches(w, p)));
            }
        }
        counts.push(planned.plan.len());
    }
    counts
}

fn randomness(level: usize, workers: usize) -> Randomness {
    if level > workers { Randomness::All } else { Randomness::Candidates(level.max(1)) }
}

#[test]
fn both_planners_are_registered_under_pliable_names() {
    let names: Vec<String> = pliable_planners().iter().map(|p| p.name().to_string()).collect();
    assert_eq!(names, ["pliable-greedy", "pliable-hierarchical"]);
    assert!(planner_by_name("auto", &PlannerOptions::default()).unwrap().as_pliable().is_none());
}

#[test]
fn one_candidate_is_the_fully_random_assignment_and_all_may_keep_everything() {
    let inst = GeneratorParams { workers: 6, points: 600, alpha: 0.5, seed: 4 }.check().unwrap().generate();
    let one = PliableRequest::new(inst.clone(), Randomness::FULLY_RANDOM, &mut seeded(1)).unwrap();
    let all = PliableRequest::new(inst.clone(), Randomness::All, &mut seeded(1)).unwrap();
    for planner in pliable_planners() {
        let p = planner.as_pliable().unwrap();
        let fixed = p.plan_pliable(&one, &mut seeded(2)).unwrap();
        assert_eq!(fixed.instance, inst, "{}", planner.name());
        // Every worker caches its previous batch: with any worker allowed, nothing moves.
        let free = p.plan_pliable(&all, &mut seeded(2)).unwrap();
        assert!(free.plan.is_empty(), "{}: {}", planner.name(), free.plan.len());
        assert!(verify_pliable(&all, &free).unwrap().is_valid());
    }
}

#[test]
fn a_plan_for_another_assignment_or_constraint_is_refused() {
    let inst = GeneratorParams { workers: 5, points: 200, alpha: 0.4, seed: 2 }.check().unwrap().generate();
    let one = PliableRequest::new(inst.clone(), Randomness::FULLY_RANDOM, &mut seeded(1)).unwrap();
    let all = PliableRequest::new(inst, Randomness::All, &mut seeded(1)).unwrap();
    let greedy = planner_by_name("pliable-greedy", &PlannerOptions::default()).unwrap();
    let free = greedy.as_pliable().unwrap().plan_pliable(&all, &mut seeded(1)).unwrap();
    // The plan chose owners outside the single candidate of `one`.
    let e = verify_pliable(&one, &free).unwrap_err();
    assert!(e.to_string().contains("not one of its candidates"), "{e}");
    // Another instance's caches.
    let other = GeneratorParams { workers: 5, points: 200, alpha: 0.4, seed: 3 }.check().unwrap().generate();
    let other = PliableRequest::new(other, Randomness::All, &mut seeded(1)).unwrap();
    assert!(
        verify_pliable(&other, &free).unwrap_err().to_string().contains("other workers, points or caches")
    );
}

#[test]
fn the_paper_setting_gives_new_points_only() {
    for (m, n, s) in [(60, 6, 20), (200, 20, 50), (40, 40, 8)] {
        let request = PaperSetting { messages: m, workers: n, cache: s, seed: 1 }.request().unwrap();
        let counts = check_request(&request, 3);
        assert_eq!(counts.len(), 2);
        assert!(counts.iter().all(|&c| c < m), "{counts:?} for m = {m}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn pliable_plans_verify_on_model_instances(
        workers in 1usize..9,
        batch in 1usize..12,
        extra_points in 0usize..8,
        excess in 0.0f64..1.0,
        level in 1usize..11,
        seed in any::<u64>(),
    ) {
        let points = workers * batch + extra_points % workers;
        let min_alpha = points.div_ceil(workers) as f64 / points as f64;
        let alpha = min_alpha + (1.0 - min_alpha) * excess;
        let inst = GeneratorParams { workers, points, alpha, seed }.check().unwrap().generate();
        let request = PliableRequest::new(inst, randomness(level, workers), &mut seeded(seed)).unwrap();
        check_request(&request, seed);
    }

    #[test]
    fn pliable_plans_verify_on_arbitrary_instances(
        workers in 1usize..8,
        points in 1usize..60,
        cache_probability in 0.0f64..1.0,
        level in 1usize..10,
        seed in any::<u64>(),
    ) {
        let inst: ShuffleInstance = arbitrary_instance(workers, points, cache_probability, seed);
        let workers = inst.workers();
        let request = PliableRequest::new(inst, randomness(level, workers), &mut seeded(seed)).unwrap();
        check_request(&request, seed);
    }

    #[test]
    fn fresh_requests_verify(
        workers in 2usize..10,
        per_worker in 1usize..6,
        cache_share in 0.05f64..0.7,
        seed in any::<u64>(),
    ) {
        let messages = workers * per_worker + seed as usize % workers;
        let cache = ((messages as f64 * cache_share) as usize).min(messages - 1);
        if let Ok(request) = (PaperSetting { messages, workers, cache, seed }).request() {
            check_request(&request, seed);
        }
    }
}
