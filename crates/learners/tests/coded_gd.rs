//! Executed gradient-coded descent on threads: exact without stragglers, converging on the
//! shipped data under heterogeneous stragglers, and late results really dropped.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ubershuffle_core::rng::seeded;
use ubershuffle_gradient_codes::{EncodingMatrix, RoleShuffle};
use ubershuffle_learners::data::record_views;
use ubershuffle_learners::data::shipped::ShippedTask;
use ubershuffle_learners::gradient_coding::glm::GlmLoss;
use ubershuffle_learners::gradient_coding::run::{CodedRunConfig, run_coded_gd};
use ubershuffle_learners::straggler::{
    HeterogeneousParams, HeterogeneousStragglers, IidStragglers, NoStragglers,
};

fn config(
    code: EncodingMatrix,
    shuffle: RoleShuffle,
    loss: GlmLoss,
    iterations: usize,
    step_size: f64,
) -> CodedRunConfig {
    // A generous deadline: these tests check results, not timing.
    CodedRunConfig::new(code, loss, iterations, step_size)
        .with_shuffle(shuffle)
        .with_deadline(Duration::from_millis(10))
        .with_seed(1)
}

#[test]
fn without_stragglers_every_code_gives_the_full_gradient_step() {
    let (train, held) = ShippedTask::IrisVirginica.prepare(0.2, 1).unwrap();
    let records = train.to_records().unwrap();
    let reference = GlmLoss::Logistic.descend(&record_views(&records), train.features(), 2.0, 15).unwrap();
    for code in [
        EncodingMatrix::uncoded(6).unwrap(),
        EncodingMatrix::frc(6, 3).unwrap(),
        EncodingMatrix::crc(6, 2).unwrap(),
        EncodingMatrix::crc_exact(6, 3, &mut seeded(2)).unwrap(),
    ] {
        for shuffle in [RoleShuffle::None, RoleShuffle::Random] {
            let cfg = config(code.clone(), shuffle, GlmLoss::Logistic, 15, 2.0);
            let trace = run_coded_gd(&cfg, &train, &held, &mut NoStragglers::new(6).unwrap()).unwrap();
            for (a, b) in trace.params.iter().zip(&reference) {
                assert!((a - b).abs() < 1e-9, "{:?} {shuffle}: {a} vs {b}", code.kind());
            }
            assert!(trace.history[1..].iter().all(|h| h.decoding_error == 0.0 && h.late_by_model == 0));
        }
    }
}

#[test]
fn coded_descent_converges_on_the_shipped_data_under_heterogeneous_stragglers() {
    let params = HeterogeneousParams::new(0.3, 0.8, 0.01);
    for (task, loss, step, bound) in [
        (ShippedTask::DiabetesRegression, GlmLoss::LeastSquares, 0.3, 0.25),
        (ShippedTask::IrisVirginica, GlmLoss::Logistic, 4.0, 0.15),
    ] {
        let (train, held) = task.prepare(0.2, 1).unwrap();
        for code in [EncodingMatrix::frc(8, 2).unwrap(), EncodingMatrix::crc(8, 2).unwrap()] {
            let mut stragglers = HeterogeneousStragglers::with_slow_workers(8, &[0, 1], params).unwrap();
            let cfg = config(code.clone(), RoleShuffle::Random, loss, 80, step);
            let trace = run_coded_gd(&cfg, &train, &held, &mut stragglers).unwrap();
            let (first, last) = (&trace.history[0], trace.history.last().unwrap());
            assert!(
                last.train_loss < bound && last.held_out_loss < 1.3 * bound,
                "{} {:?}: {first:?} -> {last:?}",
                task.name(),
                code.kind()
            );
            assert!(
                trace.history.iter().map(|h| h.late_by_model).sum::<usize>() > 40,
                "the slow workers straggled"
            );
        }
    }
}

#[test]
fn late_results_are_dropped_not_faked() {
    let (train, held) = ShippedTask::DiabetesRegression.prepare(0.2, 1).unwrap();
    let cfg = config(EncodingMatrix::frc(4, 2).unwrap(), RoleShuffle::None, GlmLoss::LeastSquares, 4, 0.3)
        .with_deadline(Duration::from_millis(3));
    let trace = run_coded_gd(&cfg, &train, &held, &mut IidStragglers::new(4, 1.0).unwrap()).unwrap();
    assert!(trace.params.iter().all(|&p| p == 0.0), "no gradient arrived, so no step: {:?}", trace.history);
    assert!(
        trace.history[1..].iter().all(|h| h.received == 0 && h.decoding_error == 4.0 && h.late_by_model == 4)
    );
    let mut bad = cfg.clone();
    bad.step_size = -1.0;
    assert!(run_coded_gd(&bad, &train, &held, &mut NoStragglers::new(4).unwrap()).is_err());
    assert!(run_coded_gd(&bad, &train, &held, &mut NoStragglers::new(5).unwrap()).is_err());
}

#[test]
fn on_time_workers_count_however_slow_the_machine_so_a_seed_gives_one_run() {
    let (train, held) = ShippedTask::DiabetesRegression.prepare(0.2, 1).unwrap();
    // A deadline no reply can meet: only the model's stragglers may be dropped.
    let cfg = config(EncodingMatrix::frc(4, 2).unwrap(), RoleShuffle::Random, GlmLoss::LeastSquares, 6, 0.3)
        .with_deadline(Duration::from_nanos(1));
    let run = || run_coded_gd(&cfg, &train, &held, &mut IidStragglers::new(4, 0.3).unwrap()).unwrap();
    let (a, b) = (run(), run());
    assert_eq!(a.params, b.params);
    for h in &a.history[1..] {
        assert_eq!(h.received + h.late_by_model, 4, "{h:?}");
        assert_eq!(h.unexpected_late, h.received, "every on-time reply came after a 1 ns deadline: {h:?}");
    }
    let kept: Vec<usize> = a.history.iter().map(|h| h.received).collect();
    assert_eq!(kept, b.history.iter().map(|h| h.received).collect::<Vec<_>>());
}
