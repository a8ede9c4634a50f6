//! Generalised linear losses on sample records: least squares and logistic.

use crate::LearnerError;
use crate::sample::{SampleView, sample_width};

/// The loss of a linear model `z = w . x + b` (parameters `[w..., b]`) on a labelled sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GlmLoss {
    /// `(z - y)^2 / 2` (linear regression).
    LeastSquares,
    /// `log(1 + e^z) - y z` with `y` in {0, 1} (logistic regression).
    Logistic,
}

impl GlmLoss {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            GlmLoss::LeastSquares => "least-squares",
            GlmLoss::Logistic => "logistic",
        }
    }

    fn value(self, z: f64, y: f64) -> f64 {
        match self {
            GlmLoss::LeastSquares => 0.5 * (z - y).powi(2),
            // log(1 + e^z) computed without overflow.
            GlmLoss::Logistic => z.max(0.0) + (-z.abs()).exp().ln_1p() - y * z,
        }
    }

    /// `d loss / d z`.
    fn slope(self, z: f64, y: f64) -> f64 {
        match self {
            GlmLoss::LeastSquares => z - y,
            GlmLoss::Logistic => 1.0 / (1.0 + (-z).exp()) - y,
        }
    }

    /// The sum over `records` of the loss's gradient at `params` (a partial gradient `g_j`
    /// when `records` is partition `j`).
    pub fn gradient_sum(self, params: &[f64], records: &[&[u8]]) -> Result<Vec<f64>, LearnerError> {
        let d = params.len().saturating_sub(1);
        let mut g = vec![0.0; params.len()];
        for r in records {
            let v = SampleView::new(r, d)?;
            let slope = self.slope(v.linear(params), v.label());
            for (gi, x) in g.iter_mut().zip(v.features()) {
                *gi += slope * x;
            }
            g[d] += slope;
        }
        Ok(g)
    }

    /// The mean loss over `records` (0 for none).
    pub fn mean_loss(self, params: &[f64], records: &[&[u8]]) -> Result<f64, LearnerError> {
        let d = params.len().saturating_sub(1);
        let mut total = 0.0;
        for r in records {
            let v = SampleView::new(r, d)?;
            total += self.value(v.linear(params), v.label());
        }
        Ok(if records.is_empty() { 0.0 } else { total / records.len() as f64 })
    }

    /// Plain full-batch gradient descent from zero, in one thread: `iterations` steps of
    /// `params -= step_size * gradient / N`. The reference (no stragglers, no code) that
    /// executed runs are compared with.
    pub fn descend(
        self,
        records: &[&[u8]],
        features: usize,
        step_size: f64,
        iterations: usize,
    ) -> Result<Vec<f64>, LearnerError> {
        let mut params = vec![0.0; features + 1];
        let n = records.len().max(1) as f64;
        for _ in 0..iterations {
            let g = self.gradient_sum(&params, records)?;
            for (p, gi) in params.iter_mut().zip(g) {
                *p -= step_size * gi / n;
            }
        }
        Ok(params)
    }

    /// Record width for `features` features (see [`crate::sample`]).
    pub fn record_width(features: usize) -> usize {
        sample_width(features)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::encode_sample;

    #[test]
    fn gradients_match_finite_differences() {
        let recs: Vec<Vec<u8>> = vec![
            encode_sample(&[1.0, -0.5], 1.0),
            encode_sample(&[0.3, 2.0], 0.0),
            encode_sample(&[-1.2, 0.1], 1.0),
        ];
        let views: Vec<&[u8]> = recs.iter().map(Vec::as_slice).collect();
        let params = [0.4, -0.3, 0.1];
        for loss in [GlmLoss::LeastSquares, GlmLoss::Logistic] {
            let g = loss.gradient_sum(&params, &views).unwrap();
            for k in 0..3 {
                let h = 1e-6;
                let mut plus = params;
                plus[k] += h;
                let mut minus = params;
                minus[k] -= h;
                let numeric = 3.0
                    * (loss.mean_loss(&plus, &views).unwrap() - loss.mean_loss(&minus, &views).unwrap())
                    / (2.0 * h);
                assert!((numeric - g[k]).abs() < 1e-6, "{loss:?} k={k}: {numeric} vs {}", g[k]);
            }
        }
        assert!(GlmLoss::Logistic.mean_loss(&[0.0, 0.0, 800.0], &views).unwrap().is_finite());
    }
}
