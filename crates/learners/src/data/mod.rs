//! Data sets: labelled samples ([`Dataset`]) and observed matrix entries ([`RatingData`]),
//! seeded synthetic generators, the shipped CSV tables, and a MovieLens loader.

pub mod movielens;
pub mod shipped;
pub mod synthetic;

use ubershuffle_codes::Records;
use ubershuffle_core::rng::{seeded, shuffle};

use crate::LearnerError;
use crate::sample::{Rating, encode_rating_row, encode_sample, rating_row_width, sample_width};

/// Labelled samples: `features` inputs and one label each.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Inputs per sample.
    pub features: usize,
    /// The inputs, one vector of `features` values per sample.
    pub inputs: Vec<Vec<f64>>,
    /// The labels.
    pub labels: Vec<f64>,
}

impl Dataset {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The samples as records (see [`crate::sample`]), in order.
    pub fn to_records(&self) -> Result<Records, LearnerError> {
        let bytes: Vec<u8> =
            self.inputs.iter().zip(&self.labels).flat_map(|(x, y)| encode_sample(x, *y)).collect();
        Ok(Records::from_bytes(sample_width(self.features), bytes)?)
    }

    /// Splits into `(train, held_out)` with a `held_out_fraction` of the samples drawn at
    /// random (seeded).
    pub fn split(&self, held_out_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let held = split_count(self.len(), held_out_fraction);
        let mut order: Vec<usize> = (0..self.len()).collect();
        shuffle(&mut seeded(seed), &mut order);
        let pick = |ids: &[usize]| Dataset {
            features: self.features,
            inputs: ids.iter().map(|&i| self.inputs[i].clone()).collect(),
            labels: ids.iter().map(|&i| self.labels[i]).collect(),
        };
        (pick(&order[held..]), pick(&order[..held]))
    }

    /// Each feature's mean and standard deviation over these samples (standard deviation 1
    /// for a constant feature).
    pub fn feature_moments(&self) -> Vec<(f64, f64)> {
        let n = self.len().max(1) as f64;
        (0..self.features)
            .map(|f| {
                let mean = self.inputs.iter().map(|x| x[f]).sum::<f64>() / n;
                let var = self.inputs.iter().map(|x| (x[f] - mean).powi(2)).sum::<f64>() / n;
                (mean, if var > 0.0 { var.sqrt() } else { 1.0 })
            })
            .collect()
    }

    /// The same samples with every feature shifted and scaled by `moments` (from
    /// [`Dataset::feature_moments`] of the training split, so held-out data gets the same map).
    pub fn standardized(&self, moments: &[(f64, f64)]) -> Dataset {
        Dataset {
            features: self.features,
            inputs: self
                .inputs
                .iter()
                .map(|x| x.iter().zip(moments).map(|(v, (m, s))| (v - m) / s).collect())
                .collect(),
            labels: self.labels.clone(),
        }
    }

    /// The same samples with labels mapped by `f`.
    pub fn map_labels(&self, f: impl Fn(f64) -> f64) -> Dataset {
        Dataset { labels: self.labels.iter().map(|&y| f(y)).collect(), ..self.clone() }
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
