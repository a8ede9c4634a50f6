//! Low-rank matrix completion by distributed SGD where a data point is one user's row of
//! observed ratings, as in the UberShuffle paper's experiments (Section 4.1 and Table 1: a data
//! point of the matrix-completion setups is a row of `m` observed entries).

use ubershuffle_core::rng::{seeded_stream, shuffle};

use crate::learner::check_model;
use crate::sample::{Rating, RatingRowView, rating_row_width};
use crate::{
    Learner, LearnerError, LocalStep, MatrixCompletionParams, MatrixCompletionSgd, Model, Update, UpdateBody,
};

/// [`MatrixCompletionSgd`]'s model, objective, aggregation and loss on records that each hold
/// one user's row of up to `slots` observed entries ([`crate::sample::encode_rating_row`]).
///
/// Local work: SGD over the worker's rows in a seeded random order, each row's entries in
/// turn (so one user's factor stays in cache), on local copies of the user factors of its rows and of the whole item factor matrix `R` (the model
/// the master sends is already that large). The update holds the change of every user factor
/// row and every item factor row touched, so the master's merge is [`MatrixCompletionSgd`]'s:
/// a user's row lives on one worker in an epoch, so its factor has one change, as in Recht and
/// Ré's conflict-free partitioning; item factors shared by several workers are averaged.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixCompletionRowsSgd {
    inner: MatrixCompletionSgd,
    slots: usize,
}

impl MatrixCompletionRowsSgd {
    /// The learner for records of `slots` entries, or a one-line error naming the bad parameter.
    pub fn new(params: MatrixCompletionParams, slots: usize) -> Result<Self, LearnerError> {
        if slots == 0 {
            return Err(LearnerError::InvalidParameter("a user row needs at least one entry slot".into()));
        }
        Ok(MatrixCompletionRowsSgd { inner: params.check()?, slots })
    }

    /// Entry slots per record.
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn ratings(&self, records: &[&[u8]]) -> Result<Vec<Rating>, LearnerError> {
        let mut out = Vec::new();
        for r in records {
            for rating in RatingRowView::new(r, self.slots)?.ratings() {
                self.inner.check_rating(&rating)?;
                out.push(rating);
            }
        }
        Ok(out)
    }
}

impl Learner for MatrixCompletionRowsSgd {
    fn name(&self) -> &'static str {
        "matrix-completion-rows-sgd"
    }

    fn record_width(&self) -> usize {
        rating_row_width(self.slots)
    }

    fn parameter_count(&self) -> usize {
        self.inner.parameter_count()
    }

    fn initial_model(&self, seed: u64) -> Model {
        self.inner.initial_model(seed)
    }

    fn local_update(&self, model: &Model, batch: &[&[u8]], step: LocalStep) -> Result<Update, LearnerError> {
        check_model(model, self.parameter_count())?;
        let views = batch.iter().map(|r| RatingRowView::new(r, self.slots)).collect::<Result<Vec<_>, _>>()?;
        let p = *self.inner.params();
        for v in &views {
            for rating in v.ratings() {
                self.inner.check_rating(&rating)?;
            }
        }
        let k = p.rank;
        let (eta, lambda) = (p.step_size, p.regularization);
        // Local user factors, one slot per distinct row of the batch (sorted).
        let mut users: Vec<u32> = views.iter().map(|v| v.row()).collect();
        users.sort_unstable();
        users.dedup();
        let mut user_factors: Vec<f64> = users
            .iter()
            .flat_map(|&u| model.params[u as usize * k..(u as usize + 1) * k].iter().copied())
            .collect();
        let items_at = p.rows * k;
        let mut items: Vec<f64> = model.params[items_at..].to_vec();
        let mut touched = vec![false; p.cols];
        // Rows in a seeded random order, each row's entries in turn.
        let mut order: Vec<usize> = (0..views.len()).collect();
        shuffle(
            &mut seeded_stream(step.seed.wrapping_add(step.epoch as u64), 1 + step.worker as u64),
            &mut order,
        );
        for &i in &order {
            let v = &views[i];
            let u = users.binary_search(&v.row()).unwrap_or(0);
            let li = &mut user_factors[u * k..(u + 1) * k];
            for r in v.ratings() {
                let c = r.col as usize;
                touched[c] = true;
                let rj = &mut items[c * k..(c + 1) * k];
                let e = li.iter().zip(rj.iter()).map(|(a, b)| a * b).sum::<f64>() - r.value;
                for (a, b) in li.iter_mut().zip(rj.iter_mut()) {
                    let (old_a, old_b) = (*a, *b);
                    *a = old_a - eta * (e * old_b + lambda * old_a);
                    *b = old_b - eta * (e * old_a + lambda * old_b);
                }
            }
        }
        let delta = |new: &[f64], old: &[f64]| new.iter().zip(old).map(|(n, o)| n - o).collect::<Vec<f64>>();
        let mut rows: Vec<(u32, Vec<f64>)> = users
            .iter()
            .enumerate()
            .map(|(s, &u)| {
                let old = &model.params[u as usize * k..(u as usize + 1) * k];
                (u, delta(&user_factors[s * k..(s + 1) * k], old))
            })
            .collect();
        for c in (0..p.cols).filter(|&c| touched[c]) {
            let old = &model.params[items_at + c * k..items_at + (c + 1) * k];
            rows.push(((p.rows + c) as u32, delta(&items[c * k..(c + 1) * k], old)));
        }
        Ok(Update { points: batch.len() as u64, body: UpdateBody::Rows { width: k, rows } })
    }

    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError> {
        self.inner.aggregate(model, updates)
    }

    /// The root mean squared error over every entry of `points` (user rows).
    fn loss(&self, model: &Model, points: &[&[u8]]) -> Result<f64, LearnerError> {
        check_model(model, self.parameter_count())?;
        let ratings = self.ratings(points)?;
        let total: f64 =
            ratings.iter().map(|r| (self.inner.predict(model, r.row, r.col) - r.value).powi(2)).sum();
        Ok(if ratings.is_empty() { 0.0 } else { (total / ratings.len() as f64).sqrt() })
    }
}
