//! `theorem1`: how far Lee et al.'s coded shuffling is from its asymptotic count at finite q.
//!
//! n = 20 as in the UberShuffle paper's Fig. 3; q from 1e3 to 1e6 (1e5 in the quick run);
//! alpha in {0.1, 0.325, 0.55}; three seeds. Every plan passes `verify` before it is counted.

use serde::Serialize;
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{GeneratorParams, PlannerOptions, rng::seeded_stream, verify};

use super::Context;
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "theorem1";
/// What it shows.
pub const ABOUT: &str =
    "Lee et al.'s coded shuffling at finite q against its asymptotic count (UberShuffle paper, Theorem 1)";

const WORKERS: usize = 20;
const ALPHAS: [f64; 3] = [0.1, 0.325, 0.55];
const SEEDS: [u64; 3] = [1, 2, 3];

/// One planned instance.
#[derive(Clone, Debug, Serialize)]
struct Measured {
    alpha: f64,
    points: usize,
    seed: u64,
    coded: usize,
    uncoded: usize,
    theorem1: f64,
    coded_over_theorem1: f64,
}

impl Row for Measured {}

/// What `--check --sample` re-runs of the full run: all of it (a few seconds).
pub const SAMPLE: &str = "the whole full run";

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let points: &[usize] =
        if ctx.quick { &[1_000, 10_000, 100_000] } else { &[1_000, 10_000, 100_000, 1_000_000] };
    let rows = measure(ctx, points)?;
    let chart = chart(points, &rows);
    let summary = summary(points, &rows) + &ctx.quick_note("q up to 1e5; the full run adds q = 1e6");
    Ok(Report::new(summary)
        .table(format!("{NAME}.csv"), &rows)?
        .figure("", chart)
        .headlines(headline(points, &rows)))
}

fn measure(ctx: &Context, points: &[usize]) -> anyhow::Result<Vec<Measured>> {
    let coded = super::planner("coded", &PlannerOptions::default())?;
    let bar = ctx.progress((ALPHAS.len() * points.len() * SEEDS.len()) as u64, NAME);
    let mut rows = Vec::new();
    for alpha in ALPHAS {
        for &q in points {
            for seed in SEEDS {
                let inst = GeneratorParams { workers: WORKERS, points: q, alpha, seed }.check()?.generate();
                let plan = coded.plan(&inst, &mut seeded_stream(seed, 1))?;
                verify(&inst, &plan)?.ensure_valid()?;
                let theorem1 =
                    theorem1_coded_transmissions(WORKERS, q, inst.cache_size()).unwrap_or(f64::NAN);
                rows.push(Measured {
                    alpha,
                    points: q,
                    seed,
                    coded: plan.len(),
                    uncoded: inst.uncoded_transmissions(),
                    theorem1,
                    coded_over_theorem1: plan.len() as f64 / theorem1,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The median ratio over seeds at (alpha, q).
fn median_ratio(rows: &[Measured], alpha: f64, q: usize) -> f64 {
    median(rows.iter().filter(|r| r.alpha == alpha && r.points == q).map(|r| r.coded_over_theorem1))
}

fn chart(points: &[usize], rows: &[Measured]) -> LineChart {
    let mut series: Vec<Series> = ALPHAS
        .iter()
        .map(|&a| {
            let curve = points.iter().map(|&q| (q as f64, median_ratio(rows, a, q))).collect();
            Series::solid(format!("alpha = {a}"), curve)
        })
        .collect();
    series.push(Series::dashed("Theorem 1", points.iter().map(|&q| (q as f64, 1.0)).collect()));
    LineChart {
        title: format!("Coded shuffling vs Theorem 1 (n = {WORKERS})"),
        x_label: "points q".into(),
        y_label: "coded transmissions / Theorem 1".into(),
        log_x: true,
        series,
        ..Default::default()
    }
}

fn summary(points: &[usize], rows: &[Measured]) -> String {
    let largest = points.last().copied().unwrap_or(0);
    let at_largest: Vec<String> =
        ALPHAS.iter().map(|&a| format!("{:.2}x (alpha = {a})", median_ratio(rows, a, largest))).collect();
    let table_rows = ALPHAS.iter().flat_map(|&a| {
        points
            .iter()
            .map(move |&q| vec![a.to_string(), q.to_string(), format!("{:.2}", median_ratio(rows, a, q))])
    });
    format!(
        "Median over seeds of coded transmissions divided by Theorem 1's count. The UberShuffle paper \
         (Section 3.2, Fig. 3) observes that even at q = 1e6 coded shuffling is far from Theorem 1, and \
         more so as q shrinks. Here, at q = {largest}, coded shuffling sends {} Theorem 1's count.\n\n{}",
        at_largest.join(", "),
        markdown_table(&["alpha", "q", "coded / Theorem 1"], table_rows)
    )
}

fn headline(points: &[usize], rows: &[Measured]) -> Vec<Headline> {
    let q = points.last().copied().unwrap_or(0);
    let alpha = 0.55;
    vec![Headline {
        what: format!("coded shuffling / Theorem 1's count, n = {WORKERS}, q = {q}, alpha = {alpha}"),
        ours: format!("{:.2}x", median_ratio(rows, alpha, q)),
        paper: "far above 1 at finite q (Fig. 3)".into(),
        table: format!("{NAME}.csv"),
        rows: format!("alpha={alpha}, points={q}, median over seeds"),
        machine: false,
    }]
}
