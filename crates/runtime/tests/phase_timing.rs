//! The phases of an epoch on shaped links: the model travels in one broadcast, transmit time is
//! the payload's time on the master's link (not the model's, not the encoding's), and the
//! phases of the shuffle add up to no more than the epoch.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::time::Duration;

use learners::data::synthetic::linear_regression;
use learners::straggler::NoStragglers;
use runtime::in_process::{InProcessRun, run_in_process};
use runtime::{LearnerSpec, RunConfig, RunData};
use shuffle_core::exchange_policy::ExchangePolicy;
use shuffle_core::{PlannerOptions, planner_by_name};
use transport::in_process::{InProcessConfig, LinkShaping};

const WORKERS: usize = 4;
const POINTS: usize = 200;
const FEATURES: usize = 255; // 2 KiB records: bytes, not messages, set the time
const RATE: f64 = 1.25e6; // 10 Mbit/s

#[test]
fn on_shaped_links_transmit_time_is_the_payload_on_the_masters_link() {
    let (all, _) = linear_regression(POINTS + 40, FEATURES, 0.05, 3).unwrap();
    let (train, held_out) = all.split(40.0 / (POINTS + 40) as f64, 4);
    let data = RunData { train: train.to_records().unwrap(), held_out: held_out.to_records().unwrap() };
    let config = RunConfig {
        workers: WORKERS,
        cache_capacity: POINTS / 2,
        epochs: 2,
        seed: 5,
        policy: ExchangePolicy::Global,
        learner: LearnerSpec::LinearRegression { features: FEATURES, step_size: 0.001, local_passes: 1 },
        deadline: None,
        chunk_bytes: 64 * 1024,
        checkpoint: None,
        resume: false,
    };
    let transport = InProcessConfig {
        timeout: Duration::from_secs(20),
        shaping: Some(LinkShaping { bytes_per_second: RATE, latency: Duration::ZERO }),
        ..InProcessConfig::default()
    };
    let planner = planner_by_name("uncoded", &PlannerOptions::default()).unwrap();
    let mut none = NoStragglers::new(WORKERS).unwrap();
    let run = InProcessRun {
        config: &config,
        planner: planner.as_ref(),
        stragglers: &mut none,
        data: &data,
        transport,
        faults: vec![],
    };
    let (report, _) = run_in_process(run, &mut |_| {}).unwrap();
    let model_bytes = ((FEATURES + 1) * 8) as u64;
    for e in &report.epochs {
        // The model: one broadcast, not a copy in every order.
        assert_eq!(e.model_bytes, model_bytes, "{e:?}");
        assert!(e.control_bytes < WORKERS as u64 * model_bytes, "{e:?}");
        let ideal_model = model_bytes as f64 / RATE;
        assert!(e.model_seconds > 0.9 * ideal_model && e.model_seconds < 4.0 * ideal_model + 0.02, "{e:?}");
        // Uncoded: every packet leaves the master's single port once.
        let ideal = (e.payload_bytes + e.control_bytes) as f64 / RATE;
        assert!(e.payload_bytes > 80 * 2048, "{e:?}");
        assert!(
            e.transmit_seconds > 0.95 * ideal && e.transmit_seconds < 1.25 * ideal + 0.02,
            "ideal {ideal}: {e:?}"
        );
        assert!(e.decode_seconds > 0.0 && e.compute_seconds > 0.0, "{e:?}");
        assert!(e.shuffle_seconds() + e.model_seconds <= e.epoch_seconds, "{e:?}");
    }
}
