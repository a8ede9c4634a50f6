//! Writing a [`Report`] (CSV, SVG, its README section, its headline rows) and checking one
//! against the committed results. Every file is written through a temporary file and a rename.

use std::path::{Path, PathBuf};

use ubershuffle_runtime::write_atomically;

use super::check::{first_difference, first_missing_row};
use super::digest;
use super::headline::{self, HeadlineRecord};
use super::machine::{machine_description, today};
use super::run_seconds::{self, RunSeconds};
use super::sections::update_section;
use super::table::parse_csv;
use super::{Report, ReportError};

/// Which subset of an experiment ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// The subset that finishes in minutes (`--quick`), committed under `results/`.
    Quick,
    /// The papers' full setting, committed under `results/full/`.
    Full,
}

impl RunKind {
    /// `quick` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Quick => "quick",
            RunKind::Full => "full",
        }
    }

    /// The committed results folder of this run kind, from the workspace root.
    pub fn results_dir(self) -> &'static str {
        match self {
            RunKind::Quick => "results",
            RunKind::Full => "results/full",
        }
    }

    fn preamble(self) -> &'static str {
        match self {
            RunKind::Quick => {
                "# Results\n\nEvery section below is written by `cargo xtask experiments NAME --quick --update` \
                 (the quick subset; the full runs are in [`full/`](full/README.md)) and says the command \
                 that runs it again, the machine and the date. Figures are SVG, data CSV. Without \
                 `--update` a run writes the same files into a folder of its own \
                 (`target/experiments/quick/`) and prints them beside these.\n"
            }
            RunKind::Full => {
                "# Results of the full runs\n\nEvery section below is written by `cargo xtask experiments \
                 NAME --update` (the papers' full setting) and says the command that runs it again, the \
                 machine and the date. Figures are SVG, data CSV. Without `--update` a run writes the same \
                 files into a folder of its own (`target/experiments/full/`) and prints them beside these.\n\n\
                 How CI checks these files (`cargo xtask experiments --check --sample`): the full runs are \
                 too slow to repeat whole in CI, so each section says which of its rows CI re-runs in the \
                 full setting (every cheap row; of the expensive ones a stated, fixed subset) and compares \
                 every machine-independent column with the committed rows. Every row, re-run or not, is \
                 also checked without running anything: each full run writes [`digests.toml`](digests.toml) \
                 beside its CSVs (digests of every row's and every column's machine-independent cells), so a \
                 cell edited by hand fails, named by file, line and column; and each CSV's invariants are \
                 recomputed from the rows' own columns (ratios, gaps and goal flags, counts at least their \
                 lower bound, the cells one instance's rows share; \
                 `crates/bench/src/experiments/full_invariants.rs`). `cargo test -p ubershuffle-bench --test \
                 full_results` runs the same two checks.\n"
            }
        }
    }
}

/// What the section of an experiment says about it.
#[derive(Clone, Debug)]
pub struct Heading<'a> {
    /// The experiment's name.
    pub name: &'a str,
    /// One line saying what it shows.
    pub about: &'a str,
    /// Every experiment's name, in the order sections are kept.
    pub order: &'a [&'a str],
    /// What `--check --sample` re-runs of its full run (`None`: nothing).
    pub sample: Option<&'a str>,
}

/// Where a report goes.
#[derive(Clone, Debug)]
pub struct Destination {
    /// The folder of the CSV and SVG files and the results README.
    pub dir: PathBuf,
    /// Quick or full.
    pub run: RunKind,
    /// The folder of `headline.csv` and [`run_seconds::FILE`], whose rows of the experiment
    /// the report replaces (both kinds of run share them): the run's own folder, or the
    /// committed `results/` when regenerating the committed results.
    pub shared: PathBuf,
    /// The README whose headline table is rendered again from the shared `headline.csv` (the
    /// workspace's, only when regenerating the committed results).
    pub readme: Option<PathBuf>,
}

impl Destination {
    /// A run's own folder `dir` (its own `headline.csv`; no README touched).
    pub fn own(dir: PathBuf, run: RunKind) -> Destination {
        Destination { shared: dir.clone(), dir, run, readme: None }
    }

    /// The committed results of `run` under the workspace `root`, with `results/headline.csv`
    /// and README's headline table (`--update`).
    pub fn committed(root: &Path, run: RunKind) -> Destination {
        Destination {
            dir: root.join(run.results_dir()),
            run,
            shared: root.join("results"),
            readme: Some(root.join("README.md")),
        }
    }
}

/// The command that regenerates an experiment.
pub fn rerun_command(name: &str, run: RunKind, flags: &[String]) -> String {
    let mut command = format!("cargo xtask experiments {name}");
    if run == RunKind::Quick {
        command += " --quick";
    }
    for flag in flags {
        command += " ";
        command += flag;
    }
    command
}

/// Writes `report`'s files and README section into `dest`, and its headline rows.
pub fn write_report(
    report: &Report,
    heading: &Heading<'_>,
    dest: &Destination,
    seconds: f64,
) -> Result<(), ReportError> {
    std::fs::create_dir_all(&dest.dir)?;
    let name = heading.name;
    for table in &report.tables {
        write_atomically(&dest.dir.join(&table.file), table.to_csv()?.as_bytes())?;
    }
    if dest.run == RunKind::Full {
        digest::record(&dest.dir, &report.tables)?;
    }
    let mut figure_links = String::new();
    for figure in &report.figures {
        let file = if figure.suffix.is_empty() {
            format!("{name}.svg")
        } else {
            format!("{name}-{}.svg", figure.suffix)
        };
        write_atomically(&dest.dir.join(&file), figure.chart.to_svg()?.as_bytes())?;
        figure_links += &format!("![{}]({file})\n\n", figure.chart.title);
    }
    let data: Vec<String> = report.tables.iter().map(|t| format!("[`{0}`]({0})", t.file)).collect();
    let command = rerun_command(name, dest.run, &report.rerun_flags);
    let section = format!(
        "## {name}\n\n{about}.\n\n{figure_links}{summary}\n\nData: {data}. Run again: `{command}` (add `--update` to rewrite these files). \
         Ran {date} in {seconds:.0} s on {machine}.\n{checked}",
        checked = if dest.run == RunKind::Full { full_check_note(heading.sample) } else { String::new() },
        about = heading.about,
        summary = report.summary.trim_end(),
        data = data.join(", "),
        date = today(),
        machine = machine_description(),
    );
    update_section(&dest.dir.join("README.md"), dest.run.preamble(), name, &section, heading.order)?;
    let timed = RunSeconds { experiment: name.into(), run: dest.run.name().into(), seconds };
    run_seconds::record(&dest.shared.join(run_seconds::FILE), timed, heading.order)?;
    write_headlines(dest, &records(report, name, dest.run, &command), heading)
}

/// What CI checks of a full run's section: the rows it re-runs, and the digests and invariants
/// of every row.
fn full_check_note(sample: Option<&str>) -> String {
    let rerun = match sample {
        Some(rows) => format!("it re-runs {rows} and compares every machine-independent column"),
        None => {
            "it re-runs nothing of this run (its figures are times of this machine, or it runs too long for \
                 CI, whose quick run checks the same code)"
                .into()
        }
    };
    format!(
        "\nChecked by `cargo xtask experiments --check --sample` (CI samples the experiments that `.ci/run` \
         names; `cargo test` checks every full row's digests and invariants): {rerun}; every row, re-run or not, \
         must match [`{0}`]({0}) (written by this run) and its CSV's invariants.\n",
        digest::FILE
    )
}

/// The headline records of a report.
pub fn records(report: &Report, name: &str, run: RunKind, command: &str) -> Vec<HeadlineRecord> {
    report
        .headlines
        .iter()
        .map(|h| {
            let file = format!("{}/{}", run.results_dir(), h.table);
            HeadlineRecord {
                experiment: name.into(),
                run: run.name().into(),
                what: h.what.clone(),
                ours: h.ours.clone(),
                paper: h.paper.clone(),
                source: if h.rows.is_empty() { file } else { format!("{file}: {}", h.rows) },
                command: command.into(),
                machine: h.machine,
            }
        })
        .collect()
}

/// Replaces the experiment's rows of the destination's `headline.csv` with `fresh` and, when
/// the destination has a README, renders its headline table again.
fn write_headlines(
    dest: &Destination,
    fresh: &[HeadlineRecord],
    heading: &Heading<'_>,
) -> Result<(), ReportError> {
    let path = dest.shared.join("headline.csv");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let all = headline::merge(
        headline::parse_records(&existing)?,
        heading.name,
        dest.run.name(),
        fresh.to_vec(),
        heading.order,
    );
    write_atomically(&path, headline::to_csv(&all)?.as_bytes())?;
    if let Some(readme_path) = &dest.readme {
        let readme = std::fs::read_to_string(readme_path)?;
        write_atomically(readme_path, headline::replace_block(&readme, &headline::render(&all))?.as_bytes())?;
    }
    Ok(())
}

/// The committed `results/headline.csv` under `root` (none when it is missing or unreadable).
pub fn committed_headlines(root: &Path) -> Vec<HeadlineRecord> {
    let text = std::fs::read_to_string(root.join("results").join("headline.csv")).unwrap_or_default();
    headline::parse_records(&text).unwrap_or_default()
}

/// How a fresh run is compared with the committed results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckMode {
    /// The same rows in the same order (`--check`).
    Exact,
    /// A sample of a full run (`--check --sample`): every fresh row must be a committed row, every
    /// committed file of the experiment must be produced again (unless the report leaves it
    /// out), and every committed headline row of the experiment too.
    Sample,
}

/// Compares `report` with the committed results of `run` under `root`: every table's checked
/// columns, and the report's machine-independent headline figures. Returns the differences,
/// one line each (empty when all agree).
pub fn check_report(report: &Report, name: &str, run: RunKind, root: &Path, how: CheckMode) -> Vec<String> {
    let dir = root.join(run.results_dir());
    let mut differences = Vec::new();
    for table in &report.tables {
        let path = dir.join(&table.file);
        let committed = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => {
                differences.push(format!("{}: not committed ({e})", path.display()));
                continue;
            }
        };
        match (parse_csv(&table.file, &committed), how) {
            (Ok((header, rows)), CheckMode::Exact) => {
                differences.extend(first_difference(table, &header, &rows))
            }
            (Ok((header, rows)), CheckMode::Sample) => {
                differences.extend(first_missing_row(table, &header, &rows))
            }
            (Err(e), _) => differences.push(e.to_string()),
        }
    }
    if how == CheckMode::Sample {
        differences.extend(files_not_produced(report, name, &dir));
        for table in &report.tables {
            let digested = digest::machine_columns(&dir, &table.file);
            if digested.as_ref().is_some_and(|m| *m != table.machine_columns) {
                differences.push(format!(
                    "{}: {} leaves out the columns [{}], but the run's machine columns are [{}]",
                    table.file,
                    digest::FILE,
                    digested.unwrap_or_default().join(", "),
                    table.machine_columns.join(", ")
                ));
            }
        }
    }
    differences.extend(headline_differences(report, name, run, root, how));
    differences
}

/// The committed CSVs of experiment `name` in `dir` (`NAME.csv`, `NAME-*.csv`) that `report`
/// neither produced nor says it leaves out.
fn files_not_produced(report: &Report, name: &str, dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("{}: not readable", dir.display())];
    };
    let mut files: Vec<String> = entries
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|f| {
            f.ends_with(".csv") && (*f == format!("{name}.csv") || f.starts_with(&format!("{name}-")))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .filter(|f| !report.tables.iter().any(|t| t.file == *f) && !report.sample_leaves_out.contains(f))
        .map(|f| format!("{f}: committed, but this run no longer produces it"))
        .collect()
}

/// The report's machine-independent headline figures against `results/headline.csv`; in a
/// sample, also the committed headline rows of the experiment that the run no longer produces.
fn headline_differences(
    report: &Report,
    name: &str,
    run: RunKind,
    root: &Path,
    how: CheckMode,
) -> Vec<String> {
    let committed = committed_headlines(root);
    let command = rerun_command(name, run, &report.rerun_flags);
    let fresh = records(report, name, run, &command);
    let mut differences = Vec::new();
    for fresh in fresh.iter().filter(|r| !r.machine) {
        let same =
            committed.iter().find(|c| c.experiment == name && c.run == run.name() && c.what == fresh.what);
        match same {
            Some(c) if c.ours == fresh.ours && c.source == fresh.source => {}
            Some(c) => differences.push(format!(
                "headline.csv, {name} \"{}\": committed {} ({}), this run {} ({})",
                fresh.what, c.ours, c.source, fresh.ours, fresh.source
            )),
            None => differences.push(format!("headline.csv: {name} \"{}\" is not committed", fresh.what)),
        }
    }
    let checks_all =
        how == CheckMode::Sample && !report.sample_leaves_out.iter().any(|f| f == "headline.csv");
    let gone = committed.iter().filter(|c| c.experiment == name && c.run == run.name() && !c.machine);
    for c in gone.filter(|c| checks_all && !fresh.iter().any(|f| f.what == c.what)) {
        differences.push(format!(
            "headline.csv: {name} \"{}\" is committed, but this run no longer produces it",
            c.what
        ));
    }
    differences
}

/// Whether README's headline table is the rendering of the committed `results/headline.csv`.
pub fn check_readme(root: &Path) -> Result<Option<String>, ReportError> {
    let text = std::fs::read_to_string(root.join("results").join("headline.csv")).unwrap_or_default();
    let want = headline::render(&headline::parse_records(&text)?);
    let readme = std::fs::read_to_string(root.join("README.md"))?;
    let have = headline::current_block(&readme)?;
    Ok((have != want).then(|| {
        "README.md's headline table differs from results/headline.csv: run the experiments into \
         results/ (or copy the table) and commit both"
            .to_string()
    }))
}
