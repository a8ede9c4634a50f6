#![doc = include_str!("../README.md")]

pub mod data;
pub mod epochs;
mod error;
pub mod gradient_coding;
mod learner;
mod matrix_completion;
mod matrix_completion_rows;
mod model;
mod psgd;
pub mod sample;
pub mod straggler;

pub use error::LearnerError;
pub use learner::{Learner, LocalStep, MAX_PARAMETERS, Received};
pub use matrix_completion::{MatrixCompletionParams, MatrixCompletionSgd};
pub use matrix_completion_rows::MatrixCompletionRowsSgd;
pub use model::{Model, Update, UpdateBody};
pub use psgd::LinearRegressionPsgd;
pub use straggler::{IterationOutcome, StragglerModel};
