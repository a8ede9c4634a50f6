//! The cost model of the emulated clusters' computing: calibrated once on the real kernels of
//! this machine (`cargo xtask calibrate` writes [`COST_MODEL_FILE`]) and read by the
//! experiments that run the epoch loop in charged mode, so that their times are the same in
//! every run and on every machine (see `ubershuffle_runtime::CostModel`).
//!
//! Each constant is the smallest of a few repetitions of the real code, timed in the thread's
//! CPU time (the repetition least disturbed by other work: on a shared or virtual machine even
//! a thread's CPU time grows with the load, through shared caches and stolen cycles), on
//! inputs of the experiments' shapes: XOR, copies and checksums on megabyte buffers; planning,
//! verifying and peeling on generated instances of Table 1's shape (q = 1e5, alpha = 0.2) at
//! n = 20 and n = 100; drawing assignments and choosing caches at n = 20; training on batches
//! of Table 1's learners, and their held-out loss.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use cpu_time::ThreadTime;
use ubershuffle_codes::Records;
use ubershuffle_codes::xor::xor_into;
use ubershuffle_core::epoch_chain::next_cache;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::{GeneratorParams, PlannerOptions, ShuffleInstance, peel, verify};
use ubershuffle_learners::data::record_views;
use ubershuffle_learners::{LocalStep, Model};
use ubershuffle_runtime::protocol::records_checksum;
use ubershuffle_runtime::{CostModel, Scaling};

use crate::experiments::epoch_runs;
use crate::report::machine::{machine_description, today};
use crate::report::median;

/// Where the committed cost model lives, from the workspace root.
pub const COST_MODEL_FILE: &str = "results/cost-model.toml";

/// The command that writes it.
pub const CALIBRATE_COMMAND: &str = "cargo xtask calibrate";

/// The planners calibrated: those the experiments run in charged mode.
pub const PLANNERS: [&str; 4] = ["uncoded", "coded", "ubershuffle", "clique-cover"];

/// Cluster sizes calibrated.
const SIZES: [usize; 2] = [20, 100];

/// Repetitions of each timing (the smallest is kept).
const REPEATS: usize = 5;

/// The committed cost model's path.
pub fn committed_path() -> PathBuf {
    crate::experiments::workspace_root().join(COST_MODEL_FILE)
}

/// Reads a cost model written by [`to_toml`].
pub fn load(path: &Path) -> anyhow::Result<CostModel> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {} (write it with `{CALIBRATE_COMMAND}`)", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{} is not a cost model", path.display()))
}

/// The committed cost model.
pub fn committed() -> anyhow::Result<CostModel> {
    load(&committed_path())
}

/// Nanoseconds per unit of `units` units of work done by `run`, in this thread's CPU time (what
/// the emulated nodes are charged in thread-CPU mode): the smallest of [`REPEATS`] runs.
fn ns_per_unit(units: f64, mut run: impl FnMut()) -> f64 {
    (0..REPEATS)
        .map(|_| {
            let started = ThreadTime::now();
            run();
            started.elapsed().as_nanos() as f64 / units.max(1.0)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Measures every constant on this machine.
pub fn calibrate(progress: &dyn Fn(&str)) -> anyhow::Result<CostModel> {
    const MIB: usize = 1 << 20;
    progress("bytes");
    let a = vec![0x5au8; 4 * MIB];
    let mut b = vec![0xa5u8; 4 * MIB];
    let xor_ns_per_byte = ns_per_unit((16 * 4 * MIB) as f64, || {
        for _ in 0..16 {
            xor_into(black_box(&mut b), black_box(&a));
        }
    });
    // A copy into a fresh buffer, as the emulator's messages and the workers' stores are.
    let copy_ns_per_byte = ns_per_unit((16 * 4 * MIB) as f64, || {
        for _ in 0..16 {
            black_box(black_box(&a).to_vec());
        }
    });
    let records = Records::random(4096, 1208, 1)?;
    let checksum_ns_per_byte = ns_per_unit((4096 * (1208 + 4)) as f64, || {
        black_box(records_checksum((0..4096u32).filter_map(|p| records.get(p).map(|r| (p, r)))));
    });

    let mut plan: BTreeMap<String, Scaling> = BTreeMap::new();
    let (mut verify_points, mut peel_points) = (Scaling::flat(0.0), Scaling::flat(0.0));
    verify_points.workers.clear();
    verify_points.ns_per_unit.clear();
    peel_points.workers.clear();
    peel_points.ns_per_unit.clear();
    let options = PlannerOptions::default().with_time_budget(std::time::Duration::from_secs(2));
    for n in SIZES {
        progress(&format!("planners at n = {n}"));
        let inst = GeneratorParams { workers: n, points: 100_000, alpha: 0.2, seed: 1 }.check()?.generate();
        let requests = inst.uncoded_transmissions() as f64;
        let (mut verify_costs, mut peel_costs) = (Vec::new(), Vec::new());
        for name in PLANNERS {
            let planner = crate::experiments::planner(name, &options)?;
            let mut rng = ubershuffle_core::seeded(1);
            // A planner past its reach here is not calibrated at this size.
            let Ok(p) = planner.plan(&inst, &mut rng) else { continue };
            let cost = ns_per_unit(requests, || {
                let _ = black_box(planner.plan(&inst, &mut ubershuffle_core::seeded(1)));
            });
            let entry =
                plan.entry(name.to_string()).or_insert(Scaling { workers: vec![], ns_per_unit: vec![] });
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
        verify_points.workers.push(n);
        verify_points.ns_per_unit.push(median(verify_costs));
        peel_points.workers.push(n);
        peel_points.ns_per_unit.push(median(peel_costs));
    }

    progress("assignments and caches");
    let (draw_ns_per_point, keep_ns_per_point) = assignments_and_caches()?;

    progress("learners");
    let (mut coordinate_ns, mut loss_ns) = (BTreeMap::new(), BTreeMap::new());
    let setups = [
        epoch_runs::matrix_completion(10_000, 2000, 100, 20, 0.2, 1)?,
        epoch_runs::linear_regression_setup(10_000, 191, 20, 0.14, 1)?,
    ];
    for setup in &setups {
        let learner = setup.learner.build()?;
        let model: Model = learner.initial_model(1);
        let views = record_views(&setup.data.train);
        let batch = &views[..5000.min(views.len())];
        let step = LocalStep { epoch: 1, worker: 0, seed: 1 };
        let work = setup.learner.update_work(batch.len()) as f64;
        let cost = ns_per_unit(work, || {
            let _ = black_box(learner.local_update(&model, batch, step));
        });
        coordinate_ns.insert(setup.learner.kind().to_string(), cost);
        let held_out = record_views(&setup.data.held_out);
        let work = setup.learner.loss_work(&held_out) as f64;
        let cost = ns_per_unit(work, || {
            let _ = black_box(learner.loss(&model, &held_out));
        });
        loss_ns.insert(setup.learner.kind().to_string(), cost);
    }
    Ok(CostModel {
        xor_ns_per_byte,
        copy_ns_per_byte,
        checksum_ns_per_byte,
        verify: verify_points,
        peel: peel_points,
        plan,
        coordinate_ns,
        loss_ns,
        draw_ns_per_point,
        keep_ns_per_point,
    })
}

/// What the master does around planning, on an instance of Table 1's shape at n = 20: drawing
/// the next assignment and building its instance, per point and cached point; and choosing the
/// next caches, per point of each cache and batch.
fn assignments_and_caches() -> anyhow::Result<(f64, f64)> {
    let (n, q) = (20, 100_000);
    let inst = GeneratorParams { workers: n, points: q, alpha: 0.2, seed: 1 }.check()?.generate();
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

/// Four significant digits, as TOML.
fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0.0".into();
    }
    let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{x:.digits$}");
    if text.contains('.') { text } else { format!("{text}.0") }
}

fn scaling_table(name: &str, s: &Scaling) -> String {
    let workers: Vec<String> = s.workers.iter().map(usize::to_string).collect();
    let costs: Vec<String> = s.ns_per_unit.iter().map(|&c| number(c)).collect();
    format!("[{name}]\nworkers = [{}]\nns_per_unit = [{}]\n", workers.join(", "), costs.join(", "))
}

/// The cost model as TOML, with a header saying what it is and how it was made.
pub fn to_toml(model: &CostModel) -> String {
    let mut text = format!(
        "# The cost model of the emulated clusters' computing (ubershuffle_runtime::CostModel):\n\
         # nanoseconds per unit of work, measured on the real kernels. Experiments that run the\n\
         # epoch loop in charged mode price every node's computing with it, so their times repeat\n\
         # exactly. Planning, verifying and peeling are per cluster size (the power law through the\n\
         # nearest two sizes in between and beyond); planning per planner (a planner past its reach\n\
         # at a size has no entry there).\n\
         # Written by `{CALIBRATE_COMMAND}` on {}, {}.\n\n\
         xor_ns_per_byte = {}\ncopy_ns_per_byte = {}\nchecksum_ns_per_byte = {}\n\
         draw_ns_per_point = {}\nkeep_ns_per_point = {}\n\n",
        machine_description(),
        today(),
        number(model.xor_ns_per_byte),
        number(model.copy_ns_per_byte),
        number(model.checksum_ns_per_byte),
        number(model.draw_ns_per_point),
        number(model.keep_ns_per_point),
    );
    text += &scaling_table("verify", &model.verify);
    text += "\n";
    text += &scaling_table("peel", &model.peel);
    for (name, s) in &model.plan {
        text += "\n";
        text += &scaling_table(&format!("plan.{name}"), s);
    }
    for (table, prices) in [("coordinate_ns", &model.coordinate_ns), ("loss_ns", &model.loss_ns)] {
        text += &format!("\n[{table}]\n");
        for (kind, ns) in prices {
            text += &format!("{kind} = {}\n", number(*ns));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toml_form_reads_back() -> anyhow::Result<()> {
        let model = CostModel {
            xor_ns_per_byte: 0.0312345,
            copy_ns_per_byte: 0.25,
            checksum_ns_per_byte: 0.05,
            verify: Scaling { workers: vec![20, 100], ns_per_unit: vec![12.5, 30.0] },
            peel: Scaling::flat(3.0),
            plan: [("clique-cover".to_string(), Scaling { workers: vec![20], ns_per_unit: vec![4800.0] })]
                .into(),
            coordinate_ns: [("linear-regression".to_string(), 0.75)].into(),
            loss_ns: [("matrix-completion".to_string(), 9.5)].into(),
            draw_ns_per_point: 12.5,
            keep_ns_per_point: 30.25,
        };
        let back: CostModel = toml::from_str(&to_toml(&model))?;
        assert_eq!(back.verify, model.verify);
        assert_eq!((&back.plan, &back.loss_ns), (&model.plan, &model.loss_ns));
        assert!((back.xor_ns_per_byte - 0.03123).abs() < 1e-12);
        assert_eq!((back.draw_ns_per_point, back.keep_ns_per_point), (12.5, 30.25));
        assert_eq!(number(4800.0), "4800.0");
        assert_eq!(number(12345.6), "12346.0");
        Ok(())
    }
}
