//! [`CheckedSpec::prepare`]: a checked run's parts built once (the planner, the straggler
//! model, the data, the checkpoint to resume from) with the run's [`RunFingerprint`].

use std::sync::Arc;

use ubershuffle_core::ShufflePlanner;
use ubershuffle_core::epoch_chain::check_scheme;
use ubershuffle_core::limits::{LimitError, Limits, instance_bytes};
use ubershuffle_learners::{LearnerError, StragglerModel};
use ubershuffle_plugin_host::{PluginError, PluginLibrary};

use super::{CheckedSpec, DataSpec, ResumePoint, RunFingerprint, SchemeChoice, Setting, SpecError};
use crate::{Checkpoint, RunData, RuntimeError};

/// What a run is made of, built by [`CheckedSpec::prepare`].
#[non_exhaustive]
pub struct PreparedRun {
    /// The shuffling scheme.
    pub planner: Arc<dyn ShufflePlanner>,
    /// Who straggles.
    pub stragglers: Box<dyn StragglerModel>,
    /// The training and held-out records (given records are shared, not copied).
    pub data: Arc<RunData>,
    /// What decides the run's numbers: the checkpoint carries it, and so should any summary.
    pub fingerprint: RunFingerprint,
    /// The checkpoint to continue from, matched to this run (with `resume`).
    pub resume: Option<ResumePoint>,
}

/// Why a checked run could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// A setting the checks could not judge without building (a plugin's scheme against the
    /// policy).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The plugin library could not give the scheme.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The run would pass the memory cap.
    #[error(transparent)]
    Memory(#[from] LimitError),
    /// The data could not be generated.
    #[error("generating the data: {0}")]
    Data(LearnerError),
    /// The straggler model or the learner could not be built.
    #[error(transparent)]
    Learner(#[from] LearnerError),
    /// The checkpoint to resume from could not be read or is not of this run.
    #[error(transparent)]
    Resume(#[from] RuntimeError),
}

impl CheckedSpec {
    /// Builds the run's parts: takes the built-in scheme the check built (or loads the
    /// plugin's and checks it against the policy and candidates), checks the memory cap
    /// ([`Limits`]) before generating the data, builds the straggler model, and with `resume`
    /// reads the checkpoint once and matches it to this run.
    pub fn prepare(&self) -> Result<PreparedRun, PrepareError> {
        let planner: Arc<dyn ShufflePlanner> = match &self.scheme {
            SchemeChoice::Builtin(planner) => Arc::clone(planner),
            SchemeChoice::Plugin(path, name) => {
                let planner = Arc::new(PluginLibrary::load(path)?.planner(name.as_deref())?);
                check_scheme(planner.as_ref(), self.config.policy, self.config.candidates)
                    .map_err(|e| SpecError::new(Setting::Plugin, e.to_string()))?;
                planner
            }
        };
        let learner = self.config.learner.build()?;
        self.check_memory(learner.record_width())?;
        let data = self.data.build(self.config.seed).map_err(PrepareError::Data)?;
        let stragglers = self.spec.stragglers.build(self.config.workers, self.config.seed)?;
        let fingerprint = RunFingerprint::of(&self.config, planner.name(), &data);
        let resume = match self.config.checkpoint.as_ref().filter(|_| self.spec.resume) {
            Some(path) => {
                let saved = Checkpoint::load(path)?;
                let parameters = learner.parameter_count();
                Some(ResumePoint::check(saved, path, &fingerprint, &self.config, parameters)?)
            }
            None => None,
        };
        Ok(PreparedRun { planner, stragglers, data, fingerprint, resume })
    }

    /// Refuses a run whose synthetic data would pass the memory cap, before generating it: the records
    /// (generated, split and encoded: about three copies), the workers' caches (in-process,
    /// all of them live in this process) and one epoch's instance, for records of `width`
    /// bytes.
    fn check_memory(&self, width: usize) -> Result<(), PrepareError> {
        if let DataSpec::Given(_) = self.data {
            // Nothing to generate: the caller holds the records already, and the caches live
            // where the workers do.
            return Ok(());
        }
        let limits = Limits::from_env()?;
        let width = width as u64;
        let (q, held) = (self.data.training_points() as u64, self.data.held_out() as u64);
        let (n, s) = (self.config.workers as u64, self.config.cache_capacity as u64);
        let records = q.saturating_add(held).saturating_mul(width).saturating_mul(3);
        let caches = n.saturating_mul(s).saturating_mul(width);
        let instance = instance_bytes(self.config.workers, self.config.points(), self.config.cache_capacity);
        let what = format!("a run of {q} points of {width} bytes on {n} workers");
        Ok(limits.check_memory(&what, records.saturating_add(caches).saturating_add(instance))?)
    }
}
