//! `host-independence`: does an emulated cluster's time depend on the host's load? A small
//! Table 1 configuration runs alone and beside two busy CPU hogs (threads spinning on this
//! machine's two cores), in both ways an emulated node counts its computing: by its thread's
//! CPU time and by the committed cost model (charged). Every per-phase time of the loaded run
//! is reported against the run alone, beside a second run alone (the baseline: how much a
//! phase moves between two runs with nothing added).
//!
//! Expected: charged times are identical (the clocks move only by the link model and the cost
//! model's prices); thread-CPU times move little (a thread's CPU clock does not run while the
//! thread waits for a core, but caches, frequency and the kernel's switching still enter it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use serde::Serialize;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_runtime::{CostModel, EpochMetrics, RunReport};

use super::Context;
use super::epoch_runs::{self, Compute, EpochRun, Setup};
use crate::report::{Report, Row, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "host-independence";
/// What it shows.
pub const ABOUT: &str = "emulated cluster times per phase alone, alone again and beside two CPU hogs, computing charged by the cost model and counted in thread CPU time";

/// The schemes compared.
const SCHEMES: [&str; 2] = ["uncoded", "ubershuffle"];
/// Busy threads started beside the loaded runs.
pub(crate) const HOGS: usize = 2;
/// The goal: every per-phase time of a thread-CPU run within this share of the run alone
/// (phases of at least [`MATERIAL_SECONDS`]).
const GOAL: f64 = 0.05;
/// Phases shorter than this (alone) are too short to compare in thread-CPU time.
const MATERIAL_SECONDS: f64 = 1e-3;
const GBIT: f64 = 1.0;
const SEED: u64 = 1;

/// One phase of one scheme under one load.
#[derive(Clone, Debug, Serialize)]
struct PhaseRow {
    scheme: &'static str,
    load: &'static str,
    phase: &'static str,
    /// Median emulated seconds per epoch, computing charged by the cost model.
    charged_s: f64,
    /// `charged_s` over the same phase alone.
    charged_vs_alone: f64,
    /// Median emulated seconds per epoch, computing counted in thread CPU time.
    cpu_s: f64,
    /// `cpu_s` over the same phase alone.
    cpu_vs_alone: f64,
    /// `charged_s` over `cpu_s`: how far the cost model's price of a phase is from the thread
    /// CPU time the same phase took in this run.
    charged_vs_cpu: f64,
}

/// The thread-CPU columns depend on the machine; the charged ones must repeat exactly.
impl Row for PhaseRow {
    const MACHINE_COLUMNS: &'static [&'static str] = &["cpu_s", "cpu_vs_alone", "charged_vs_cpu"];
}

/// Threads spinning until dropped: load for the host's cores.
pub(crate) struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Hogs {
    /// Starts `count` busy threads.
    pub(crate) fn start(count: usize) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A run of `scheme` on `setup`, made afresh (never from the charged runs' memory), beside
/// `hogs` busy threads.
pub(crate) fn run_with_load(
    setup: &Setup,
    scheme: &str,
    epochs: usize,
    compute: Compute<'_>,
    hogs: usize,
) -> anyhow::Result<RunReport> {
    let spec =
        EpochRun { scheme, policy: ExchangePolicy::Global, epochs, gbit: Some(GBIT), seed: SEED, compute };
    let _load = (hogs > 0).then(|| Hogs::start(hogs));
    epoch_runs::run_afresh(setup, &spec)
}

/// The phases compared, with the whole epoch last.
pub(crate) fn phase_seconds(e: &EpochMetrics) -> Vec<(&'static str, f64)> {
    let mut phases = e.phases().to_vec();
    phases.push(("epoch", e.epoch_seconds));
    phases
}

/// Median per epoch of each phase of `report`, leaving out the first epoch when there are
/// more (a warm-up: its nodes touch their buffers for the first time, and page faults count
/// as the thread's CPU time).
fn medians(report: &RunReport) -> Vec<(&'static str, f64)> {
    let warm = if report.epochs.len() > WARM_UP_EPOCHS {
        &report.epochs[WARM_UP_EPOCHS..]
    } else {
        &report.epochs[..]
    };
    let names: Vec<&'static str> =
        warm.first().map(phase_seconds).unwrap_or_default().into_iter().map(|(n, _)| n).collect();
    names
        .iter()
        .enumerate()
        .map(|(i, &name)| (name, median(warm.iter().map(|e| phase_seconds(e)[i].1))))
        .collect()
}

/// Epochs at the start of a run left out of its medians.
const WARM_UP_EPOCHS: usize = 1;

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { if a == 0.0 { 1.0 } else { f64::INFINITY } } else { a / b }
}

/// The small configuration: Table 1's matrix completion (1208 B rows, alpha = 0.2) on n = 10
/// workers and q = 20 000 points.
fn setup() -> anyhow::Result<Setup> {
    let mut setup = epoch_runs::matrix_completion(20_000, 2000, 100, 10, 0.2, SEED)?;
    setup.key = "mc-small";
    Ok(setup)
}

/// Epochs per run in the quick run.
const QUICK_EPOCHS: usize = 5;

/// Epochs per run in the full run.
const FULL_EPOCHS: usize = 9;

/// Runs the experiment.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let epochs = if ctx.quick { QUICK_EPOCHS } else { FULL_EPOCHS };
    let model: CostModel = epoch_runs::committed()?;
    let setup = setup()?;
    let loads = [("alone", 0), ("again", 0), ("hogs", HOGS)];
    let bar = ctx.progress((SCHEMES.len() * 2 * loads.len()) as u64, NAME);
    let mut rows = Vec::new();
    for scheme in SCHEMES {
        let mut by_load = Vec::new();
        for (load, hogs) in loads {
            let charged = medians(&run_with_load(&setup, scheme, epochs, Compute::Charged(&model), hogs)?);
            bar.inc(1);
            let cpu = medians(&run_with_load(&setup, scheme, epochs, Compute::ThreadCpu, hogs)?);
            bar.inc(1);
            by_load.push((load, charged, cpu));
        }
        let (_, alone_charged, alone_cpu) = by_load[0].clone();
        for (load, charged, cpu) in &by_load {
            for (i, &(phase, charged_s)) in charged.iter().enumerate() {
                let cpu_s = cpu[i].1;
                rows.push(PhaseRow {
                    scheme,
                    load,
                    phase,
                    charged_s,
                    charged_vs_alone: ratio(charged_s, alone_charged[i].1),
                    cpu_s,
                    cpu_vs_alone: ratio(cpu_s, alone_cpu[i].1),
                    charged_vs_cpu: ratio(charged_s, cpu_s),
                });
            }
        }
    }
    bar.finish_and_clear();
    let summary = summary(ctx, &setup, epochs, &rows);
    Report::new(summary).table(format!("{NAME}.csv"), &rows).map_err(Into::into)
}

/// How the thread-CPU phases of `load` compare with the run alone: how many of the phases long
/// enough to compare are within [`GOAL`], of how many, and the largest change, in words.
fn cpu_comparison(rows: &[PhaseRow], load: &str) -> (usize, usize, String) {
    let alone_cpu = |r: &PhaseRow| {
        rows.iter()
            .find(|a| a.load == "alone" && a.scheme == r.scheme && a.phase == r.phase)
            .map_or(0.0, |a| a.cpu_s)
    };
    let material: Vec<&PhaseRow> =
        rows.iter().filter(|r| r.load == load && alone_cpu(r) >= MATERIAL_SECONDS).collect();
    let within = material.iter().filter(|r| (r.cpu_vs_alone - 1.0).abs() <= GOAL).count();
    let worst = material
        .iter()
        .max_by(|a, b| (a.cpu_vs_alone - 1.0).abs().total_cmp(&(b.cpu_vs_alone - 1.0).abs()))
        .map_or("no phase was long enough to compare".into(), |w| {
            format!(
                "the largest change is {}'s {} ({:.4} s against {:.4} s, {:+.1} %)",
                w.scheme,
                w.phase,
                w.cpu_s,
                alone_cpu(w),
                100.0 * (w.cpu_vs_alone - 1.0)
            )
        });
    (within, material.len(), worst)
}

/// The whole epoch's thread-CPU change under `load`, per scheme, in words.
fn epoch_changes(rows: &[PhaseRow], load: &str) -> String {
    let parts: Vec<String> = rows
        .iter()
        .filter(|r| r.load == load && r.phase == "epoch")
        .map(|r| format!("{} {:+.1} %", r.scheme, 100.0 * (r.cpu_vs_alone - 1.0)))
        .collect();
    parts.join(", ")
}

/// Each scheme's phases alone as `phase charged/CPU`, in words.
fn charged_vs_cpu(rows: &[PhaseRow]) -> String {
    SCHEMES
        .iter()
        .map(|scheme| {
            let phases: Vec<String> = rows
                .iter()
                .filter(|r| r.load == "alone" && r.scheme == *scheme)
                .map(|r| format!("{} {:.2}", r.phase, r.charged_vs_cpu))
                .collect();
            format!("{scheme}: {}", phases.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn summary(ctx: &Context, setup: &Setup, epochs: usize, rows: &[PhaseRow]) -> String {
    let loaded: Vec<&PhaseRow> = rows.iter().filter(|r| r.load != "alone").collect();
    let differ = loaded.iter().filter(|r| r.charged_vs_alone != 1.0).count();
    let charged = if differ == 0 {
        "every per-phase time, alone again and beside the hogs, is identical to the run alone".to_string()
    } else {
        format!("{differ} per-phase times differ from the run alone (they should not)")
    };
    let (again_within, again_of, again_worst) = cpu_comparison(rows, "again");
    let (hogs_within, hogs_of, hogs_worst) = cpu_comparison(rows, "hogs");
    let table = markdown_table(
        &["scheme", "load", "phase", "charged s", "vs alone", "thread-CPU s", "vs alone", "charged / CPU"],
        rows.iter().map(|r| {
            vec![
                r.scheme.to_string(),
                r.load.to_string(),
                r.phase.to_string(),
                format!("{:.4}", r.charged_s),
                format!("{:.4}", r.charged_vs_alone),
                format!("{:.4}", r.cpu_s),
                format!("{:.3}", r.cpu_vs_alone),
                format!("{:.2}", r.charged_vs_cpu),
            ]
        }),
    );
    format!(
        "A small Table 1 configuration (matrix completion, n = {}, q = {}, {} B per point, alpha = {}, \
         {GBIT} Gbit/s, seed {SEED}, {epochs} epochs; medians per epoch after the first, a warm-up) run alone, alone again, and beside \
         {HOGS} busy threads spinning on this machine's cores (load `hogs`), each run with its nodes' computing \
         counted both ways: charged by the committed cost model, and by each node's thread CPU time \
         (`docs/training-runs.md`). The goal: every phase within {:.0} % of the run alone.\n\n\
         **Charged**: {charged}.\n\n\
         **Thread CPU**, phases of at least {MATERIAL_SECONDS} s alone: beside the hogs {hogs_within} of \
         {hogs_of} are within {:.0} % of the run alone ({hogs_worst}); the whole epoch moved by {}. The \
         baseline, a second run alone: {again_within} of {again_of} within {:.0} % ({again_worst}); the whole \
         epoch moved by {}.\n\n**Charged / thread CPU**, per phase of the run alone (what the cost model \
         leaves out or over-prices; `docs/training-runs.md`): {}.\n\n{table}{}",
        setup.workers,
        setup.points(),
        setup.record_bytes(),
        setup.alpha,
        100.0 * GOAL,
        100.0 * GOAL,
        epoch_changes(rows, "hogs"),
        100.0 * GOAL,
        epoch_changes(rows, "again"),
        charged_vs_cpu(rows),
        ctx.quick_note(&format!("{QUICK_EPOCHS} epochs per run instead of {FULL_EPOCHS}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wide band: the loaded run's thread-CPU epoch within a factor of 2 of the run alone
    /// (beside hogs on 2 cores, wall time would double); charged times identical.
    #[test]
    fn two_hogs_leave_emulated_times_nearly_or_exactly_alone() -> anyhow::Result<()> {
        let model = epoch_runs::committed()?;
        let setup = epoch_runs::matrix_completion(2000, 400, 50, 4, 0.25, 3)?;
        let run = |compute, hogs| -> anyhow::Result<Vec<(&'static str, f64)>> {
            Ok(medians(&run_with_load(&setup, "coded", 2, compute, hogs)?))
        };
        let (alone, loaded) = (run(Compute::Charged(&model), 0)?, run(Compute::Charged(&model), HOGS)?);
        assert_eq!(alone, loaded, "charged clocks must not see the hogs");
        assert!(alone.iter().any(|(p, s)| *p == "epoch" && *s > 0.0), "{alone:?}");
        let (alone, loaded) = (run(Compute::ThreadCpu, 0)?, run(Compute::ThreadCpu, HOGS)?);
        let epoch = |phases: &[(&str, f64)]| phases.iter().find(|p| p.0 == "epoch").map_or(0.0, |p| p.1);
        let r = epoch(&loaded) / epoch(&alone);
        assert!(
            (0.5..2.0).contains(&r),
            "thread-CPU epoch beside hogs {r:.3} of alone: {alone:?} {loaded:?}"
        );
        Ok(())
    }
}
