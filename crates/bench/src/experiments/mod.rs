//! The papers' experiments, each one file, and the runner that reports them.
//!
//! An experiment measures into typed rows and returns a [`Report`] (tables, figures, a summary
//! and headline figures computed from those rows); [`run_all`] writes it with the one reporter
//! ([`crate::report`]) or, with `--check`, compares it with the committed results. Adding an
//! experiment: write `experiments/<name>.rs` with a `run(&Context) -> anyhow::Result<Report>`
//! and add one entry to [`EXPERIMENTS`].

mod broadcast;
mod carpool_fresh;
mod carpool_optimum;
pub(crate) mod epoch_runs;
mod fig3;
mod fig4;
pub mod full_invariants;
mod gradient_coding;
mod host_independence;
mod msr;
mod partial_local;
mod partial_local_training;
mod pliable;
mod pliable_training;
mod plugins;
pub mod scale;
mod speed;
mod table1;
mod theorem1;
mod worst_case;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use crate::report::Report;
use crate::report::compare::{Comparison, render};
use crate::report::write::{
    CheckMode, Destination, Heading, RunKind, check_readme, check_report, records, rerun_command,
    write_report,
};

/// What an experiment runs with.
#[derive(Clone, Debug)]
pub struct Context {
    /// Run the small subset that finishes in minutes (the full run may take much longer).
    pub quick: bool,
    /// Plugin libraries to compare (`--plugin PATH`; the `plugins` experiment needs one).
    pub plugins: Vec<PathBuf>,
    /// Run the full run's settings, restricted to the experiment's [`Experiment::sample`] (the
    /// rows behind its headline figures, or a stated subset), for `--check --sample`.
    pub sample: bool,
}

impl Context {
    /// A progress bar of `len` steps on stderr (hidden when stderr is not a terminal).
    pub fn progress(&self, len: u64, message: &str) -> ProgressBar {
        let bar = ProgressBar::new(len);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.to_string());
        bar
    }

    /// The committed results folder of this run's kind (`results` or `results/full`), which
    /// the citations of its machine-dependent headline figures name.
    pub fn results_dir(&self) -> &'static str {
        if self.quick { RunKind::Quick.results_dir() } else { RunKind::Full.results_dir() }
    }

    /// A summary's closing line naming the quick subset (empty for a full run), so every
    /// section of the results README says what `--quick` left out.
    pub fn quick_note(&self, subset: &str) -> String {
        if self.quick { format!("\n\nQuick subset: {subset}.") } else { String::new() }
    }
}

/// An experiment in the registry.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// The name `cargo xtask experiments NAME` takes.
    pub name: &'static str,
    /// One line saying what it shows.
    pub about: &'static str,
    /// Runs it.
    pub run: fn(&Context) -> anyhow::Result<Report>,
    /// What `--check --sample` re-runs of its full run (`None`: nothing, as its full results
    /// are times of the machine or take too long for CI; the quick run's check covers its code,
    /// and the digests its committed rows).
    pub sample: Option<&'static str>,
}

/// Every experiment, in the order `cargo xtask experiments` runs them and README lists them.
pub static EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: theorem1::NAME,
        about: theorem1::ABOUT,
        run: theorem1::run,
        sample: Some(theorem1::SAMPLE),
    },
    Experiment { name: fig3::NAME, about: fig3::ABOUT, run: fig3::run, sample: Some(fig3::SAMPLE) },
    Experiment { name: scale::NAME, about: scale::ABOUT, run: scale::run, sample: Some(scale::SAMPLE) },
    Experiment {
        name: carpool_optimum::NAME,
        about: carpool_optimum::ABOUT,
        run: carpool_optimum::run,
        sample: Some(carpool_optimum::SAMPLE),
    },
    Experiment {
        name: carpool_fresh::NAME,
        about: carpool_fresh::ABOUT,
        run: carpool_fresh::run,
        sample: Some(carpool_fresh::SAMPLE),
    },
    Experiment { name: plugins::NAME, about: plugins::ABOUT, run: plugins::run, sample: None },
    Experiment {
        name: gradient_coding::NAME,
        about: gradient_coding::ABOUT,
        run: gradient_coding::run,
        sample: None,
    },
    Experiment { name: worst_case::NAME, about: worst_case::ABOUT, run: worst_case::run, sample: None },
    Experiment {
        name: partial_local::NAME,
        about: partial_local::ABOUT,
        run: partial_local::run,
        sample: None,
    },
    Experiment { name: msr::NAME, about: msr::ABOUT, run: msr::run, sample: None },
    Experiment { name: broadcast::NAME, about: broadcast::ABOUT, run: broadcast::run, sample: None },
    Experiment { name: table1::NAME, about: table1::ABOUT, run: table1::run, sample: None },
    Experiment { name: fig4::NAME, about: fig4::ABOUT, run: fig4::run, sample: None },
    Experiment {
        name: pliable::NAME,
        about: pliable::ABOUT,
        run: pliable::run,
        sample: Some(pliable::SAMPLE),
    },
    Experiment {
        name: host_independence::NAME,
        about: host_independence::ABOUT,
        run: host_independence::run,
        sample: None,
    },
    Experiment { name: speed::NAME, about: speed::ABOUT, run: speed::run, sample: None },
];

/// The built-in planner `name` with `options` (an error naming the known ones otherwise).
pub(crate) fn planner(
    name: &str,
    options: &ubershuffle_core::PlannerOptions,
) -> anyhow::Result<Box<dyn ubershuffle_core::ShufflePlanner>> {
    Ok(ubershuffle_planners::planner_by_name(name, options)?)
}

/// The experiment called `name`, or an error naming the known ones.
pub fn experiment_by_name(name: &str) -> anyhow::Result<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        anyhow::anyhow!("unknown experiment '{name}'; known: {}", known.join(", "))
    })
}

/// How [`run_all`] runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The experiments (all when empty).
    pub names: Vec<String>,
    /// The quick subset.
    pub quick: bool,
    /// Fail where the machine-independent values differ from the committed results.
    pub check: bool,
    /// Where to write (default: [`run_folder`]); the committed results only with `update`.
    pub out: Option<PathBuf>,
    /// Regenerate the committed results (`results/` or `results/full/`, `results/headline.csv`
    /// and README's headline table) instead of writing a folder of the run's own.
    pub update: bool,
    /// Plugin libraries for the `plugins` experiment.
    pub plugins: Vec<PathBuf>,
    /// With `check` (and not `quick`): re-run each experiment's [`Experiment::sample`] of its
    /// full run and compare it with the committed rows of `results/full/` it names.
    pub sample: bool,
}

/// The workspace root (where README.md and results/ are).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Cargo's target folder: `CARGO_TARGET_DIR` (relative to where cargo runs, the workspace), else
/// `target/` of the workspace.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

/// The folder a run writes to unless told otherwise: `experiments/quick` or `experiments/full`
/// in cargo's target folder, never the committed results.
pub fn run_folder(run: RunKind) -> PathBuf {
    target_dir().join("experiments").join(run.name())
}

/// `path` relative to the workspace when inside it, for messages.
fn shown(path: &Path) -> String {
    path.strip_prefix(workspace_root()).unwrap_or(path).display().to_string()
}

/// Runs the chosen experiments into the run's own folder (or, with `update`, the committed
/// results), printing each one's time and then the run beside the committed results; returns
/// the number that failed (with `check`, also those whose machine-independent values differ
/// from the committed results). Each failure or difference is printed as one `error:` line.
pub fn run_all(options: &RunOptions) -> anyhow::Result<usize> {
    let chosen = choose(options)?;
    let run = if options.quick { RunKind::Quick } else { RunKind::Full };
    let root = workspace_root();
    let committed = root.join(run.results_dir());
    let dest = if options.update {
        Destination::committed(&root, run)
    } else {
        let dir = options.out.clone().unwrap_or_else(|| run_folder(run));
        if same_dir(&dir, &committed) {
            anyhow::bail!(
                "--out {}: that is the committed results folder; regenerating it is `--update`",
                dir.display()
            );
        }
        Destination::own(dir, run)
    };
    eprintln!(
        "writing to {}{}",
        shown(&dest.dir),
        if options.update { " (the committed results)" } else { " (results/ stays as committed)" }
    );
    let ctx = Context { quick: options.quick, plugins: options.plugins.clone(), sample: options.sample };
    let how = if options.sample { CheckMode::Sample } else { CheckMode::Exact };
    let order: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
    let mut failed = 0;
    let mut comparisons = Vec::new();
    for experiment in chosen {
        eprintln!("experiment {}: {}", experiment.name, experiment.about);
        let heading = Heading {
            name: experiment.name,
            about: experiment.about,
            order: &order,
            sample: experiment.sample,
        };
        if options.sample {
            eprintln!("  sample of the full run: {}", experiment.sample.unwrap_or("-"));
        }
        match run_one(experiment, &ctx, &heading, &dest, &root, how) {
            Ok(comparison) => {
                eprintln!("  {:.1} s; values {}", comparison.seconds, comparison.values());
                if options.check && !comparison.differences.is_empty() {
                    for d in &comparison.differences {
                        eprintln!("error: {}: {d}", experiment.name);
                    }
                    failed += 1;
                }
                comparisons.push(comparison);
            }
            Err(e) => {
                eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
                failed += 1;
            }
        }
    }
    if options.sample {
        failed += check_committed_full(&committed);
    }
    if options.check
        && let Some(d) = check_readme(&root)?
    {
        eprintln!("error: {d}");
        failed += 1;
    }
    let before = if options.update { "before this run" } else { "in the checkout" };
    eprintln!(
        "\nThis run beside the committed {} ({before}):\n\n{}",
        shown(&committed),
        render(&comparisons)
    );
    eprintln!("Wrote {} (README.md, headline.csv, CSV and SVG files).", shown(&dest.dir));
    if !options.update {
        eprintln!(
            "The committed {} are unchanged; maintainers regenerate them with `--update`.",
            shown(&committed)
        );
    }
    Ok(failed)
}

/// The committed full results in `dir` against the digests their runs wrote and against their
/// invariants, every row (re-run by the sample or not); prints each difference as an `error:`
/// line and returns 1 when there is one.
fn check_committed_full(dir: &Path) -> usize {
    eprintln!("every committed row of {}: digests and invariants", dir.display());
    let differences: Vec<String> =
        crate::report::digest::check_dir(dir).into_iter().chain(full_invariants::check_dir(dir)).collect();
    for d in &differences {
        eprintln!("error: full results: {d}");
    }
    usize::from(!differences.is_empty())
}

/// Runs one experiment, compares it with the committed results (before writing, which with
/// `--update` replaces them) and writes its report.
fn run_one(
    experiment: &Experiment,
    ctx: &Context,
    heading: &Heading<'_>,
    dest: &Destination,
    root: &Path,
    how: CheckMode,
) -> anyhow::Result<Comparison> {
    let started = Instant::now();
    let report = (experiment.run)(ctx).with_context(|| format!("experiment {}", experiment.name))?;
    let seconds = started.elapsed().as_secs_f64();
    let name = experiment.name;
    let differences = check_report(&report, name, dest.run, root, how);
    let command = rerun_command(name, dest.run, &report.rerun_flags);
    let headlines = records(&report, name, dest.run, &command);
    let comparison = Comparison::new(name, dest.run, root, &report.tables, &headlines, seconds, differences);
    write_report(&report, heading, dest, seconds).with_context(|| format!("writing {name}"))?;
    Ok(comparison)
}

/// The experiments `options` name (all when none; with `sample`, all that have a sample).
fn choose(options: &RunOptions) -> anyhow::Result<Vec<&'static Experiment>> {
    if options.sample && (!options.check || options.quick) {
        anyhow::bail!(
            "--sample re-runs part of the full runs to compare them: it needs --check and not --quick"
        );
    }
    if options.names.is_empty() {
        return Ok(EXPERIMENTS.iter().filter(|e| !options.sample || e.sample.is_some()).collect());
    }
    let chosen: Vec<&Experiment> =
        options.names.iter().map(|n| experiment_by_name(n)).collect::<anyhow::Result<_>>()?;
    if let Some(e) = chosen.iter().find(|e| options.sample && e.sample.is_none()) {
        anyhow::bail!("experiment {} has no sample of a full run (its quick run is checked whole)", e.name);
    }
    Ok(chosen)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
