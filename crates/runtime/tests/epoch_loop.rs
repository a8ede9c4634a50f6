//! The epoch loop end to end on threads: real records through real encoders, decoders and the
//! in-process transport; stragglers, a killed worker, and a resumed run.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::path::PathBuf;
use std::time::Duration;

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::StragglerModel;
use ubershuffle_learners::data::synthetic::linear_regression;
use ubershuffle_learners::straggler::{IidStragglers, NoStragglers};
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process};
use ubershuffle_runtime::spec::ResumePoint;
use ubershuffle_runtime::{
    EpochMetrics, LearnerSpec, RunConfig, RunData, RunFingerprint, RunReport, RuntimeError, WorkerExit,
    WorkerSummary,
};
use ubershuffle_transport::in_process::InProcessConfig;

const WORKERS: usize = 4;
const POINTS: usize = 400;
const FEATURES: usize = 6;

fn data() -> RunData {
    let (all, _) = linear_regression(POINTS + 100, FEATURES, 0.05, 3).unwrap();
    let (train, held_out) = all.split(100.0 / (POINTS + 100) as f64, 4);
    RunData { train: train.to_records().unwrap().into(), held_out: held_out.to_records().unwrap() }
}

fn config(epochs: usize) -> RunConfig {
    let learner = LearnerSpec::LinearRegression { features: FEATURES, step_size: 0.01, local_passes: 2 };
    RunConfig::new(WORKERS, POINTS / 2, learner)
        .with_epochs(epochs)
        .with_seed(11)
        .with_policy(ExchangePolicy::Global)
        .with_chunk_bytes(2048)
}

fn transport() -> InProcessConfig {
    InProcessConfig::default().with_timeout(Duration::from_secs(5))
}

/// One run of `scheme` on [`data`], as `run_in_process` returns it.
fn try_run(
    config: &RunConfig,
    scheme: &str,
    stragglers: &mut dyn StragglerModel,
    faults: Vec<(usize, u32)>,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<(RunReport, Vec<Result<WorkerSummary, String>>), RuntimeError> {
    try_run_resuming(config, scheme, stragglers, faults, on_epoch, false)
}

/// [`try_run`], continuing from the config's checkpoint when `resume` (matched to the run
/// as a front end does: [`ResumePoint::check`]).
fn try_run_resuming(
    config: &RunConfig,
    scheme: &str,
    stragglers: &mut dyn StragglerModel,
    faults: Vec<(usize, u32)>,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
    resume: bool,
) -> Result<(RunReport, Vec<Result<WorkerSummary, String>>), RuntimeError> {
    let data = data();
    let config = config.clone().check(data.train.len())?;
    let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
    let point = match config.checkpoint.as_ref().filter(|_| resume) {
        Some(path) => {
            Some(ResumePoint::load(path, &RunFingerprint::of(&config, planner.name(), &data), &config)?)
        }
        None => None,
    };
    let run = InProcessRun::new(&config, planner.as_ref(), stragglers, &data)
        .with_transport(transport())
        .with_faults(faults)
        .with_resume(point);
    run_in_process(run, on_epoch)
}

/// A run that must succeed, each worker exiting as its injected fault says.
fn run_with(
    config: &RunConfig,
    scheme: &str,
    stragglers: &mut dyn StragglerModel,
    faults: Vec<(usize, u32)>,
) -> RunReport {
    let (report, workers) = try_run(config, scheme, stragglers, faults.clone(), &mut |_| {}).unwrap();
    for (w, summary) in workers.iter().enumerate() {
        let summary = summary.as_ref().unwrap_or_else(|e| panic!("worker {w}: {e}"));
        let injected = faults.iter().any(|f| f.0 == w);
        assert_eq!(summary.exit == WorkerExit::InjectedFailure, injected, "worker {w}: {summary:?}");
    }
    report
}

/// A resumed run from the config's checkpoint that must succeed.
fn resume_with(config: &RunConfig, scheme: &str, stragglers: &mut dyn StragglerModel) -> RunReport {
    try_run_resuming(config, scheme, stragglers, vec![], &mut |_| {}, true).unwrap().0
}

fn losses(report: &RunReport) -> Vec<f64> {
    report.epochs.iter().map(|e| e.loss).collect()
}

#[test]
fn coded_shuffling_trains_and_sends_fewer_packets_than_uncoded() {
    let config = config(4);
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let coded = run_with(&config, "coded", &mut none, vec![]);
    assert_eq!(coded.epochs.len(), 4);
    for e in &coded.epochs {
        assert_eq!((e.updates, e.stragglers, e.attempts, e.workers), (WORKERS, 0, 1, WORKERS), "{e:?}");
        assert!(e.transmissions < e.uncoded_transmissions, "{e:?}");
        assert!(e.broadcast_packets > 0 && e.payload_bytes > 0);
        assert_eq!(e.payload_bytes, ((e.broadcast_packets + e.unicast_packets) * (8 * FEATURES + 8)) as u64);
    }
    let l = losses(&coded);
    assert!(l[3] < coded.initial_loss / 5.0, "initial {} then {l:?}", coded.initial_loss);

    let mut none = NoStragglers::new(WORKERS).unwrap();
    let uncoded = run_with(&config, "uncoded", &mut none, vec![]);
    for e in &uncoded.epochs {
        assert_eq!(e.broadcast_packets, 0);
        assert_eq!(e.transmissions, e.uncoded_transmissions);
    }
    // The same seed draws the same assignments, so the two schemes train identically.
    assert_eq!(losses(&uncoded), l);
    let counts = |r: &RunReport| r.epochs.iter().map(|e| e.uncoded_transmissions).collect::<Vec<_>>();
    assert_eq!(counts(&uncoded), counts(&coded));
}

#[test]
fn same_seed_same_run() {
    let config = config(3);
    let a = run_with(&config, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    let b = run_with(&config, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    assert_eq!(losses(&a), losses(&b));
    let plan =
        |r: &RunReport| r.epochs.iter().map(|e| (e.transmissions, e.broadcast_packets)).collect::<Vec<_>>();
    assert_eq!(plan(&a), plan(&b));
}

#[test]
fn stragglers_miss_the_deadline_and_the_run_goes_on() {
    let config = config(4).with_deadline(Duration::from_millis(150));
    let mut iid = IidStragglers::new(WORKERS, 0.4).unwrap();
    let report = run_with(&config, "coded", &mut iid, vec![]);
    let late: usize = report.epochs.iter().map(|e| e.stragglers).sum();
    assert!(late > 0, "{:?}", report.epochs);
    for e in &report.epochs {
        assert_eq!(e.updates + e.stragglers, WORKERS, "{e:?}");
    }
    assert!(report.epochs[3].loss < report.initial_loss);
}

#[test]
fn a_killed_worker_is_reported_and_the_survivors_keep_the_coding_gain() {
    let config = config(4);
    let report = run_with(&config, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![(2, 2)]);
    assert_eq!(report.lost_workers, vec![2]);
    let e2 = &report.epochs[1];
    assert_eq!((e2.attempts, e2.workers, e2.updates), (2, WORKERS - 1, WORKERS - 1), "{e2:?}");
    assert_eq!(e2.lost_workers, vec![2]);
    // The same plan on three healthy workers (same points and caches).
    let mut healthy_config = config.clone();
    healthy_config.workers = WORKERS - 1;
    let healthy = run_with(&healthy_config, "coded", &mut NoStragglers::new(WORKERS - 1).unwrap(), vec![]);
    let healthy_sent: usize = healthy.epochs[1..].iter().map(EpochMetrics::packets_sent).sum();
    // From the restarted epoch on the survivors' group broadcasts the coded packets again.
    for e in &report.epochs[1..] {
        assert_eq!(e.workers, WORKERS - 1, "{e:?}");
        assert!(e.broadcast_packets > 0 && e.broadcast_bytes > 0, "{e:?}");
        assert!(e.packets_sent() < e.uncoded_transmissions, "{e:?}");
        assert_eq!(e.broadcast_bytes + e.unicast_bytes, e.payload_bytes, "{e:?}");
    }
    let sent: usize = report.epochs[1..].iter().map(EpochMetrics::packets_sent).sum();
    assert!(
        sent as f64 <= 1.1 * healthy_sent as f64,
        "after the loss {sent}, three healthy workers {healthy_sent}"
    );
    assert!(report.epochs[3].loss < report.initial_loss);
}

#[test]
fn a_resume_takes_lost_workers_back_and_codes_over_all_of_them() {
    let path = temp_checkpoint("readmit.json");
    let first = config(2).with_checkpoint(path.clone());
    let lost = run_with(&first, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![(1, 2)]);
    assert_eq!(lost.lost_workers, vec![1]);
    let rest = config(4).with_checkpoint(path);
    let resumed = resume_with(&rest, "coded", &mut NoStragglers::new(WORKERS).unwrap());
    for e in &resumed.epochs[2..] {
        assert_eq!((e.workers, e.updates, e.attempts), (WORKERS, WORKERS, 1), "{e:?}");
        assert!(e.broadcast_packets > 0, "{e:?}");
    }
}

#[test]
fn losing_every_worker_leaves_a_resumable_checkpoint() {
    let path = temp_checkpoint("total-loss.json");
    let every_worker = (0..WORKERS).map(|w| (w, 3)).collect();
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let doomed = config(4).with_checkpoint(path.clone());
    let err = try_run(&doomed, "coded", &mut none, every_worker, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("no worker is left"), "{err}");
    let saved = ubershuffle_runtime::Checkpoint::load(&path).unwrap();
    assert_eq!(saved.chain.completed_epochs, 2);
    assert!(saved.metrics.iter().all(|m| m.updates == WORKERS));
    let rest = config(4).with_checkpoint(path);
    let resumed = resume_with(&rest, "coded", &mut NoStragglers::new(WORKERS).unwrap());
    assert_eq!(resumed.epochs.iter().map(|e| e.updates).collect::<Vec<_>>(), vec![WORKERS; 4]);
}

#[test]
fn losing_every_worker_is_a_clear_error() {
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let every_worker = (0..WORKERS).map(|w| (w, 2)).collect();
    let err = try_run(&config(3), "coded", &mut none, every_worker, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("no worker is left"), "{err}");
}

fn temp_checkpoint(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runtime-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn a_resumed_run_continues_exactly_where_it_stopped() {
    let whole = run_with(&config(4), "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    let path = temp_checkpoint("resume.json");
    let first = config(2).with_checkpoint(path.clone());
    let first_half = run_with(&first, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    assert_eq!(first_half.epochs.len(), 2);
    let rest = config(4).with_checkpoint(path.clone());
    let mut seen: Vec<EpochMetrics> = Vec::new();
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let (resumed, _) =
        try_run_resuming(&rest, "coded", &mut none, vec![], &mut |m| seen.push(m.clone()), true).unwrap();
    assert_eq!(seen.iter().map(|m| m.epoch).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(losses(&resumed), losses(&whole));
    // A checkpoint of another run is refused.
    let other = config(4).with_checkpoint(path.clone()).with_seed(12);
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let err =
        try_run_resuming(&other, "coded", &mut none, vec![], &mut |_| {}, true).unwrap_err().to_string();
    assert!(err.contains("belongs to another run (seed: 11 there, 12 here)"), "{err}");
    // So is one with more epochs done than asked for.
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let err =
        try_run_resuming(&config(1).with_checkpoint(path), "coded", &mut none, vec![], &mut |_| {}, true);
    assert!(err.unwrap_err().to_string().contains("4 epochs are done already"));
}

#[test]
fn partial_local_moves_fewer_points_than_a_global_reshuffle() {
    let partial = config(3).with_policy(ExchangePolicy::new("partial-local", Some(0.2)).unwrap());
    let p = run_with(&partial, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    let g = run_with(&config(3), "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    let moved = |r: &RunReport| r.epochs.iter().map(|e| e.uncoded_transmissions).sum::<usize>();
    assert!(moved(&p) * 2 < moved(&g), "{} vs {}", moved(&p), moved(&g));
    let local = config(2).with_policy(ExchangePolicy::Local);
    let l = run_with(&local, "coded", &mut NoStragglers::new(WORKERS).unwrap(), vec![]);
    assert!(l.epochs.iter().all(|e| e.transmissions == 0 && e.updates == WORKERS));
}

#[test]
fn a_pliable_scheme_chooses_the_batches_and_the_workers_decode_them() {
    use ubershuffle_core::pliable::Randomness;
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let fixed = run_with(&config(3), "auto", &mut none, vec![]);
    for scheme in ["pliable-greedy", "pliable-hierarchical"] {
        // The workers decode the chosen batches and check them against the master's checksums
        // (a wrong byte fails the run); a killed worker's batch is taken over as usual.
        let mut none = NoStragglers::new(WORKERS).unwrap();
        let config = config(3).with_candidates(Randomness::Candidates(3));
        let report = run_with(&config, scheme, &mut none, vec![(1, 3)]);
        assert_eq!(report.lost_workers, vec![1], "{scheme}");
        let sent: usize = report.epochs[..2].iter().map(|e| e.transmissions).sum();
        let fixed_sent: usize = fixed.epochs[..2].iter().map(|e| e.transmissions).sum();
        assert!(sent < fixed_sent, "{scheme}: {sent} vs auto {fixed_sent}");
        for e in &report.epochs {
            assert!(e.cached_fraction > 0.5 && e.owner_entropy_bits > 0.5, "{scheme}: {e:?}");
            assert!(e.owner_chi_square_per_df.is_some_and(|c| c > 0.0), "{e:?}");
        }
        assert!(report.epochs[2].loss < report.initial_loss / 5.0, "{scheme}");
    }
    // Uniform shuffling: the statistics sit near their uniform values.
    for e in &fixed.epochs {
        assert!((e.owner_entropy_bits - 2.0).abs() < 0.05 && (e.stay_fraction - 0.25).abs() < 0.06, "{e:?}");
    }
}

#[test]
fn candidates_need_a_pliable_scheme_and_pliable_schemes_the_global_policy() {
    use ubershuffle_core::pliable::Randomness;
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let config = config(1).with_candidates(Randomness::All);
    let err = try_run(&config, "coded", &mut none, vec![], &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("apply to the pliable schemes"), "{err}");
    let local = config.with_policy(ExchangePolicy::Local);
    let err = try_run(&local, "pliable-greedy", &mut none, vec![], &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("global policy"), "{err}");
}
