//! Plan time of the built-in planners at the scale of the UberShuffle paper's Fig. 3
//! (n = 20, q = 1e6). Run: `cargo bench -p shuffle-core --bench planners`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use shuffle_core::{GeneratorParams, PlannerOptions, builtin_planners, planner_by_name, seeded, verify};

fn plan_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan n=20 q=1e6 alpha=0.55");
    group.sample_size(10);
    let inst = GeneratorParams { workers: 20, points: 1_000_000, alpha: 0.55, seed: 1 }
        .check()
        .expect("valid parameters")
        .generate();
    for entry in builtin_planners() {
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
    group.finish();
}

criterion_group!(benches, plan_time);
criterion_main!(benches);
