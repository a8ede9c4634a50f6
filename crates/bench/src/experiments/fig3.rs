//! `fig3`: the UberShuffle paper's Fig. 3: packets per epoch against the storage ratio alpha for
//! n = 20 workers and q in {1e4, 1e5, 1e6}, for uncoded, coded (Lee et al.), the paper's
//! UberShuffle greedy and our `ubershuffle-opt`, next to the best lower bound and Theorem 1.
//!
//! Every plan passes `verify` before it is counted. The full run takes three seeds per point
//! and gives `ubershuffle-opt` a budget of [`FULL_OPT_BUDGET`]; `--quick` runs q in {1e4, 1e5}
//! with one seed and [`QUICK_OPT_BUDGET`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ubershuffle_core::bounds::best_lower_bound;
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{
    GeneratorParams, PlannerOptions, ShufflePlanner, planner_by_name, rng::seeded_stream, verify,
};

use super::theorem1::median;
use super::{Context, Outcome};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

const WORKERS: usize = 20;
const ALPHAS: [f64; 6] = [0.1, 0.2, 0.325, 0.4, 0.55, 0.7];
const SCHEMES: [&str; 4] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt"];
/// `ubershuffle-opt`'s search budget in the full run.
pub const FULL_OPT_BUDGET: Duration = Duration::from_secs(10);
/// `ubershuffle-opt`'s search budget in the quick run.
pub const QUICK_OPT_BUDGET: Duration = Duration::from_secs(3);

/// The paper's reported reductions of coded shuffling by UberShuffle (Section 3.2).
const PAPER_RATIOS: [(usize, f64, f64); 2] = [(1_000_000, 0.55, 5.4), (100_000, 0.325, 2.58)];

/// Medians over seeds for one (scheme, q, alpha).
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    transmissions: f64,
    seconds: f64,
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let (points, seeds, budget): (&[usize], &[u64], Duration) = if ctx.quick {
        (&[10_000, 100_000], &[1], QUICK_OPT_BUDGET)
    } else {
        (&[10_000, 100_000, 1_000_000], &[1, 2, 3], FULL_OPT_BUDGET)
    };
    let options = PlannerOptions::default().with_time_budget(budget);
    let planners: Vec<Box<dyn ShufflePlanner>> = SCHEMES
        .iter()
        .map(|name| planner_by_name(name, &options).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    let mut table = CsvTable::new(&[
        "scheme",
        "alpha",
        "points",
        "seed",
        "transmissions",
        "lower_bound",
        "lower_bound_kind",
        "theorem1",
        "plan_seconds",
    ]);
    let bar = ctx.progress((points.len() * ALPHAS.len() * seeds.len() * SCHEMES.len()) as u64, "fig3");
    // (scheme or "lower bound", q, alpha index) -> values over seeds.
    let mut samples: BTreeMap<(String, usize, usize), Vec<(f64, f64)>> = BTreeMap::new();
    for &q in points {
        for (a, &alpha) in ALPHAS.iter().enumerate() {
            for &seed in seeds {
                let inst = GeneratorParams { workers: WORKERS, points: q, alpha, seed }.check()?.generate();
                let bound = best_lower_bound(&inst);
                let theorem1 =
                    theorem1_coded_transmissions(WORKERS, q, inst.cache_size()).unwrap_or(f64::NAN);
                samples.entry(("lower bound".into(), q, a)).or_default().push((bound.value as f64, 0.0));
                for planner in &planners {
                    let started = Instant::now();
                    let plan = planner.plan(&inst, &mut seeded_stream(seed, 1))?;
                    let seconds = started.elapsed().as_secs_f64();
                    verify(&inst, &plan)?.ensure_valid()?;
                    table.push(vec![
                        cell(planner.name()),
                        cell(alpha),
                        cell(q),
                        cell(seed),
                        cell(plan.len()),
                        cell(bound.value),
                        cell(bound.kind),
                        cell(format!("{theorem1:.1}")),
                        cell(format!("{seconds:.3}")),
                    ]);
                    samples
                        .entry((planner.name().into(), q, a))
                        .or_default()
                        .push((plan.len() as f64, seconds));
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    let medians: BTreeMap<(String, usize, usize), Cell> = samples
        .into_iter()
        .map(|(key, values)| {
            let mut counts: Vec<f64> = values.iter().map(|v| v.0).collect();
            let mut seconds: Vec<f64> = values.iter().map(|v| v.1).collect();
            (key, Cell { transmissions: median(&mut counts), seconds: median(&mut seconds) })
        })
        .collect();
    let at = |scheme: &str, q: usize, a: usize| medians.get(&(scheme.to_string(), q, a)).copied();
    let figures =
        points.iter().rev().enumerate().map(|(k, &q)| (figure_suffix(k, q), chart(q, &at))).collect();
    let summary = summary(points, seeds.len(), budget, &at)
        + &super::quick_note(
            ctx,
            &format!(
                "q in {{1e4, 1e5}}, one seed, a {} s budget for ubershuffle-opt; the full run adds q = 1e6, seeds 1-3 and a {} s budget",
                QUICK_OPT_BUDGET.as_secs(),
                FULL_OPT_BUDGET.as_secs()
            ),
        );
    Ok(Outcome { table, figures, summary })
}

/// The largest q is `fig3.svg`; the others `fig3-q1e5.svg` and so on.
fn figure_suffix(k: usize, q: usize) -> String {
    if k == 0 { String::new() } else { format!("q1e{}", (q as f64).log10().round()) }
}

fn chart(q: usize, at: &impl Fn(&str, usize, usize) -> Option<Cell>) -> LineChart {
    let curve = |scheme: &str| -> Vec<(f64, f64)> {
        ALPHAS
            .iter()
            .enumerate()
            .filter_map(|(a, &alpha)| at(scheme, q, a).map(|c| (alpha, c.transmissions)))
            .collect()
    };
    let mut series: Vec<Series> = SCHEMES.iter().map(|s| Series::solid(*s, curve(s))).collect();
    series.push(Series::dashed("lower bound", curve("lower bound")));
    let theorem1 = ALPHAS
        .iter()
        .filter_map(|&alpha| {
            let s = ubershuffle_core::cache_size_for(alpha, q);
            theorem1_coded_transmissions(WORKERS, q, s).map(|r| (alpha, r))
        })
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

fn summary(
    points: &[usize],
    seeds: usize,
    budget: Duration,
    at: &impl Fn(&str, usize, usize) -> Option<Cell>,
) -> String {
    let mut text = format!(
        "Medians over {seeds} seed(s) of the packets each scheme sends, n = {WORKERS}; every plan passed \
         `verify`. `ubershuffle-opt` ran with a budget of {:.0} s (work units, so counts do not depend on the \
         machine's load). The lower bound is the best of `ubershuffle_core::bounds` (the acyclic-subgraph \
         index-coding bound, exact over worker orders).\n\n\
         Coded / UberShuffle where the paper reports it (Section 3.2):\n\n\
         | q | alpha | paper | coded / ubershuffle (ours) | coded / ubershuffle-opt |\n| --- | --- | --- | --- | --- |\n",
        budget.as_secs_f64()
    );
    for (q, alpha, paper) in PAPER_RATIOS {
        let a = ALPHAS.iter().position(|&x| x == alpha).unwrap_or(0);
        let ratio = |scheme: &str| match (at("coded", q, a), at(scheme, q, a)) {
            (Some(c), Some(u)) if u.transmissions > 0.0 => {
                format!("{:.2}x", c.transmissions / u.transmissions)
            }
            _ => "not in this run".into(),
        };
        text += &format!(
            "| {q} | {alpha} | {paper}x | {} | {} |\n",
            ratio("ubershuffle"),
            ratio("ubershuffle-opt")
        );
    }
    text += "\nPer point (medians; seconds are plan times on this machine):\n\n\
             | q | alpha | coded | ubershuffle | ubershuffle-opt | opt vs greedy | lower bound | ubershuffle s | opt s |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for &q in points {
        for (a, &alpha) in ALPHAS.iter().enumerate() {
            let get = |s: &str| at(s, q, a).unwrap_or_default();
            let (coded, greedy, opt, bound) =
                (get("coded"), get("ubershuffle"), get("ubershuffle-opt"), get("lower bound"));
            let gain = 100.0 * (1.0 - opt.transmissions / greedy.transmissions);
            text += &format!(
                "| {q} | {alpha} | {:.0} | {:.0} | {:.0} | {gain:.1} % fewer | {:.0} | {:.2} | {:.2} |\n",
                coded.transmissions,
                greedy.transmissions,
                opt.transmissions,
                bound.transmissions,
                greedy.seconds,
                opt.seconds
            );
        }
    }
    text
}
