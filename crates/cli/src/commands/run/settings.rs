//! `ubershuffle run`'s settings: flags merged over a TOML file ([`merged`]), then defaults and
//! checks that turn them into what a run needs ([`Resolved`]). Every bad value is a one-line
//! error naming the flag.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::{PlannerOptions, cache_size_for, planner_by_name};
use ubershuffle_learners::MatrixCompletionParams;
use ubershuffle_runtime::{LearnerSpec, RunConfig};
use ubershuffle_transport::BroadcastMethod;
use ubershuffle_transport::in_process::LinkShaping;

use super::specs::{DataSpec, StragglerSpec, parse_bandwidth, parse_kill};
use crate::cli::{RunArgs, RunSettings};
use crate::commands::master::seconds;

/// The settings of the command line over those of `--config FILE` (if any).
pub fn merged(args: &RunArgs) -> anyhow::Result<RunSettings> {
    let Some(path) = &args.config else { return Ok(args.settings.clone()) };
    let file = read_config(path)?;
    let mut merged = to_object(&file)?;
    for (key, value) in to_object(&args.settings)? {
        if !value.is_null() {
            merged.insert(key, value);
        }
    }
    Ok(serde_json::from_value(Value::Object(merged))?)
}

/// Reads a TOML settings file; an unknown key or a wrong type is an error naming the line.
fn read_config(path: &Path) -> anyhow::Result<RunSettings> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let mut line = e.span().map_or(0, |s| text[..s.start.min(text.len())].lines().count().max(1));
        let mut message = e.message().replace('\n', " ");
        if let Some(rest) = message.strip_prefix("unknown field ") {
            let key = rest.split(',').next().unwrap_or(rest);
            line = line_of_key(&text, key.trim_matches('`')).unwrap_or(line);
            message = format!("unknown key {key} (the keys are the long flags of `ubershuffle run --help`)");
        }
        let at = if line > 0 { format!(" line {line}") } else { String::new() };
        anyhow::anyhow!("config {}{at}: {message}", path.display())
    })
}

/// The line (from 1) where `key` is set, or where the table `[key]` starts.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix(key).or_else(|| l.strip_prefix('[').and_then(|t| t.strip_prefix(key)));
            rest.is_some_and(|r| r.trim_start().starts_with(['=', ']']))
        })
        .map(|k| k + 1)
}

fn to_object(settings: &RunSettings) -> anyhow::Result<Map<String, Value>> {
    match serde_json::to_value(settings)? {
        Value::Object(map) => Ok(map),
        _ => bail!("settings are not a map"),
    }
}

/// Which transport a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// Threads of this process.
    InProcess,
    /// This process is the master; workers are `ubershuffle worker` processes.
    Tcp,
    /// Under mpirun: rank 0 is the master.
    Mpi,
}

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
    /// The epoch loop's configuration (checkpoint in `--out`).
    pub config: RunConfig,
    /// Who straggles.
    pub stragglers: StragglerSpec,
    /// The scheme.
    pub scheme: SchemeChoice,
    /// The timeout of every wait.
    pub timeout: Duration,
    /// TCP: how long workers may take to join.
    pub join_timeout: Duration,
    /// TCP: where to listen, and the token.
    pub listen: Option<(String, String)>,
    /// Fault injection: worker and epoch.
    pub kill: Option<(usize, u32)>,
    /// `--out DIR`.
    pub out: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
}

/// The most workers a run takes: as far as the planners `uncoded`, `clique-cover` and `auto`
/// are tested (the straggler models and the epoch loop have no limit of their own).
const MAX_WORKERS: usize = 1024;

/// Echo keys that do not change a run's numbers: a resumed run may change them.
const NOT_IDENTITY: &[&str] = &[
    "epochs",
    "json",
    "out",
    "resume",
    "kill-worker",
    "timeout",
    "join-timeout",
    "listen",
    "transport",
    "bandwidth",
    "broadcast",
    "chunk-bytes",
];

/// A flag and whether the settings give it.
type FlagGiven = (&'static str, fn(&RunSettings) -> bool);

/// Flags that only one learner takes.
const LINREG_ONLY: &[FlagGiven] = &[
    ("--points", |s| s.points.is_some()),
    ("--features", |s| s.features.is_some()),
    ("--local-passes", |s| s.local_passes.is_some()),
];
const MATCOMP_ONLY: &[FlagGiven] = &[
    ("--rows", |s| s.rows.is_some()),
    ("--cols", |s| s.cols.is_some()),
    ("--rank", |s| s.rank.is_some()),
    ("--ratings-per-row", |s| s.ratings_per_row.is_some()),
    ("--regularization", |s| s.regularization.is_some()),
    ("--init-scale", |s| s.init_scale.is_some()),
];

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

impl RunSettings {
    /// Fills in the defaults and checks everything. `mpi_ranks` is the size of the MPI job
    /// when running under mpirun.
    pub fn resolve(&self, mpi_ranks: Option<usize>) -> anyhow::Result<Resolved> {
        let mut s = self.clone();
        let transport = match s.transport.get_or_insert_with(|| "inproc".into()).as_str() {
            "inproc" | "in-process" => TransportKind::InProcess,
            "tcp" => TransportKind::Tcp,
            "mpi" => TransportKind::Mpi,
            other => bail!("invalid --transport '{other}': use inproc, tcp or mpi"),
        };
        let workers = match (transport, mpi_ranks, s.workers) {
            (TransportKind::Mpi, Some(ranks), Some(n)) if n + 1 != ranks => {
                bail!("--workers {n} needs {} MPI ranks (mpirun -np {}), the job has {ranks}", n + 1, n + 1)
            }
            (TransportKind::Mpi, Some(ranks), None) => ranks.saturating_sub(1),
            (_, _, n) => n.unwrap_or(4),
        };
        s.workers = Some(at_least_one("--workers", workers)?);
        if workers > MAX_WORKERS {
            bail!(
                "--workers {workers}: runs take at most {MAX_WORKERS} workers (as far as the planners are tested)"
            );
        }
        let epochs = at_least_one("--epochs", *s.epochs.get_or_insert(5))?;
        let seed = *s.seed.get_or_insert(0);

        let (data, learner) = resolve_learner(&mut s)?;
        let points = data.training_points();
        if points < workers {
            bail!("{points} training points cannot be split among {workers} workers");
        }
        let alpha = *s.alpha.get_or_insert((2.0 / workers as f64).min(1.0));
        if !(alpha > 0.0 && alpha <= 1.0) {
            bail!("--alpha must lie in (0, 1], got {alpha}");
        }
        let cache_capacity = cache_size_for(alpha, points);
        let batch = points.div_ceil(workers);
        if cache_capacity < batch {
            bail!(
                "--alpha {alpha} caches {cache_capacity} points, less than a batch ({batch} = q/n); use --alpha {:.4} or more",
                batch as f64 / points as f64
            );
        }
        let policy_name = s.policy.get_or_insert_with(|| "global".into()).clone();
        let policy = ExchangePolicy::new(&policy_name, s.fraction).context("--policy")?;

        let shaping =
            parse_bandwidth(s.bandwidth.get_or_insert_with(|| "none".into())).map_err(anyhow::Error::msg)?;
        if shaping.is_some() && transport != TransportKind::InProcess {
            bail!("--bandwidth shapes in-process links only; tcp and mpi run at the real network's rate");
        }
        let broadcast = match (transport, s.broadcast.as_deref()) {
            (TransportKind::Mpi, Some(_)) => {
                bail!("--broadcast does not apply to mpi (it broadcasts with MPI_Bcast)")
            }
            (TransportKind::Mpi, None) => BroadcastMethod::PseudoBroadcast,
            (_, name) => {
                let name = name.unwrap_or("pseudo-broadcast");
                let method = BroadcastMethod::from_name(name).ok_or_else(|| {
                    anyhow::anyhow!("invalid --broadcast '{name}': use pseudo-broadcast or plain")
                })?;
                s.broadcast = Some(method.name().into());
                method
            }
        };
        let stragglers = StragglerSpec::parse(s.stragglers.get_or_insert_with(|| "none".into()))
            .map_err(anyhow::Error::msg)?;
        stragglers.build(workers, seed).context("--stragglers")?;
        let deadline = s.deadline.map(|d| seconds("--deadline", d)).transpose()?;
        if deadline.is_none() && !stragglers.is_none() {
            bail!(
                "--stragglers {} needs --deadline SECONDS (how long the master waits for updates)",
                s.stragglers.as_deref().unwrap_or_default()
            );
        }
        let chunk_bytes = at_least_one("--chunk-bytes", *s.chunk_bytes.get_or_insert(1 << 20))?;
        let timeout = seconds("--timeout", *s.timeout.get_or_insert(10.0))?;

        let listen = match (transport, s.listen.clone(), s.token.clone()) {
            (TransportKind::Tcp, Some(addr), Some(token)) => Some((addr, token)),
            (TransportKind::Tcp, _, _) => bail!("--transport tcp needs --listen ADDR and --token T"),
            (_, None, None) => None,
            _ => bail!("--listen and --token apply only to --transport tcp"),
        };
        let join_timeout = match transport {
            TransportKind::Tcp => seconds("--join-timeout", *s.join_timeout.get_or_insert(60.0))?,
            _ if s.join_timeout.is_some() => bail!("--join-timeout applies only to --transport tcp"),
            _ => Duration::ZERO,
        };
        let kill = s
            .kill_worker
            .as_deref()
            .map(|k| parse_kill(k, workers))
            .transpose()
            .map_err(anyhow::Error::msg)?;
        if kill.is_some() && transport == TransportKind::Mpi {
            bail!("--kill-worker is not available under mpi: a rank that leaves ends the whole MPI job");
        }

        let checkpoint = s.out.as_ref().map(|dir| dir.join("checkpoint.json"));
        if s.resume {
            let Some(path) = &checkpoint else { bail!("--resume needs --out DIR (the run to continue)") };
            if !path.exists() {
                bail!("--resume: {} does not exist (no completed epoch to resume from)", path.display());
            }
        }
        let scheme = resolve_scheme(&mut s)?;
        let config = RunConfig {
            workers,
            cache_capacity,
            epochs,
            seed,
            policy,
            learner,
            deadline,
            chunk_bytes,
            checkpoint,
            resume: s.resume,
        };
        let (echo, identity) = echo(&s, &data, cache_capacity)?;
        Ok(Resolved {
            echo,
            identity,
            transport,
            shaping,
            broadcast,
            data,
            config,
            stragglers,
            scheme,
            timeout,
            join_timeout,
            listen,
            kill,
            out: s.out.clone(),
            json: s.json,
        })
    }
}

/// The learner and its data.
fn resolve_learner(s: &mut RunSettings) -> anyhow::Result<(DataSpec, LearnerSpec)> {
    let learner = s.learner.get_or_insert_with(|| "linreg".into()).clone();
    let (others, wrong) = match learner.as_str() {
        "linreg" => (MATCOMP_ONLY, "matcomp"),
        "matcomp" => (LINREG_ONLY, "linreg"),
        other => bail!("invalid --learner '{other}': use linreg or matcomp"),
    };
    if let Some((flag, _)) = others.iter().find(|(_, given)| given(s)) {
        bail!("{flag} applies to --learner {wrong}, not {learner}");
    }
    if learner == "linreg" {
        let points = at_least_one("--points", *s.points.get_or_insert(4000))?;
        let features = at_least_one("--features", *s.features.get_or_insert(10))?;
        let noise = non_negative("--noise", *s.noise.get_or_insert(0.1))?;
        let step_size = positive("--step-size", *s.step_size.get_or_insert(0.001))?;
        let local_passes = at_least_one("--local-passes", *s.local_passes.get_or_insert(1))?;
        let spec = LearnerSpec::LinearRegression { features, step_size, local_passes };
        spec.build().context("--learner linreg")?;
        return Ok((DataSpec::LinearRegression { points, features, noise }, spec));
    }
    let rows = at_least_one("--rows", *s.rows.get_or_insert(300))?;
    let cols = at_least_one("--cols", *s.cols.get_or_insert(200))?;
    let rank = at_least_one("--rank", *s.rank.get_or_insert(3))?;
    let per_row = at_least_one("--ratings-per-row", *s.ratings_per_row.get_or_insert(40))?;
    if per_row > cols {
        bail!("--ratings-per-row {per_row} exceeds the {cols} columns");
    }
    let params = MatrixCompletionParams {
        rows,
        cols,
        rank,
        step_size: positive("--step-size", *s.step_size.get_or_insert(0.05))?,
        regularization: non_negative("--regularization", *s.regularization.get_or_insert(0.001))?,
        init_scale: non_negative("--init-scale", *s.init_scale.get_or_insert(0.3))?,
    };
    let noise = non_negative("--noise", *s.noise.get_or_insert(0.05))?;
    params.check().context("--learner matcomp")?;
    let data = DataSpec::MatrixCompletion { rows, cols, rank, per_row, noise };
    if u32::try_from(data.training_points()).is_err() {
        bail!("{rows} x {per_row} ratings exceed the u32 point ids");
    }
    Ok((data, LearnerSpec::MatrixCompletion(params)))
}

/// The scheme: a plugin, or a built-in checked by name now.
fn resolve_scheme(s: &mut RunSettings) -> anyhow::Result<SchemeChoice> {
    if let Some(path) = &s.plugin {
        return Ok(SchemeChoice::Plugin(path.clone(), s.scheme.clone()));
    }
    let name = s.scheme.get_or_insert_with(|| "coded".into()).clone();
    if let Err(e) = planner_by_name(&name, &PlannerOptions::default()) {
        bail!("invalid value '{name}' for '--scheme': known schemes are {}", e.known.join(", "));
    }
    Ok(SchemeChoice::Builtin(name))
}

/// The settings as JSON (nulls and the token left out, the data sizes added) and the part of
/// it that decides the numbers.
fn echo(s: &RunSettings, data: &DataSpec, cache_capacity: usize) -> anyhow::Result<(Value, Value)> {
    let mut map = to_object(s)?;
    map.retain(|k, v| !v.is_null() && k != "token");
    map.insert("training-points".into(), data.training_points().into());
    map.insert("held-out-points".into(), data.held_out().into());
    map.insert("cache-capacity".into(), cache_capacity.into());
    let mut identity = map.clone();
    identity.retain(|k, _| !NOT_IDENTITY.contains(&k.as_str()));
    Ok((Value::Object(map), Value::Object(identity)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn settings() -> RunSettings {
        RunSettings::default()
    }

    #[test]
    fn defaults_resolve() {
        let r = settings().resolve(None).unwrap();
        assert_eq!(r.transport, TransportKind::InProcess);
        assert_eq!((r.config.workers, r.config.epochs, r.config.cache_capacity), (4, 5, 2000));
        assert_eq!(r.scheme, SchemeChoice::Builtin("coded".into()));
        assert_eq!(r.echo["learner"], "linreg");
        assert!(r.identity.get("epochs").is_none() && r.identity["seed"] == 0);
    }

    #[test]
    fn bad_values_are_one_line_errors() {
        let cases: Vec<(RunSettings, &str)> = vec![
            (RunSettings { learner: Some("svm".into()), ..settings() }, "invalid --learner 'svm'"),
            (RunSettings { rows: Some(3), ..settings() }, "--rows applies to --learner matcomp"),
            (RunSettings { stragglers: Some("iid:0.2".into()), ..settings() }, "needs --deadline"),
            (RunSettings { alpha: Some(0.1), ..settings() }, "less than a batch"),
            (RunSettings { bandwidth: Some("1gb".into()), ..settings() }, "invalid --bandwidth"),
            (RunSettings { transport: Some("tcp".into()), ..settings() }, "needs --listen"),
            (RunSettings { token: Some("t".into()), ..settings() }, "apply only to --transport tcp"),
            (RunSettings { resume: true, ..settings() }, "--resume needs --out"),
            (RunSettings { kill_worker: Some("7@1".into()), ..settings() }, "only workers 0..3"),
            (RunSettings { scheme: Some("magic".into()), ..settings() }, "known schemes are"),
            (RunSettings { policy: Some("partial-local".into()), ..settings() }, "fraction"),
            (RunSettings { workers: Some(0), ..settings() }, "--workers must be at least 1"),
        ];
        for (s, want) in cases {
            let e = format!("{:#}", s.resolve(None).unwrap_err());
            assert!(e.contains(want) && !e.contains('\n'), "{e:?} lacks {want:?}");
        }
    }

    #[test]
    fn mpi_takes_the_workers_from_the_job() {
        let mpi = RunSettings { transport: Some("mpi".into()), ..settings() };
        assert_eq!(mpi.resolve(Some(6)).unwrap().config.workers, 5);
        let four = RunSettings { workers: Some(4), ..mpi.clone() };
        assert!(format!("{:#}", four.resolve(Some(6)).unwrap_err()).contains("mpirun -np 5"));
        let killing = RunSettings { kill_worker: Some("1@2".into()), ..mpi };
        assert!(killing.resolve(Some(3)).is_err());
    }
}
