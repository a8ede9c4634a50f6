//! The learners converge epoch by epoch on batches reassigned every epoch, on synthetic data
//! and on the shipped data; the MovieLens loader reads both formats.

#![allow(clippy::unwrap_used)]

use ubershuffle_codes::Records;
use ubershuffle_core::rng::seeded;
use ubershuffle_learners::data::shipped::ShippedTask;
use ubershuffle_learners::data::{movielens, synthetic};
use ubershuffle_learners::epochs::EpochRecord;
use ubershuffle_learners::epochs::{EpochOptions, random_assignment, train_by_epochs};
use ubershuffle_learners::straggler::{IidStragglers, NoStragglers};
use ubershuffle_learners::{
    Learner, LinearRegressionPsgd, LocalStep, MatrixCompletionParams, MatrixCompletionRowsSgd,
};

/// Trains without stragglers and returns the held-out losses by epoch.
fn train_all(
    learner: &dyn Learner,
    train: &Records,
    held: &Records,
    options: EpochOptions,
) -> Vec<EpochRecord> {
    train_by_epochs(learner, train, held, options, &mut NoStragglers::new(options.workers).unwrap()).unwrap()
}

fn mc(
    rows: usize,
    cols: usize,
    rank: usize,
    step_size: f64,
    regularization: f64,
    init_scale: f64,
) -> ubershuffle_learners::MatrixCompletionSgd {
    MatrixCompletionParams::new(rows, cols, rank, step_size)
        .with_regularization(regularization)
        .with_init_scale(init_scale)
        .check()
        .unwrap()
}

#[test]
fn psgd_recovers_a_synthetic_linear_model() {
    let (data, _truth) = synthetic::linear_regression(2000, 8, 0.1, 1).unwrap();
    let (train, held) = data.split(0.2, 2);
    let learner = LinearRegressionPsgd::new(8, 0.01, 1).unwrap();
    let options = EpochOptions::new(8, 30, 3);
    let mut stragglers = IidStragglers::new(8, 0.2).unwrap();
    let history = train_by_epochs(
        &learner,
        &train.to_records().unwrap(),
        &held.to_records().unwrap(),
        options,
        &mut stragglers,
    )
    .unwrap();
    let (first, last) = (history[0].held_out_loss, history.last().unwrap().held_out_loss);
    // The noise variance is 0.01: the held-out MSE must get close to it.
    assert!(last < 0.02 && first > 5.0, "held-out MSE {first} -> {last}");
    assert!(history.iter().skip(1).any(|h| h.stragglers > 0), "some updates were dropped");
}

#[test]
fn psgd_fits_the_diabetes_data() {
    let (train, held) = ShippedTask::DiabetesRegression.prepare(0.2, 1).unwrap();
    let learner = LinearRegressionPsgd::new(train.features(), 0.01, 1).unwrap();
    let options = EpochOptions::new(4, 60, 1);
    let history = train_all(&learner, &train.to_records().unwrap(), &held.to_records().unwrap(), options);
    let last = history.last().unwrap().held_out_loss;
    // Standardised target: predicting the mean gives about 1; ordinary least squares on this
    // data explains about half the variance.
    assert!(history[0].held_out_loss > 0.8 && last < 0.6, "{} -> {last}", history[0].held_out_loss);
}

#[test]
fn matrix_completion_fits_a_synthetic_low_rank_matrix() {
    let data = synthetic::low_rank(120, 100, 3, 40, 0.05, 4).unwrap();
    let (train, held) = data.split(0.1, 5);
    let learner = mc(120, 100, 3, 0.05, 0.001, 0.3);
    let options = EpochOptions::new(4, 40, 6);
    let history = train_all(&learner, &train.to_records().unwrap(), &held.to_records().unwrap(), options);
    let (first, last) = (history[0].held_out_loss, history.last().unwrap().held_out_loss);
    // Entries have unit variance; the noise is 0.05.
    assert!(first > 0.9 && last < 0.2, "held-out RMSE {first} -> {last}");
}

#[test]
fn batches_change_every_epoch() {
    let mut rng = seeded(1);
    let a = random_assignment(100, 4, &mut rng);
    let b = random_assignment(100, 4, &mut rng);
    assert_ne!(a, b);
    let mut all: Vec<u32> = a.concat();
    all.sort_unstable();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    assert_eq!(random_assignment(10, 3, &mut rng).iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 3, 3]);
}

#[test]
fn learners_reject_bad_records_and_updates() {
    let learner = LinearRegressionPsgd::new(3, 0.1, 1).unwrap();
    let model = learner.initial_model(0);
    let step = LocalStep { epoch: 0, worker: 0, seed: 0 };
    assert!(learner.local_update(&model, &[&[0u8; 7]], step).is_err());
    let mc = mc(2, 2, 1, 0.1, 0.0, 0.1);
    let out_of_range = ubershuffle_learners::sample::Rating { row: 5, col: 0, value: 1.0 }.to_record();
    assert!(mc.local_update(&mc.initial_model(0), &[&out_of_range], step).is_err());
    let wrong = learner.local_update(&model, &[], step).unwrap();
    assert!(mc.aggregate(&mc.initial_model(0), &[wrong]).is_err());
    assert!(LinearRegressionPsgd::new(3, -1.0, 1).is_err());
    let bad = MatrixCompletionParams::new(0, 2, 1, 0.1).with_regularization(0.0).with_init_scale(0.1);
    assert!(bad.check().is_err());
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("learners-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn movielens_files_in_both_formats() {
    let udata = temp_file(
        "u.data",
        "196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n196\t377\t4.5\t1\n",
    );
    let ml = movielens::load(&udata).unwrap();
    assert_eq!((ml.data.rows, ml.data.cols, ml.data.ratings.len()), (3, 3, 4));
    assert_eq!(ml.user_ids, vec![22, 186, 196]);
    assert_eq!(ml.item_ids, vec![242, 302, 377]);
    let last = ml.data.ratings[3];
    assert_eq!((last.row, last.col, last.value), (2, 2, 4.5));

    let csv = temp_file(
        "ratings.csv",
        "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n1,1029,3.0,1260759179\n7,31,5.0,1\n",
    );
    let ml = movielens::load(&csv).unwrap();
    assert_eq!((ml.data.rows, ml.data.cols), (2, 2));
    assert_eq!(ml.data.ratings[2].value, 5.0);
    // The ratings train a matrix-completion learner.
    let (train, _) = ml.data.split(0.0, 1);
    let learner = mc(ml.data.rows, ml.data.cols, 2, 0.05, 0.0, 0.1);
    let records = train.to_records().unwrap();
    let views = ubershuffle_learners::data::record_views(&records);
    assert!(learner.loss(&learner.initial_model(1), &views).unwrap() > 2.0);

    let bad = temp_file("bad.csv", "userId,movieId,rating,timestamp\n1,31,2.5,1\n1,x,3,1\n");
    let e = movielens::load(&bad).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("item id"), "{e}");
    assert!(movielens::load(std::path::Path::new("/no/such/ratings.csv")).is_err());
}

#[test]
fn matrix_completion_on_user_rows_fits_and_agrees_with_the_triples_learner() {
    let data = synthetic::low_rank(120, 100, 3, 40, 0.05, 4).unwrap();
    let (train, held) = data.split_within_rows(4, 5);
    assert_eq!((train.ratings.len(), held.ratings.len()), (120 * 36, 120 * 4));
    let params =
        MatrixCompletionParams::new(120, 100, 3, 0.05).with_regularization(0.001).with_init_scale(0.3);
    let rows = MatrixCompletionRowsSgd::new(params, 36).unwrap();
    let (train_rows, held_rows) = (train.to_row_records(36).unwrap(), held.to_row_records(36).unwrap());
    assert_eq!((train_rows.len(), train_rows.width()), (120, 8 + 12 * 36));
    // Same model, same ratings: the same loss as the learner on triples.
    let triples = params.check().unwrap();
    let model = rows.initial_model(9);
    let views = ubershuffle_learners::data::record_views(&held_rows);
    let on_rows = rows.loss(&model, &views).unwrap();
    let on_triples =
        triples.loss(&model, &ubershuffle_learners::data::record_views(&held.to_records().unwrap())).unwrap();
    assert!((on_rows - on_triples).abs() < 1e-12, "{on_rows} vs {on_triples}");
    let options = EpochOptions::new(4, 40, 6);
    let history = train_all(&rows, &train_rows, &held_rows, options);
    let (first, last) = (history[0].held_out_loss, history.last().unwrap().held_out_loss);
    assert!(first > 0.9 && last < 0.2, "held-out RMSE {first} -> {last}");
    // A row with more entries than slots, a rating outside the matrix: errors, not panics.
    assert!(train.to_row_records(35).is_err());
    let outside = ubershuffle_learners::sample::encode_rating_row(500, &[(1, 1.0)], 36).unwrap();
    let step = LocalStep { epoch: 0, worker: 0, seed: 0 };
    assert!(rows.local_update(&model, &[&outside], step).is_err());
    assert!(MatrixCompletionRowsSgd::new(params, 0).is_err());
}
