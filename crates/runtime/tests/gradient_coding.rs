//! Gradient-coded descent on the runtime (an emulated cluster of threads): exact without
//! stragglers whatever the code and the role shuffle, converging on the shipped data under
//! heterogeneous stragglers, late results really dropped, and one run per seed.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ubershuffle_core::{PlannerOptions, ShufflePlanner};
use ubershuffle_gradient_codes::{GradientCodeKind, RoleShuffle};
use ubershuffle_learners::StragglerModel;
use ubershuffle_learners::data::Dataset;
use ubershuffle_learners::data::record_views;
use ubershuffle_learners::data::shipped::ShippedTask;
use ubershuffle_learners::gradient_coding::glm::GlmLoss;
use ubershuffle_learners::gradient_coding::learner::CodedDescentParams;
use ubershuffle_learners::straggler::{
    HeterogeneousParams, HeterogeneousStragglers, IidStragglers, NoStragglers,
};
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::RunReport;
use ubershuffle_runtime::gradient_coding::{coded_job, decoding_errors, run_coded_emulated};

fn uncoded() -> Box<dyn ShufflePlanner> {
    planner_by_name("uncoded", &PlannerOptions::default()).unwrap()
}

/// Runs `params` for `steps` on `train`, the loss measured on `train`; with the decoding errors.
fn run(
    params: CodedDescentParams,
    steps: usize,
    train: &Dataset,
    stragglers: &mut dyn StragglerModel,
) -> (RunReport, Vec<f64>) {
    let records = train.to_records().unwrap();
    let job = coded_job(params, steps, Duration::from_millis(10), &records, &records).unwrap();
    let report = run_coded_emulated(&job, uncoded().as_ref(), stragglers, &mut |_| {}).unwrap();
    let errors = decoding_errors(&job.learner, &report.epochs);
    (report, errors)
}

fn params(
    train: &Dataset,
    loss: GlmLoss,
    code: GradientCodeKind,
    ns: (usize, usize),
    step: f64,
) -> CodedDescentParams {
    CodedDescentParams::new(train.features(), loss, code, ns, step, train.len()).with_seed(1)
}

#[test]
fn without_stragglers_every_code_and_shuffle_gives_the_full_gradient_step() {
    let (train, _) = ShippedTask::IrisVirginica.prepare(0.2, 1).unwrap();
    let records = train.to_records().unwrap();
    let reference = GlmLoss::Logistic.descend(&record_views(&records), train.features(), 2.0, 15).unwrap();
    for (code, s) in [
        (GradientCodeKind::Uncoded, 1),
        (GradientCodeKind::Frc, 3),
        (GradientCodeKind::Crc, 2),
        (GradientCodeKind::CrcExact, 3),
    ] {
        for shuffle in [RoleShuffle::None, RoleShuffle::Random] {
            let p = params(&train, GlmLoss::Logistic, code, (6, s), 2.0).with_shuffle(shuffle);
            let (report, errors) = run(p, 15, &train, &mut NoStragglers::new(6).unwrap());
            for (a, b) in report.model.params.iter().zip(&reference) {
                assert!((a - b).abs() < 1e-9, "{code} {shuffle}: {a} vs {b}");
            }
            assert!(errors.iter().all(|&e| e < 1e-12) && report.epochs.iter().all(|m| m.stragglers == 0));
            // Shuffled roles move whole role blocks between the workers every iteration.
            let moved: usize = report.epochs.iter().map(|m| m.uncoded_transmissions).sum();
            assert_eq!(moved > 0, shuffle == RoleShuffle::Random, "{code} {shuffle}: {moved} points moved");
        }
    }
}

#[test]
fn coded_descent_converges_on_the_shipped_data_under_heterogeneous_stragglers() {
    let model = HeterogeneousParams::new(0.3, 0.8, 0.01);
    for (task, loss, step, bound) in [
        (ShippedTask::DiabetesRegression, GlmLoss::LeastSquares, 0.3, 0.25),
        (ShippedTask::IrisVirginica, GlmLoss::Logistic, 4.0, 0.15),
    ] {
        let (train, held) = task.prepare(0.2, 1).unwrap();
        for code in [GradientCodeKind::Frc, GradientCodeKind::Crc] {
            let mut stragglers = HeterogeneousStragglers::with_slow_workers(8, &[0, 1], model).unwrap();
            let p = params(&train, loss, code, (8, 2), step).with_shuffle(RoleShuffle::Random);
            let (report, _) = run(p, 80, &train, &mut stragglers);
            let held_records = held.to_records().unwrap();
            let held_loss = loss.mean_loss(&report.model.params, &record_views(&held_records)).unwrap();
            let last = report.epochs.last().unwrap().loss;
            assert!(last < bound && held_loss < 1.3 * bound, "{} {code}: {last} {held_loss}", task.name());
            let dropped: usize = report.epochs.iter().map(|m| m.stragglers).sum();
            assert!(dropped > 40, "the slow workers straggled: {dropped}");
        }
    }
}

#[test]
fn late_results_are_dropped_not_faked_and_a_seed_gives_one_run() {
    let (train, _) = ShippedTask::DiabetesRegression.prepare(0.2, 1).unwrap();
    let p = params(&train, GlmLoss::LeastSquares, GradientCodeKind::Frc, (4, 2), 0.3);
    let (report, errors) = run(p, 4, &train, &mut IidStragglers::new(4, 1.0).unwrap());
    assert!(report.model.params.iter().all(|&x| x == 0.0), "no gradient arrived, so no step");
    assert!(
        report.epochs.iter().all(|m| m.updates == 0 && m.stragglers == 4) && errors.iter().all(|&e| e == 4.0)
    );
    let shuffled = p.with_shuffle(RoleShuffle::Random);
    let (a, _) = run(shuffled, 6, &train, &mut IidStragglers::new(4, 0.3).unwrap());
    let (b, _) = run(shuffled, 6, &train, &mut IidStragglers::new(4, 0.3).unwrap());
    assert_eq!(a.model.params, b.model.params);
    let heard = |r: &RunReport| r.epochs.iter().map(|m| m.updated_workers.clone()).collect::<Vec<_>>();
    assert_eq!(heard(&a), heard(&b));
    let mut bad = p;
    bad.step_size = -1.0;
    let records = train.to_records().unwrap();
    assert!(coded_job(bad, 2, Duration::from_millis(1), &records, &records).is_err());
}
