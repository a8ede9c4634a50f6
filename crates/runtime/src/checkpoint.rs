//! [`Checkpoint`]: the master's state after a completed epoch, written atomically, so that a
//! run can resume from the last completed epoch; [`ResumePoint`]: a checkpoint found to be of
//! this run, the one place a resume is matched.

use std::path::Path;

use serde::{Deserialize, Serialize};

use ubershuffle_core::epoch_chain::ChainState;
use ubershuffle_core::limits::Limits;

use crate::config::CheckedRunConfig;
use crate::files::{Access, write_atomic};
use crate::fingerprint::RunFingerprint;
use crate::{EpochMetrics, RuntimeError};

/// Everything the master needs to go on after the chain's completed epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// What decides the run's numbers; a resume with another fingerprint is refused
    /// ([`ResumePoint::check`]).
    pub fingerprint: RunFingerprint,
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

/// A checkpoint matched to a run: the same fingerprint, the right shape, no more epochs done
/// than the run asks for. Made only by [`ResumePoint::check`]; a
/// [`Master`](crate::Master) resumes from it with [`Master::resuming`](crate::Master::resuming).
#[derive(Clone, Debug)]
pub struct ResumePoint {
    checkpoint: Checkpoint,
}

impl ResumePoint {
    /// Matches `checkpoint` (read from `path`, for the errors) to a run of `config` with
    /// fingerprint `fingerprint` and a model of `parameters` values.
    pub fn check(
        checkpoint: Checkpoint,
        path: &std::path::Path,
        fingerprint: &RunFingerprint,
        config: &CheckedRunConfig,
        parameters: usize,
    ) -> Result<ResumePoint, RuntimeError> {
        let fail = |reason: String| RuntimeError::Checkpoint { path: path.display().to_string(), reason };
        if let Some(diff) = fingerprint.difference(&checkpoint.fingerprint) {
            return Err(fail(format!("it belongs to another run ({diff})")));
        }
        checkpoint.check_shape(config.workers, config.points(), parameters).map_err(fail)?;
        let done = checkpoint.chain.completed_epochs;
        if done > config.epochs {
            return Err(fail(format!(
                "{done} epochs are done already, more than the {} asked for",
                config.epochs
            )));
        }
        Ok(ResumePoint { checkpoint })
    }

    /// Reads the checkpoint at `path` (once) and matches it to a run of `config` with
    /// fingerprint `fingerprint` ([`ResumePoint::check`]).
    pub fn load(
        path: &Path,
        fingerprint: &RunFingerprint,
        config: &CheckedRunConfig,
    ) -> Result<ResumePoint, RuntimeError> {
        let parameters = config.learner.build()?.parameter_count();
        ResumePoint::check(Checkpoint::load(path)?, path, fingerprint, config, parameters)
    }

    /// The matched checkpoint (its metrics are the completed epochs').
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The checkpoint itself.
    pub fn into_checkpoint(self) -> Checkpoint {
        self.checkpoint
    }
}
