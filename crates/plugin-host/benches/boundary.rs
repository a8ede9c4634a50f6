//! What the plugin boundary costs: the example scheme planned in-process (then verified, as the
//! host does) against the same scheme loaded from its release-built library, which adds the
//! instance and plan byte forms and the call. n = 20, q = 1e6, alpha = 0.55, the scale of the
//! UberShuffle paper's Fig. 3. Run: `cargo bench -p ubershuffle-plugin-host --bench boundary`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pairwise_xor::PairwiseXor;
use ubershuffle_core::{GeneratorParams, ShufflePlanner, seeded, verify};
use ubershuffle_plugin_api::wire::{decode_instance, decode_plan, encode_instance, encode_plan};
use ubershuffle_plugin_host::PluginLibrary;
use ubershuffle_plugin_host::workspace_plugins::{PAIRWISE_XOR, built};

fn boundary(c: &mut Criterion) {
    let mut group = c.benchmark_group("pairwise-xor n=20 q=1e6 alpha=0.55");
    group.sample_size(10);
    let inst = GeneratorParams { workers: 20, points: 1_000_000, alpha: 0.55, seed: 1 }
        .check()
        .expect("valid parameters")
        .generate();
    let library = built(PAIRWISE_XOR).unwrap_or_else(|e| panic!("{e}"));
    let loaded = PluginLibrary::load(library).expect("loads").planner(None).expect("one scheme");
    group.bench_function("in-process plan + verify", |b| {
        b.iter(|| {
            let plan = PairwiseXor.plan(black_box(&inst), &mut seeded(0)).expect("plans");
            verify(&inst, &plan).expect("well formed").ensure_valid().expect("decodes");
            plan
        })
    });
    group.bench_function("loaded plugin (plan, bytes, verify)", |b| {
        b.iter(|| loaded.plan(black_box(&inst), &mut seeded(0)).expect("plans"))
    });
    let plan = PairwiseXor.plan(&inst, &mut seeded(0)).expect("plans");
    group.bench_function("byte forms only (instance and plan, both ways)", |b| {
        b.iter(|| {
            let inst = decode_instance(&encode_instance(black_box(&inst))).expect("decodes");
            let plan = decode_plan(&encode_plan(black_box(&plan)).expect("encodes")).expect("decodes");
            (inst, plan)
        })
    });
    group.finish();
}

criterion_group!(benches, boundary);
criterion_main!(benches);
