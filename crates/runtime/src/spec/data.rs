//! [`DataSpec`]: the data a run of [`RunSpec`](super::RunSpec) trains on: seeded synthetic data,
//! or records the caller gives ([`GivenData`]).

use std::fmt;
use std::sync::Arc;

use ubershuffle_codes::Records;
use ubershuffle_learners::LearnerError;
use ubershuffle_learners::data::synthetic::{linear_regression, low_rank};

use crate::RunData;

/// Fraction of the generated ratings held out for the loss (matrix completion).
const MATCOMP_HELD_OUT: f64 = 0.1;

/// The data a run trains on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DataSpec {
    /// `points` training samples `y = w* . x + b* + noise` with `features` inputs, plus
    /// `points / 4` (at least one) held-out samples.
    LinearRegression {
        /// Training samples q.
        points: usize,
        /// Inputs per sample.
        features: usize,
        /// Label noise.
        noise: f64,
    },
    /// A rank-`rank` `rows x cols` matrix observed at `per_row` entries of every row; 10 % of
    /// the entries are held out.
    MatrixCompletion {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Rank.
        rank: usize,
        /// Observed entries per row.
        per_row: usize,
        /// Entry noise.
        noise: f64,
    },
    /// Records the caller gives (see [`RunSpec::check_given`](super::RunSpec::check_given)).
    Given(GivenData),
}

/// Training and held-out records a caller gives a run (an experiment's data set, records read
/// from files), shared rather than copied.
#[derive(Clone)]
pub struct GivenData(Arc<RunData>);

impl GivenData {
    /// The records of `data`.
    pub fn new(data: impl Into<Arc<RunData>>) -> GivenData {
        GivenData(data.into())
    }

    /// The records.
    pub fn data(&self) -> &Arc<RunData> {
        &self.0
    }
}

impl PartialEq for GivenData {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.train == other.0.train && self.0.held_out == other.0.held_out)
    }
}

/// The sizes, not the bytes.
impl fmt::Debug for GivenData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (train, held) = (&self.0.train, &self.0.held_out);
        match train.fixed() {
            Some(fixed) => {
                write!(f, "GivenData({} + {} records of {} bytes)", train.len(), held.len(), fixed.width())
            }
            None => write!(f, "GivenData({} records of any size + {} held out)", train.len(), held.len()),
        }
    }
}

impl DataSpec {
    /// Held-out records.
    pub fn held_out(&self) -> usize {
        match *self {
            DataSpec::LinearRegression { points, .. } => (points / 4).max(1),
            DataSpec::Given(ref given) => given.0.held_out.len(),
            DataSpec::MatrixCompletion { rows, per_row, .. } => {
                let total = rows.saturating_mul(per_row);
                ((total as f64 * MATCOMP_HELD_OUT).round() as usize).min(total)
            }
        }
    }

    /// Training records: the data points q that are shuffled.
    pub fn training_points(&self) -> usize {
        match *self {
            DataSpec::LinearRegression { points, .. } => points,
            DataSpec::MatrixCompletion { rows, per_row, .. } => {
                rows.saturating_mul(per_row) - self.held_out()
            }
            DataSpec::Given(ref given) => given.0.train.len(),
        }
    }

    /// Generates the data from `seed` (the held-out split from the next seed); given data as
    /// it is.
    pub fn build(&self, seed: u64) -> Result<Arc<RunData>, LearnerError> {
        let split_seed = seed.wrapping_add(1);
        let (train, held_out): (Records, Records) = match *self {
            DataSpec::Given(ref given) => return Ok(Arc::clone(&given.0)),
            DataSpec::LinearRegression { points, features, noise } => {
                let held = self.held_out();
                let (all, _) = linear_regression(points + held, features, noise, seed)?;
                let (train, held_out) = all.split(held as f64 / (points + held) as f64, split_seed);
                (train.to_records()?, held_out.to_records()?)
            }
            DataSpec::MatrixCompletion { rows, cols, rank, per_row, noise } => {
                let all = low_rank(rows, cols, rank, per_row, noise, seed)?;
                let (train, held_out) = all.split(MATCOMP_HELD_OUT, split_seed);
                (train.to_records()?, held_out.to_records()?)
            }
        };
        Ok(Arc::new(RunData { train: train.into(), held_out }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_have_the_announced_sizes() -> Result<(), LearnerError> {
        let lin = DataSpec::LinearRegression { points: 40, features: 3, noise: 0.1 };
        let data = lin.build(1)?;
        assert_eq!((data.train.len(), data.held_out.len()), (40, 10));
        let mc = DataSpec::MatrixCompletion { rows: 10, cols: 8, rank: 2, per_row: 5, noise: 0.0 };
        let data = mc.build(1)?;
        assert_eq!((data.train.len(), data.held_out.len()), (mc.training_points(), mc.held_out()));
        assert_eq!(mc.training_points() + mc.held_out(), 50);
        assert_eq!(lin.build(1)?.train, lin.build(1)?.train);
        let given = DataSpec::Given(GivenData::new(lin.build(1)?));
        assert_eq!((given.training_points(), given.held_out()), (40, 10));
        assert_eq!(format!("{given:?}"), "Given(GivenData(40 + 10 records of 32 bytes))");
        Ok(())
    }
}
