//! `worst-case`: Attia-Tandon's no-excess shuffling against our cycle packing and the lower
//! bound, as the number of workers K grows.
//!
//! Three families of shuffle matrices, N/K = 12 points per worker:
//! - `random`: random reshuffles (the previous batches and the new assignment are independent
//!   uniformly random balanced assignments), the case of random reshuffling in SGD;
//! - `sparse`: sums of 2 uniformly random permutation matrices (few, long cycles), where the
//!   choice of cycles matters most;
//! - `cyclic`: every worker's batch goes whole to the next worker (eq. (49)), the worst case.
//!
//! For each: uncoded, Lee et al.'s coded scheme (pairwise XORs, leftovers unicast), the
//! `worst-case` planner (eq. (43)), `cycle-packing`, Theorem 2's bound maximised over orderings
//! and Theorem 3's `(K-1)N/K`, all divided by N. Every plan passes `verify` first.

use ubershuffle_core::bounds::theorem2_ordering;
use ubershuffle_core::no_excess::{
    GreedyOrder, ShuffleMatrix, greedy_packing, pack_cycles, random_no_excess_instance,
    random_permutation_sum,
};
use ubershuffle_core::rng::{seeded, seeded_stream};
use ubershuffle_core::{PlannerOptions, ShuffleInstance, planner_by_name, verify};

use super::{Context, Outcome};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

const BATCH: usize = 12;
const FAMILIES: [&str; 3] = ["random", "sparse", "cyclic"];
const SCHEMES: [&str; 4] = ["uncoded", "coded", "worst-case", "cycle-packing"];

/// The counts of one shuffle matrix.
struct Counts {
    planned: [usize; 4],
    bound: usize,
    worst: usize,
    points: usize,
    proven_optimal: bool,
    /// Plain greedy splits (shortest first, longest first), up to 10 workers.
    greedy: Option<(usize, usize)>,
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let (max_workers, samples) = if ctx.quick { (12usize, 50u64) } else { (16, 200) };
    let planners = SCHEMES
        .iter()
        .map(|name| {
            planner_by_name(name, &PlannerOptions::default())
                .map_err(anyhow::Error::from)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut table = CsvTable::new(&[
        "family",
        "workers",
        "points",
        "sample",
        "uncoded",
        "coded",
        "worst_case_eq43",
        "cycle_packing",
        "lower_bound",
        "theorem3",
        "cycle_packing_proven_optimal",
        "greedy_shortest_first",
        "greedy_longest_first",
    ]);
    let bar = ctx.progress((FAMILIES.len() * (max_workers - 1)) as u64, "worst-case");
    let mut figures = Vec::new();
    let mut summary_rows = Vec::new();
    let mut stats = Vec::new();
    for family in FAMILIES {
        let mut curves: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 6];
        for workers in 2..=max_workers {
            let draws = if family == "cyclic" { 1 } else { samples };
            let mut sums = [0.0f64; 6];
            let mut family_stats = FamilyStats::default();
            for sample in 0..draws {
                let inst = draw(family, workers, sample);
                let counts = count(&inst, &planners)?;
                let n = counts.points as f64;
                let values = [
                    counts.planned[0],
                    counts.planned[1],
                    counts.planned[2],
                    counts.planned[3],
                    counts.bound,
                    counts.worst,
                ];
                for (sum, v) in sums.iter_mut().zip(values) {
                    *sum += v as f64 / n;
                }
                family_stats.add(&counts);
                let mut row = vec![cell(family), cell(workers), cell(counts.points), cell(sample)];
                row.extend(values.iter().map(cell));
                row.push(cell(counts.proven_optimal));
                let (shortest, longest) =
                    counts.greedy.map_or((String::new(), String::new()), |(s, l)| (cell(s), cell(l)));
                row.extend([shortest, longest]);
                table.push(row);
            }
            for (curve, sum) in curves.iter_mut().zip(sums) {
                curve.push((workers as f64, sum / draws as f64));
            }
            summary_rows.push(format!(
                "| {family} | {workers} | {} |",
                sums.iter().map(|s| format!("{:.3}", s / draws as f64)).collect::<Vec<_>>().join(" | ")
            ));
            stats.push((family, workers, family_stats));
            bar.inc(1);
        }
        let names =
            ["uncoded", "coded (Lee et al.)", "worst-case, eq. (43)", "cycle-packing", "lower bound (Thm 2)"];
        let mut chart = LineChart {
            title: format!("No-excess shuffling, {family} shuffle matrices, N/K = {BATCH}"),
            x_label: "workers K".into(),
            y_label: "transmissions / N (mean)".into(),
            ..Default::default()
        };
        for (name, curve) in names.iter().zip(&curves) {
            chart.series.push(if name.starts_with("lower") {
                Series::dashed(*name, curve.clone())
            } else {
                Series::solid(*name, curve.clone())
            });
        }
        chart.series.push(Series::dashed("worst case (K-1)/K (Thm 3)", curves[5].clone()));
        let suffix = if family == "random" { String::new() } else { family.to_string() };
        figures.push((suffix, chart));
    }
    bar.finish_and_clear();
    let summary = summarise(&stats, &summary_rows, samples)
        + &super::quick_note(
            ctx,
            "K up to 12 with 50 sampled instances per K; the full run goes to K = 16 with 200",
        );
    Ok(Outcome { table, figures, summary })
}

/// The instance of `sample` in `family` with `workers` workers.
fn draw(family: &str, workers: usize, sample: u64) -> ShuffleInstance {
    let seed = sample * 1000 + workers as u64;
    match family {
        "random" => random_no_excess_instance(workers, workers * BATCH, &mut seeded(seed))
            .unwrap_or_else(|e| unreachable!("valid sizes: {e}")),
        "sparse" => random_permutation_sum(workers, 2, &mut seeded(seed)).to_instance(),
        _ => {
            let rows = (0..workers)
                .map(|i| (0..workers).map(|j| if j == (i + 1) % workers { BATCH } else { 0 }).collect())
                .collect();
            ShuffleMatrix::new(rows).unwrap_or_else(|e| unreachable!("a cyclic shuffle: {e}")).to_instance()
        }
    }
}

/// Plans `inst` with every scheme (each plan verified) and computes the bounds.
fn count(
    inst: &ShuffleInstance,
    planners: &[Box<dyn ubershuffle_core::ShufflePlanner>],
) -> anyhow::Result<Counts> {
    let mut planned = [0usize; 4];
    for (slot, planner) in planned.iter_mut().zip(planners) {
        let plan = planner.plan(inst, &mut seeded_stream(0, 1))?;
        verify(inst, &plan)?.ensure_valid()?;
        *slot = plan.len();
    }
    let s = ShuffleMatrix::from_instance(inst)?;
    anyhow::ensure!(planned[2] == s.achievable_transmissions(), "worst-case differs from eq. (43) on {s}");
    let bound = theorem2_ordering(&s).forward;
    let greedy = |order| greedy_packing(&s, order).map(|p| p.transmissions());
    Ok(Counts {
        greedy: greedy(GreedyOrder::ShortestFirst).zip(greedy(GreedyOrder::LongestFirst)),
        planned,
        bound,
        worst: s.worst_case_transmissions().unwrap_or(0),
        points: inst.points(),
        proven_optimal: pack_cycles(&s).proven_optimal,
    })
}

/// How cycle packing fared against eq. (43) and the bound on one family and K.
#[derive(Default)]
struct FamilyStats {
    samples: usize,
    beats_eq43: usize,
    total_gain: usize,
    max_gain: usize,
    meets_bound: usize,
    eq43_meets_bound: usize,
    eq43_sum: usize,
    proven: usize,
    /// Sums of (cycle packing, greedy shortest first, greedy longest first), up to 10 workers.
    greedy_sums: Option<(usize, usize, usize)>,
}

impl FamilyStats {
    fn add(&mut self, c: &Counts) {
        let gain = c.planned[2] - c.planned[3];
        self.samples += 1;
        self.beats_eq43 += usize::from(gain > 0);
        self.total_gain += gain;
        self.max_gain = self.max_gain.max(gain);
        self.meets_bound += usize::from(c.planned[3] == c.bound);
        self.eq43_meets_bound += usize::from(c.planned[2] == c.bound);
        self.eq43_sum += c.planned[2];
        self.proven += usize::from(c.proven_optimal);
        self.greedy_sums = c.greedy.map(|(s, l)| {
            let (a, b, d) = self.greedy_sums.unwrap_or((0, 0, 0));
            (a + c.planned[3], b + s, d + l)
        });
    }
}

fn summarise(stats: &[(&str, usize, FamilyStats)], rows: &[String], samples: u64) -> String {
    let mut out = format!(
        "Mean transmissions divided by N over {samples} matrices per K (one for cyclic). Every plan passed `verify`, \
         and the `worst-case` planner's count equalled eq. (43) on every matrix. Example 1 of the paper \
         (`ubershuffle plan --scheme worst-case --shuffle-matrix \"2,1,2;2,1,2;1,3,1\"`) gives uncoded 11, \
         eq. (43) 6, lower bound 6.\n\n\
         How often cycle packing beats eq. (43), by how much, and how often each meets Theorem 2's bound \
         (`proven` = no split into cycles holds more: exact search finished or the bound was met):\n\n\
         | family | K | beats eq. 43 | mean gain | max gain | cycle-packing = bound | eq. 43 = bound | proven |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for (family, workers, s) in stats {
        let pct = |x: usize| format!("{:.0} %", 100.0 * x as f64 / s.samples.max(1) as f64);
        out.push_str(&format!(
            "| {family} | {workers} | {} | {:.2} | {} | {} | {} | {} |\n",
            pct(s.beats_eq43),
            s.total_gain as f64 / s.samples.max(1) as f64,
            s.max_gain,
            pct(s.meets_bound),
            pct(s.eq43_meets_bound),
            pct(s.proven),
        ));
    }
    out.push_str(
        "\nWhy shortest first: mean transmissions of the search, of a plain greedy taking every listed cycle \
         shortest first, and longest first, against eq. (43) (non-cyclic families, K up to 10):\n\n\
         | family | K | cycle-packing | greedy shortest first | greedy longest first | eq. 43 |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for (family, workers, s) in stats.iter().filter(|(f, _, _)| *f != "cyclic") {
        if let Some((packed, shortest, longest)) = s.greedy_sums {
            let n = s.samples.max(1) as f64;
            out.push_str(&format!(
                "| {family} | {workers} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
                packed as f64 / n,
                shortest as f64 / n,
                longest as f64 / n,
                s.eq43_sum as f64 / n
            ));
        }
    }
    out.push_str(
        "\nMean rates (transmissions / N):\n\n\
         | family | K | uncoded | coded | eq. 43 | cycle-packing | lower bound | (K-1)/K |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    out.push_str(&rows.join("\n"));
    out
}
