//! `plugins`: schemes loaded from plugin libraries against the built-in ones, on the same
//! instances.
//!
//! The libraries come from `--plugin PATH` (repeatable); `cargo xtask experiments plugins`
//! builds the example plugin (`examples/plugins/pairwise-xor`) in release mode and passes it.
//! n = 20 as in the UberShuffle paper's Fig. 3, alpha from 0.1 to 0.55, q = 1e5 (1e4 in the
//! quick run), three seeds. Every plan, built-in or plugin, passes `verify` before it is counted.
//! A scheme that fails (or a library that does not load) gets rows with its error; the others
//! still run.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;
use serde::Serialize;
use ubershuffle_core::{
    GeneratorParams, PlannerOptions, ShuffleInstance, ShufflePlanner, rng::seeded_stream, verify,
};
use ubershuffle_plugin_host::PluginLibrary;

use super::{Context, target_dir, workspace_root};
use crate::report::{LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "plugins";
/// What it shows.
pub const ABOUT: &str =
    "Schemes loaded from plugin libraries (by default the pairwise-XOR example) against the built-ins";

const WORKERS: usize = 20;
const ALPHAS: [f64; 5] = [0.1, 0.2, 0.325, 0.45, 0.55];
const SEEDS: [u64; 3] = [1, 2, 3];
/// The built-in schemes compared.
const BUILTINS: [&str; 3] = ["uncoded", "coded", "ubershuffle"];
/// The `source` of a built-in scheme.
const BUILT_IN: &str = "built-in";

/// A scheme in the comparison and where it comes from.
struct Contender {
    planner: Box<dyn ShufflePlanner>,
    source: String,
}

/// One plan, or why there is none.
#[derive(Clone, Debug, Serialize)]
struct Compared {
    scheme: String,
    source: String,
    alpha: f64,
    points: usize,
    seed: u64,
    transmissions: Option<usize>,
    uncoded: usize,
    over_uncoded: Option<f64>,
    plan_seconds: Option<f64>,
    /// Empty when the plan passed `verify`.
    error: String,
}

impl Row for Compared {
    const MACHINE_COLUMNS: &'static [&'static str] = &["plan_seconds"];
}

/// Runs the comparison.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    if ctx.plugins.is_empty() {
        bail!(
            "no plugin given: run `cargo xtask experiments plugins` (which builds the example plugin) \
             or pass --plugin PATH"
        );
    }
    let points = if ctx.quick { 10_000 } else { 100_000 };
    let mut rows = Vec::new();
    let mut contenders: Vec<Contender> = BUILTINS
        .iter()
        .map(|name| {
            Ok(Contender {
                planner: super::planner(name, &PlannerOptions::default())?,
                source: BUILT_IN.into(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    for path in &ctx.plugins {
        let source = shown(path);
        match PluginLibrary::load(path) {
            Ok(plugin) => contenders.extend(
                plugin
                    .planners()
                    .into_iter()
                    .map(|p| Contender { planner: Box::new(p), source: source.clone() }),
            ),
            Err(e) => rows.push(unloadable(&source, points, &e.to_string())),
        }
    }
    rows.extend(measure(ctx, &contenders, points)?);
    let summary = summary(ctx, &contenders, &rows, points)
        + &ctx.quick_note("q = 10 000; the full run has q = 100 000");
    let mut report = Report::new(summary)
        .table(format!("{NAME}.csv"), &rows)?
        .figure("", chart(&contenders, &rows, points));
    report.rerun_flags = ctx.plugins.iter().map(|p| format!("--plugin {}", shown(p))).collect();
    Ok(report)
}

/// A path as the results show it, the same on every machine for the example plugin: inside
/// cargo's target folder as `target/...` (wherever `CARGO_TARGET_DIR` puts it), else relative to
/// the workspace when inside it.
fn shown(path: &Path) -> String {
    let real = |p: PathBuf| p.canonicalize().unwrap_or(p);
    shown_from(&real(path.to_path_buf()), &real(target_dir()), &workspace_root())
}

/// [`shown`] of an absolute `path`, given the target folder and the workspace root.
fn shown_from(path: &Path, target: &Path, root: &Path) -> String {
    match (path.strip_prefix(target), path.strip_prefix(root)) {
        (Ok(inside), _) => Path::new("target").join(inside).display().to_string(),
        (_, Ok(inside)) => inside.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// The row of a library that did not load.
fn unloadable(source: &str, points: usize, error: &str) -> Compared {
    Compared {
        scheme: "(library)".into(),
        source: source.into(),
        alpha: f64::NAN,
        points,
        seed: 0,
        transmissions: None,
        uncoded: 0,
        over_uncoded: None,
        plan_seconds: None,
        error: error.replace('\n', " "),
    }
}

fn measure(ctx: &Context, contenders: &[Contender], points: usize) -> anyhow::Result<Vec<Compared>> {
    let bar = ctx.progress((ALPHAS.len() * SEEDS.len() * contenders.len()) as u64, NAME);
    let mut rows = Vec::new();
    for alpha in ALPHAS {
        for seed in SEEDS {
            let inst = GeneratorParams { workers: WORKERS, points, alpha, seed }.check()?.generate();
            for contender in contenders {
                rows.push(plan_one(contender, &inst, alpha, seed));
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// Plans and verifies one instance; a failure becomes the row's error.
fn plan_one(contender: &Contender, inst: &ShuffleInstance, alpha: f64, seed: u64) -> Compared {
    let uncoded = inst.uncoded_transmissions();
    let started = Instant::now();
    let outcome =
        contender.planner.plan(inst, &mut seeded_stream(seed, 1)).map_err(|e| e.to_string()).and_then(
            |plan| {
                let seconds = started.elapsed().as_secs_f64();
                let report = verify(inst, &plan).map_err(|e| e.to_string())?;
                report.ensure_valid().map_err(|e| e.to_string())?;
                Ok((plan.len(), seconds))
            },
        );
    let (transmissions, seconds, error) = match outcome {
        Ok((t, s)) => (Some(t), Some(s), String::new()),
        Err(e) => (None, None, e.replace('\n', " ")),
    };
    Compared {
        scheme: contender.planner.name().to_string(),
        source: contender.source.clone(),
        alpha,
        points: inst.points(),
        seed,
        transmissions,
        uncoded,
        over_uncoded: transmissions.map(|t| t as f64 / uncoded as f64),
        plan_seconds: seconds,
        error,
    }
}

/// The rows of one contender.
fn rows_of<'a>(rows: &'a [Compared], c: &'a Contender) -> impl Iterator<Item = &'a Compared> {
    rows.iter().filter(move |r| r.scheme == c.planner.name() && r.source == c.source)
}

/// Median transmissions / uncoded of a contender at `alpha` over the seeds it planned.
fn ratio_at(rows: &[Compared], c: &Contender, alpha: f64) -> Option<f64> {
    let values: Vec<f64> =
        rows_of(rows, c).filter(|r| r.alpha == alpha).filter_map(|r| r.over_uncoded).collect();
    (!values.is_empty()).then(|| median(values))
}

fn label(c: &Contender) -> String {
    if c.source == BUILT_IN { c.planner.name().to_string() } else { format!("{} (plugin)", c.planner.name()) }
}

fn chart(contenders: &[Contender], rows: &[Compared], points: usize) -> LineChart {
    let series = contenders
        .iter()
        .map(|c| {
            let curve = ALPHAS.iter().filter_map(|&a| ratio_at(rows, c, a).map(|r| (a, r))).collect();
            if c.source == BUILT_IN {
                Series::dashed(label(c), curve)
            } else {
                Series::solid(label(c), curve)
            }
        })
        .collect();
    LineChart {
        title: format!("Plugin and built-in schemes (n = {WORKERS}, q = {points})"),
        x_label: "storage ratio alpha".into(),
        y_label: "transmissions / uncoded".into(),
        series,
        ..Default::default()
    }
}

fn summary(ctx: &Context, contenders: &[Contender], rows: &[Compared], points: usize) -> String {
    let table = contenders.iter().map(|c| {
        let mut row = vec![label(c)];
        row.extend(
            ALPHAS.iter().map(|&a| ratio_at(rows, c, a).map_or("failed".into(), |r| format!("{r:.3}"))),
        );
        row.push(format!("{:.3}", median(rows_of(rows, c).filter_map(|r| r.plan_seconds))));
        row
    });
    let mut header = vec!["scheme".to_string()];
    header.extend(ALPHAS.iter().map(|a| format!("alpha = {a}")));
    header.push("plan s".into());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let libraries: Vec<String> = ctx.plugins.iter().map(|p| format!("`{}`", shown(p))).collect();
    let findings: Vec<String> = contenders
        .iter()
        .filter(|c| c.source != BUILT_IN)
        .map(|c| finding(contenders, rows, c))
        .chain(
            rows.iter()
                .filter(|r| r.scheme == "(library)")
                .map(|r| format!("`{}` did not load: {}", r.source, r.error)),
        )
        .collect();
    format!(
        "Median over seeds of each scheme's transmissions divided by uncoded's, on the same generated \
         instances (n = {WORKERS}, q = {points}); the last column is the median plan time in seconds, which \
         for a plugin includes passing the instance and plan across the plugin boundary as bytes and \
         verifying the plan on the host side. Plugin libraries: {}.\n\n{}\n{}",
        libraries.join(", "),
        markdown_table(&header, table),
        findings.join("\n\n")
    )
}

/// One sentence on a plugin scheme: its failures, or its range of ratios and at how many storage
/// ratios it sends fewer transmissions than every built-in compared.
fn finding(contenders: &[Contender], rows: &[Compared], c: &Contender) -> String {
    let name = c.planner.name();
    let failures: Vec<&Compared> = rows_of(rows, c).filter(|r| !r.error.is_empty()).collect();
    if let Some(first) = failures.first() {
        let total = rows_of(rows, c).count();
        return format!(
            "`{name}` (plugin) failed on {} of {total} instances; the first: {}",
            failures.len(),
            first.error
        );
    }
    let ratios: Vec<f64> = ALPHAS.iter().filter_map(|&a| ratio_at(rows, c, a)).collect();
    let (low, high) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
    let range =
        if (high - low).abs() < 5e-4 { format!("{low:.3}") } else { format!("{low:.3} to {high:.3}") };
    let builtins: Vec<&Contender> = contenders.iter().filter(|b| b.source == BUILT_IN).collect();
    let wins = ALPHAS
        .iter()
        .filter(|&&a| {
            let own = ratio_at(rows, c, a).unwrap_or(f64::INFINITY);
            builtins.iter().all(|b| ratio_at(rows, b, a).is_none_or(|r| own < r))
        })
        .count();
    let at = match wins {
        0 => "at none of the".to_string(),
        w if w == ALPHAS.len() => "at all".to_string(),
        w => format!("at {w} of the"),
    };
    format!(
        "`{name}` (plugin) sends {range} of uncoded's transmissions; it sends fewer than every built-in \
         compared ({}) {at} {} storage ratios.",
        BUILTINS.join(", "),
        ALPHAS.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_in_the_target_folder_reads_the_same_wherever_that_folder_is() {
        let root = Path::new("/src/ubershuffle");
        let lib = "libpairwise_xor.so";
        let inside = root.join("target/release").join(lib);
        assert_eq!(shown_from(&inside, &root.join("target"), root), "target/release/libpairwise_xor.so");
        let elsewhere = Path::new("/elsewhere/release").join(lib);
        assert_eq!(
            shown_from(&elsewhere, Path::new("/elsewhere"), root),
            "target/release/libpairwise_xor.so"
        );
        assert_eq!(shown_from(&root.join("mine.so"), Path::new("/elsewhere"), root), "mine.so");
        assert_eq!(shown_from(Path::new("/opt/x.so"), Path::new("/elsewhere"), root), "/opt/x.so");
    }
}
