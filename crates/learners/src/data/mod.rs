//! Data sets: labelled samples ([`Dataset`]) and observed matrix entries ([`RatingData`]),
//! seeded synthetic generators, the shipped CSV tables, and a MovieLens loader.

pub mod movielens;
pub mod shipped;
pub mod synthetic;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use ubershuffle_codes::Records;
use ubershuffle_core::rng::{seeded, shuffle};

use crate::LearnerError;
use crate::sample::{Rating, encode_rating_row, encode_sample, rating_row_width, sample_width};

/// Labelled samples: a matrix of inputs (one row per sample, one column per feature) and one
/// label per sample, held as `ndarray` arrays as in linfa and the rest of the Rust ML
/// ecosystem.
///
/// ```
/// use ndarray::{Array1, Array2, array};
/// use ubershuffle_learners::data::Dataset;
///
/// let x: Array2<f64> = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let y: Array1<f64> = array![0.5, 1.5, 2.5];
/// let data = Dataset::new(x.clone(), y.clone())?;
/// assert_eq!((data.len(), data.features()), (3, 2));
/// let records = data.to_records()?; // the bytes the shuffle moves
/// assert_eq!(records.len(), 3);
/// assert_eq!(data.into_arrays(), (x, y));
/// assert!(Dataset::new(Array2::zeros((3, 2)), Array1::zeros(4)).is_err()); // says why
/// # Ok::<(), ubershuffle_learners::LearnerError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    inputs: Array2<f64>,
    labels: Array1<f64>,
}

impl Dataset {
    /// Samples from `inputs` (`samples x features`) and `labels` (`samples`). Fails when the
    /// numbers of rows and labels differ.
    pub fn new(inputs: Array2<f64>, labels: Array1<f64>) -> Result<Self, LearnerError> {
        if inputs.nrows() != labels.len() {
            return Err(LearnerError::InvalidParameter(format!(
                "{} input rows but {} labels: a data set needs one label per row",
                inputs.nrows(),
                labels.len()
            )));
        }
        Ok(Dataset { inputs, labels })
    }

    /// Samples from row vectors, each of `features` values. Fails when a row has another
    /// length or the numbers of rows and labels differ.
    pub fn from_rows(features: usize, rows: &[Vec<f64>], labels: Vec<f64>) -> Result<Self, LearnerError> {
        let mut flat = Vec::with_capacity(rows.len() * features);
        for (i, row) in rows.iter().enumerate() {
            if row.len() != features {
                return Err(LearnerError::InvalidParameter(format!(
                    "row {i} has {} values, expected {features} features",
                    row.len()
                )));
            }
            flat.extend_from_slice(row);
        }
        let inputs = Array2::from_shape_vec((rows.len(), features), flat)
            .map_err(|e| LearnerError::InvalidParameter(format!("inputs: {e}")))?;
        Self::new(inputs, Array1::from(labels))
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Inputs per sample.
    pub fn features(&self) -> usize {
        self.inputs.ncols()
    }

    /// The inputs, one row per sample.
    pub fn inputs(&self) -> ArrayView2<'_, f64> {
        self.inputs.view()
    }

    /// The labels, one per sample.
    pub fn labels(&self) -> ArrayView1<'_, f64> {
        self.labels.view()
    }

    /// The inputs and labels, as owned arrays.
    pub fn into_arrays(self) -> (Array2<f64>, Array1<f64>) {
        (self.inputs, self.labels)
    }

    /// The samples as records (see [`crate::sample`]), in order.
    pub fn to_records(&self) -> Result<Records, LearnerError> {
        let mut bytes = Vec::with_capacity(self.len() * sample_width(self.features()));
        let mut x = Vec::with_capacity(self.features());
        for (row, y) in self.inputs.rows().into_iter().zip(&self.labels) {
            x.clear();
            x.extend(row.iter().copied());
            bytes.extend(encode_sample(&x, *y));
        }
        Ok(Records::from_bytes(sample_width(self.features()), bytes)?)
    }

    /// The samples `ids`, in that order.
    fn select(&self, ids: &[usize]) -> Dataset {
        Dataset { inputs: self.inputs.select(Axis(0), ids), labels: self.labels.select(Axis(0), ids) }
    }

    /// Splits into `(train, held_out)` with a `held_out_fraction` of the samples drawn at
    /// random (seeded).
    pub fn split(&self, held_out_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let held = split_count(self.len(), held_out_fraction);
        let mut order: Vec<usize> = (0..self.len()).collect();
        shuffle(&mut seeded(seed), &mut order);
        (self.select(&order[held..]), self.select(&order[..held]))
    }

    /// Each feature's mean and standard deviation over these samples (standard deviation 1
    /// for a constant feature).
    pub fn feature_moments(&self) -> Vec<(f64, f64)> {
        let n = self.len().max(1) as f64;
        self.inputs
            .columns()
            .into_iter()
            .map(|column| {
                // Summed in sample order, as a plain loop would, so results do not depend on
                // how ndarray might reorder a reduction.
                let mean = column.iter().sum::<f64>() / n;
                let var = column.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
                (mean, if var > 0.0 { var.sqrt() } else { 1.0 })
            })
            .collect()
    }

    /// The same samples with every feature shifted and scaled by `moments` (from
    /// [`Dataset::feature_moments`] of the training split, so held-out data gets the same map).
    pub fn standardized(&self, moments: &[(f64, f64)]) -> Dataset {
        let mut inputs = self.inputs.clone();
        for (mut column, (m, s)) in inputs.columns_mut().into_iter().zip(moments) {
            column.mapv_inplace(|v| (v - m) / s);
        }
        Dataset { inputs, labels: self.labels.clone() }
    }

    /// The same samples with labels mapped by `f`.
    pub fn map_labels(&self, f: impl Fn(f64) -> f64) -> Dataset {
        Dataset { inputs: self.inputs.clone(), labels: self.labels.mapv(f) }
    }
}

impl TryFrom<(Array2<f64>, Array1<f64>)> for Dataset {
    type Error = LearnerError;

    fn try_from((inputs, labels): (Array2<f64>, Array1<f64>)) -> Result<Self, LearnerError> {
        Dataset::new(inputs, labels)
    }
}

impl From<Dataset> for (Array2<f64>, Array1<f64>) {
    fn from(data: Dataset) -> Self {
        data.into_arrays()
    }
}

fn split_count(len: usize, fraction: f64) -> usize {
    ((len as f64 * fraction.clamp(0.0, 1.0)).round() as usize).min(len)
}

/// Observed entries of a `rows x cols` matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct RatingData {
    /// Rows (users).
    pub rows: usize,
    /// Columns (items).
    pub cols: usize,
    /// The observed entries.
    pub ratings: Vec<Rating>,
}

impl RatingData {
    /// The ratings as 16-byte records.
    pub fn to_records(&self) -> Result<Records, LearnerError> {
        let bytes: Vec<u8> = self.ratings.iter().flat_map(|r| r.to_record()).collect();
        Ok(Records::from_bytes(crate::sample::RATING_WIDTH, bytes)?)
    }

    /// Splits into `(train, held_out)` with a `held_out_fraction` of the ratings at random.
    pub fn split(&self, held_out_fraction: f64, seed: u64) -> (RatingData, RatingData) {
        let held = split_count(self.ratings.len(), held_out_fraction);
        let mut ratings = self.ratings.clone();
        shuffle(&mut seeded(seed), &mut ratings);
        let train = ratings.split_off(held);
        (
            RatingData { rows: self.rows, cols: self.cols, ratings: train },
            RatingData { rows: self.rows, cols: self.cols, ratings },
        )
    }
}

impl RatingData {
    /// The ratings grouped by matrix row, one user-row record of `slots` slots per row that
    /// has ratings, in row order (the UberShuffle paper's matrix-completion data point).
    pub fn to_row_records(&self, slots: usize) -> Result<Records, LearnerError> {
        let mut by_row: Vec<Vec<(u32, f64)>> = vec![Vec::new(); self.rows];
        for r in &self.ratings {
            let row = by_row.get_mut(r.row as usize).ok_or(LearnerError::RatingOutOfRange {
                row: r.row,
                col: r.col,
                rows: self.rows,
                cols: self.cols,
            })?;
            row.push((r.col, r.value));
        }
        let mut bytes = Vec::with_capacity(self.rows * rating_row_width(slots));
        for (row, entries) in by_row.iter().enumerate().filter(|(_, e)| !e.is_empty()) {
            bytes.extend(encode_rating_row(row as u32, entries, slots)?);
        }
        Ok(Records::from_bytes(rating_row_width(slots), bytes)?)
    }

    /// Splits into `(train, held_out)` holding out `per_row` ratings of every row, drawn at
    /// random (seeded); rows with no more than `per_row` ratings keep them all for training.
    pub fn split_within_rows(&self, per_row: usize, seed: u64) -> (RatingData, RatingData) {
        let mut by_row: Vec<Vec<Rating>> = vec![Vec::new(); self.rows];
        for r in &self.ratings {
            if let Some(row) = by_row.get_mut(r.row as usize) {
                row.push(*r);
            }
        }
        let mut rng = seeded(seed);
        let (mut train, mut held) = (Vec::new(), Vec::new());
        for mut row in by_row {
            if row.len() > per_row {
                shuffle(&mut rng, &mut row);
                held.extend(row.drain(..per_row));
            }
            train.extend(row);
        }
        let part = |ratings| RatingData { rows: self.rows, cols: self.cols, ratings };
        (part(train), part(held))
    }
}

/// Views of every record of `records`, in order (what a learner's `loss` takes).
pub fn record_views(records: &Records) -> Vec<&[u8]> {
    records.as_bytes().chunks_exact(records.width()).collect()
}
