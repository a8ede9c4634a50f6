//! [`Checkpoint`]: the master's state after a completed epoch, written atomically, so that a
//! run can resume from the last completed epoch.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use ubershuffle_core::epoch_chain::ChainState;
use ubershuffle_core::limits::Limits;

use crate::spec::RunFingerprint;
use crate::{EpochMetrics, RuntimeError};

/// Everything the master needs to go on after the chain's completed epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// What decides the run's numbers; a resume with another fingerprint is refused
    /// ([`ResumePoint::check`](crate::spec::ResumePoint::check)).
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
    /// Writes the checkpoint through a temporary file and a rename.
    pub fn save(&self, path: &Path) -> Result<(), RuntimeError> {
        let fail = |reason: String| RuntimeError::Checkpoint { path: path.display().to_string(), reason };
        let json = serde_json::to_vec(self).map_err(|e| fail(e.to_string()))?;
        write_atomically(path, &json).map_err(|e| fail(e.to_string()))
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

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a half-written file behind. The error names the path.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_through_temporary(path, bytes)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

fn write_through_temporary(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
