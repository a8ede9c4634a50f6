//! Plan time of the built-in planners: at the scale of the UberShuffle paper's Fig. 3
//! (n = 20, q = 1e6) and at cluster scale (n = 100 and 1000, q = 1e6), with `verify` and the
//! lower bound beside the plans they check.
//!
//! Run: `cargo bench -p ubershuffle-core --bench planners` (all groups take about 15 minutes;
//! pick one with a filter, e.g. `-- "scale n=100"`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ubershuffle_core::{GeneratorParams, PlannerOptions, ShuffleInstance, ShufflePlanner, seeded, verify};
use ubershuffle_planners::bounds::best_lower_bound;
use ubershuffle_planners::planners::{BuiltinPlanner, UberShuffleOptPlanner};
use ubershuffle_planners::{builtin_planners, planner_by_name};

fn instance(workers: usize, points: usize, alpha: f64) -> ShuffleInstance {
    GeneratorParams { workers, points, alpha, seed: 1 }.check().expect("valid parameters").generate()
}

fn plan_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan n=20 q=1e6 alpha=0.55");
    group.sample_size(10);
    let inst = instance(20, 1_000_000, 0.55);
    // ubershuffle-opt and auto search for their whole budget: they have their own group below.
    let searching = [UberShuffleOptPlanner::NAME, "auto"];
    for entry in builtin_planners().iter().filter(|e| !searching.contains(&e.name)) {
        let planner = (entry.build)(&PlannerOptions::default());
        if planner.plan(&inst, &mut seeded(0)).is_err() {
            continue; // a planner for another model (no excess storage)
        }
        group.bench_function(entry.name, |b| {
            b.iter(|| planner.plan(black_box(&inst), &mut seeded(0)).expect("plans"))
        });
    }
    let coded = planner_by_name("coded", &PlannerOptions::default()).expect("built in");
    let plan = coded.plan(&inst, &mut seeded(0)).expect("plans");
    group.bench_function("verify coded plan", |b| b.iter(|| verify(black_box(&inst), black_box(&plan))));
    group.bench_function("best lower bound", |b| b.iter(|| best_lower_bound(black_box(&inst))));
    group.finish();

    // About 11 s an iteration: ten samples take two minutes.
    let mut group = c.benchmark_group("plan n=20 q=1e6 alpha=0.55, 10 s budget");
    group.sample_size(10).measurement_time(Duration::from_secs(120)).warm_up_time(Duration::from_millis(1));
    let opt = UberShuffleOptPlanner::new(PlannerOptions::default().time_budget);
    group.bench_function(UberShuffleOptPlanner::NAME, |b| {
        b.iter(|| opt.plan(black_box(&inst), &mut seeded(0)).expect("plans"))
    });
    group.finish();
}

/// The cluster-scale points of issue 15: `clique-cover` (the only coded scheme that keeps its
/// gain there), `verify` of its plan and the lower bound, at n = 100 (q = 1e6, a = 0.3) and
/// n = 1000 (q = 1e6, a = 0.1).
fn plan_time_at_scale(c: &mut Criterion) {
    for (workers, alpha) in [(100, 0.3), (1000, 0.1)] {
        let mut group = c.benchmark_group(format!("scale n={workers} q=1e6 alpha={alpha}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(1))
            .measurement_time(Duration::from_secs(60));
        let inst = instance(workers, 1_000_000, alpha);
        let planner = planner_by_name("clique-cover", &PlannerOptions::default()).expect("built in");
        let plan = planner.plan(&inst, &mut seeded(0)).expect("plans");
        group.bench_function("clique-cover", |b| {
            b.iter(|| planner.plan(black_box(&inst), &mut seeded(0)).expect("plans"))
        });
        group.bench_function("verify clique-cover plan", |b| {
            b.iter(|| verify(black_box(&inst), black_box(&plan)))
        });
        group.bench_function("best lower bound", |b| b.iter(|| best_lower_bound(black_box(&inst))));
        group.finish();
    }
}

/// The schemes that apply with no excess storage (caches = previous batches), at n = 8 (where
/// cycle packing searches exactly) and n = 20 (greedy), q = 1e6.
fn plan_time_no_excess(c: &mut Criterion) {
    for workers in [8, 20] {
        let mut group = c.benchmark_group(format!("plan no excess n={workers} q=1e6"));
        group.sample_size(10);
        let inst =
            ubershuffle_planners::no_excess::random_no_excess_instance(workers, 1_000_000, &mut seeded(1))
                .expect("valid parameters");
        for name in ["uncoded", "coded", "worst-case", "cycle-packing"] {
            let planner = planner_by_name(name, &PlannerOptions::default()).expect("built in");
            group.bench_function(name, |b| {
                b.iter(|| planner.plan(black_box(&inst), &mut seeded(0)).expect("plans"))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, plan_time, plan_time_at_scale, plan_time_no_excess);
criterion_main!(benches);
