//! Linear regression by parallel SGD (Zinkevich, Weimer, Smola and Li): each worker runs
//! plain SGD over its own records starting from the master's model, and the master averages
//! the workers' models (UberShuffle paper, Section 4.1, "Parallel SGD for Linear Regression").

use ndarray::{Array1, ArrayView2};
use ubershuffle_core::rng::{seeded_stream, shuffle};

use crate::learner::check_model;
use crate::sample::{SampleView, sample_width};
use crate::{Learner, LearnerError, LocalStep, Model, Update, UpdateBody};

/// Least-squares linear regression `y ~ w . x + b` trained by parallel SGD.
///
/// Parameters: `[w_1, ..., w_d, b]`. Records: regression samples ([`crate::sample`]).
/// Loss: the mean squared error. Choice: the master weights each worker's model by the number
/// of points it trained on (equal to Zinkevich et al.'s plain average when batches are
/// balanced, and right when they are not).
#[derive(Clone, Debug, PartialEq)]
pub struct LinearRegressionPsgd {
    features: usize,
    step_size: f64,
    local_passes: usize,
}

impl LinearRegressionPsgd {
    /// `features` inputs, SGD step size `step_size`, `local_passes` passes over the batch per epoch.
    pub fn new(features: usize, step_size: f64, local_passes: usize) -> Result<Self, LearnerError> {
        if features == 0 {
            return Err(LearnerError::InvalidParameter(
                "linear regression needs at least one feature".into(),
            ));
        }
        if !(step_size > 0.0 && step_size.is_finite()) {
            return Err(LearnerError::InvalidParameter(format!(
                "step size must be positive, got {step_size}"
            )));
        }
        if local_passes == 0 {
            return Err(LearnerError::InvalidParameter("at least one local pass".into()));
        }
        if features >= crate::MAX_PARAMETERS {
            return Err(LearnerError::InvalidParameter(format!(
                "{features} features exceed the {} model parameters a learner takes",
                crate::MAX_PARAMETERS
            )));
        }
        Ok(LinearRegressionPsgd { features, step_size, local_passes })
    }

    /// The model's predictions `w . x + b` for every row of `inputs` (`samples x features`).
    pub fn predict(&self, model: &Model, inputs: ArrayView2<'_, f64>) -> Result<Array1<f64>, LearnerError> {
        check_model(model, self.parameter_count())?;
        if inputs.ncols() != self.features {
            return Err(LearnerError::InvalidParameter(format!(
                "inputs have {} features, the model {}",
                inputs.ncols(),
                self.features
            )));
        }
        let (w, b) = model.params.split_at(self.features);
        Ok(inputs
            .rows()
            .into_iter()
            .map(|x| x.iter().zip(w).map(|(a, w)| a * w).sum::<f64>() + b[0])
            .collect())
    }
}

impl Learner for LinearRegressionPsgd {
    fn name(&self) -> &'static str {
        "linear-regression-psgd"
    }

    fn record_width(&self) -> usize {
        sample_width(self.features)
    }

    fn parameter_count(&self) -> usize {
        self.features + 1
    }

    fn initial_model(&self, _seed: u64) -> Model {
        Model::new(vec![0.0; self.features + 1])
    }

    fn local_update(&self, model: &Model, batch: &[&[u8]], step: LocalStep) -> Result<Update, LearnerError> {
        check_model(model, self.parameter_count())?;
        let views = batch.iter().map(|r| SampleView::new(r, self.features)).collect::<Result<Vec<_>, _>>()?;
        let mut x = model.params.clone();
        let mut order: Vec<usize> = (0..views.len()).collect();
        let mut rng = seeded_stream(step.seed.wrapping_add(step.epoch as u64), 1 + step.worker as u64);
        for _ in 0..self.local_passes {
            shuffle(&mut rng, &mut order);
            for &i in &order {
                let v = &views[i];
                let residual = v.linear(&x) - v.label();
                let g = self.step_size * residual;
                for (w, f) in x.iter_mut().zip(v.features()) {
                    *w -= g * f;
                }
                x[self.features] -= g;
            }
        }
        Ok(Update { points: batch.len() as u64, body: UpdateBody::Dense(x) })
    }

    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError> {
        check_model(model, self.parameter_count())?;
        let mut sum = vec![0.0; self.parameter_count()];
        let mut weight = 0.0;
        for u in updates {
            let UpdateBody::Dense(x) = &u.body else {
                return Err(LearnerError::Malformed {
                    what: "update",
                    reason: "expected a dense model".into(),
                });
            };
            if x.len() != sum.len() {
                return Err(LearnerError::Malformed {
                    what: "update",
                    reason: format!("{} parameters, expected {}", x.len(), sum.len()),
                });
            }
            let w = u.points as f64;
            for (s, v) in sum.iter_mut().zip(x) {
                *s += w * v;
            }
            weight += w;
        }
        if weight == 0.0 {
            return Ok(model.clone());
        }
        Ok(Model::new(sum.into_iter().map(|s| s / weight).collect()))
    }

    fn loss(&self, model: &Model, points: &[&[u8]]) -> Result<f64, LearnerError> {
        check_model(model, self.parameter_count())?;
        let mut total = 0.0;
        for r in points {
            let v = SampleView::new(r, self.features)?;
            total += (v.linear(&model.params) - v.label()).powi(2);
        }
        Ok(if points.is_empty() { 0.0 } else { total / points.len() as f64 })
    }
}
