//! [`LearnerSpec`]: which learner a run trains, in a form the master can send to workers that
//! run in other processes.

use ubershuffle_core::wire::{ByteReader, push_f64, push_u32};
use ubershuffle_learners::gradient_coding::learner::CodedDescentParams;
use ubershuffle_learners::sample::RatingRowView;
use ubershuffle_learners::{
    Learner, LearnerError, LinearRegressionPsgd, MatrixCompletionParams, MatrixCompletionRowsSgd,
};

use crate::{ProtocolError, RuntimeError};

#[path = "learner_spec_gc.rs"]
mod gradient_coding;

/// A learner and its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum LearnerSpec {
    /// Linear regression by parallel SGD (Zinkevich et al.): local SGD, then averaging.
    LinearRegression {
        /// Input features per sample.
        features: usize,
        /// SGD step size.
        step_size: f64,
        /// Passes over the local batch per epoch.
        local_passes: usize,
    },
    /// Low-rank matrix completion by distributed SGD on rating triples (Recht and Ré).
    MatrixCompletion(MatrixCompletionParams),
    /// Low-rank matrix completion by distributed SGD where a data point is one user's row of
    /// up to `slots` observed ratings (the UberShuffle paper's layout).
    MatrixCompletionRows {
        /// The model and SGD hyper-parameters.
        params: MatrixCompletionParams,
        /// Entry slots per record.
        slots: usize,
    },
    /// Gradient-coded full-gradient descent under stragglers: a worker's batch is the role it
    /// plays (see [`ubershuffle_learners::gradient_coding::learner`]).
    GradientCoding(CodedDescentParams),
}

impl LearnerSpec {
    /// The learner.
    pub fn build(&self) -> Result<Box<dyn Learner>, LearnerError> {
        Ok(match *self {
            LearnerSpec::LinearRegression { features, step_size, local_passes } => {
                Box::new(LinearRegressionPsgd::new(features, step_size, local_passes)?)
            }
            LearnerSpec::MatrixCompletion(params) => Box::new(params.check()?),
            LearnerSpec::MatrixCompletionRows { params, slots } => {
                Box::new(MatrixCompletionRowsSgd::new(params, slots)?)
            }
            LearnerSpec::GradientCoding(params) => Box::new(params.build()?),
        })
    }

    /// The learner's kind, as a cost model names it: `linear-regression`,
    /// `matrix-completion` or `gradient-coding`.
    pub fn kind(&self) -> &'static str {
        match self {
            LearnerSpec::LinearRegression { .. } => "linear-regression",
            LearnerSpec::MatrixCompletion(_) | LearnerSpec::MatrixCompletionRows { .. } => {
                "matrix-completion"
            }
            LearnerSpec::GradientCoding(_) => "gradient-coding",
        }
    }

    /// Multiply-adds one sample (a record) costs in one SGD step or one loss term: the
    /// features and the label, or each rating's dot product and step over the rank.
    fn per_sample(&self) -> u64 {
        match *self {
            LearnerSpec::LinearRegression { features, .. } => features as u64 + 1,
            LearnerSpec::MatrixCompletion(p) => 4 * p.rank as u64,
            LearnerSpec::MatrixCompletionRows { params, slots } => 4 * (params.rank * slots) as u64,
            LearnerSpec::GradientCoding(p) => p.features as u64 + 1,
        }
    }

    /// Multiply-adds of one local update over `points` records (what a cost model prices
    /// training by).
    pub fn update_work(&self, points: usize) -> u64 {
        let passes = match *self {
            LearnerSpec::LinearRegression { local_passes, .. } => local_passes as u64,
            _ => 1,
        };
        passes * points as u64 * self.per_sample()
    }

    /// Multiply-adds of the loss over `records` (what a cost model prices it by): per sample its
    /// features and label, per rating its prediction's dot product over the rank. A user row
    /// counts the ratings it holds, not its slots (held-out rows hold a few ratings in slots
    /// sized for training rows).
    pub fn loss_work(&self, records: &[&[u8]]) -> u64 {
        match *self {
            LearnerSpec::LinearRegression { features, .. } => records.len() as u64 * (features as u64 + 1),
            LearnerSpec::GradientCoding(p) => records.len() as u64 * (p.features as u64 + 1),
            LearnerSpec::MatrixCompletion(p) => records.len() as u64 * (p.rank as u64 + 1),
            LearnerSpec::MatrixCompletionRows { params, slots } => {
                let ratings: u64 =
                    records.iter().map(|r| RatingRowView::new(r, slots).map_or(0, |v| v.len() as u64)).sum();
                ratings * (params.rank as u64 + 1)
            }
        }
    }

    /// Appends the byte form.
    pub fn write(&self, out: &mut Vec<u8>) {
        match *self {
            LearnerSpec::LinearRegression { features, step_size, local_passes } => {
                out.push(1);
                push_u32(out, features as u32);
                push_f64(out, step_size);
                push_u32(out, local_passes as u32);
            }
            LearnerSpec::MatrixCompletion(p) => {
                out.push(2);
                write_matrix_params(out, &p);
            }
            LearnerSpec::MatrixCompletionRows { params, slots } => {
                out.push(3);
                write_matrix_params(out, &params);
                push_u32(out, slots as u32);
            }
            LearnerSpec::GradientCoding(p) => {
                out.push(4);
                gradient_coding::write(out, &p);
            }
        }
    }

    /// Reads the byte form.
    pub fn read(r: &mut ByteReader<'_>) -> Result<Self, RuntimeError> {
        match r.take(1)?[0] {
            1 => Ok(LearnerSpec::LinearRegression {
                features: r.u32()? as usize,
                step_size: r.f64()?,
                local_passes: r.u32()? as usize,
            }),
            2 => Ok(LearnerSpec::MatrixCompletion(read_matrix_params(r)?)),
            3 => Ok(LearnerSpec::MatrixCompletionRows {
                params: read_matrix_params(r)?,
                slots: r.u32()? as usize,
            }),
            4 => Ok(LearnerSpec::GradientCoding(gradient_coding::read(r)?)),
            other => Err(ProtocolError::UnknownKind { what: "learner", kind: other }.into()),
        }
    }
}

fn write_matrix_params(out: &mut Vec<u8>, p: &MatrixCompletionParams) {
    push_u32(out, p.rows as u32);
    push_u32(out, p.cols as u32);
    push_u32(out, p.rank as u32);
    push_f64(out, p.step_size);
    push_f64(out, p.regularization);
    push_f64(out, p.init_scale);
}

fn read_matrix_params(r: &mut ByteReader<'_>) -> Result<MatrixCompletionParams, RuntimeError> {
    let (rows, cols, rank) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
    let (step_size, regularization, init_scale) = (r.f64()?, r.f64()?, r.f64()?);
    Ok(MatrixCompletionParams::new(rows, cols, rank, step_size)
        .with_regularization(regularization)
        .with_init_scale(init_scale))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_learner_spec_round_trips_through_bytes() {
        let params =
            MatrixCompletionParams::new(30, 20, 3, 0.05).with_regularization(0.001).with_init_scale(0.3);
        for spec in [
            LearnerSpec::LinearRegression { features: 5, step_size: 0.01, local_passes: 2 },
            LearnerSpec::MatrixCompletion(params),
            LearnerSpec::MatrixCompletionRows { params, slots: 12 },
            LearnerSpec::GradientCoding(
                CodedDescentParams::new(
                    4,
                    ubershuffle_learners::gradient_coding::glm::GlmLoss::Logistic,
                    ubershuffle_gradient_codes::GradientCodeKind::CrcExact,
                    (6, 3),
                    0.5,
                    60,
                )
                .with_shuffle(ubershuffle_gradient_codes::RoleShuffle::Random)
                .with_seed(9),
            ),
        ] {
            let mut bytes = Vec::new();
            spec.write(&mut bytes);
            assert_eq!(LearnerSpec::read(&mut ByteReader::new(&bytes, "learner")).unwrap(), spec);
            assert!(spec.build().is_ok());
        }
        let rows = LearnerSpec::MatrixCompletionRows { params, slots: 12 }.build().unwrap();
        assert_eq!(rows.record_width(), 8 + 12 * 12);
    }
}
