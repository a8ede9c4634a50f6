//! What the workers compute.
//!
//! This crate will hold the `Learner` trait (local work on a worker's points from the current
//! model, aggregation at the master, held-out loss) with linear regression by parallel SGD,
//! low-rank matrix completion by distributed SGD and gradient-coded gradient descent, the data
//! sets and loaders they train on, and the `StragglerModel` trait with its models (none, i.i.d.,
//! heterogeneous slow/active classes, shifted exponential, two-state Markov). Not built yet: see
//! the learners and gradient-coding issue.
