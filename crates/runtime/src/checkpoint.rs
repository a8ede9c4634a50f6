//! [`Checkpoint`]: the master's state after a completed epoch, written atomically, so that a
//! run can resume from the last completed epoch.

use std::path::Path;

use serde::{Deserialize, Serialize};

use ubershuffle_core::epoch_chain::ChainState;
use ubershuffle_core::limits::Limits;

use crate::files::{Access, write_atomic};
use crate::{EpochMetrics, RuntimeError};

/// Everything the master needs to go on after the chain's completed epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Describes the run's configuration; a resume with another configuration is refused.
    pub fingerprint: String,
    /// The model's parameters.
    pub model: Vec<f64>,
    /// Epochs completed, every worker's batch and cache (empty for a lost worker).
    #[serde(flatten)]
    pub chain: ChainState,
    /// Which workers are still in the run.
    pub alive: Vec<bool>,
    /// The metrics of the completed epochs.
    pub metrics: Vec<EpochMetrics>,
}

impl Checkpoint {
    /// Writes the checkpoint through a temporary file and a rename, readable by its owner only
    /// ([`crate::files`]).
    pub fn save(&self, path: &Path) -> Result<(), RuntimeError> {
        let fail = |reason: String| RuntimeError::Checkpoint { path: path.display().to_string(), reason };
        let json = serde_json::to_vec(self).map_err(|e| fail(e.to_string()))?;
        write_atomic(path, &json, Access::Private).map_err(|e| fail(e.to_string()))
    }

    /// Reads a checkpoint of at most the input cap ([`ubershuffle_core::limits`]: 256 MiB, or
    /// `UBERSHUFFLE_MAX_INPUT_BYTES`).
    pub fn load(path: &Path) -> Result<Checkpoint, RuntimeError> {
        let fail = |reason: String| RuntimeError::Checkpoint { path: path.display().to_string(), reason };
        let limits = Limits::from_env().map_err(|e| fail(e.to_string()))?;
        let bytes = limits.read(path).map_err(|e| fail(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("malformed: {e}")))
    }

    /// Checks that the checkpoint fits a run of `workers` workers over `points` points with a
    /// model of `parameters` values (a file edited by hand, or from another build, may not):
    /// one batch, cache and flag per worker, every id a point, the model of the right size.
    pub fn check_shape(&self, workers: usize, points: usize, parameters: usize) -> Result<(), String> {
        self.chain.check_shape(workers, points)?;
        if self.alive.len() != workers {
            return Err(format!("it has {} liveness flags for {workers} workers", self.alive.len()));
        }
        if self.model.len() != parameters {
            return Err(format!("its model has {} values, the learner {parameters}", self.model.len()));
        }
        if self.metrics.len() != self.chain.completed_epochs {
            return Err(format!(
                "it records {} epochs' metrics for {} completed epochs",
                self.metrics.len(),
                self.chain.completed_epochs
            ));
        }
        Ok(())
    }
}
