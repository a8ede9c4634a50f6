//! Every built-in planner on the papers' examples and on random instances: counts where the
//! papers give them, and `verify` on every plan.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use proptest::prelude::*;
use ubershuffle_core::{
    GeneratorParams, PlanError, PlannerOptions, ShuffleInstance, arbitrary_instance, seeded, verify,
};
use ubershuffle_planners::bounds::{all_lower_bounds, best_lower_bound, max_need_bound};
use ubershuffle_planners::{builtin_planners, planner_by_name};

fn count(scheme: &str, inst: &ShuffleInstance) -> usize {
    let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
    let plan = planner.plan(inst, &mut seeded(0)).unwrap();
    let report = verify(inst, &plan).unwrap();
    assert!(report.is_valid(), "{scheme}: {report:?}");
    plan.len()
}

/// Plans `inst` with every built-in planner and checks each plan decodes everywhere, never
/// costs more than uncoded, and never beats a lower bound; that `ubershuffle-opt` never sends
/// more than `ubershuffle`, and `auto` never more than any other fixed-assignment planner (the
/// pliable ones plan a fixed instance as one candidate per point: `pliable-greedy` is `auto`
/// then, `pliable-hierarchical` its own group scheme, which `auto` does not include). A
/// planner built for a narrower model (no excess storage, say) may refuse an instance outside
/// it with `PlanError::Unsupported`.
fn check_every_planner(inst: &ShuffleInstance) {
    let uncoded = inst.uncoded_transmissions();
    let bounds = all_lower_bounds(inst);
    let mut counts = Vec::new();
    // The properties hold at any budget; a small one keeps the 400 cases quick.
    let options = PlannerOptions::default().with_time_budget(std::time::Duration::from_millis(200));
    for entry in builtin_planners() {
        let planner = (entry.build)(&options);
        let plan = match planner.plan(inst, &mut seeded(0)) {
            Err(PlanError::Unsupported { .. }) => continue,
            plan => plan.unwrap(),
        };
        let report = verify(inst, &plan).unwrap();
        assert!(report.is_valid(), "{}: {report:?}", entry.name);
        let n = plan.len();
        assert!(n <= uncoded, "{} sent {n} > uncoded {uncoded}", entry.name);
        for bound in &bounds {
            assert!(n >= bound.value, "{} sent {n} < the {} bound {}", entry.name, bound.kind, bound.value);
        }
        if planner.as_pliable().is_none() {
            counts.push((entry.name, n));
        }
    }
    let of = |name: &str| counts.iter().find(|(n, _)| *n == name).map(|&(_, c)| c);
    assert!(of("ubershuffle-opt") <= of("ubershuffle"));
    let auto = of("auto").unwrap();
    assert!(counts.iter().all(|&(_, c)| auto <= c), "auto {auto} vs {counts:?}");
}

#[test]
fn paper_examples_1_and_2() {
    let inst = ShuffleInstance::paper_example();
    assert_eq!(count("uncoded", &inst), 6);
    assert_eq!(count("coded", &inst), 4);
}

#[test]
fn paper_example_3_ubershuffle_sends_three() {
    let inst = ShuffleInstance::paper_example();
    assert_eq!(count("ubershuffle", &inst), 3);
    assert_eq!(count("ubershuffle-opt", &inst), 3);
    assert_eq!(best_lower_bound(&inst).value, 3);
}

#[test]
fn the_acyclic_bound_is_stronger_than_max_need() {
    let inst = GeneratorParams { workers: 8, points: 2000, alpha: 0.4, seed: 1 }.check().unwrap().generate();
    let best = best_lower_bound(&inst);
    assert_eq!(best.kind, "acyclic-subgraph");
    assert!(best.value > 2 * max_need_bound(&inst).value, "{best:?}");
    // Above 20 workers the order is greedy; it still beats max-need.
    let wide = GeneratorParams { workers: 24, points: 2400, alpha: 0.3, seed: 2 }.check().unwrap().generate();
    let best = best_lower_bound(&wide);
    assert_eq!(best.kind, "acyclic-subgraph-greedy");
    assert!(best.value > max_need_bound(&wide).value);
    assert!(best.value <= count("ubershuffle-opt", &wide));
}

#[test]
fn planners_are_deterministic_under_a_seed() {
    let inst = GeneratorParams { workers: 6, points: 600, alpha: 0.4, seed: 2 }.check().unwrap().generate();
    for entry in builtin_planners() {
        let p = (entry.build)(&PlannerOptions::default());
        assert_eq!(p.plan(&inst, &mut seeded(9)), p.plan(&inst, &mut seeded(9)));
    }
}

#[test]
fn edge_cases() {
    // alpha exactly q/n: no excess storage.
    check_every_planner(
        &GeneratorParams { workers: 5, points: 100, alpha: 0.2, seed: 1 }.check().unwrap().generate(),
    );
    // Everything cached: nothing to send.
    let all = GeneratorParams { workers: 4, points: 40, alpha: 1.0, seed: 1 }.check().unwrap().generate();
    assert_eq!(count("coded", &all), 0);
    assert_eq!(count("uncoded", &all), 0);
    // One worker.
    check_every_planner(
        &GeneratorParams { workers: 1, points: 10, alpha: 1.0, seed: 1 }.check().unwrap().generate(),
    );
    // Nothing cached anywhere: every needed point is a unicast.
    let bare = arbitrary_instance(4, 20, 0.0, 3);
    assert_eq!(count("coded", &bare), 20);
    // One point per worker.
    check_every_planner(
        &GeneratorParams { workers: 3, points: 3, alpha: 1.0 / 3.0, seed: 4 }.check().unwrap().generate(),
    );
}

#[test]
fn past_128_workers_the_carpool_schemes_refuse_and_name_one_that_fits() {
    let inst = arbitrary_instance(130, 260, 0.05, 1);
    for scheme in ["ubershuffle", "ubershuffle-opt"] {
        let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
        let err = planner.plan(&inst, &mut seeded(0)).unwrap_err();
        assert_eq!(planner.fits(&inst), Err(err.clone()));
        let message = err.to_string();
        assert!(
            message.contains("at most 128 workers") && message.contains("--scheme clique-cover"),
            "{message}"
        );
    }
    assert_eq!(count("uncoded", &inst), inst.uncoded_transmissions());
    assert!(count("coded", &inst) <= inst.uncoded_transmissions());
}

#[test]
fn uncoded_clique_cover_and_auto_plan_1024_workers() {
    let inst =
        GeneratorParams { workers: 1024, points: 8192, alpha: 0.05, seed: 3 }.check().unwrap().generate();
    let uncoded = count("uncoded", &inst);
    let clique = count("clique-cover", &inst);
    assert!(clique < uncoded, "clique-cover {clique} vs uncoded {uncoded}");
    assert!(count("auto", &inst) <= clique);
    assert!(clique >= best_lower_bound(&inst).value);
}

#[test]
fn a_carpool_search_past_its_reach_is_refused_at_once() {
    // Cachers of about 13 workers each, almost all unique: the greedy's subset search would
    // take minutes; it is refused before it starts.
    let inst =
        GeneratorParams { workers: 40, points: 40_000, alpha: 0.3, seed: 1 }.check().unwrap().generate();
    let planner = planner_by_name("ubershuffle", &PlannerOptions::default()).unwrap();
    let err = planner.fits(&inst).unwrap_err();
    assert!(matches!(err, PlanError::OverBudget { .. }), "{err}");
    assert!(err.to_string().contains("try --scheme clique-cover"), "{err}");
}

#[test]
fn unknown_schemes_are_named_with_the_known_ones() {
    let err = planner_by_name("clique", &PlannerOptions::default()).err().unwrap();
    assert_eq!(err.known, ubershuffle_planners::builtin_names());
    assert!(err.to_string().contains("unknown scheme 'clique'"), "{err}");
    assert!(ubershuffle_planners::builtin_names().contains(&"auto"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_planner_verifies_on_model_instances(
        workers in 1usize..9,
        batch in 1usize..12,
        extra_points in 0usize..8,
        excess in prop_oneof![Just(0.0), 0.0f64..1.0], // 0: no excess storage, half the cases
        seed in any::<u64>(),
    ) {
        let points = workers * batch + extra_points % workers;
        let min_alpha = points.div_ceil(workers) as f64 / points as f64;
        let alpha = min_alpha + (1.0 - min_alpha) * excess;
        let inst = GeneratorParams { workers, points, alpha, seed }.check().unwrap().generate();
        check_every_planner(&inst);
    }

    #[test]
    fn every_planner_verifies_on_arbitrary_instances(
        workers in 1usize..8,
        points in 1usize..60,
        cache_probability in 0.0f64..1.0,
        seed in any::<u64>(),
    ) {
        check_every_planner(&arbitrary_instance(workers, points, cache_probability, seed));
    }
}

#[test]
fn without_excess_storage_the_acyclic_bound_is_attia_tandon_theorem_2() {
    use ubershuffle_planners::bounds::{acyclic_subgraph_bound, attia_tandon_bound};
    use ubershuffle_planners::no_excess::random_no_excess_instance;
    for seed in 0..40 {
        let workers = 2 + (seed as usize % 9);
        let inst = random_no_excess_instance(workers, workers * 7, &mut seeded(seed)).unwrap();
        let (a, t) = (acyclic_subgraph_bound(&inst).unwrap(), attia_tandon_bound(&inst).unwrap());
        assert_eq!(a.value, t.value, "seed {seed}, {workers} workers");
        // Named by Theorem 2 unless the plain max-need bound (listed first) ties it.
        let best = best_lower_bound(&inst);
        assert!(best.kind == t.kind || (best.kind == "max-need" && best.value == t.value), "{best:?}");
    }
}
