//! Encode and decode throughput next to `memcpy` of the same bytes in the same run.
//!
//! The baselines gather the very records the codec touches with `copy_from_slice`, in the same
//! order, so the ratio isolates the cost of XOR and bookkeeping from memory traffic.
//! Run: `cargo bench -p ubershuffle-codes --bench codec`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ubershuffle_codes::{Decoder, Encoder, Packet, Records};
use ubershuffle_core::{GeneratorParams, PlannerOptions, seeded};
use ubershuffle_planners::planner_by_name;

const WIDTH: usize = 4096;

fn codec(c: &mut Criterion) {
    let inst = GeneratorParams { workers: 20, points: 20_000, alpha: 0.4, seed: 1 }
        .check()
        .expect("valid parameters")
        .generate();
    let coded = planner_by_name("coded", &PlannerOptions::default()).expect("built in");
    let plan = coded.plan(&inst, &mut seeded(0)).expect("plans");
    let records = Records::random(inst.points(), WIDTH, 2).expect("records");
    let encoder = Encoder::new(&plan, &records).expect("encoder");

    let read_bytes = (plan.total_parts() * WIDTH) as u64;
    let mut group = c.benchmark_group("encode");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(read_bytes));
    let mut out = vec![0u8; WIDTH];
    group.bench_function("xor packets", |b| {
        b.iter(|| {
            for seq in 0..plan.len() {
                encoder.encode_into(seq, &mut out);
                black_box(&out);
            }
        })
    });
    group.bench_function("memcpy same records", |b| {
        b.iter(|| {
            for parts in plan.iter() {
                for part in parts {
                    out.copy_from_slice(records.get(part.point).expect("in range"));
                    black_box(&out);
                }
            }
        })
    });
    group.finish();

    let packets: Vec<Packet> = encoder.packets().collect();
    let worker = 0;
    let needs = inst.needs(worker);
    let make_decoder = || {
        let store = records.store_of(inst.cache(worker)).expect("cache");
        Decoder::new(worker, &plan, store, needs).expect("decodable")
    };
    let needed: Vec<&Packet> = packets.iter().filter(|p| make_decoder().needs_packet(p.seq)).collect();
    // A decoder reads each needed payload and the cached records it XORs out.
    let read_bytes = needed.iter().map(|p| p.parts.len() * WIDTH).sum::<usize>();
    let mut group = c.benchmark_group("decode worker 0");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(read_bytes as u64));
    group.bench_function("peel packets", |b| {
        b.iter_batched(
            make_decoder,
            |mut decoder| {
                for p in &packets {
                    decoder.receive_packet(p).expect("decodes");
                }
                decoder
            },
            BatchSize::LargeInput,
        )
    });
    // Same cold start as the decoder: a freshly built cache store, then the same reads.
    group.bench_function("memcpy same bytes", |b| {
        b.iter_batched(
            || records.store_of(inst.cache(worker)).expect("cache"),
            |cache| {
                for p in &needed {
                    out.copy_from_slice(&p.payload);
                    black_box(&out);
                    for part in &p.parts {
                        if let Some(known) = cache.get(part.point) {
                            out.copy_from_slice(known);
                            black_box(&out);
                        }
                    }
                }
                cache
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
