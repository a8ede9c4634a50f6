//! The papers' experiments, each one file, and the runner that writes their results.
//!
//! An experiment returns an [`Outcome`] (a CSV table, SVG figures and a Markdown summary); the
//! runner writes `results/NAME.csv`, `results/NAME.svg` (plus `NAME-<suffix>.svg` for further
//! figures) and replaces the experiment's section of `results/README.md`, with the command that
//! made it and the machine it ran on. Adding an experiment: write `experiments/<name>.rs` with a
//! `run(&Context) -> anyhow::Result<Outcome>` and add one entry to [`EXPERIMENTS`].

mod broadcast;
mod epoch_runs;
mod fig3;
mod fig4;
mod gradient_coding;
mod machine;
mod msr;
mod partial_local;
mod partial_local_training;
mod plugins;
mod results_readme;
mod table1;
mod theorem1;
mod worst_case;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use crate::csv_table::CsvTable;
use crate::svg_chart::LineChart;
use ubershuffle_runtime::write_atomically;

pub use machine::{machine_description, today};

/// What an experiment runs with.
#[derive(Clone, Debug)]
pub struct Context {
    /// Run the small subset that finishes in minutes (the full run may take much longer).
    pub quick: bool,
    /// Where results go (`results/` of the workspace by default).
    pub out_dir: PathBuf,
    /// Plugin libraries to compare (`--plugin PATH`; the `plugins` experiment needs one).
    pub plugins: Vec<PathBuf>,
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
}

/// What an experiment measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// One row per measurement, in tidy (long) form.
    pub table: CsvTable,
    /// Figures: `("", chart)` is written as `NAME.svg`, `(suffix, chart)` as `NAME-suffix.svg`.
    pub figures: Vec<(String, LineChart)>,
    /// Markdown for the README section: findings, and the paper's numbers beside ours.
    pub summary: String,
}

/// An experiment in the registry.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// The name `cargo xtask experiments NAME` takes.
    pub name: &'static str,
    /// One line saying what it shows.
    pub about: &'static str,
    /// Runs it.
    pub run: fn(&Context) -> anyhow::Result<Outcome>,
}

/// Every experiment, in the order `cargo xtask experiments` runs them and README lists them.
pub static EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "theorem1",
        about: "Lee et al.'s coded shuffling at finite q against its asymptotic count (UberShuffle paper, Theorem 1)",
        run: theorem1::run,
    },
    Experiment {
        name: "fig3",
        about: "packets per epoch against alpha for uncoded, coded, UberShuffle and ubershuffle-opt, n = 20, q = 1e4..1e6 (UberShuffle paper, Fig. 3)",
        run: fig3::run,
    },
    Experiment {
        name: "plugins",
        about: "Schemes loaded from plugin libraries (by default the pairwise-XOR example) against the built-ins",
        run: plugins::run,
    },
    Experiment {
        name: "gradient-coding",
        about: "Approximate gradient coding (FRC, CRC) under heterogeneous stragglers, with and without shuffled worker roles (Johri et al.)",
        run: gradient_coding::run,
    },
    Experiment {
        name: "worst-case",
        about: "No-excess shuffling (Attia-Tandon): eq. (43) vs cycle packing vs Theorem 2's bound, rate vs K",
        run: worst_case::run,
    },
    Experiment {
        name: "partial-local",
        about: "Partial-local exchange (fraction Q per epoch): points moved and what coded schemes send for it; loss vs epochs and bytes moved under local, partial-local and global in the real epoch loop",
        run: partial_local::run,
    },
    Experiment {
        name: "msr",
        about: "Coded map-shuffle-reduce with stragglers: latency-load trade-off of the unified and the improved (reconstructed) scheme, executed over GF(p)",
        run: msr::run,
    },
    Experiment {
        name: "broadcast",
        about: "Pseudo-broadcast (scatter + ring, UberShuffle Section 3.1) against plain broadcast on emulated 1 Gbit/s links and TCP loopback",
        run: broadcast::run,
    },
    Experiment {
        name: "table1",
        about: "UberShuffle paper, Table 1 scaled: shuffle and training time per epoch of uncoded, coded and UberShuffle on emulated 1, 10 and 50 Gbit/s links, real epoch loop",
        run: table1::run,
    },
    Experiment {
        name: "fig4",
        about: "UberShuffle paper, Fig. 4: held-out loss vs emulated wall-clock time under uncoded, coded, UberShuffle and no shuffling, real epoch loop on emulated 1 Gbit/s links",
        run: fig4::run,
    },
];

/// A summary's closing line naming the quick subset (empty for a full run), so every section
/// of results/README.md says what `--quick` left out.
pub(crate) fn quick_note(ctx: &Context, subset: &str) -> String {
    if ctx.quick { format!("\n\nQuick subset: {subset}.") } else { String::new() }
}

/// The experiment called `name`.
pub fn experiment_by_name(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// Runs `experiment` and writes its files and README section into `ctx.out_dir`.
pub fn run_and_write(experiment: &Experiment, ctx: &Context) -> anyhow::Result<()> {
    std::fs::create_dir_all(&ctx.out_dir)
        .with_context(|| format!("cannot create {}", ctx.out_dir.display()))?;
    let started = Instant::now();
    let outcome = (experiment.run)(ctx).with_context(|| format!("experiment {}", experiment.name))?;
    let seconds = started.elapsed().as_secs_f64();
    let name = experiment.name;
    write_atomically(&ctx.out_dir.join(format!("{name}.csv")), outcome.table.to_csv().as_bytes())?;
    let mut figure_links = String::new();
    for (suffix, chart) in &outcome.figures {
        let file = if suffix.is_empty() { format!("{name}.svg") } else { format!("{name}-{suffix}.svg") };
        write_atomically(&ctx.out_dir.join(&file), chart.to_svg().as_bytes())?;
        figure_links.push_str(&format!("![{}]({file})\n\n", chart.title));
    }
    let quick = if ctx.quick { " --quick" } else { "" };
    let section = format!(
        "## {name}\n\n{about}.\n\n{figure_links}{summary}\n\nData: [`{name}.csv`]({name}.csv). \
         Regenerate: `cargo xtask experiments {name}{quick}`{mode}. Ran {date} in {seconds:.0} s on {machine}.\n",
        about = experiment.about,
        summary = outcome.summary.trim_end(),
        mode = if ctx.quick { " (the quick subset)" } else { " (the full run)" },
        date = today(),
        machine = machine_description(),
    );
    results_readme::update_section(&ctx.out_dir.join("README.md"), name, &section, &registry_order())
}

fn registry_order() -> Vec<&'static str> {
    EXPERIMENTS.iter().map(|e| e.name).collect()
}

/// The workspace's `results/` folder.
pub fn default_out_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results")
}
