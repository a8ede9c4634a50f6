//! `scale`: the planners from the papers' n = 20 to real clusters of 1000 workers: transmissions
//! against uncoded and the lower bound, plan and verify time, and peak memory, as n grows.
//!
//! Sweep: n in {10, 20, 40, 100, 200, 500, 1000}, q in {1e5, 1e6}, alpha in {0.1, 0.3} (the quick
//! run: q = 1e5, n up to 200). Schemes: uncoded, coded (Lee et al.'s tables), the paper's
//! UberShuffle greedy, ubershuffle-opt, clique-cover and (in the full run) auto. Every plan passes `verify`; a
//! scheme past its reach refuses at once and gets a row with its one-line reason.
//!
//! Peak memory belongs to a process, so every (point, scheme) runs in a child process of this
//! program (`experiments --scale-point ...`), which measures one scheme and prints its row as
//! JSON with its peak resident memory.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use ubershuffle_core::limits::peak_rss_bytes;
use ubershuffle_core::{GeneratorParams, PlannerOptions};
use ubershuffle_planners::bounds::SEARCH_WORK_PER_SECOND;
use ubershuffle_planners::scale::{measure_clique_family, measure_scale_point};

use super::Context;
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table};

/// The experiment's name.
pub const NAME: &str = "scale";
/// What it shows.
pub const ABOUT: &str = "Planners from n = 10 to 1000 workers: transmissions vs uncoded and the lower bound, plan and verify time, peak memory (the cluster-scale planner clique-cover and the portfolio auto against the papers' schemes)";

const SCHEMES: [&str; 6] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt", "clique-cover", "auto"];
/// The quick run's schemes: the portfolio `auto` (the sum of its members' time) only runs in
/// the full run.
const QUICK_SCHEMES: [&str; 5] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt", "clique-cover"];
const ALPHAS: [f64; 2] = [0.1, 0.3];
const SEED: u64 = 1;
/// The search budget of the schemes that search, in the full and the quick run.
const FULL_BUDGET: Duration = Duration::from_secs(10);
const QUICK_BUDGET: Duration = Duration::from_secs(2);
/// The full run's budget from n = 1000 workers, where `clique-cover`'s two passes (see
/// `planners/src/receiver_packing/`) need about 70 s on two cores at q = 1e6, alpha = 0.1.
const FULL_LARGE_BUDGET: (usize, Duration) = (1000, Duration::from_secs(90));
/// The flag of the child mode that measures one scheme on one point.
pub const CHILD_FLAG: &str = "--scale-point";
/// The flag of the child mode that computes one point's clique family figures.
pub const FAMILY_FLAG: &str = "--scale-family";
/// Work units of the largest-clique search behind the clique family's bound, in the full and
/// the quick run: 150 and 2 seconds of one core (where the search takes all of it, about 90
/// and 1.2 s on two).
const FULL_SEARCH_WORK: u64 = 150 * SEARCH_WORK_PER_SECOND;
const QUICK_SEARCH_WORK: u64 = 2 * SEARCH_WORK_PER_SECOND;

/// One scheme on one point of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalePoint {
    scheme: String,
    made_by: String,
    workers: usize,
    points: usize,
    alpha: f64,
    transmissions: Option<usize>,
    uncoded: usize,
    over_uncoded: Option<f64>,
    lower_bound: usize,
    bound_over_uncoded: f64,
    clique_bound: usize,
    clique_bound_over_uncoded: f64,
    clique_bound_kind: String,
    clique_search_threshold: usize,
    clique_search_work: u64,
    clique_estimate: usize,
    clique_estimate_over_uncoded: f64,
    refused: String,
    instance_bytes: usize,
    plan_seconds: f64,
    verify_seconds: f64,
    lower_bound_seconds: f64,
    max_rss_bytes: Option<u64>,
    /// Seconds for the clique family's figures (once a point, in a child of its own).
    clique_bound_seconds: f64,
}

impl Row for ScalePoint {
    const MACHINE_COLUMNS: &'static [&'static str] =
        &["plan_seconds", "verify_seconds", "lower_bound_seconds", "max_rss_bytes", "clique_bound_seconds"];
}

impl ScalePoint {
    /// Takes the clique family's figures of its point.
    fn set_family(&mut self, answer: &FamilyAnswer) {
        let f = &answer.columns;
        self.clique_bound = f.clique_bound;
        self.clique_bound_over_uncoded = f.clique_bound_over_uncoded;
        self.clique_bound_kind.clone_from(&f.clique_bound_kind);
        self.clique_search_threshold = f.clique_search_threshold;
        self.clique_search_work = f.clique_search_work;
        self.clique_estimate = f.clique_estimate;
        self.clique_estimate_over_uncoded = f.clique_estimate_over_uncoded;
        self.clique_bound_seconds = answer.seconds;
    }
}

/// The clique family's figures of a point, the same in every row of the point.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct FamilyColumns {
    /// The bound on every plan of the clique family.
    clique_bound: usize,
    clique_bound_over_uncoded: f64,
    /// What it rests on: `search` (the largest cliques, found at and above a threshold) or
    /// `cachers` (each request's cachers only).
    clique_bound_kind: String,
    /// The search's threshold, 0 without a finished search.
    clique_search_threshold: usize,
    /// Work units the search spent (within the run's budget).
    clique_search_work: u64,
    /// The estimate from expected clique counts (not a bound).
    clique_estimate: usize,
    clique_estimate_over_uncoded: f64,
}

/// The family child's answer: the point's figures and their seconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct FamilyAnswer {
    columns: FamilyColumns,
    seconds: f64,
}

/// The sweep of a run.
struct Sweep {
    schemes: &'static [&'static str],
    workers: &'static [usize],
    points: &'static [usize],
    budget: Duration,
    /// From this many workers on, this budget instead.
    large: Option<(usize, Duration)>,
    /// Work units of the largest-clique search behind the clique family's bound.
    search_work: u64,
}

impl Sweep {
    /// The search budget at `n` workers.
    fn budget_at(&self, n: usize) -> Duration {
        match self.large {
            Some((from, budget)) if n >= from => budget,
            _ => self.budget,
        }
    }

    /// The budgets in words.
    fn describe_budget(&self) -> String {
        let base = format!("{:.0} s", self.budget.as_secs_f64());
        match self.large {
            Some((from, budget)) => format!("{base} ({:.0} s from n = {from})", budget.as_secs_f64()),
            None => base,
        }
    }
}

/// Runs the sweep, each (point, scheme) in a child process.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sweep = if ctx.quick {
        Sweep {
            schemes: &QUICK_SCHEMES,
            workers: &[10, 20, 40, 100, 200],
            points: &[100_000],
            budget: QUICK_BUDGET,
            large: None,
            search_work: QUICK_SEARCH_WORK,
        }
    } else {
        Sweep {
            schemes: &SCHEMES,
            workers: &[10, 20, 40, 100, 200, 500, 1000],
            points: &[100_000, 1_000_000],
            budget: FULL_BUDGET,
            large: Some(FULL_LARGE_BUDGET),
            search_work: FULL_SEARCH_WORK,
        }
    };
    let cells = cells(ctx, &sweep);
    let bar = ctx.progress(cells.len() as u64, NAME);
    let mut rows: Vec<ScalePoint> = Vec::new();
    let mut family: Option<((usize, usize, f64), FamilyAnswer)> = None;
    for (n, q, alpha, scheme) in cells {
        let answer = match family.take() {
            Some((point, answer)) if point == (n, q, alpha) => answer,
            _ => family_in_child(n, q, alpha, sweep.search_work)?,
        };
        let mut row = in_child(n, q, alpha, scheme, sweep.budget_at(n))?;
        row.set_family(&answer);
        rows.push(row);
        family = Some(((n, q, alpha), answer));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let q = sweep.points.last().copied().unwrap_or(0);
    let summary = summary(&sweep, &rows)
        + &ctx.quick_note(
            "q = 1e5, n up to 200, a 2 s budget, no auto, a clique search of 2 s of one core's work; the full run adds q = 1e6, \
             n = 500 and 1000, auto, a 10 s budget (90 s from n = 1000) and 150 s of search",
        );
    let mut report = Report::new(summary).table(format!("{NAME}.csv"), &rows)?.headlines(headlines(&rows));
    for alpha in ALPHAS.iter().rev() {
        let suffix =
            if *alpha == 0.3 { String::new() } else { format!("a{}", alpha.to_string().replace('.', "")) };
        report = report.figure(suffix, ratio_chart(&rows, q, *alpha));
    }
    Ok(report.figure("time", time_chart(&rows, q, 0.3)))
}

/// What `--check --sample` re-runs of the full run.
pub const SAMPLE: &str = "every row at q = 1e5 (all schemes, n and alphas); at q = 1e6 uncoded, coded and \
                          ubershuffle at every n and alpha, and clique-cover at the headline's points (n = 100, \
                          alpha = 0.3 and n = 1000, alpha = 0.1); left out: ubershuffle-opt, auto and the other \
                          clique-cover rows at q = 1e6 (most of the full run's time), checked by digest \
                          and invariants";

/// The headline's points: (n, q, alpha), clique-cover at each.
const HEADLINE_POINTS: [(usize, usize, f64); 4] =
    [(100, 1_000_000, 0.3), (1000, 1_000_000, 0.1), (200, 100_000, 0.3), (100, 100_000, 0.3)];

/// Whether the sample re-runs `scheme` at (n, q, alpha); see [`SAMPLE`].
fn sampled(n: usize, q: usize, alpha: f64, scheme: &str) -> bool {
    q < 1_000_000
        || ["uncoded", "coded", "ubershuffle"].contains(&scheme)
        || (scheme == "clique-cover" && HEADLINE_POINTS.contains(&(n, q, alpha)))
}

/// The (n, q, alpha, scheme) a run measures, in order.
fn cells(ctx: &Context, sweep: &Sweep) -> Vec<(usize, usize, f64, &'static str)> {
    let mut cells = Vec::new();
    for &q in sweep.points {
        for alpha in ALPHAS {
            for &n in sweep.workers {
                let chosen = sweep
                    .schemes
                    .iter()
                    .copied()
                    .filter(|s| !ctx.sample || ctx.quick || sampled(n, q, alpha, s));
                cells.extend(chosen.map(|scheme| (n, q, alpha, scheme)));
            }
        }
    }
    cells
}

/// Runs one scheme on one point in a child process of this program and reads its row.
fn in_child(n: usize, q: usize, alpha: f64, scheme: &str, budget: Duration) -> anyhow::Result<ScalePoint> {
    let exe = std::env::current_exe().context("cannot find this program to run a scale point")?;
    let point = format!("{n},{q},{alpha},{scheme},{}", budget.as_secs_f64());
    let out = Command::new(exe).args([CHILD_FLAG, &point]).output().context("cannot run a scale point")?;
    if !out.status.success() {
        bail!("scale point {point}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("scale point {point}: unreadable row"))
}

/// Computes the clique family's figures of one point in a child process of this program.
fn family_in_child(n: usize, q: usize, alpha: f64, work: u64) -> anyhow::Result<FamilyAnswer> {
    let exe = std::env::current_exe().context("cannot find this program to run a scale point")?;
    let point = format!("{n},{q},{alpha},{work}");
    let out = Command::new(exe).args([FAMILY_FLAG, &point]).output().context("cannot run a scale point")?;
    if !out.status.success() {
        bail!("clique family of {point}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("clique family of {point}: unreadable answer"))
}

/// Whether `flag` starts one of this experiment's child modes ([`child`]).
pub fn is_child_flag(flag: &str) -> bool {
    flag == CHILD_FLAG || flag == FAMILY_FLAG
}

/// The child's side: with [`CHILD_FLAG`] measures `spec` (`n,q,alpha,scheme,budget_seconds`)
/// and returns its row, with [`FAMILY_FLAG`] computes the clique family's figures of `spec`
/// (`n,q,alpha,search_work`); one line of JSON.
pub fn child(flag: &str, spec: &str) -> anyhow::Result<String> {
    if flag == FAMILY_FLAG {
        return family_child(spec);
    }
    scheme_child(spec)
}

fn family_child(spec: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [n, q, alpha, work] = parts.as_slice() else { bail!("{FAMILY_FLAG} takes n,q,alpha,search_work") };
    let params =
        GeneratorParams { workers: n.parse()?, points: q.parse()?, alpha: alpha.parse()?, seed: SEED };
    let point = measure_clique_family(&params.check()?, work.parse()?);
    let (f, uncoded) = (point.family, point.uncoded.max(1) as f64);
    let columns = FamilyColumns {
        clique_bound: f.bound,
        clique_bound_over_uncoded: f.bound as f64 / uncoded,
        clique_bound_kind: f.bound_kind.name().to_string(),
        clique_search_threshold: f.bound_kind.threshold(),
        clique_search_work: f.search_work,
        clique_estimate: f.estimate,
        clique_estimate_over_uncoded: f.estimate as f64 / uncoded,
    };
    Ok(serde_json::to_string(&FamilyAnswer { columns, seconds: point.seconds })?)
}

fn scheme_child(spec: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [n, q, alpha, scheme, budget] = parts.as_slice() else {
        bail!("{CHILD_FLAG} takes n,q,alpha,scheme,budget")
    };
    let params =
        GeneratorParams { workers: n.parse()?, points: q.parse()?, alpha: alpha.parse()?, seed: SEED };
    let options = PlannerOptions::default().with_time_budget(Duration::try_from_secs_f64(budget.parse()?)?);
    let measured = measure_scale_point(&params.check()?, &[*scheme], &options)?;
    let Some(r) = measured.into_iter().next() else { bail!("no row for {scheme}") };
    let row = ScalePoint {
        scheme: r.scheme.clone(),
        made_by: r.made_by.clone(),
        workers: r.workers,
        points: r.points,
        alpha: r.alpha,
        transmissions: r.transmissions,
        uncoded: r.uncoded,
        over_uncoded: r.ratio(),
        lower_bound: r.lower_bound,
        bound_over_uncoded: r.lower_bound as f64 / r.uncoded.max(1) as f64,
        clique_bound: 0,
        clique_bound_over_uncoded: 0.0,
        clique_bound_kind: String::new(),
        clique_search_threshold: 0,
        clique_search_work: 0,
        clique_estimate: 0,
        clique_estimate_over_uncoded: 0.0,
        refused: r.refused.clone().unwrap_or_default(),
        instance_bytes: r.instance_bytes,
        plan_seconds: r.plan_seconds,
        verify_seconds: r.verify_seconds,
        lower_bound_seconds: r.lower_bound_seconds,
        max_rss_bytes: peak_rss_bytes(),
        clique_bound_seconds: 0.0,
    };
    Ok(serde_json::to_string(&row)?)
}

/// The rows of one (q, alpha).
fn at(rows: &[ScalePoint], q: usize, alpha: f64) -> impl Iterator<Item = &ScalePoint> {
    rows.iter().filter(move |r| r.points == q && r.alpha == alpha)
}

/// The best verified plan of one point (fewest transmissions; the first scheme on ties).
fn best(rows: &[ScalePoint], n: usize, q: usize, alpha: f64) -> Option<&ScalePoint> {
    at(rows, q, alpha).filter(|r| r.workers == n && r.transmissions.is_some()).min_by_key(|r| r.transmissions)
}

/// The schemes that ran (the quick run has no `auto`).
fn ran(rows: &[ScalePoint]) -> impl Iterator<Item = &'static str> + '_ {
    SCHEMES.into_iter().filter(|s| rows.iter().any(|r| r.scheme == *s))
}

fn ratio_chart(rows: &[ScalePoint], q: usize, alpha: f64) -> LineChart {
    let mut series: Vec<Series> = ran(rows)
        .map(|s| {
            let curve = at(rows, q, alpha).filter(|r| r.scheme == s);
            Series::solid(s, curve.filter_map(|r| r.over_uncoded.map(|v| (r.workers as f64, v))).collect())
        })
        .collect();
    let bound = at(rows, q, alpha)
        .filter(|r| r.scheme == SCHEMES[0])
        .map(|r| (r.workers as f64, r.bound_over_uncoded));
    series.push(Series::dashed("lower bound", bound.collect()));
    LineChart {
        title: format!("Transmissions vs uncoded, q = {q}, alpha = {alpha}"),
        x_label: "workers n".into(),
        y_label: "transmissions / uncoded".into(),
        log_x: true,
        log_y: true,
        series,
    }
}

fn time_chart(rows: &[ScalePoint], q: usize, alpha: f64) -> LineChart {
    let series = ran(rows)
        .map(|s| {
            let curve = at(rows, q, alpha).filter(|r| r.scheme == s && r.transmissions.is_some());
            Series::solid(s, curve.map(|r| (r.workers as f64, r.plan_seconds + r.verify_seconds)).collect())
        })
        .collect();
    LineChart {
        title: format!("Plan + verify time, q = {q}, alpha = {alpha}"),
        x_label: "workers n".into(),
        y_label: "seconds (this machine)".into(),
        log_x: true,
        log_y: true,
        series,
    }
}

fn summary(sweep: &Sweep, rows: &[ScalePoint]) -> String {
    let lines = sweep.points.iter().flat_map(|&q| {
        ALPHAS.iter().flat_map(move |&alpha| {
            sweep.workers.iter().filter_map(move |&n| {
                let b = best(rows, n, q, alpha)?;
                let of = |s: &str| {
                    at(rows, q, alpha).find(|r| r.workers == n && r.scheme == s).map_or("-".into(), |r| {
                        r.over_uncoded.map_or("refused".into(), |v| format!("{v:.3}"))
                    })
                };
                Some(vec![
                    q.to_string(),
                    alpha.to_string(),
                    n.to_string(),
                    of("coded"),
                    of("ubershuffle"),
                    of("ubershuffle-opt"),
                    of("clique-cover"),
                    of("auto"),
                    format!("{:.3}", b.bound_over_uncoded),
                    match b.clique_search_threshold {
                        0 => format!("{:.3} (cachers)", b.clique_bound_over_uncoded),
                        k => format!("{:.3} (search {k})", b.clique_bound_over_uncoded),
                    },
                    format!(
                        "{} ({:.1}x the bound, {:.2}x the family's)",
                        b.made_by,
                        b.transmissions.unwrap_or(0) as f64 / b.lower_bound.max(1) as f64,
                        b.transmissions.unwrap_or(0) as f64 / b.clique_bound.max(1) as f64
                    ),
                    format!("{:.2}", b.plan_seconds + b.verify_seconds),
                    b.max_rss_bytes.map_or("-".into(), |m| format!("{:.0}", m as f64 / (1 << 20) as f64)),
                ])
            })
        })
    });
    let refusals = rows.iter().filter(|r| !r.refused.is_empty()).count();
    format!(
        "Transmissions divided by uncoded's, seed {SEED}; every plan passed `verify`. The schemes that search had a \
         budget of {} (work units). \"refused\": the scheme stopped at once past its reach ({refusals} of {} \
         scheme-points; the reasons are in the CSV). \"clique family bound\": a bound on every plan whose packets each \
         receiver decodes alone, as every scheme here sends; \"search k\": every clique of k requests or more was \
         found (within {:.0} s of one core's work), \"cachers\": the search did not finish and the bound counts each \
         request's cachers. The last columns are the best plan's scheme and its gap to the lower bound and to the \
         family's, its plan + verify seconds and the peak memory of its process (MiB).\n\n{}",
        sweep.describe_budget(),
        rows.len(),
        sweep.search_work as f64 / SEARCH_WORK_PER_SECOND as f64,
        markdown_table(
            &[
                "q",
                "alpha",
                "n",
                "coded",
                "ubershuffle",
                "ubershuffle-opt",
                "clique-cover",
                "auto",
                "lower bound",
                "clique family bound",
                "best (gap)",
                "best s",
                "best MiB"
            ],
            lines
        )
    )
}

fn headlines(rows: &[ScalePoint]) -> Vec<Headline> {
    let mut out = Vec::new();
    for (n, q, alpha) in HEADLINE_POINTS {
        let Some(c) = at(rows, q, alpha).find(|r| r.workers == n && r.scheme == "clique-cover") else {
            continue;
        };
        let Some(ratio) = c.over_uncoded else { continue };
        out.push(Headline {
            what: format!("clique-cover transmissions / uncoded, n = {n}, q = {q}, alpha = {alpha}"),
            ours: match c.clique_search_threshold {
                0 => format!("{ratio:.3} (lower bound {:.3})", c.bound_over_uncoded),
                _ => format!(
                    "{ratio:.3} (lower bound {:.3}; clique family bound {:.3})",
                    c.bound_over_uncoded, c.clique_bound_over_uncoded
                ),
            },
            paper: "(ours; the papers stop at n = 20)".into(),
            table: format!("{NAME}.csv"),
            rows: format!("scheme=clique-cover, workers={n}, points={q}, alpha={alpha}"),
            machine: false,
        });
    }
    out
}
