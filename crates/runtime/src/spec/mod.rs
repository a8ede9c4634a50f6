//! [`RunSpec`]: one run of the epoch loop as data (serde), the one thing every front end
//! builds (the command line's flags and `--config` file, Python, tests), with every default
//! written here once. [`RunSpec::check`] validates it once and says what it chose;
//! [`CheckedSpec::prepare`] builds the parts (planner, straggler model, data, the resumed
//! checkpoint) and the run's one [`RunFingerprint`], which both the checkpoint and a front
//! end's summary carry.

mod check;
mod data;
mod prepare;
mod setting;
mod stragglers;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use ubershuffle_core::exchange_policy::PolicyKind;
use ubershuffle_core::pliable::Randomness;

pub use crate::checkpoint::ResumePoint;
pub use crate::fingerprint::RunFingerprint;
pub use check::{CheckedSpec, SchemeChoice};
pub use data::{DataSpec, GivenData};
pub use prepare::{PrepareError, PreparedRun};
pub use setting::{Setting, SpecError};
pub use stragglers::StragglerSpec;

/// The defaults of a [`RunSpec`], for front ends that show them (a flag's `--help`).
pub mod defaults {
    /// Workers.
    pub const WORKERS: usize = 4;
    /// Epochs.
    pub const EPOCHS: usize = 5;
    /// The scheme when neither a scheme nor a plugin is named.
    pub const SCHEME: &str = "coded";
    /// Linear regression's training points.
    pub const POINTS: usize = 4000;
    /// Linear regression's input features.
    pub const FEATURES: usize = 10;
    /// Linear regression's passes over the local batch per epoch.
    pub const LOCAL_PASSES: usize = 1;
    /// Linear regression's label noise.
    pub const LINREG_NOISE: f64 = 0.1;
    /// Linear regression's SGD step size.
    pub const LINREG_STEP_SIZE: f64 = 0.001;
    /// Matrix completion's rows (users).
    pub const ROWS: usize = 300;
    /// Matrix completion's columns (items).
    pub const COLS: usize = 200;
    /// Matrix completion's rank.
    pub const RANK: usize = 3;
    /// Matrix completion's observed entries per row.
    pub const RATINGS_PER_ROW: usize = 40;
    /// Matrix completion's l2 penalty.
    pub const REGULARIZATION: f64 = 0.001;
    /// Matrix completion's initial factor scale.
    pub const INIT_SCALE: f64 = 0.3;
    /// Matrix completion's entry noise.
    pub const MATCOMP_NOISE: f64 = 0.05;
    /// Matrix completion's SGD step size.
    pub const MATCOMP_STEP_SIZE: f64 = 0.05;
    /// The most workers a run takes: as far as the planners `uncoded`, `clique-cover` and
    /// `auto` are tested (the straggler models and the epoch loop have no limit of their own).
    pub const MAX_WORKERS: usize = 1024;

    /// The storage ratio when none is given: twice the batch (2/n, the UberShuffle paper's
    /// smallest setting), at most half the data, so that every run has something to shuffle
    /// (at 2/n with 2 workers, each would cache everything and send nothing).
    pub fn alpha(workers: usize) -> f64 {
        (2.0 / workers.max(1) as f64).min(0.5)
    }
}

/// What the workers train, with its synthetic data's settings; `None`s take the learner's
/// defaults ([`defaults`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum LearnerSettings {
    /// Linear regression by parallel SGD on `points` seeded samples.
    #[serde(rename_all = "kebab-case")]
    Linreg {
        /// Training points q (plus q/4 held out for the loss).
        points: usize,
        /// Input features.
        features: usize,
        /// Passes over the local batch per epoch.
        local_passes: usize,
        /// Label noise.
        noise: Option<f64>,
        /// SGD step size.
        step_size: Option<f64>,
    },
    /// Low-rank matrix completion by SGD on a seeded `rows x cols` matrix.
    #[serde(rename_all = "kebab-case")]
    Matcomp {
        /// Rows (users).
        rows: usize,
        /// Columns (items).
        cols: usize,
        /// Rank of the matrix and of the factors.
        rank: usize,
        /// Observed entries per row (10 % held out).
        ratings_per_row: usize,
        /// l2 penalty.
        regularization: f64,
        /// Initial factor scale.
        init_scale: f64,
        /// Entry noise.
        noise: Option<f64>,
        /// SGD step size.
        step_size: Option<f64>,
    },
}

impl LearnerSettings {
    /// Linear regression with every default.
    pub fn linreg() -> LearnerSettings {
        LearnerSettings::Linreg {
            points: defaults::POINTS,
            features: defaults::FEATURES,
            local_passes: defaults::LOCAL_PASSES,
            noise: None,
            step_size: None,
        }
    }

    /// Matrix completion with every default.
    pub fn matcomp() -> LearnerSettings {
        LearnerSettings::Matcomp {
            rows: defaults::ROWS,
            cols: defaults::COLS,
            rank: defaults::RANK,
            ratings_per_row: defaults::RATINGS_PER_ROW,
            regularization: defaults::REGULARIZATION,
            init_scale: defaults::INIT_SCALE,
            noise: None,
            step_size: None,
        }
    }
}

impl Default for LearnerSettings {
    fn default() -> Self {
        LearnerSettings::linreg()
    }
}

/// One run of the epoch loop: build with [`RunSpec::default`] (or from TOML or JSON; missing
/// keys take the defaults) and change what differs, then [`check`](RunSpec::check) it.
///
/// ```
/// use ubershuffle_runtime::spec::{RunSpec, Setting};
/// let spec: RunSpec = toml::from_str("workers = 8\nalpha = 0.3\nepochs = 2").unwrap();
/// let checked = spec.check().unwrap();
/// assert_eq!((checked.config.workers, checked.config.cache_capacity), (8, 1200));
/// let bad: RunSpec = toml::from_str("alpha = 1.5").unwrap();
/// assert_eq!(bad.check().unwrap_err().setting(), Setting::Alpha);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct RunSpec {
    /// Workers n (at most [`defaults::MAX_WORKERS`]).
    pub workers: usize,
    /// Epochs to run.
    pub epochs: usize,
    /// Storage ratio: each worker caches `floor(alpha q)` points (`None`: [`defaults::alpha`]).
    pub alpha: Option<f64>,
    /// How batches change between epochs.
    pub policy: PolicyKind,
    /// partial-local's fraction of each worker's points exchanged per epoch.
    pub fraction: Option<f64>,
    /// The scheme (`None`: [`defaults::SCHEME`], or the plugin's only scheme).
    pub scheme: Option<String>,
    /// A plugin library to take the scheme from.
    pub plugin: Option<PathBuf>,
    /// A pliable scheme's randomness constraint (`None` with a pliable scheme:
    /// [`Randomness::DEFAULT`]); refused with other schemes.
    pub candidates: Option<Randomness>,
    /// What the workers train, and its data.
    pub learner: LearnerSettings,
    /// Who straggles.
    pub stragglers: StragglerSpec,
    /// Seconds the master waits for updates once every worker holds its packets (needed with
    /// stragglers; `None`: wait for every live worker).
    pub deadline: Option<f64>,
    /// Seed of the data and of every random choice.
    pub seed: u64,
    /// Seconds of search a planner may spend on an epoch, counted in work units so that plans
    /// repeat exactly (`None`: the planners' default, 10 s).
    pub time_budget: Option<f64>,
    /// Largest payload of one data message, in bytes.
    pub chunk_bytes: usize,
    /// Write a checkpoint here after every epoch.
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint.
    pub resume: bool,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            workers: defaults::WORKERS,
            epochs: defaults::EPOCHS,
            alpha: None,
            policy: PolicyKind::default(),
            fraction: None,
            scheme: None,
            plugin: None,
            candidates: None,
            learner: LearnerSettings::default(),
            stragglers: StragglerSpec::None,
            deadline: None,
            seed: 0,
            time_budget: None,
            chunk_bytes: crate::RunConfig::DEFAULT_CHUNK_BYTES,
            checkpoint: None,
            resume: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_round_trips_through_json_reads_toml_and_refuses_unknown_keys() -> Result<(), String> {
        let spec = RunSpec {
            workers: 6,
            alpha: Some(0.4),
            policy: PolicyKind::PartialLocal,
            fraction: Some(0.3),
            candidates: Some(Randomness::All),
            learner: LearnerSettings::matcomp(),
            stragglers: StragglerSpec::Iid(0.1),
            deadline: Some(0.5),
            ..RunSpec::default()
        };
        let json = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        assert_eq!(serde_json::from_str::<RunSpec>(&json).map_err(|e| e.to_string())?, spec);
        let read: RunSpec = toml::from_str(
            "policy = \"local\"\n[learner]\nkind = \"linreg\"\npoints = 80\nfeatures = 3\nlocal-passes = 2\n",
        )
        .map_err(|e| e.to_string())?;
        assert_eq!(read.policy, PolicyKind::Local);
        assert!(matches!(read.learner, LearnerSettings::Linreg { points: 80, noise: None, .. }));
        for bad in ["wrokers = 4", "stragglers = \"often\"", "candidates = 0", "[learner]\nkind = \"svm\""] {
            assert!(toml::from_str::<RunSpec>(bad).is_err(), "{bad}");
        }
        Ok(())
    }
}
