//! What the experiments rely on: on emulated links the model travels in one broadcast and the
//! transmit time is the payload's time on the master's link (not the model's, not the
//! encoding's, not the records' checksums), never below it, the phases add up to the epoch; and a
//! run can start from a given partition (blocks of the data in storage order), which the local
//! policy then keeps, while a partition that is not one is a clear error.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::path::Path;
use std::time::Duration;

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::data::synthetic::linear_regression;
use ubershuffle_learners::straggler::NoStragglers;
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process_from};
use ubershuffle_runtime::{Checkpoint, LearnerSpec, RunConfig, RunData, RunReport, RuntimeError};
use ubershuffle_transport::in_process::{InProcessConfig, LinkShaping};

const WORKERS: usize = 4;
const POINTS: usize = 200;

/// A run of uncoded shuffling on linear-regression records of `features` features, each
/// worker caching half the data.
struct Run<'a> {
    features: usize,
    policy: ExchangePolicy,
    chunk_bytes: usize,
    shaping: Option<LinkShaping>,
    start: Option<Vec<Vec<u32>>>,
    checkpoint: Option<&'a Path>,
}

impl Run<'_> {
    fn go(self) -> Result<RunReport, RuntimeError> {
        let (all, _) = linear_regression(POINTS + 40, self.features, 0.05, 3).unwrap();
        let (train, held_out) = all.split(40.0 / (POINTS + 40) as f64, 4);
        let data =
            RunData { train: train.to_records().unwrap().into(), held_out: held_out.to_records().unwrap() };
        let learner =
            LearnerSpec::LinearRegression { features: self.features, step_size: 0.001, local_passes: 1 };
        let mut config = RunConfig::new(WORKERS, POINTS / 2, learner)
            .with_epochs(2)
            .with_seed(5)
            .with_policy(self.policy)
            .with_chunk_bytes(self.chunk_bytes);
        if let Some(path) = self.checkpoint {
            config = config.with_checkpoint(path);
        }
        let config = config.check(POINTS)?;
        let transport =
            InProcessConfig::default().with_timeout(Duration::from_secs(20)).with_shaping(self.shaping);
        let planner = planner_by_name("uncoded", &PlannerOptions::default()).unwrap();
        let mut none = NoStragglers::new(WORKERS).unwrap();
        let run = InProcessRun::new(&config, planner.as_ref(), &mut none, &data).with_transport(transport);
        run_in_process_from(run, self.start, &mut |_| {}).map(|(report, _)| report)
    }
}

#[test]
fn on_emulated_links_transmit_time_is_the_payload_on_the_masters_link_and_phases_add_up() {
    const FEATURES: usize = 255; // 2 KiB records: bytes, not messages, set the time
    const RATE: f64 = 1.25e6; // 10 Mbit/s
    let report = Run {
        features: FEATURES,
        policy: ExchangePolicy::Global,
        chunk_bytes: 64 * 1024,
        shaping: Some(LinkShaping::new(RATE, Duration::ZERO)),
        start: None,
        checkpoint: None,
    }
    .go()
    .unwrap();
    let model_bytes = ((FEATURES + 1) * 8) as u64;
    for e in &report.epochs {
        // The model: one broadcast, not a copy in every order, in (2m-1)/m of its link time.
        assert_eq!(e.model_bytes, model_bytes, "{e:?}");
        assert!(e.control_bytes < WORKERS as u64 * model_bytes, "{e:?}");
        let m = WORKERS as f64;
        let ideal_model = (2.0 * m - 1.0) / m * model_bytes as f64 / RATE;
        assert!(e.model_seconds >= ideal_model && e.model_seconds < 1.1 * ideal_model + 1e-3, "{e:?}");
        // Uncoded: every packet leaves the master's single port once; transmit is never below
        // that. Before the first epoch the starting caches (100 records, 200 KB each) have
        // landed: epoch 1 is not charged for them.
        let ideal = (e.payload_bytes + e.control_bytes) as f64 / RATE;
        assert!(e.payload_bytes > 80 * 2048, "{e:?}");
        assert!(
            e.transmit_seconds >= ideal && e.transmit_seconds < 1.02 * ideal + 1e-3,
            "ideal {ideal}: {e:?}"
        );
        assert!(e.decode_seconds > 0.0 && e.train_seconds > 0.0, "{e:?}");
        let sum: f64 = e.phases().iter().map(|(_, s)| s).sum();
        assert!((sum - e.epoch_seconds).abs() < 1e-9, "phases {sum} vs epoch {}: {e:?}", e.epoch_seconds);
    }
}

fn blocks() -> Vec<Vec<u32>> {
    let per = (POINTS / WORKERS) as u32;
    (0..WORKERS as u32).map(|w| (w * per..(w + 1) * per).collect()).collect()
}

fn from(policy: ExchangePolicy, start: Vec<Vec<u32>>, checkpoint: &Path) -> Result<RunReport, RuntimeError> {
    Run {
        features: 5,
        policy,
        chunk_bytes: 4096,
        shaping: None,
        start: Some(start),
        checkpoint: Some(checkpoint),
    }
    .go()
}

#[test]
fn the_local_policy_keeps_the_given_partition_and_bad_partitions_are_refused() {
    let dir = std::env::temp_dir().join(format!("runtime-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.json");
    let report = from(ExchangePolicy::Local, blocks(), &path).unwrap();
    assert!(report.epochs.iter().all(|e| e.transmissions == 0 && e.updates == WORKERS));
    let saved = Checkpoint::load(&path).unwrap();
    assert_eq!(saved.chain.batches, blocks());
    for (cache, batch) in saved.chain.caches.iter().zip(blocks()) {
        assert!(batch.iter().all(|p| cache.binary_search(p).is_ok()) && cache.len() == POINTS / 2);
    }
    // A global reshuffle from the same start moves points.
    let global = from(ExchangePolicy::Global, blocks(), &path).unwrap();
    assert!(global.epochs.iter().all(|e| e.transmissions > 0));

    let mut twice = blocks();
    twice[1][0] = 0;
    let err = from(ExchangePolicy::Local, twice, &path).unwrap_err().to_string();
    assert!(err.contains("point 0 is in two batches"), "{err}");
    let err = from(ExchangePolicy::Local, blocks()[..3].to_vec(), &path).unwrap_err().to_string();
    assert!(err.contains("3 batches for 4 workers"), "{err}");
    let mut outside = blocks();
    outside[3].push(POINTS as u32);
    let err = from(ExchangePolicy::Local, outside, &path).unwrap_err().to_string();
    assert!(err.contains("not one of the 200 points"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
