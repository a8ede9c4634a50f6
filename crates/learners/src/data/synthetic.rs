//! Seeded synthetic data: linear models and low-rank matrices with Gaussian noise.

use ubershuffle_core::rng::{partial_shuffle, seeded, standard_normal};

use super::{Dataset, RatingData};
use crate::LearnerError;
use crate::sample::Rating;

/// `samples` points `x ~ N(0, I_d)` with `y = w* . x + b* + noise * N(0, 1)`, where the
/// true `w*` and `b*` are standard normal; returns the data and `[w*, b*]`.
pub fn linear_regression(
    samples: usize,
    features: usize,
    noise: f64,
    seed: u64,
) -> Result<(Dataset, Vec<f64>), LearnerError> {
    if samples == 0 || features == 0 {
        return Err(LearnerError::InvalidParameter("synthetic data needs samples and features".into()));
    }
    let mut rng = seeded(seed);
    let truth: Vec<f64> = (0..=features).map(|_| standard_normal(&mut rng)).collect();
    let mut inputs = Vec::with_capacity(samples);
    let mut labels = Vec::with_capacity(samples);
    for _ in 0..samples {
        let x: Vec<f64> = (0..features).map(|_| standard_normal(&mut rng)).collect();
        let y = x.iter().zip(&truth).map(|(a, w)| a * w).sum::<f64>()
            + truth[features]
            + noise * standard_normal(&mut rng);
        inputs.push(x);
        labels.push(y);
    }
    Ok((Dataset::from_rows(features, &inputs, labels)?, truth))
}

/// A rank-`rank` matrix `L R^T` with `L`, `R` entries `N(0, 1/sqrt(rank))` (so entries have
/// unit variance), observed at `per_row` distinct random columns of every row, plus
/// `noise * N(0, 1)`.
pub fn low_rank(
    rows: usize,
    cols: usize,
    rank: usize,
    per_row: usize,
    noise: f64,
    seed: u64,
) -> Result<RatingData, LearnerError> {
    if rows == 0 || cols == 0 || rank == 0 || per_row == 0 || per_row > cols {
        return Err(LearnerError::InvalidParameter(format!(
            "low-rank data needs 1 <= per_row <= cols and positive sizes, got {rows} x {cols}, rank {rank}, {per_row} per row"
        )));
    }
    let mut rng = seeded(seed);
    let scale = 1.0 / (rank as f64).sqrt().sqrt();
    let mut factor =
        |n: usize| -> Vec<f64> { (0..n * rank).map(|_| scale * standard_normal(&mut rng)).collect() };
    let (l, r) = (factor(rows), factor(cols));
    let mut ratings = Vec::with_capacity(rows * per_row);
    let mut columns: Vec<u32> = (0..cols as u32).collect();
    for i in 0..rows {
        partial_shuffle(&mut rng, &mut columns, per_row);
        for &j in &columns[..per_row] {
            let dot: f64 = (0..rank).map(|k| l[i * rank + k] * r[j as usize * rank + k]).sum();
            ratings.push(Rating { row: i as u32, col: j, value: dot + noise * standard_normal(&mut rng) });
        }
    }
    Ok(RatingData { rows, cols, ratings })
}
