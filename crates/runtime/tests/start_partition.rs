//! A run can start from a given partition (blocks of the data in storage order): the local
//! policy then keeps exactly those batches; a partition that is not one is a clear error.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::time::Duration;

use learners::data::synthetic::linear_regression;
use learners::straggler::NoStragglers;
use runtime::in_process::{InProcessRun, run_in_process_from};
use runtime::{Checkpoint, LearnerSpec, RunConfig, RunData, RunReport, RuntimeError};
use shuffle_core::exchange_policy::ExchangePolicy;
use shuffle_core::{PlannerOptions, planner_by_name};
use transport::in_process::InProcessConfig;

const WORKERS: usize = 4;
const POINTS: usize = 200;

fn run(
    policy: ExchangePolicy,
    start: Vec<Vec<u32>>,
    checkpoint: &std::path::Path,
) -> Result<RunReport, RuntimeError> {
    let (all, _) = linear_regression(POINTS + 40, 5, 0.05, 3).unwrap();
    let (train, held_out) = all.split(40.0 / (POINTS + 40) as f64, 4);
    let data = RunData { train: train.to_records().unwrap(), held_out: held_out.to_records().unwrap() };
    let config = RunConfig {
        workers: WORKERS,
        cache_capacity: POINTS / 2,
        epochs: 3,
        seed: 8,
        policy,
        learner: LearnerSpec::LinearRegression { features: 5, step_size: 0.01, local_passes: 1 },
        deadline: None,
        chunk_bytes: 4096,
        checkpoint: Some(checkpoint.to_path_buf()),
        resume: false,
    };
    let planner = planner_by_name("uncoded", &PlannerOptions::default()).unwrap();
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let run = InProcessRun {
        config: &config,
        planner: planner.as_ref(),
        stragglers: &mut none,
        data: &data,
        transport: InProcessConfig { timeout: Duration::from_secs(5), ..InProcessConfig::default() },
        faults: vec![],
    };
    run_in_process_from(run, Some(start), &mut |_| {}).map(|(report, _)| report)
}

fn blocks() -> Vec<Vec<u32>> {
    let per = (POINTS / WORKERS) as u32;
    (0..WORKERS as u32).map(|w| (w * per..(w + 1) * per).collect()).collect()
}

#[test]
fn the_local_policy_keeps_the_given_partition_and_bad_partitions_are_refused() {
    let dir = std::env::temp_dir().join(format!("runtime-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.json");
    let report = run(ExchangePolicy::Local, blocks(), &path).unwrap();
    assert!(report.epochs.iter().all(|e| e.transmissions == 0 && e.updates == WORKERS));
    let saved = Checkpoint::load(&path).unwrap();
    assert_eq!(saved.batches, blocks());
    for (cache, batch) in saved.caches.iter().zip(blocks()) {
        assert!(batch.iter().all(|p| cache.binary_search(p).is_ok()) && cache.len() == POINTS / 2);
    }
    // A global reshuffle from the same start moves points.
    let global = run(ExchangePolicy::Global, blocks(), &path).unwrap();
    assert!(global.epochs.iter().all(|e| e.transmissions > 0));

    let mut twice = blocks();
    twice[1][0] = 0;
    let err = run(ExchangePolicy::Local, twice, &path).unwrap_err().to_string();
    assert!(err.contains("point 0 is in two batches"), "{err}");
    let err = run(ExchangePolicy::Local, blocks()[..3].to_vec(), &path).unwrap_err().to_string();
    assert!(err.contains("3 batches for 4 workers"), "{err}");
    let mut outside = blocks();
    outside[3].push(POINTS as u32);
    let err = run(ExchangePolicy::Local, outside, &path).unwrap_err().to_string();
    assert!(err.contains("not one of the 200 points"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
