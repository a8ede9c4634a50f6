//! [`LearnerSpec`]: which learner a run trains, in a form the master can send to workers that
//! run in other processes.

use learners::{Learner, LearnerError, LinearRegressionPsgd, MatrixCompletionParams};
use shuffle_core::wire::{ByteReader, push_f64, push_u32};

use crate::RuntimeError;

/// A learner and its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
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
}

impl LearnerSpec {
    /// The learner.
    pub fn build(&self) -> Result<Box<dyn Learner>, LearnerError> {
        Ok(match *self {
            LearnerSpec::LinearRegression { features, step_size, local_passes } => {
                Box::new(LinearRegressionPsgd::new(features, step_size, local_passes)?)
            }
            LearnerSpec::MatrixCompletion(params) => Box::new(params.check()?),
        })
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
                push_u32(out, p.rows as u32);
                push_u32(out, p.cols as u32);
                push_u32(out, p.rank as u32);
                push_f64(out, p.step_size);
                push_f64(out, p.regularization);
                push_f64(out, p.init_scale);
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
            2 => Ok(LearnerSpec::MatrixCompletion(MatrixCompletionParams {
                rows: r.u32()? as usize,
                cols: r.u32()? as usize,
                rank: r.u32()? as usize,
                step_size: r.f64()?,
                regularization: r.f64()?,
                init_scale: r.f64()?,
            })),
            other => Err(RuntimeError::Protocol(format!("unknown learner kind {other}"))),
        }
    }
}
