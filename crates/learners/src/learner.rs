//! [`Learner`]: what a worker computes on its current data points, and how the master
//! combines the results.

use crate::{LearnerError, Model, Update};

/// Where a worker's local work sits in a run (for its seeded randomness).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalStep {
    /// The epoch (iteration of the master's loop), from 0.
    pub epoch: usize,
    /// The worker, from 0.
    pub worker: usize,
    /// The run's seed.
    pub seed: u64,
}

/// The updates the master aggregates in one epoch, with who sent them.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    /// The epoch, from 1.
    pub epoch: usize,
    /// The worker (from 0) of each update, increasing.
    pub workers: &'a [usize],
    /// The updates, `updates[k]` from `workers[k]`.
    pub updates: &'a [Update],
}

/// A distributed learner, in the shape of the epoch loop: the master holds a [`Model`] and
/// sends it (as bytes) to the workers; each worker trains on the records it holds this epoch
/// (the data shuffle changes them every epoch) and returns an [`Update`] (as bytes); the master
/// aggregates the updates that arrived before the deadline (stragglers are simply absent) and
/// measures the loss on held-out records.
///
/// Records are fixed-width byte strings whose layout the learner defines (see
/// [`crate::sample`]). Every method is deterministic given its inputs, so a run reproduces
/// under a seed.
pub trait Learner: Send + Sync {
    /// A short name for tables.
    fn name(&self) -> &'static str;

    /// Bytes per data record.
    fn record_width(&self) -> usize;

    /// Number of model parameters.
    fn parameter_count(&self) -> usize;

    /// The master's starting model, drawn from `seed`.
    fn initial_model(&self, seed: u64) -> Model;

    /// A worker's local work on `batch` (its records this epoch) starting from `model`.
    fn local_update(&self, model: &Model, batch: &[&[u8]], step: LocalStep) -> Result<Update, LearnerError>;

    /// The master's next model from the updates that arrived (possibly none).
    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError>;

    /// The master's next model when it matters which workers' updates arrived, and in which
    /// epoch (a gradient code decodes the roles of the workers it heard from). By default
    /// [`Learner::aggregate`] of the updates alone.
    fn aggregate_received(&self, model: &Model, received: &Received<'_>) -> Result<Model, LearnerError> {
        self.aggregate(model, received.updates)
    }

    /// The batches (point ids, sorted) every worker must hold in `epoch` (from 1), when the
    /// learner dictates them instead of the run's exchange policy (a gradient code's roles:
    /// which partitions, with which coefficients, each worker computes on). `None` by default:
    /// the policy draws them. The runtime delivers a dictated assignment like any other, by the
    /// run's shuffling scheme.
    fn assignment(&self, epoch: usize) -> Option<Vec<Vec<u32>>> {
        let _ = epoch;
        None
    }

    /// The loss of `model` on `points` (held-out data), in the learner's own units.
    fn loss(&self, model: &Model, points: &[&[u8]]) -> Result<f64, LearnerError>;
}

/// Checks that `model` has the learner's parameter count.
pub(crate) fn check_model(model: &Model, expected: usize) -> Result<(), LearnerError> {
    if model.params.len() != expected {
        return Err(LearnerError::Malformed {
            what: "model",
            reason: format!("{} parameters, the learner has {expected}", model.params.len()),
        });
    }
    Ok(())
}

/// The most model parameters a learner takes (2^27 f64s, 1 GiB): checked when it is built, so a
/// model never costs more, and a request past it is an error, not an allocation failure.
pub const MAX_PARAMETERS: usize = 1 << 27;
