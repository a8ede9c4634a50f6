//! Every built-in planner on the papers' examples and on random instances: counts where the
//! papers give them, and `verify` on every plan.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use proptest::prelude::*;
use ubershuffle_core::bounds::{all_lower_bounds, best_lower_bound, max_need_bound};
use ubershuffle_core::examples::{arbitrary_instance, ubershuffle_paper_example};
use ubershuffle_core::tables::{encoding_tables, tables_cost};
use ubershuffle_core::{
    GeneratorParams, PlanError, PlannerOptions, ShuffleInstance, builtin_planners, planner_by_name, seeded,
    verify,
};

fn count(scheme: &str, inst: &ShuffleInstance) -> usize {
    let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
    let plan = planner.plan(inst, &mut seeded(0)).unwrap();
    let report = verify(inst, &plan).unwrap();
    assert!(report.is_valid(), "{scheme}: {report:?}");
    plan.len()
}

/// Plans `inst` with every built-in planner and checks each plan decodes everywhere, never
/// costs more than uncoded, and never beats a lower bound; and that `ubershuffle-opt` never
/// sends more than `ubershuffle`. A planner built for a narrower model (no excess storage, say)
/// may refuse an instance outside it with `PlanError::Unsupported`.
fn check_every_planner(inst: &ShuffleInstance) {
    let uncoded = inst.uncoded_transmissions();
    let bounds = all_lower_bounds(inst);
    for entry in builtin_planners() {
        let planner = (entry.build)(&PlannerOptions::default());
        if let Err(PlanError::Unsupported { .. }) = planner.plan(inst, &mut seeded(0)) {
            continue;
        }
        let n = count(entry.name, inst);
        assert!(n <= uncoded, "{} sent {n} > uncoded {uncoded}", entry.name);
        for bound in &bounds {
            assert!(n >= bound.value, "{} sent {n} < the {} bound {}", entry.name, bound.kind, bound.value);
        }
    }
    assert!(count("ubershuffle-opt", inst) <= count("ubershuffle", inst));
}

#[test]
fn paper_examples_1_and_2() {
    let inst = ubershuffle_paper_example();
    assert_eq!(count("uncoded", &inst), 6);
    assert_eq!(count("coded", &inst), 4);
}

#[test]
fn paper_example_3_ubershuffle_sends_three() {
    let inst = ubershuffle_paper_example();
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
fn coded_count_is_the_sum_of_table_heights() {
    let inst = GeneratorParams { workers: 8, points: 2000, alpha: 0.3, seed: 5 }.check().unwrap().generate();
    let tables = encoding_tables(&inst, "coded").unwrap();
    assert_eq!(count("coded", &inst), tables_cost(&tables));
    assert!(tables_cost(&tables) < inst.uncoded_transmissions());
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
fn too_many_workers_for_sets_is_a_typed_error() {
    let inst = arbitrary_instance(130, 130, 0.01, 1);
    let coded = planner_by_name("coded", &PlannerOptions::default()).unwrap();
    let err = coded.plan(&inst, &mut seeded(0)).unwrap_err();
    assert!(err.to_string().contains("at most 128 workers"), "{err}");
    assert_eq!(count("uncoded", &inst), inst.uncoded_transmissions());
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
    use ubershuffle_core::bounds::{acyclic_subgraph_bound, attia_tandon_bound};
    use ubershuffle_core::no_excess::random_no_excess_instance;
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
