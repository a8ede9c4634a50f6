//! [`RunSpec::check`]: every setting of a run validated once, the dependent defaults filled in,
//! and the epoch loop's own check ([`RunConfig::check`]) said in terms of the settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ubershuffle_core::epoch_chain::{ChainError, check_scheme};
use ubershuffle_core::exchange_policy::{ExchangePolicy, PolicyError};
use ubershuffle_core::pliable::Randomness;
use ubershuffle_core::{PlannerOptions, ShufflePlanner, cache_size_for};
use ubershuffle_learners::MatrixCompletionParams;
use ubershuffle_planners::planner_by_name;

use super::{DataSpec, GivenData, LearnerSettings, RunSpec, Setting, SpecError, StragglerSpec, defaults};
use crate::{CheckedRunConfig, ConfigError, LearnerSpec, RunConfig};

/// Where the scheme comes from.
#[derive(Clone)]
#[non_exhaustive]
pub enum SchemeChoice {
    /// A built-in planner, built once by the check and used by the run.
    Builtin(Arc<dyn ShufflePlanner>),
    /// A plugin library, and the scheme's name if given (loaded by
    /// [`prepare`](CheckedSpec::prepare)).
    Plugin(PathBuf, Option<String>),
}

impl SchemeChoice {
    /// The built-in scheme's name (`None` for a plugin, whose name is known once loaded).
    pub fn builtin_name(&self) -> Option<&str> {
        match self {
            SchemeChoice::Builtin(planner) => Some(planner.name()),
            SchemeChoice::Plugin(..) => None,
        }
    }
}

impl std::fmt::Debug for SchemeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemeChoice::Builtin(planner) => write!(f, "Builtin({})", planner.name()),
            SchemeChoice::Plugin(path, name) => write!(f, "Plugin({}, {name:?})", path.display()),
        }
    }
}

/// A [`RunSpec`] that passed [`RunSpec::check`]: the epoch loop's configuration and what the
/// run is made of, ready for [`prepare`](CheckedSpec::prepare).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CheckedSpec {
    /// The spec with the dependent defaults filled in (alpha, scheme, candidates, noise,
    /// step size).
    pub spec: RunSpec,
    /// The epoch loop's configuration, checked against the data's size.
    pub config: CheckedRunConfig,
    /// The data.
    pub data: DataSpec,
    /// The scheme.
    pub scheme: SchemeChoice,
    /// A default chosen that changes what the run measures: the setting (alpha) and what was
    /// chosen, in words that follow its name.
    pub chosen: Option<(Setting, String)>,
}

impl RunSpec {
    /// Checks every setting once, fills in the defaults that depend on others, and checks the
    /// epoch loop's configuration against the data's size. Nothing is built or read.
    pub fn check(&self) -> Result<CheckedSpec, SpecError> {
        self.check_with(|s| learner(&mut s.learner))
    }

    /// [`check`](RunSpec::check) for a run that trains `learner` on records the caller gives
    /// (an experiment's data set, records read from files) instead of the synthetic data of
    /// the spec's [`learner`](RunSpec::learner) settings, which are not used. Refuses records
    /// the learner cannot read.
    pub fn check_given(&self, learner: LearnerSpec, data: GivenData) -> Result<CheckedSpec, SpecError> {
        self.check_with(|_| {
            let invalid =
                |e: ubershuffle_learners::LearnerError| SpecError::new(Setting::Learner, e.to_string());
            let width = learner.build().map_err(invalid)?.record_width();
            let given = data.data();
            let train = given.train.fixed();
            if train.is_none() && width != 0 {
                return Err(SpecError::new(
                    Setting::Learner,
                    format!(
                        "{learner:?} reads records of {width} bytes; the training records are of any size"
                    ),
                ));
            }
            for (what, records) in
                train.into_iter().map(|t| ("training", t)).chain([("held-out", &given.held_out)])
            {
                if records.width() != width && !records.is_empty() {
                    return Err(SpecError::new(
                        Setting::Learner,
                        format!(
                            "{learner:?} reads records of {width} bytes; the {what} records have {}",
                            records.width()
                        ),
                    ));
                }
            }
            Ok((DataSpec::Given(data), learner))
        })
    }

    /// The checks, with the learner and its data from `learner`.
    fn check_with(
        &self,
        learner: impl FnOnce(&mut RunSpec) -> Result<(DataSpec, LearnerSpec), SpecError>,
    ) -> Result<CheckedSpec, SpecError> {
        let mut s = self.clone();
        let workers = at_least_one(Setting::Workers, s.workers)?;
        if workers > defaults::MAX_WORKERS {
            let most = defaults::MAX_WORKERS;
            return Err(SpecError::new(
                Setting::Workers,
                format!("{workers}: runs take at most {most} workers (as far as the planners are tested)"),
            ));
        }
        let (data, learner) = learner(&mut s)?;
        let points = data.training_points();
        let alpha = *s.alpha.get_or_insert(defaults::alpha(workers));
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(SpecError::new(Setting::Alpha, format!("must lie in (0, 1], got {alpha}")));
        }
        let policy = ExchangePolicy::of(s.policy, s.fraction).map_err(policy_problem)?;
        s.stragglers
            .build(workers, s.seed)
            .map_err(|e| SpecError::new(Setting::Stragglers, format!("{}: {e}", s.stragglers)))?;
        let deadline = s.deadline.map(|d| seconds(Setting::Deadline, d)).transpose()?;
        if deadline.is_none() && s.stragglers != StragglerSpec::None {
            return Err(SpecError::new(Setting::Stragglers, format!("{} needs ", s.stragglers))
                .then_setting(Setting::Deadline)
                .then(" (how long the master waits for updates)"));
        }
        if s.resume && s.checkpoint.is_none() {
            return Err(SpecError::new(Setting::Resume, "needs ")
                .then_setting(Setting::Checkpoint)
                .then(" (the run to continue)"));
        }
        let budget = s
            .time_budget
            .map_or(Ok(PlannerOptions::default().time_budget), |b| seconds(Setting::TimeBudget, b))?;
        let scheme = scheme(&mut s, policy, budget)?;
        let mut config = RunConfig::new(workers, cache_size_for(alpha, points), learner)
            .with_epochs(s.epochs)
            .with_seed(s.seed)
            .with_policy(policy)
            .with_chunk_bytes(s.chunk_bytes)
            .with_plan_budget(budget);
        (config.deadline, config.checkpoint, config.candidates) =
            (deadline, s.checkpoint.clone(), s.candidates);
        let config = config.check(points).map_err(|e| in_settings(e, alpha))?;
        let chosen = self.alpha.is_none().then(|| {
            let cache = config.cache_capacity;
            let text = format!(
                "not given: alpha = {alpha} (2/n, at most 1/2), each worker caches {cache} of the {points} points"
            );
            (Setting::Alpha, text)
        });
        Ok(CheckedSpec { spec: s, config, data, scheme, chosen })
    }
}

fn at_least_one(setting: Setting, v: usize) -> Result<usize, SpecError> {
    if v == 0 {
        return Err(SpecError::new(setting, "must be at least 1"));
    }
    Ok(v)
}

fn positive(setting: Setting, v: f64) -> Result<f64, SpecError> {
    if !(v > 0.0 && v.is_finite()) {
        return Err(SpecError::new(setting, format!("must be a positive number, got {v}")));
    }
    Ok(v)
}

fn non_negative(setting: Setting, v: f64) -> Result<f64, SpecError> {
    if !(v >= 0.0 && v.is_finite()) {
        return Err(SpecError::new(setting, format!("must be a non-negative number, got {v}")));
    }
    Ok(v)
}

/// The longest wait a run takes: 10^9 s.
const MAX_SECONDS: f64 = 1e9;

/// A positive number of seconds, at most [`MAX_SECONDS`].
pub(crate) fn seconds(setting: Setting, v: f64) -> Result<Duration, SpecError> {
    if !(v > 0.0 && v <= MAX_SECONDS) {
        return Err(SpecError::new(
            setting,
            format!("must be a positive number of seconds, at most {MAX_SECONDS:e}, got {v}"),
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// The learner and its data, the learner's defaults filled in.
fn learner(settings: &mut LearnerSettings) -> Result<(DataSpec, LearnerSpec), SpecError> {
    let invalid = |e: ubershuffle_learners::LearnerError| SpecError::new(Setting::Learner, e.to_string());
    match settings {
        LearnerSettings::Linreg { points, features, local_passes, noise, step_size } => {
            let noise = non_negative(Setting::Noise, *noise.get_or_insert(defaults::LINREG_NOISE))?;
            let step_size =
                positive(Setting::StepSize, *step_size.get_or_insert(defaults::LINREG_STEP_SIZE))?;
            let points = at_least_one(Setting::Points, *points)?;
            let features = at_least_one(Setting::Features, *features)?;
            let local_passes = at_least_one(Setting::LocalPasses, *local_passes)?;
            let spec = LearnerSpec::LinearRegression { features, step_size, local_passes };
            spec.build().map_err(invalid)?;
            Ok((DataSpec::LinearRegression { points, features, noise }, spec))
        }
        LearnerSettings::Matcomp {
            rows,
            cols,
            rank,
            ratings_per_row,
            regularization,
            init_scale,
            noise,
            step_size,
        } => {
            let noise = non_negative(Setting::Noise, *noise.get_or_insert(defaults::MATCOMP_NOISE))?;
            let step_size =
                positive(Setting::StepSize, *step_size.get_or_insert(defaults::MATCOMP_STEP_SIZE))?;
            let (rows, cols) = (at_least_one(Setting::Rows, *rows)?, at_least_one(Setting::Cols, *cols)?);
            let rank = at_least_one(Setting::Rank, *rank)?;
            let per_row = at_least_one(Setting::RatingsPerRow, *ratings_per_row)?;
            if per_row > cols {
                return Err(SpecError::new(
                    Setting::RatingsPerRow,
                    format!("{per_row} exceeds the {cols} columns"),
                ));
            }
            let params = MatrixCompletionParams::new(rows, cols, rank, step_size)
                .with_regularization(non_negative(Setting::Regularization, *regularization)?)
                .with_init_scale(non_negative(Setting::InitScale, *init_scale)?);
            params.check().map_err(invalid)?;
            let data = DataSpec::MatrixCompletion { rows, cols, rank, per_row, noise };
            if u32::try_from(data.training_points()).is_err() {
                return Err(SpecError::new(
                    Setting::Rows,
                    format!("{rows} x {per_row} ratings exceed the u32 point ids"),
                ));
            }
            Ok((data, LearnerSpec::MatrixCompletion(params)))
        }
    }
}

/// The scheme: a plugin (loaded by [`prepare`](CheckedSpec::prepare)), or a built-in checked
/// by name now and against the policy and candidates by the epoch chain's rule.
fn scheme(s: &mut RunSpec, policy: ExchangePolicy, budget: Duration) -> Result<SchemeChoice, SpecError> {
    if let Some(path) = &s.plugin {
        return Ok(SchemeChoice::Plugin(path.clone(), s.scheme.clone()));
    }
    let name = s.scheme.get_or_insert_with(|| defaults::SCHEME.into()).clone();
    let options = PlannerOptions::default().with_time_budget(budget);
    let planner: Arc<dyn ShufflePlanner> = planner_by_name(&name, &options)
        .map_err(|e| {
            SpecError::new(Setting::Scheme, format!("'{name}': known schemes are {}", e.known.join(", ")))
        })?
        .into();
    check_scheme(planner.as_ref(), policy, s.candidates).map_err(|e| match e {
        ChainError::CandidatesNeedPliable { scheme } => SpecError::new(
            Setting::Candidates,
            format!("applies to the pliable schemes (pliable-greedy, pliable-hierarchical), not {scheme}"),
        ),
        ChainError::PliablePolicy { scheme, policy } => {
            SpecError::new(Setting::Policy, format!("{policy}: "))
                .then_setting(Setting::Scheme)
                .then(format!(" {scheme} chooses the next assignment itself; it takes "))
                .then_setting(Setting::Policy)
                .then(" global")
        }
        other => SpecError::new(Setting::Scheme, other.to_string()),
    })?;
    if planner.as_pliable().is_some() {
        s.candidates.get_or_insert(Randomness::DEFAULT);
    }
    Ok(SchemeChoice::Builtin(planner))
}

/// The policy's refusal, said in terms of the settings.
fn policy_problem(e: PolicyError) -> SpecError {
    match e {
        PolicyError::MissingFraction => SpecError::new(Setting::Policy, "partial-local needs ")
            .then_setting(Setting::Fraction)
            .then(", the share Q in [0, 1] of each worker's points exchanged per epoch"),
        PolicyError::UnexpectedFraction { policy, .. } => {
            SpecError::new(Setting::Fraction, format!("applies only to partial-local, not {policy}"))
        }
        PolicyError::FractionOutOfRange(q) => {
            SpecError::new(Setting::Fraction, format!("must lie in [0, 1], got {q}"))
        }
        other => SpecError::new(Setting::Policy, other.to_string()),
    }
}

/// The epoch loop's check ([`RunConfig::check`], the one place a configuration is validated)
/// said in terms of the settings.
fn in_settings(e: ConfigError, alpha: f64) -> SpecError {
    match e {
        ConfigError::WorkersForPoints { workers, points } => SpecError::new(
            Setting::Workers,
            format!("{workers}: {points} training points cannot be split among {workers} workers"),
        ),
        ConfigError::CacheSize { cache, batch, points } if cache < batch => SpecError::new(
            Setting::Alpha,
            format!(
                "{alpha} caches {cache} points, less than a batch ({batch} = q/n); use {:.4} or more",
                batch as f64 / points as f64
            ),
        ),
        ConfigError::ZeroChunk => SpecError::new(Setting::ChunkBytes, "must be at least 1"),
        ConfigError::NoEpochs => SpecError::new(Setting::Epochs, "must be at least 1"),
        other => SpecError::new(Setting::Alpha, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(edit: impl FnOnce(&mut RunSpec)) -> (Setting, String) {
        let mut spec = RunSpec::default();
        edit(&mut spec);
        match spec.check() {
            Ok(_) => (Setting::Seed, "accepted".into()),
            Err(e) => (e.setting(), e.to_string()),
        }
    }

    #[test]
    fn defaults_check_and_say_what_they_chose() -> Result<(), SpecError> {
        let checked = RunSpec::default().check()?;
        assert_eq!(
            (checked.config.workers, checked.config.epochs, checked.config.cache_capacity),
            (4, 5, 2000)
        );
        assert_eq!(checked.scheme.builtin_name(), Some("coded"));
        assert!(checked.chosen.is_some_and(|(s, c)| s == Setting::Alpha && c.contains("alpha = 0.5")));
        let two = RunSpec { workers: 2, ..RunSpec::default() }.check()?;
        assert_eq!(two.config.cache_capacity, 2000, "half of the 4000 points, not all of them");
        let given = RunSpec { alpha: Some(0.3), ..RunSpec::default() }.check()?;
        assert!(given.chosen.is_none());
        Ok(())
    }

    #[test]
    fn every_problem_names_its_setting() {
        type Edit = Box<dyn FnOnce(&mut RunSpec)>;
        let cases: Vec<(Edit, Setting, &str)> = vec![
            (Box::new(|s| s.workers = 0), Setting::Workers, "at least 1"),
            (Box::new(|s| s.workers = 5000), Setting::Workers, "at most 1024"),
            (Box::new(|s| s.alpha = Some(0.1)), Setting::Alpha, "less than a batch"),
            (Box::new(|s| s.alpha = Some(1.5)), Setting::Alpha, "(0, 1]"),
            (Box::new(|s| s.stragglers = StragglerSpec::Iid(0.2)), Setting::Stragglers, "needs deadline"),
            (Box::new(|s| s.resume = true), Setting::Resume, "needs checkpoint"),
            (Box::new(|s| s.scheme = Some("magic".into())), Setting::Scheme, "known schemes are"),
            (Box::new(|s| s.candidates = Some(Randomness::All)), Setting::Candidates, "pliable"),
            (
                Box::new(|s| s.policy = ubershuffle_core::exchange_policy::PolicyKind::PartialLocal),
                Setting::Policy,
                "fraction",
            ),
            (Box::new(|s| s.chunk_bytes = 0), Setting::ChunkBytes, "at least 1"),
            (Box::new(|s| s.epochs = 0), Setting::Epochs, "at least 1"),
            (Box::new(|s| s.deadline = Some(-1.0)), Setting::Deadline, "positive"),
            (Box::new(|s| s.time_budget = Some(0.0)), Setting::TimeBudget, "positive"),
            (
                Box::new(|s| {
                    s.learner = LearnerSettings::Linreg {
                        points: 3,
                        features: 2,
                        local_passes: 1,
                        noise: None,
                        step_size: None,
                    }
                }),
                Setting::Workers,
                "cannot be split among 4 workers",
            ),
        ];
        for (edit, setting, want) in cases {
            let (got, text) = problem(edit);
            assert!(
                got == setting && text.contains(want) && !text.contains('\n'),
                "{got:?} {text:?}, want {setting:?} {want:?}"
            );
        }
    }

    #[test]
    fn given_data_is_checked_against_its_learner_and_shared() -> Result<(), Box<dyn std::error::Error>> {
        let data = DataSpec::LinearRegression { points: 400, features: 3, noise: 0.1 }.build(5)?;
        let learner = LearnerSpec::LinearRegression { features: 3, step_size: 0.01, local_passes: 1 };
        let spec = RunSpec { alpha: Some(0.5), time_budget: Some(2.0), ..RunSpec::default() };
        let checked = spec.check_given(learner, GivenData::new(std::sync::Arc::clone(&data)))?;
        assert_eq!((checked.config.points(), checked.config.cache_capacity), (400, 200));
        assert_eq!(checked.config.plan_budget, Duration::from_secs(2));
        let prepared = checked.prepare()?;
        assert!(std::sync::Arc::ptr_eq(&prepared.data, &data), "given records are shared, not copied");
        let wider = LearnerSpec::LinearRegression { features: 4, step_size: 0.01, local_passes: 1 };
        let e = spec.check_given(wider, GivenData::new(data)).err().ok_or("accepted")?;
        assert_eq!(e.setting(), Setting::Learner);
        assert!(e.to_string().contains("records of 40 bytes; the training records have 32"), "{e}");
        Ok(())
    }
}
