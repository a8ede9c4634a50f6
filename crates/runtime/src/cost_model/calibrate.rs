//! Measuring a [`CostModel`] on this machine: every kernel, every planner at every cluster
//! size asked for, every learner given, each timed in this thread's CPU time on inputs of the
//! experiments' shapes and kept as the smallest of [`REPEATS`] repetitions (the one least
//! disturbed by other work: on a shared or virtual machine even a thread's CPU time grows with
//! the load, through shared caches and stolen cycles).
//!
//! Inputs: XOR, copies and checksums on megabyte buffers; planning, verifying and peeling on
//! generated instances of Table 1's shape (q = 1e5, alpha = 0.2) at each size; drawing
//! assignments and choosing caches at n = 20; training on batches of the learners given, and
//! their held-out loss.

use std::collections::BTreeMap;
use std::hint::black_box;

use cpu_time::ThreadTime;
use ubershuffle_codes::Records;
use ubershuffle_codes::xor::xor_into;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::{GeneratorParams, PlannerOptions, ShuffleInstance, peel, verify};
use ubershuffle_learners::data::record_views;
use ubershuffle_learners::{LocalStep, Model};

use super::{CostModel, Scaling};
use crate::protocol::records_checksum;
use crate::{LearnerSpec, RunData};
use ubershuffle_core::epoch_chain::next_cache;

/// The planners calibrated: those the experiments run in charged mode.
pub const PLANNERS: [&str; 4] = ["uncoded", "coded", "ubershuffle", "clique-cover"];

/// The cluster sizes the experiments run in charged mode (host-independence: 10; Table 1 and
/// Fig. 4: 20 and 100).
pub const SIZES: [usize; 3] = [10, 20, 100];

/// Repetitions of each timing (the smallest is kept).
pub const REPEATS: usize = 5;

/// Why a cost model cannot be measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// A step of the measurement failed.
    #[error("calibrating {what}: {source}")]
    Step {
        /// What was being measured.
        what: String,
        /// Why it failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A step's error, naming the step.
fn step<E: std::error::Error + Send + Sync + 'static>(what: &str) -> impl FnOnce(E) -> CalibrationError + '_ {
    move |e| CalibrationError::Step { what: what.to_string(), source: Box::new(e) }
}

/// A learner to price: its specification and data of the experiments' shape.
#[derive(Clone, Debug)]
pub struct LearnerSample {
    /// The learner.
    pub spec: LearnerSpec,
    /// Its training and held-out records.
    pub data: RunData,
}

/// How many heap placements a learner's update is measured at (see [`learner`]).
const PLACEMENTS: usize = 8;

/// Nanoseconds per unit of `units` units of work done by `run`, in this thread's CPU time (what
/// the emulated nodes are charged in thread-CPU mode): the smallest of [`REPEATS`] runs.
pub fn ns_per_unit(units: f64, mut run: impl FnMut()) -> f64 {
    (0..REPEATS)
        .map(|_| {
            let started = ThreadTime::now();
            run();
            started.elapsed().as_nanos() as f64 / units.max(1.0)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Measures every constant on this machine, planners at `sizes`, learners on `learners`.
pub fn calibrate(
    sizes: &[usize],
    learners: &[LearnerSample],
    progress: &dyn Fn(&str),
) -> Result<CostModel, CalibrationError> {
    progress("bytes");
    let (xor_ns_per_byte, copy_ns_per_byte, checksum_ns_per_byte) = bytes()?;
    let mut model = CostModel {
        xor_ns_per_byte,
        copy_ns_per_byte,
        checksum_ns_per_byte,
        verify: Scaling { workers: vec![], ns_per_unit: vec![] },
        peel: Scaling { workers: vec![], ns_per_unit: vec![] },
        plan: BTreeMap::new(),
        coordinate_ns: BTreeMap::new(),
        loss_ns: BTreeMap::new(),
        draw_ns_per_point: 0.0,
        keep_ns_per_point: 0.0,
    };
    for &n in sizes {
        progress(&format!("planners at n = {n}"));
        planners_at(n, &mut model)?;
    }
    progress("assignments and caches");
    (model.draw_ns_per_point, model.keep_ns_per_point) = assignments_and_caches()?;
    progress("learners");
    for sample in learners {
        let (coordinate, loss) = learner(sample)?;
        model.coordinate_ns.insert(sample.spec.kind().to_string(), coordinate);
        model.loss_ns.insert(sample.spec.kind().to_string(), loss);
    }
    Ok(model)
}

/// XOR, copy and checksum, per byte.
fn bytes() -> Result<(f64, f64, f64), CalibrationError> {
    const MIB: usize = 1 << 20;
    let a = vec![0x5au8; 4 * MIB];
    let mut b = vec![0xa5u8; 4 * MIB];
    let xor = ns_per_unit((16 * 4 * MIB) as f64, || {
        for _ in 0..16 {
            xor_into(black_box(&mut b), black_box(&a));
        }
    });
    // A copy into a fresh buffer, as the emulator's messages and the workers' stores are.
    let copy = ns_per_unit((16 * 4 * MIB) as f64, || {
        for _ in 0..16 {
            black_box(black_box(&a).to_vec());
        }
    });
    let records = Records::random(4096, 1208, 1).map_err(step("records"))?;
    let checksum = ns_per_unit((4096 * (1208 + 4)) as f64, || {
        black_box(records_checksum((0..4096u32).filter_map(|p| records.get(p).map(|r| (p, r)))));
    });
    Ok((xor, copy, checksum))
}

/// Planning (each of [`PLANNERS`] within its reach), verifying and peeling at `n` workers,
/// added to `model`.
fn planners_at(n: usize, model: &mut CostModel) -> Result<(), CalibrationError> {
    let options = PlannerOptions::default().with_time_budget(std::time::Duration::from_secs(2));
    let inst = GeneratorParams { workers: n, points: 100_000, alpha: 0.2, seed: 1 }
        .check()
        .map_err(step("an instance"))?
        .generate();
    let requests = inst.uncoded_transmissions() as f64;
    let (mut verify_costs, mut peel_costs) = (Vec::new(), Vec::new());
    for name in PLANNERS {
        let planner = ubershuffle_planners::planner_by_name(name, &options).map_err(step(name))?;
        // A planner past its reach here is not calibrated at this size.
        let Ok(p) = planner.plan(&inst, &mut ubershuffle_core::seeded(1)) else { continue };
        let cost = ns_per_unit(requests, || {
            let _ = black_box(planner.plan(&inst, &mut ubershuffle_core::seeded(1)));
        });
        let entry =
            model.plan.entry(name.to_string()).or_insert(Scaling { workers: vec![], ns_per_unit: vec![] });
        entry.workers.push(n);
        entry.ns_per_unit.push(cost);
        let pairs: f64 = p.iter().map(|parts| (parts.len() * parts.len()) as f64).sum::<f64>() + requests;
        verify_costs.push(ns_per_unit(pairs, || {
            let _ = black_box(verify(&inst, &p));
        }));
        let parts: f64 = p.iter().map(|parts| parts.len() as f64).sum();
        peel_costs.push(ns_per_unit(parts * n as f64, || {
            for w in 0..n {
                let _ = black_box(peel(inst.points(), &p, inst.cache(w)));
            }
        }));
    }
    model.verify.workers.push(n);
    model.verify.ns_per_unit.push(median(verify_costs));
    model.peel.workers.push(n);
    model.peel.ns_per_unit.push(median(peel_costs));
    Ok(())
}

/// The median of `values` (NaN when empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// What the master does around planning, on an instance of Table 1's shape at n = 20: drawing
/// the next assignment and building its instance, per point and cached point; and choosing the
/// next caches, per point of each cache and batch.
fn assignments_and_caches() -> Result<(f64, f64), CalibrationError> {
    let (n, q) = (20, 100_000);
    let inst = GeneratorParams { workers: n, points: q, alpha: 0.2, seed: 1 }
        .check()
        .map_err(step("an instance"))?
        .generate();
    let caches: Vec<Vec<u32>> = (0..n).map(|k| inst.cache(k).to_vec()).collect();
    let batches: Vec<Vec<u32>> = (0..n).map(|k| inst.assignment(k).to_vec()).collect();
    let cached: usize = caches.iter().map(Vec::len).sum();
    let draw = ns_per_unit((q + cached) as f64, || {
        let mut rng = ubershuffle_core::seeded(2);
        let next = ExchangePolicy::Global.exchange(&batches, &mut rng);
        let _ = black_box(ShuffleInstance::new(n, q, caches.clone(), next));
    });
    let capacity = caches.iter().map(Vec::len).max().unwrap_or(0);
    let looked: usize = cached + batches.iter().map(Vec::len).sum::<usize>();
    let keep = ns_per_unit(looked as f64, || {
        for (k, (cache, batch)) in caches.iter().zip(&batches).enumerate() {
            black_box(next_cache(cache, batch, capacity, 1, 1, k as u32));
        }
    });
    Ok((draw, keep))
}

/// A learner's local update and held-out loss, per multiply-add.
fn learner(sample: &LearnerSample) -> Result<(f64, f64), CalibrationError> {
    let learner = sample.spec.build().map_err(step(sample.spec.kind()))?;
    let model: Model = learner.initial_model(1);
    // A worker trains on a batch it has just decoded into a buffer of its own: a fresh copy.
    let train = sample.data.train.fixed().ok_or_else(|| CalibrationError::Step {
        what: sample.spec.kind().to_string(),
        source: "a learner is priced on records of one width".into(),
    })?;
    let (width, points) = (train.width(), 5000.min(train.len()));
    let fresh: Vec<u8> = train.as_bytes()[..points * width].to_vec();
    let batch: Vec<&[u8]> = fresh.chunks_exact(width).collect();
    let step = LocalStep { epoch: 1, worker: 0, seed: 1 };
    let work = sample.spec.update_work(batch.len()) as f64;
    // The update's speed depends on where the heap places the model it writes, relative to the
    // records it reads (linear regression's measured from 1.1x to 1.9x its fastest from one
    // placement to the next), so it is measured at several placements, each shifted by a block
    // held for the measurement, and the fastest is kept, as for every other price.
    let mut shifts = Vec::with_capacity(PLACEMENTS);
    let coordinate = (0..PLACEMENTS)
        .map(|placement| {
            shifts.push(vec![0u8; 40 + 72 * placement]);
            ns_per_unit(work, || {
                let _ = black_box(learner.local_update(&model, &batch, step));
            })
        })
        .fold(f64::INFINITY, f64::min);
    black_box(&shifts);
    let held_out = record_views(&sample.data.held_out);
    let work = sample.spec.loss_work(&held_out) as f64;
    let loss = ns_per_unit(work, || {
        let _ = black_box(learner.loss(&model, &held_out));
    });
    Ok((coordinate, loss))
}
