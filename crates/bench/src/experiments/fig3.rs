//! `fig3`: the UberShuffle paper's Fig. 3: packets per epoch against the storage ratio alpha for
//! n = 20 workers and q in {1e4, 1e5, 1e6}, for uncoded, coded (Lee et al.), the paper's
//! UberShuffle greedy and our `ubershuffle-opt`, next to the best lower bound and Theorem 1.
//!
//! Every plan passes `verify` before it is counted. The full run takes three seeds per point
//! and gives `ubershuffle-opt` a budget of [`FULL_OPT_BUDGET`]; `--quick` runs q in {1e4, 1e5}
//! with one seed and [`QUICK_OPT_BUDGET`].

use std::time::{Duration, Instant};

use serde::Serialize;
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{GeneratorParams, PlannerOptions, ShufflePlanner, rng::seeded_stream, verify};
use ubershuffle_planners::bounds::best_lower_bound;

use super::Context;
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "fig3";
/// What it shows.
pub const ABOUT: &str = "packets per epoch against alpha for uncoded, coded, UberShuffle and ubershuffle-opt, n = 20, q = 1e4..1e6 (UberShuffle paper, Fig. 3)";

const WORKERS: usize = 20;
const ALPHAS: [f64; 6] = [0.1, 0.2, 0.325, 0.4, 0.55, 0.7];
const SCHEMES: [&str; 5] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt", "auto"];
/// The quick run's schemes: the paper's and ours beside them, without the portfolio `auto`.
const QUICK_SCHEMES: [&str; 4] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt"];
/// `ubershuffle-opt`'s search budget in the full run.
pub const FULL_OPT_BUDGET: Duration = Duration::from_secs(10);
/// `ubershuffle-opt`'s search budget in the quick run.
pub const QUICK_OPT_BUDGET: Duration = Duration::from_secs(1);

/// The paper's reported reductions of coded shuffling by UberShuffle (Section 3.2):
/// (q, alpha, coded / UberShuffle).
const PAPER_RATIOS: [(usize, f64, f64); 2] = [(1_000_000, 0.55, 5.4), (100_000, 0.325, 2.58)];

/// One planned instance.
#[derive(Clone, Debug, Serialize)]
struct Planned {
    scheme: String,
    alpha: f64,
    points: usize,
    seed: u64,
    transmissions: usize,
    lower_bound: usize,
    lower_bound_kind: String,
    theorem1: f64,
    plan_seconds: f64,
}

impl Row for Planned {
    const MACHINE_COLUMNS: &'static [&'static str] = &["plan_seconds"];
}

/// What `--check --sample` re-runs of the full run.
pub const SAMPLE: &str = "every row at q = 1e4 and 1e5 (all schemes, alphas and seeds); at q = 1e6 uncoded, coded \
                          and ubershuffle at every alpha and seed, and ubershuffle-opt at alpha = 0.55 (the \
                          headline's point), seeds 1-3; left out: ubershuffle-opt at the other q = 1e6 points and \
                          auto at q = 1e6 (about 5 of the full run's 7.5 minutes), checked by digest and invariants";

/// Whether the sample re-runs `scheme` at (q, alpha); see [`SAMPLE`].
fn sampled(q: usize, alpha: f64, scheme: &str) -> bool {
    q < 1_000_000
        || ["uncoded", "coded", "ubershuffle"].contains(&scheme)
        || (scheme == "ubershuffle-opt" && alpha == 0.55)
}

/// Every scheme everywhere (the quick and full runs).
fn everything(_: usize, _: f64, _: &str) -> bool {
    true
}

/// The sweep of a run.
struct Sweep {
    points: &'static [usize],
    seeds: &'static [u64],
    budget: Duration,
    /// Whether the run plans a scheme at (q, alpha).
    planned: fn(usize, f64, &str) -> bool,
    schemes: &'static [&'static str],
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sweep = if ctx.quick {
        Sweep {
            points: &[10_000, 100_000],
            seeds: &[1],
            budget: QUICK_OPT_BUDGET,
            planned: everything,
            schemes: &QUICK_SCHEMES,
        }
    } else if ctx.sample {
        let points = &[10_000, 100_000, 1_000_000];
        Sweep { points, seeds: &[1, 2, 3], budget: FULL_OPT_BUDGET, planned: sampled, schemes: &SCHEMES }
    } else {
        let points = &[10_000, 100_000, 1_000_000];
        Sweep { points, seeds: &[1, 2, 3], budget: FULL_OPT_BUDGET, planned: everything, schemes: &SCHEMES }
    };
    let rows = measure(ctx, &sweep)?;
    let mut report = Report::new(
        summary(&sweep, &rows)
            + &ctx.quick_note(&format!(
                "q in {{1e4, 1e5}}, one seed, a {} s budget for ubershuffle-opt, no auto; the full run adds q = 1e6, seeds 1-3, a {} s budget and auto",
                QUICK_OPT_BUDGET.as_secs(),
                FULL_OPT_BUDGET.as_secs()
            )),
    )
    .table(format!("{NAME}.csv"), &rows)?
    .headlines(headlines(&rows));
    // The largest q is `fig3.svg`; the others `fig3-q1e5.svg` and so on.
    for (k, &q) in sweep.points.iter().rev().enumerate() {
        let suffix = if k == 0 { String::new() } else { format!("q1e{}", (q as f64).log10().round()) };
        report = report.figure(suffix, chart(q, &rows, sweep.schemes));
    }
    Ok(report)
}

fn measure(ctx: &Context, sweep: &Sweep) -> anyhow::Result<Vec<Planned>> {
    let options = PlannerOptions::default().with_time_budget(sweep.budget);
    let planners: Vec<Box<dyn ShufflePlanner>> =
        sweep.schemes.iter().map(|name| super::planner(name, &options)).collect::<anyhow::Result<_>>()?;
    let steps = sweep.points.len() * ALPHAS.len() * sweep.seeds.len() * sweep.schemes.len();
    let bar = ctx.progress(steps as u64, NAME);
    let mut rows = Vec::new();
    for &q in sweep.points {
        for alpha in ALPHAS {
            for &seed in sweep.seeds {
                let inst = GeneratorParams { workers: WORKERS, points: q, alpha, seed }.check()?.generate();
                let bound = best_lower_bound(&inst);
                let theorem1 =
                    theorem1_coded_transmissions(WORKERS, q, inst.cache_size()).unwrap_or(f64::NAN);
                for planner in planners.iter().filter(|p| (sweep.planned)(q, alpha, p.name())) {
                    let started = Instant::now();
                    let plan = planner.plan(&inst, &mut seeded_stream(seed, 1))?;
                    let plan_seconds = started.elapsed().as_secs_f64();
                    verify(&inst, &plan)?.ensure_valid()?;
                    rows.push(Planned {
                        scheme: planner.name().to_string(),
                        alpha,
                        points: q,
                        seed,
                        transmissions: plan.len(),
                        lower_bound: bound.value,
                        lower_bound_kind: bound.kind.to_string(),
                        theorem1,
                        plan_seconds,
                    });
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// Medians over seeds at (scheme, q, alpha): transmissions and plan seconds. The scheme
/// "lower bound" gives the bound.
fn at(rows: &[Planned], scheme: &str, q: usize, alpha: f64) -> Option<(f64, f64)> {
    let at: Vec<&Planned> = rows.iter().filter(|r| r.points == q && r.alpha == alpha).collect();
    let chosen: Vec<&&Planned> = if scheme == "lower bound" {
        at.iter().filter(|r| r.scheme == SCHEMES[0]).collect()
    } else {
        at.iter().filter(|r| r.scheme == scheme).collect()
    };
    if chosen.is_empty() {
        return None;
    }
    let count = |r: &&&Planned| if scheme == "lower bound" { r.lower_bound } else { r.transmissions } as f64;
    Some((median(chosen.iter().map(count)), median(chosen.iter().map(|r| r.plan_seconds))))
}

fn chart(q: usize, rows: &[Planned], schemes: &[&str]) -> LineChart {
    let curve = |scheme: &str| -> Vec<(f64, f64)> {
        ALPHAS.iter().filter_map(|&a| at(rows, scheme, q, a).map(|(t, _)| (a, t))).collect()
    };
    let mut series: Vec<Series> = schemes.iter().map(|s| Series::solid(*s, curve(s))).collect();
    series.push(Series::dashed("lower bound", curve("lower bound")));
    let theorem1 = rows
        .iter()
        .filter(|r| r.points == q && r.scheme == SCHEMES[0] && r.seed == rows[0].seed)
        .map(|r| (r.alpha, r.theorem1))
        .collect();
    series.push(Series::dashed("Theorem 1", theorem1));
    LineChart {
        title: format!("Packets per epoch, n = {WORKERS}, q = {q} (UberShuffle paper, Fig. 3)"),
        x_label: "storage ratio alpha".into(),
        y_label: "transmissions (median over seeds)".into(),
        log_y: true,
        series,
        ..Default::default()
    }
}

/// Coded / `scheme` at (q, alpha), when both ran.
fn reduction(rows: &[Planned], scheme: &str, q: usize, alpha: f64) -> Option<f64> {
    match (at(rows, "coded", q, alpha), at(rows, scheme, q, alpha)) {
        (Some((c, _)), Some((u, _))) if u > 0.0 => Some(c / u),
        _ => None,
    }
}

fn summary(sweep: &Sweep, rows: &[Planned]) -> String {
    let ratio = |s, q, a| reduction(rows, s, q, a).map_or("not in this run".into(), |r| format!("{r:.2}x"));
    let paper = PAPER_RATIOS.iter().map(|&(q, a, p)| {
        vec![
            q.to_string(),
            a.to_string(),
            format!("{p}x"),
            ratio("ubershuffle", q, a),
            ratio("ubershuffle-opt", q, a),
        ]
    });
    let per_point = sweep.points.iter().flat_map(|&q| {
        ALPHAS.iter().map(move |&a| {
            let get = |s: &str| at(rows, s, q, a).unwrap_or((f64::NAN, f64::NAN));
            let (coded, greedy, opt, auto, bound) =
                (get("coded"), get("ubershuffle"), get("ubershuffle-opt"), get("auto"), get("lower bound"));
            vec![
                q.to_string(),
                a.to_string(),
                format!("{:.0}", coded.0),
                format!("{:.0}", greedy.0),
                format!("{:.0}", opt.0),
                format!("{:.1} % fewer", 100.0 * (1.0 - opt.0 / greedy.0)),
                if auto.0.is_nan() { "-".into() } else { format!("{:.0}", auto.0) },
                format!("{:.0}", bound.0),
                format!("{:.2}", greedy.1),
                format!("{:.2}", opt.1),
            ]
        })
    });
    format!(
        "Medians over {} seed(s) of the packets each scheme sends, n = {WORKERS}; every plan passed \
         `verify`. `ubershuffle-opt` ran with a budget of {:.0} s (work units, so counts do not depend on \
         the machine's load). The lower bound is the best of `ubershuffle_planners::bounds` (the \
         acyclic-subgraph index-coding bound, exact over worker orders).{}\n\n\
         Coded / UberShuffle where the paper reports it (Section 3.2):\n\n{}\n\
         Per point (medians; seconds are plan times on this machine):\n\n{}",
        sweep.seeds.len(),
        sweep.budget.as_secs_f64(),
        auto_sentence(rows),
        markdown_table(
            &["q", "alpha", "paper", "coded / ubershuffle (ours)", "coded / ubershuffle-opt"],
            paper
        ),
        markdown_table(
            &[
                "q",
                "alpha",
                "coded",
                "ubershuffle",
                "ubershuffle-opt",
                "opt vs greedy",
                "auto",
                "lower bound",
                "ubershuffle s",
                "opt s"
            ],
            per_point
        )
    )
}

/// How `auto` (when it ran) did against `ubershuffle-opt`, as a sentence.
fn auto_sentence(rows: &[Planned]) -> String {
    let all = auto_vs_opt(rows, |_, _| true);
    if all == 0 {
        return String::new();
    }
    format!(
        " `auto` (the portfolio of `clique-cover`, `ubershuffle-opt` and `cycle-packing`, same budget) sent no \
         more than `ubershuffle-opt` on {} of {all} instances, and fewer on {}.",
        auto_vs_opt(rows, |a, o| a <= o),
        auto_vs_opt(rows, |a, o| a < o)
    )
}

/// How many instances (point and seed) satisfy `holds(auto, opt)` on their transmissions.
fn auto_vs_opt(rows: &[Planned], holds: impl Fn(usize, usize) -> bool) -> usize {
    rows.iter()
        .filter(|a| a.scheme == "auto")
        .filter_map(|a| {
            let opt = rows.iter().find(|o| {
                o.scheme == "ubershuffle-opt"
                    && o.points == a.points
                    && o.alpha == a.alpha
                    && o.seed == a.seed
            })?;
            Some(holds(a.transmissions, opt.transmissions))
        })
        .filter(|&h| h)
        .count()
}

fn headlines(rows: &[Planned]) -> Vec<Headline> {
    PAPER_RATIOS
        .iter()
        .filter_map(|&(q, alpha, paper)| {
            let greedy = reduction(rows, "ubershuffle", q, alpha)?;
            let opt = reduction(rows, "ubershuffle-opt", q, alpha)?;
            Some(Headline {
                what: format!("coded / UberShuffle packets, n = {WORKERS}, q = {q}, alpha = {alpha}"),
                ours: format!("{greedy:.2}x (ubershuffle-opt: {opt:.2}x)"),
                paper: format!("{paper}x"),
                table: format!("{NAME}.csv"),
                rows: format!("points={q}, alpha={alpha}, schemes coded, ubershuffle, ubershuffle-opt; median over seeds"),
                machine: false,
            })
        })
        .collect()
}
