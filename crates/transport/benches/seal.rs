//! The CPU cost of sealing and opening next to `memcpy` of the same bytes in the same run:
//! 1 MiB frames (the runtime's data chunk) through the sealed-frame writer and reader, in
//! memory, against copying the frame's bytes once.
//! Run: `cargo bench -p ubershuffle-transport --bench seal`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::{LinkKeys, Opening, Sealing, read_frame_on, write_frame_on};

const FRAME: usize = 1 << 20;

fn seal(c: &mut Criterion) {
    let (send, recv) = LinkKeys::in_memory_pair().expect("an in-memory handshake");
    let payload: Vec<u8> = (0..FRAME).map(|i| (i * 31 % 251) as u8).collect();
    let head = (FrameKind::Message, 1, 7);
    let mut group = c.benchmark_group("seal");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(FRAME as u64));
    let mut sealing = Sealing::new(send.clone());
    let mut wire = Vec::with_capacity(2 * FRAME);
    group.bench_function("seal 1 MiB frame", |b| {
        b.iter(|| {
            wire.clear();
            write_frame_on(Some(&mut sealing), &mut wire, head, &[&payload]).expect("sealing into memory");
            black_box(&wire);
        })
    });
    // Opening needs each frame's own sequence number: seal a run of frames once, open them in
    // order (a fresh opening per run).
    let frames = 64;
    let mut stream = Vec::with_capacity(frames * (FRAME + 4096));
    let mut fresh = Sealing::new(send);
    for _ in 0..frames {
        write_frame_on(Some(&mut fresh), &mut stream, head, &[&payload]).expect("sealing into memory");
    }
    group.bench_function("open 1 MiB frame", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(frames as u64);
                let mut opening = Opening::new(recv.clone());
                let mut r = &stream[..];
                let started = Instant::now();
                for _ in 0..n {
                    black_box(read_frame_on(Some(&mut opening), &mut r, usize::MAX).expect("opens"));
                }
                total += started.elapsed();
                left -= n;
            }
            total
        })
    });
    let mut copy = vec![0u8; FRAME];
    group.bench_function("memcpy 1 MiB", |b| {
        b.iter(|| {
            copy.copy_from_slice(black_box(&payload));
            black_box(&copy);
        })
    });
    group.finish();
}

criterion_group!(benches, seal);
criterion_main!(benches);
