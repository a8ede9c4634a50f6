//! `ubershuffle run`'s settings, typed and defaulted by clap (flags over a `--config` file,
//! see [`crate::config_file`]), turned into what a run needs ([`Resolved`]): the run's
//! [`RunSpec`], checked once by the runtime ([`RunSpec::check`]), and the flags of this
//! command alone (transport, output, fault injection). The runtime's errors name settings;
//! [`flag`] says each as its flag, the one table between the two.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde_json::Value;
use ubershuffle_runtime::spec::{CheckedSpec, LearnerSettings, PrepareError, Setting, SpecError};
use ubershuffle_runtime::{RunSpec, RuntimeError};
use ubershuffle_transport::BroadcastMethod;
use ubershuffle_transport::in_process::LinkShaping;

use crate::cli::{BroadcastKind, LearnerKind, RunSettings, TransportKind};
use crate::commands::master::seconds;
use crate::flag_values::KillSpec;

/// Everything a run needs, checked.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The settings with every default filled in, for the JSON echo (no secrets).
    pub echo: Value,
    /// The run itself, checked by the runtime.
    pub run: CheckedSpec,
    /// The transport.
    pub transport: TransportKind,
    /// In-process link shaping.
    pub shaping: Option<LinkShaping>,
    /// How broadcasts travel (in-process and TCP).
    pub broadcast: BroadcastMethod,
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

/// The flag of a run setting: the one table between the runtime's settings and this
/// command's flags (`--config` keys are the flags' names).
pub fn flag(setting: Setting) -> String {
    match setting {
        Setting::Checkpoint => "--out".into(),
        other => format!("--{}", other.name()),
    }
}

/// A run's problem said in flags.
pub fn in_flags(e: &SpecError) -> anyhow::Error {
    anyhow::anyhow!(e.render(&flag))
}

/// Preparing a run failed: a setting's problem said in flags, anything else as it is.
pub fn prepare_failed(e: PrepareError) -> anyhow::Error {
    match e {
        PrepareError::Spec(e) => in_flags(&e),
        PrepareError::Resume(RuntimeError::Checkpoint { path, reason }) => {
            anyhow::anyhow!("--resume: {path}: {reason}")
        }
        other => other.into(),
    }
}

/// Flags (clap ids) that only one learner takes.
const LINREG_ONLY: &[&str] = &["points", "features", "local_passes"];
const MATCOMP_ONLY: &[&str] = &["rows", "cols", "rank", "ratings_per_row", "regularization", "init_scale"];

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
            (_, _, n) => n.unwrap_or(ubershuffle_runtime::spec::defaults::WORKERS),
        };
        s.workers = Some(workers);
        let spec = s.spec()?;
        let run = spec.check().map_err(|e| in_flags(&e))?;
        let (transport, broadcast) = resolve_transport(&mut s)?;
        let kill = s.kill_worker.map(|k| k.within(workers)).transpose().map_err(anyhow::Error::msg)?;
        if s.resume {
            let Some(path) = &run.config.checkpoint else {
                bail!("--resume needs --out DIR (the run to continue)")
            };
            if !path.exists() {
                bail!("--resume: {} does not exist (no completed epoch to resume from)", path.display());
            }
        }
        let echo = echo(&s, &run)?;
        Ok(Resolved {
            echo,
            run,
            transport,
            shaping: s.bandwidth.0,
            broadcast,
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

    /// The run's [`RunSpec`] from the flags (the learner's flags checked against the learner).
    fn spec(&self) -> anyhow::Result<RunSpec> {
        let (others, wrong, name) = match self.learner {
            LearnerKind::Linreg => (MATCOMP_ONLY, "matcomp", "linreg"),
            LearnerKind::Matcomp => (LINREG_ONLY, "linreg", "matcomp"),
        };
        if let Some(id) = others.iter().find(|id| self.given(id)) {
            bail!("--{} applies to --learner {wrong}, not {name}", id.replace('_', "-"));
        }
        let learner = match self.learner {
            LearnerKind::Linreg => LearnerSettings::Linreg {
                points: self.points,
                features: self.features,
                local_passes: self.local_passes,
                noise: self.noise,
                step_size: self.step_size,
            },
            LearnerKind::Matcomp => LearnerSettings::Matcomp {
                rows: self.rows,
                cols: self.cols,
                rank: self.rank,
                ratings_per_row: self.ratings_per_row,
                regularization: self.regularization,
                init_scale: self.init_scale,
                noise: self.noise,
                step_size: self.step_size,
            },
        };
        let mut spec = RunSpec::default();
        spec.workers = self.workers.unwrap_or(spec.workers);
        spec.epochs = self.epochs;
        spec.alpha = self.alpha;
        spec.policy = self.policy.into();
        spec.fraction = self.fraction;
        spec.scheme = self.scheme.clone();
        spec.plugin = self.plugin.clone();
        spec.candidates = self.candidates;
        spec.learner = learner;
        spec.stragglers = self.stragglers;
        spec.deadline = self.deadline;
        spec.seed = self.seed;
        spec.time_budget = self.time_budget;
        spec.chunk_bytes = self.chunk_bytes;
        spec.checkpoint = self.out.as_ref().map(|dir| dir.join("checkpoint.json"));
        spec.resume = self.resume;
        Ok(spec)
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

/// The settings as JSON (the token left out, the run's defaults filled in from the checked
/// spec, the data sizes added); flags of the other learner are left out. A default that
/// changes what the run measures is said in `chosen`.
fn echo(s: &RunSettings, run: &CheckedSpec) -> anyhow::Result<Value> {
    let mut s = s.clone();
    let filled = &run.spec;
    (s.alpha, s.scheme, s.candidates) = (filled.alpha, filled.scheme.clone(), filled.candidates);
    if let LearnerSettings::Linreg { noise, step_size, .. }
    | LearnerSettings::Matcomp { noise, step_size, .. } = &filled.learner
    {
        (s.noise, s.step_size) = (*noise, *step_size);
    }
    let Value::Object(mut map) = serde_json::to_value(&s)? else { bail!("settings are not a map") };
    let others = if s.learner == LearnerKind::Linreg { MATCOMP_ONLY } else { LINREG_ONLY };
    map.retain(|k, _| !others.iter().any(|id| id.replace('_', "-") == *k));
    map.insert("training-points".into(), run.data.training_points().into());
    map.insert("held-out-points".into(), run.data.held_out().into());
    map.insert("cache-capacity".into(), run.config.cache_capacity.into());
    if let Some((setting, text)) = &run.chosen {
        map.insert("chosen".into(), format!("{} {text}", flag(*setting)).into());
    }
    Ok(Value::Object(map))
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
        assert_eq!(two.run.config.cache_capacity, 2000, "half of the 4000 points, not all of them");
        assert!(
            two.echo["chosen"].as_str().is_some_and(|n| n.starts_with("--alpha not given: alpha = 0.5")),
            "{}",
            two.echo
        );
        let eight = settings(&["--workers", "8"]).resolve(None).unwrap();
        assert_eq!(eight.run.config.cache_capacity, 1000);
        assert!(settings(&["--alpha", "0.3"]).resolve(None).unwrap().echo.get("chosen").is_none());
    }

    #[test]
    fn defaults_resolve() {
        let r = settings(&[]).resolve(None).unwrap();
        assert_eq!(r.transport, TransportKind::Inproc);
        assert_eq!((r.run.config.workers, r.run.config.epochs, r.run.config.cache_capacity), (4, 5, 2000));
        assert_eq!(r.echo["scheme"], "coded");
        assert_eq!(r.echo["learner"], "linreg");
        assert_eq!((r.echo["noise"].as_f64(), r.echo["step-size"].as_f64()), (Some(0.1), Some(0.001)));
        assert!(r.echo.get("rows").is_none(), "matcomp's flags are not echoed for linreg");
    }

    #[test]
    fn bad_values_are_one_line_errors() {
        let cases: Vec<(&[&str], &str)> = vec![
            (&["--rows", "3"], "--rows applies to --learner matcomp"),
            (&["--rows", "300"], "--rows applies to --learner matcomp"),
            (&["--stragglers", "iid:0.2"], "--stragglers iid:0.2 needs --deadline"),
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
            (&["--scheme", "magic"], "--scheme 'magic': known schemes are"),
            (&["--policy", "partial-local"], "--policy partial-local needs --fraction"),
            (&["--workers", "0"], "--workers must be at least 1"),
            (&["--chunk-bytes", "0"], "--chunk-bytes must be at least 1"),
            (&["--workers", "5", "--points", "4"], "cannot be split among 5 workers"),
            (&["--alpha", "1.5"], "--alpha must lie in (0, 1]"),
            (&["--deadline", "0"], "--deadline must be a positive number of seconds"),
            (&["--time-budget", "0"], "--time-budget must be a positive number of seconds"),
        ];
        for (args, want) in cases {
            let e = format!("{:#}", settings(args).resolve(None).unwrap_err());
            assert!(e.contains(want) && !e.contains('\n'), "{args:?}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn mpi_takes_the_workers_from_the_job() {
        let mpi = settings(&["--transport", "mpi"]);
        assert_eq!(mpi.resolve(Some(6)).unwrap().run.config.workers, 5);
        let four = settings(&["--transport", "mpi", "--workers", "4"]);
        assert!(format!("{:#}", four.resolve(Some(6)).unwrap_err()).contains("mpirun -np 5"));
        let killing = settings(&["--transport", "mpi", "--kill-worker", "1@2"]);
        assert!(killing.resolve(Some(3)).is_err());
        let plain = settings(&["--transport", "mpi", "--broadcast", "plain"]);
        assert!(format!("{:#}", plain.resolve(Some(3)).unwrap_err()).contains("MPI_Bcast"));
    }
}
