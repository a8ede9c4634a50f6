//! Low-rank matrix completion by distributed SGD on rating triples (UberShuffle paper,
//! Section 4.1, after Recht and Ré's parallel SGD for matrix completion).

use std::collections::BTreeMap;

use ubershuffle_core::rng::{seeded, seeded_stream, shuffle, standard_normal};

use crate::learner::check_model;
use crate::sample::{RATING_WIDTH, Rating};
use crate::{Learner, LearnerError, LocalStep, Model, Update, UpdateBody};

/// Fits `X ~ L R^T` (`L`: rows x rank, `R`: cols x rank) to observed entries by SGD on
/// `(L_i . R_j - x_ij)^2 + lambda (|L_i|^2 + |R_j|^2)`.
///
/// Parameters: `L` row-major, then `R` row-major. Records: ratings ([`Rating`]). Loss: the
/// root mean squared error on the given ratings.
///
/// Each worker runs SGD over its ratings on its own copy of the factor rows they touch and
/// returns the change of each touched row. The master adds, for every factor row, the mean of
/// the changes sent for it. Recht and Ré partition the ratings so that concurrent workers touch
/// disjoint rows and columns; then each row has one change and this is exactly their merge.
/// Under a shuffle that assigns ratings at random, workers may share rows, and averaging their
/// changes is our choice (it keeps the step size of one worker, unlike summing).
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixCompletionSgd {
    params: MatrixCompletionParams,
}

/// The hyper-parameters of [`MatrixCompletionSgd`]; [`MatrixCompletionParams::check`] validates
/// them once and gives the learner.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct MatrixCompletionParams {
    /// Matrix rows (users).
    pub rows: usize,
    /// Matrix columns (items).
    pub cols: usize,
    /// Rank of the factors.
    pub rank: usize,
    /// SGD step size.
    pub step_size: f64,
    /// The l2 penalty `lambda`.
    pub regularization: f64,
    /// Initial factor entries are `N(0, init_scale^2)`.
    pub init_scale: f64,
}

impl MatrixCompletionParams {
    /// A `rows x cols` matrix fitted with rank-`rank` factors by SGD steps of `step_size`, with
    /// the l2 penalty 0.001 and initial factor entries of scale 0.3 unless set otherwise (the
    /// values of the UberShuffle experiments here).
    pub const fn new(rows: usize, cols: usize, rank: usize, step_size: f64) -> Self {
        MatrixCompletionParams { rows, cols, rank, step_size, regularization: 0.001, init_scale: 0.3 }
    }

    /// The l2 penalty `lambda`.
    pub fn with_regularization(mut self, regularization: f64) -> Self {
        self.regularization = regularization;
        self
    }

    /// Initial factor entries `N(0, init_scale^2)`.
    pub fn with_init_scale(mut self, init_scale: f64) -> Self {
        self.init_scale = init_scale;
        self
    }

    /// The learner, or a one-line error naming the bad parameter.
    pub fn check(self) -> Result<MatrixCompletionSgd, LearnerError> {
        let MatrixCompletionParams { rows, cols, rank, step_size, regularization, init_scale } = self;
        if rows == 0 || cols == 0 || rank == 0 {
            return Err(LearnerError::InvalidParameter(format!(
                "matrix completion needs positive rows, cols and rank, got {rows} x {cols}, rank {rank}"
            )));
        }
        if rows.checked_add(cols).is_none_or(|n| u32::try_from(n).is_err()) {
            return Err(LearnerError::InvalidParameter(format!(
                "{rows} + {cols} factor rows exceed u32 ids"
            )));
        }
        if (rows + cols).checked_mul(rank).is_none_or(|p| p > crate::MAX_PARAMETERS) {
            return Err(LearnerError::InvalidParameter(format!(
                "({rows} + {cols}) x rank {rank} factor entries exceed the {} model parameters a learner takes",
                crate::MAX_PARAMETERS
            )));
        }
        for (name, v) in
            [("step size", step_size), ("regularization", regularization), ("init scale", init_scale)]
        {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(LearnerError::InvalidParameter(format!("{name} must be non-negative, got {v}")));
            }
        }
        Ok(MatrixCompletionSgd { params: self })
    }
}

impl MatrixCompletionSgd {
    /// The hyper-parameters.
    pub fn params(&self) -> &MatrixCompletionParams {
        &self.params
    }

    pub(crate) fn check_rating(&self, r: &Rating) -> Result<(), LearnerError> {
        if r.row as usize >= self.params.rows || r.col as usize >= self.params.cols {
            return Err(LearnerError::RatingOutOfRange {
                row: r.row,
                col: r.col,
                rows: self.params.rows,
                cols: self.params.cols,
            });
        }
        Ok(())
    }

    /// The factor row id of matrix row `i` (in `L`) and of column `j` (in `R`).
    fn ids(&self, r: &Rating) -> (u32, u32) {
        (r.row, self.params.rows as u32 + r.col)
    }

    fn factor<'a>(&self, params: &'a [f64], id: u32) -> &'a [f64] {
        let start = id as usize * self.params.rank;
        &params[start..start + self.params.rank]
    }

    /// The model's prediction of entry `(row, col)`.
    pub fn predict(&self, model: &Model, row: u32, col: u32) -> f64 {
        let (i, j) = self.ids(&Rating { row, col, value: 0.0 });
        self.factor(&model.params, i).iter().zip(self.factor(&model.params, j)).map(|(a, b)| a * b).sum()
    }
}

impl Learner for MatrixCompletionSgd {
    fn name(&self) -> &'static str {
        "matrix-completion-sgd"
    }

    fn record_width(&self) -> usize {
        RATING_WIDTH
    }

    fn parameter_count(&self) -> usize {
        (self.params.rows + self.params.cols) * self.params.rank
    }

    fn initial_model(&self, seed: u64) -> Model {
        let mut rng = seeded(seed);
        Model::new(
            (0..self.parameter_count()).map(|_| self.params.init_scale * standard_normal(&mut rng)).collect(),
        )
    }

    fn local_update(&self, model: &Model, batch: &[&[u8]], step: LocalStep) -> Result<Update, LearnerError> {
        check_model(model, self.parameter_count())?;
        let ratings = batch.iter().map(|r| Rating::from_record(r)).collect::<Result<Vec<_>, _>>()?;
        for r in &ratings {
            self.check_rating(r)?;
        }
        let mut order: Vec<usize> = (0..ratings.len()).collect();
        shuffle(
            &mut seeded_stream(step.seed.wrapping_add(step.epoch as u64), 1 + step.worker as u64),
            &mut order,
        );
        // The worker's copies of the factor rows it touches.
        let mut local: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        let (eta, lambda) = (self.params.step_size, self.params.regularization);
        for &k in &order {
            let r = &ratings[k];
            let (i, j) = self.ids(r);
            let li = local.entry(i).or_insert_with(|| self.factor(&model.params, i).to_vec()).clone();
            let rj = local.entry(j).or_insert_with(|| self.factor(&model.params, j).to_vec()).clone();
            let e = li.iter().zip(&rj).map(|(a, b)| a * b).sum::<f64>() - r.value;
            if let Some(row) = local.get_mut(&i) {
                for (x, (a, b)) in row.iter_mut().zip(li.iter().zip(&rj)) {
                    *x = a - eta * (e * b + lambda * a);
                }
            }
            if let Some(col) = local.get_mut(&j) {
                for (x, (b, a)) in col.iter_mut().zip(rj.iter().zip(&li)) {
                    *x = b - eta * (e * a + lambda * b);
                }
            }
        }
        let rows = local
            .into_iter()
            .map(|(id, v)| {
                let old = self.factor(&model.params, id);
                (id, v.iter().zip(old).map(|(new, old)| new - old).collect())
            })
            .collect();
        Ok(Update { points: batch.len() as u64, body: UpdateBody::Rows { width: self.params.rank, rows } })
    }

    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError> {
        check_model(model, self.parameter_count())?;
        let ids = (self.params.rows + self.params.cols) as u32;
        let mut sums: BTreeMap<u32, (Vec<f64>, usize)> = BTreeMap::new();
        for u in updates {
            let UpdateBody::Rows { width, rows } = &u.body else {
                return Err(LearnerError::Malformed {
                    what: "update",
                    reason: "expected factor rows".into(),
                });
            };
            if *width != self.params.rank {
                return Err(LearnerError::Malformed {
                    what: "update",
                    reason: format!("rows of width {width}, the rank is {}", self.params.rank),
                });
            }
            for (id, delta) in rows {
                if *id >= ids || delta.len() != self.params.rank {
                    return Err(LearnerError::Malformed {
                        what: "update",
                        reason: format!("factor row {id} (there are {ids}) of width {}", delta.len()),
                    });
                }
                let entry = sums.entry(*id).or_insert_with(|| (vec![0.0; self.params.rank], 0));
                for (s, d) in entry.0.iter_mut().zip(delta) {
                    *s += d;
                }
                entry.1 += 1;
            }
        }
        let mut params = model.params.clone();
        for (id, (sum, count)) in sums {
            let start = id as usize * self.params.rank;
            for (p, s) in params[start..start + self.params.rank].iter_mut().zip(sum) {
                *p += s / count as f64;
            }
        }
        Ok(Model::new(params))
    }

    fn loss(&self, model: &Model, points: &[&[u8]]) -> Result<f64, LearnerError> {
        check_model(model, self.parameter_count())?;
        let mut total = 0.0;
        for rec in points {
            let r = Rating::from_record(rec)?;
            self.check_rating(&r)?;
            total += (self.predict(model, r.row, r.col) - r.value).powi(2);
        }
        Ok(if points.is_empty() { 0.0 } else { (total / points.len() as f64).sqrt() })
    }
}
