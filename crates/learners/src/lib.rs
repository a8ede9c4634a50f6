//! What the workers compute: learners, data, straggler models and gradient-coded descent.
//!
//! - [`Learner`]: local work on a worker's current records from the master's [`Model`] giving
//!   an [`Update`], aggregation of the updates that arrived, held-out loss. Implemented by
//!   [`LinearRegressionPsgd`] (parallel SGD, local SGD then averaging),
//!   [`MatrixCompletionSgd`] (distributed SGD on rating triples) and [`MatrixCompletionRowsSgd`]
//!   (the same on user rows, the UberShuffle paper's data points); [`epochs`] is an in-process
//!   reference epoch loop that reassigns the data every epoch.
//! - [`data`]: seeded synthetic data, the CSV tables shipped in `data/`, a MovieLens loader.
//! - [`straggler`]: [`StragglerModel`] and its models (none, i.i.d., heterogeneous slow/active
//!   classes, shifted exponential compute times, two-state Markov).
//! - [`gradient_coding`]: gradient-coded gradient descent for linear and logistic regression
//!   with FRC/CRC codes and shuffled worker roles, run on real threads, and the expected
//!   decoding error three ways (theorems, exact enumeration, Monte Carlo).
//!
//! Records are fixed-width byte strings ([`sample`] gives the layouts), the same bytes the
//! shuffle moves; models and updates have byte forms for the wire.

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
pub use learner::{Learner, LocalStep, MAX_PARAMETERS};
pub use matrix_completion::{MatrixCompletionParams, MatrixCompletionSgd};
pub use matrix_completion_rows::MatrixCompletionRowsSgd;
pub use model::{Model, Update, UpdateBody};
pub use psgd::LinearRegressionPsgd;
pub use straggler::{IterationOutcome, StragglerModel};
