//! `ubershuffle run`'s settings, typed and defaulted by clap (flags over a `--config` file,
//! see [`crate::config_file`]), turned into what a run needs ([`Resolved`]): the defaults that
//! depend on other settings, the checks that span several flags, and the epoch loop's own
//! check ([`RunConfig::check`]). Every bad value is a one-line error naming the flag.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use ubershuffle_core::epoch_chain::{ChainError, check_scheme};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;
use ubershuffle_core::{PlannerOptions, cache_size_for};
use ubershuffle_learners::MatrixCompletionParams;
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::{CheckedRunConfig, ConfigError, LearnerSpec, RunConfig};
use ubershuffle_transport::BroadcastMethod;
use ubershuffle_transport::in_process::LinkShaping;

use super::specs::{DataSpec, KillSpec, StragglerSpec};
use crate::cli::{BroadcastKind, LearnerKind, RunSettings, TransportKind};
use crate::commands::master::seconds;

/// Where the scheme comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum SchemeChoice {
    /// A built-in planner.
    Builtin(String),
    /// A plugin library, and the scheme's name if given.
    Plugin(PathBuf, Option<String>),
}

/// Everything a run needs, checked.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The settings with every default filled in, for the JSON echo (no secrets).
    pub echo: Value,
    /// The keys of the echo that decide a run's numbers (compared on `--resume`).
    pub identity: Value,
    /// The transport.
    pub transport: TransportKind,
    /// In-process link shaping.
    pub shaping: Option<LinkShaping>,
    /// How broadcasts travel (in-process and TCP).
    pub broadcast: BroadcastMethod,
    /// The data.
    pub data: DataSpec,
    /// The epoch loop's configuration, checked against the data's size.
    pub config: CheckedRunConfig,
    /// Who straggles.
    pub stragglers: StragglerSpec,
    /// The scheme.
    pub scheme: SchemeChoice,
    /// The timeout of every wait.
    pub timeout: Duration,
    /// TCP: how long workers may take to join.
    pub join_timeout: Duration,
    /// TCP: the fewest workers to start with at the join timeout (`--min-workers`, else all).
    pub min_workers: usize,
    /// TCP: where to listen, and the token (its `Debug` shows none).
    pub listen: Option<(String, crate::token::ClusterKey)>,
    /// Fault injection.
    pub kill: Option<KillSpec>,
    /// `--out DIR`.
    pub out: Option<PathBuf>,
    /// `--force`: replace an earlier run in `--out DIR`.
    pub force: bool,
    /// `--json`.
    pub json: bool,
}

/// The most workers a run takes: as far as the planners `uncoded`, `clique-cover` and `auto`
/// are tested (the straggler models and the epoch loop have no limit of their own).
const MAX_WORKERS: usize = 1024;
/// Workers when `--workers` is not given (outside MPI).
const DEFAULT_WORKERS: usize = 4;

/// The learner-dependent defaults: (noise, step size).
fn learner_defaults(learner: LearnerKind) -> (f64, f64) {
    match learner {
        LearnerKind::Linreg => (0.1, 0.001),
        LearnerKind::Matcomp => (0.05, 0.05),
    }
}

/// Echo keys that do not change a run's numbers: a resumed run may change them.
const NOT_IDENTITY: &[&str] = &[
    "epochs",
    "out",
    "kill-worker",
    "timeout",
    "join-timeout",
    "min-workers",
    "listen",
    "transport",
    "bandwidth",
    "broadcast",
    "chunk-bytes",
];

/// Flags (clap ids) that only one learner takes.
const LINREG_ONLY: &[&str] = &["points", "features", "local_passes"];
const MATCOMP_ONLY: &[&str] = &["rows", "cols", "rank", "ratings_per_row", "regularization", "init_scale"];

fn positive(flag: &str, v: f64) -> anyhow::Result<f64> {
    if !(v > 0.0 && v.is_finite()) {
        bail!("{flag} must be a positive number, got {v}");
    }
    Ok(v)
}

fn non_negative(flag: &str, v: f64) -> anyhow::Result<f64> {
    if !(v >= 0.0 && v.is_finite()) {
        bail!("{flag} must be a non-negative number, got {v}");
    }
    Ok(v)
}

fn at_least_one(flag: &str, v: usize) -> anyhow::Result<usize> {
    if v == 0 {
        bail!("{flag} must be at least 1");
    }
    Ok(v)
}

/// The long flag of a clap id (`step_size` -> `--step-size`).
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

impl RunSettings {
    /// Whether the flag with clap id `id` was given (on the command line or in the config).
    fn given(&self, id: &str) -> bool {
        self.given.iter().any(|g| g == id)
    }

    /// Fills in the dependent defaults and checks everything. `mpi_ranks` is the size of the
    /// MPI job when running under mpirun.
    pub fn resolve(&self, mpi_ranks: Option<usize>) -> anyhow::Result<Resolved> {
        let mut s = self.clone();
        let workers = match (s.transport, mpi_ranks, s.workers) {
            (TransportKind::Mpi, Some(ranks), Some(n)) if n + 1 != ranks => {
                bail!("--workers {n} needs {} MPI ranks (mpirun -np {}), the job has {ranks}", n + 1, n + 1)
            }
            (TransportKind::Mpi, Some(ranks), None) => ranks.saturating_sub(1),
            (_, _, n) => n.unwrap_or(DEFAULT_WORKERS),
        };
        s.workers = Some(at_least_one("--workers", workers)?);
        if workers > MAX_WORKERS {
            bail!(
                "--workers {workers}: runs take at most {MAX_WORKERS} workers (as far as the planners are tested)"
            );
        }
        let (data, learner) = resolve_learner(&mut s)?;
        let points = data.training_points();
        let alpha_given = s.alpha.is_some();
        let alpha = *s.alpha.get_or_insert(default_alpha(workers));
        if !(alpha > 0.0 && alpha <= 1.0) {
            bail!("--alpha must lie in (0, 1], got {alpha}");
        }
        let policy = ExchangePolicy::of(s.policy.into(), s.fraction).context("--policy")?;
        let (transport, broadcast) = resolve_transport(&mut s)?;
        s.stragglers.build(workers, s.seed).context("--stragglers")?;
        let deadline = s.deadline.map(|d| seconds("--deadline", d)).transpose()?;
        if deadline.is_none() && !s.stragglers.is_none() {
            bail!(
                "--stragglers {} needs --deadline SECONDS (how long the master waits for updates)",
                s.stragglers
            );
        }
        let kill = s.kill_worker.map(|k| k.within(workers)).transpose().map_err(anyhow::Error::msg)?;
        let checkpoint = s.out.as_ref().map(|dir| dir.join("checkpoint.json"));
        if s.resume {
            let Some(path) = &checkpoint else { bail!("--resume needs --out DIR (the run to continue)") };
            if !path.exists() {
                bail!("--resume: {} does not exist (no completed epoch to resume from)", path.display());
            }
        }
        let scheme = resolve_scheme(&mut s, policy)?;
        let mut config = RunConfig::new(workers, cache_size_for(alpha, points), learner)
            .with_epochs(s.epochs)
            .with_seed(s.seed)
            .with_policy(policy)
            .with_chunk_bytes(s.chunk_bytes);
        (config.deadline, config.checkpoint, config.resume) = (deadline, checkpoint, s.resume);
        config.candidates = s.candidates;
        let config = config.check(points).map_err(|e| explain(e, alpha))?;
        let (mut echo, identity) = echo(&s, &data, config.cache_capacity)?;
        if !alpha_given {
            echo["chosen"] = alpha_chosen(alpha, config.cache_capacity, points).into();
        }
        Ok(Resolved {
            echo,
            identity,
            transport,
            shaping: s.bandwidth.0,
            broadcast,
            data,
            config,
            stragglers: s.stragglers,
            scheme,
            timeout: seconds("--timeout", s.timeout)?,
            join_timeout: seconds("--join-timeout", s.join_timeout)?,
            min_workers: min_workers(&s, workers)?,
            listen: match &s.listen {
                Some(addr) => Some((addr.clone(), s.token.require()?)),
                None => None,
            },
            kill,
            out: s.out.clone(),
            force: s.force,
            json: s.json,
        })
    }
}

/// What a run that chose alpha says it chose (a default that changes what it measures): in the
/// summary table and as `config.chosen` in the JSON.
fn alpha_chosen(alpha: f64, cache: usize, points: usize) -> String {
    format!(
        "--alpha not given: alpha = {alpha} (2/n, at most 1/2), each worker caches {cache} of the {points} points"
    )
}

/// The storage ratio when `--alpha` is not given: twice the batch (2/n, the UberShuffle
/// paper's smallest setting), at most half the data, so that every run has something to
/// shuffle (at 2/n with 2 workers, each would cache everything and send nothing).
fn default_alpha(workers: usize) -> f64 {
    (2.0 / workers as f64).min(0.5)
}

/// The epoch loop's check (the one place a run's settings are validated, `RunConfig::check`),
/// said in terms of the flags.
fn explain(e: ConfigError, alpha: f64) -> anyhow::Error {
    match e {
        ConfigError::WorkersForPoints { workers, points } => {
            anyhow::anyhow!("{points} training points cannot be split among {workers} workers")
        }
        ConfigError::CacheSize { cache, batch, points } if cache < batch => anyhow::anyhow!(
            "--alpha {alpha} caches {cache} points, less than a batch ({batch} = q/n); use --alpha {:.4} or more",
            batch as f64 / points as f64
        ),
        ConfigError::ZeroChunk => anyhow::anyhow!("--chunk-bytes must be at least 1"),
        ConfigError::NoEpochs => anyhow::anyhow!("--epochs must be at least 1"),
        other => anyhow::Error::new(other),
    }
}

/// `--min-workers`: tcp only, between 1 and `--workers`; all of them when not given.
fn min_workers(s: &RunSettings, workers: usize) -> anyhow::Result<usize> {
    match s.min_workers {
        None => Ok(workers),
        Some(_) if s.transport != TransportKind::Tcp => {
            bail!("--min-workers applies only to --transport tcp")
        }
        Some(n) if (1..=workers).contains(&n) => Ok(n),
        Some(n) => bail!("--min-workers must be between 1 and --workers {workers}, got {n}"),
    }
}

/// The transport's flags: which apply, and the broadcast method.
fn resolve_transport(s: &mut RunSettings) -> anyhow::Result<(TransportKind, BroadcastMethod)> {
    let transport = s.transport;
    if s.bandwidth.0.is_some() && transport != TransportKind::Inproc {
        bail!("--bandwidth shapes in-process links only; tcp and mpi run at the real network's rate");
    }
    let broadcast = match (transport, s.broadcast) {
        (TransportKind::Mpi, Some(_)) => {
            bail!("--broadcast does not apply to mpi (it broadcasts with MPI_Bcast)")
        }
        (TransportKind::Mpi, None) => BroadcastMethod::PseudoBroadcast,
        (_, kind) => s.broadcast.get_or_insert(kind.unwrap_or(BroadcastKind::PseudoBroadcast)).method(),
    };
    match (transport, s.listen.is_some(), s.token.given()) {
        (TransportKind::Tcp, true, _) | (TransportKind::Inproc | TransportKind::Mpi, false, false) => {}
        (TransportKind::Tcp, _, _) => bail!("--transport tcp needs --listen ADDR"),
        _ => bail!("--listen and the token flags apply only to --transport tcp"),
    }
    if transport != TransportKind::Tcp && s.given("join_timeout") {
        bail!("--join-timeout applies only to --transport tcp");
    }
    if s.kill_worker.is_some() && transport == TransportKind::Mpi {
        bail!("--kill-worker is not available under mpi: a rank that leaves ends the whole MPI job");
    }
    Ok((transport, broadcast))
}

/// The learner and its data.
fn resolve_learner(s: &mut RunSettings) -> anyhow::Result<(DataSpec, LearnerSpec)> {
    let (others, wrong, name) = match s.learner {
        LearnerKind::Linreg => (MATCOMP_ONLY, "matcomp", "linreg"),
        LearnerKind::Matcomp => (LINREG_ONLY, "linreg", "matcomp"),
    };
    if let Some(id) = others.iter().find(|id| s.given(id)) {
        bail!("{} applies to --learner {wrong}, not {name}", flag(id));
    }
    let (noise, step_size) = learner_defaults(s.learner);
    let noise = non_negative("--noise", *s.noise.get_or_insert(noise))?;
    let step_size = positive("--step-size", *s.step_size.get_or_insert(step_size))?;
    if s.learner == LearnerKind::Linreg {
        let points = at_least_one("--points", s.points)?;
        let features = at_least_one("--features", s.features)?;
        let local_passes = at_least_one("--local-passes", s.local_passes)?;
        let spec = LearnerSpec::LinearRegression { features, step_size, local_passes };
        spec.build().context("--learner linreg")?;
        return Ok((DataSpec::LinearRegression { points, features, noise }, spec));
    }
    let (rows, cols) = (at_least_one("--rows", s.rows)?, at_least_one("--cols", s.cols)?);
    let rank = at_least_one("--rank", s.rank)?;
    let per_row = at_least_one("--ratings-per-row", s.ratings_per_row)?;
    if per_row > cols {
        bail!("--ratings-per-row {per_row} exceeds the {cols} columns");
    }
    let params = MatrixCompletionParams::new(rows, cols, rank, step_size)
        .with_regularization(non_negative("--regularization", s.regularization)?)
        .with_init_scale(non_negative("--init-scale", s.init_scale)?);
    params.check().context("--learner matcomp")?;
    let data = DataSpec::MatrixCompletion { rows, cols, rank, per_row, noise };
    if u32::try_from(data.training_points()).is_err() {
        bail!("{rows} x {per_row} ratings exceed the u32 point ids");
    }
    Ok((data, LearnerSpec::MatrixCompletion(params)))
}

/// The scheme: a plugin, or a built-in checked by name now (and against the policy and
/// candidates, by the epoch chain's rule).
fn resolve_scheme(s: &mut RunSettings, policy: ExchangePolicy) -> anyhow::Result<SchemeChoice> {
    if let Some(path) = &s.plugin {
        return Ok(SchemeChoice::Plugin(path.clone(), s.scheme.clone()));
    }
    let name = s.scheme.get_or_insert_with(|| "coded".into()).clone();
    let planner = match planner_by_name(&name, &PlannerOptions::default()) {
        Ok(planner) => planner,
        Err(e) => bail!("invalid value '{name}' for '--scheme': known schemes are {}", e.known.join(", ")),
    };
    check_scheme(planner.as_ref(), policy, s.candidates).map_err(in_flags)?;
    if planner.as_pliable().is_some() {
        s.candidates.get_or_insert(Randomness::DEFAULT);
    }
    Ok(SchemeChoice::Builtin(name))
}

/// The epoch chain's refusal of a scheme, said in terms of the flags.
fn in_flags(e: ChainError) -> anyhow::Error {
    match e {
        ChainError::CandidatesNeedPliable { scheme } => anyhow::anyhow!(
            "--candidates applies to the pliable schemes (pliable-greedy, pliable-hierarchical), not {scheme}"
        ),
        ChainError::PliablePolicy { scheme, policy } => anyhow::anyhow!(
            "--scheme {scheme} chooses the next assignment itself: it takes --policy global, not {policy}"
        ),
        other => other.into(),
    }
}

/// The settings as JSON (the token left out, the data sizes added) and the part of it that
/// decides the numbers. Flags of the other learner are left out.
fn echo(s: &RunSettings, data: &DataSpec, cache_capacity: usize) -> anyhow::Result<(Value, Value)> {
    let Value::Object(mut map) = serde_json::to_value(s)? else { bail!("settings are not a map") };
    let others = if s.learner == LearnerKind::Linreg { MATCOMP_ONLY } else { LINREG_ONLY };
    map.retain(|k, _| !others.iter().any(|id| id.replace('_', "-") == *k));
    map.insert("training-points".into(), data.training_points().into());
    map.insert("held-out-points".into(), data.held_out().into());
    map.insert("cache-capacity".into(), cache_capacity.into());
    let mut identity: Map<String, Value> = map.clone();
    identity.retain(|k, _| !NOT_IDENTITY.contains(&k.as_str()));
    Ok((Value::Object(map), Value::Object(identity)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::{Cli, Command};

    /// The settings of `ubershuffle run ARGS`, with the given flags recorded as `main` does.
    fn settings(args: &[&str]) -> RunSettings {
        let argv = ["ubershuffle", "run"].iter().chain(args);
        let matches = Cli::command().try_get_matches_from(argv).unwrap();
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        let Command::Run(run) = &mut cli.command else { unreachable!() };
        run.settings.given = crate::given_ids(&matches);
        run.settings.clone()
    }

    #[test]
    fn no_debug_output_shows_the_token() {
        let token = "a-token-that-must-never-be-shown-0123456789";
        let s = settings(&["--transport", "tcp", "--listen", "127.0.0.1:0", "--token", token]);
        let r = s.resolve(None).unwrap();
        assert!(r.listen.as_ref().is_some_and(|(_, k)| k.token.expose() == token && k.sealed));
        for shown in [format!("{s:?}"), format!("{r:?}"), r.echo.to_string()] {
            assert!(!shown.contains(token), "{shown}");
        }
    }

    #[test]
    fn a_default_run_shuffles_something_and_says_what_it_chose() {
        let two = settings(&["--workers", "2"]).resolve(None).unwrap();
        assert_eq!(two.config.cache_capacity, 2000, "half of the 4000 points, not all of them");
        assert!(two.echo["chosen"].as_str().is_some_and(|n| n.contains("alpha = 0.5")), "{}", two.echo);
        let eight = settings(&["--workers", "8"]).resolve(None).unwrap();
        assert_eq!(eight.config.cache_capacity, 1000);
        assert!(settings(&["--alpha", "0.3"]).resolve(None).unwrap().echo.get("chosen").is_none());
    }

    #[test]
    fn defaults_resolve() {
        let r = settings(&[]).resolve(None).unwrap();
        assert_eq!(r.transport, TransportKind::Inproc);
        assert_eq!((r.config.workers, r.config.epochs, r.config.cache_capacity), (4, 5, 2000));
        assert_eq!(r.scheme, SchemeChoice::Builtin("coded".into()));
        assert_eq!(r.echo["learner"], "linreg");
        assert_eq!((r.echo["noise"].as_f64(), r.echo["step-size"].as_f64()), (Some(0.1), Some(0.001)));
        assert!(r.echo.get("rows").is_none(), "matcomp's flags are not echoed for linreg");
        assert!(r.identity.get("epochs").is_none() && r.identity["seed"] == 0);
    }

    #[test]
    fn bad_values_are_one_line_errors() {
        let cases: Vec<(&[&str], &str)> = vec![
            (&["--rows", "3"], "--rows applies to --learner matcomp"),
            (&["--rows", "300"], "--rows applies to --learner matcomp"),
            (&["--stragglers", "iid:0.2"], "needs --deadline"),
            (&["--alpha", "0.1"], "less than a batch"),
            (&["--transport", "tcp"], "needs --listen"),
            (&["--token", "t"], "apply only to --transport tcp"),
            (&["--join-timeout", "60"], "--join-timeout applies only"),
            (&["--min-workers", "2"], "--min-workers applies only"),
            (
                &["--transport", "tcp", "--listen", "127.0.0.1:0", "--token", "t", "--min-workers", "5"],
                "--min-workers must be between 1 and --workers 4, got 5",
            ),
            (
                &["--transport", "tcp", "--listen", "127.0.0.1:0", "--token", "t", "--min-workers", "0"],
                "--min-workers must be between 1 and --workers 4, got 0",
            ),
            (&["--resume"], "--resume needs --out"),
            (&["--kill-worker", "7@1"], "only workers 0..3"),
            (&["--scheme", "magic"], "known schemes are"),
            (&["--policy", "partial-local"], "fraction"),
            (&["--workers", "0"], "--workers must be at least 1"),
            (&["--chunk-bytes", "0"], "--chunk-bytes must be at least 1"),
            (&["--workers", "5", "--points", "4"], "cannot be split among 5 workers"),
        ];
        for (args, want) in cases {
            let e = format!("{:#}", settings(args).resolve(None).unwrap_err());
            assert!(e.contains(want) && !e.contains('\n'), "{args:?}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn mpi_takes_the_workers_from_the_job() {
        let mpi = settings(&["--transport", "mpi"]);
        assert_eq!(mpi.resolve(Some(6)).unwrap().config.workers, 5);
        let four = settings(&["--transport", "mpi", "--workers", "4"]);
        assert!(format!("{:#}", four.resolve(Some(6)).unwrap_err()).contains("mpirun -np 5"));
        let killing = settings(&["--transport", "mpi", "--kill-worker", "1@2"]);
        assert!(killing.resolve(Some(3)).is_err());
        let plain = settings(&["--transport", "mpi", "--broadcast", "plain"]);
        assert!(format!("{:#}", plain.resolve(Some(3)).unwrap_err()).contains("MPI_Bcast"));
    }
}
