//! `partial-local`: how many points move per epoch when each worker exchanges a fraction Q of
//! its partition (Nguyen et al.'s partial-local shuffling), and how many transmissions the
//! exchange costs when it is itself planned by a coded scheme.
//!
//! n = 8 workers, q = 2000 points, Q from 0 (local) to 1 (global) in steps of 0.1; with no
//! excess storage (caches = current batches: uncoded, coded, worst-case, cycle-packing) and
//! with alpha = 0.25 (twice the batch: uncoded, coded). Consecutive epochs from one seeded
//! stream; every plan passes `verify` before it is counted.
//!
//! Then the real epoch loop under local, partial-local Q in {0.1, 0.3, 0.5} and global
//! ([`super::partial_local_training`]): loss against epochs and bytes moved per epoch.

use ubershuffle_core::exchange_policy::{ExchangePolicy, ExchangeRun};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{PlannerOptions, planner_by_name, verify};

use super::{Context, Outcome, partial_local_training};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

const WORKERS: usize = 8;
const POINTS: usize = 2000;
const EXCESS_ALPHA: f64 = 0.25;

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let (seeds, epochs): (&[u64], usize) = if ctx.quick { (&[1], 3) } else { (&[1, 2, 3], 5) };
    let fractions: Vec<f64> = (0..=10).map(|i| f64::from(i) / 10.0).collect();
    let storages: [(&str, Option<f64>, &[&str]); 2] = [
        ("no excess", None, &["uncoded", "coded", "worst-case", "cycle-packing"]),
        ("alpha = 0.25", Some(EXCESS_ALPHA), &["uncoded", "coded"]),
    ];
    let mut table = CsvTable::new(&[
        "part",
        "storage",
        "fraction",
        "seed",
        "epoch",
        "points_moved",
        "scheme",
        "transmissions",
        "payload_bytes",
        "loss",
    ]);
    let bar = ctx.progress((storages.len() * fractions.len() * seeds.len() + 10) as u64, "partial-local");
    let mut chart = LineChart {
        title: format!("Partial-local exchange, n = {WORKERS}, q = {POINTS}"),
        x_label: "fraction Q exchanged per epoch".into(),
        y_label: "per epoch / q (mean)".into(),
        ..Default::default()
    };
    let mut moved_curve = Vec::new();
    let mut summary = Vec::new();
    for (storage, alpha, schemes) in storages {
        let planners = schemes
            .iter()
            .map(|s| planner_by_name(s, &PlannerOptions::default()).map_err(anyhow::Error::from))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut curves = vec![Vec::new(); schemes.len()];
        for &fraction in &fractions {
            let policy = ExchangePolicy::PartialLocal { fraction };
            let (mut moved, mut sent) = (0usize, vec![0usize; schemes.len()]);
            for &seed in seeds {
                let mut run = ExchangeRun::new(policy, WORKERS, POINTS, alpha, seed)?;
                for _ in 0..epochs {
                    let epoch = run.next_epoch();
                    moved += epoch.points_moved;
                    for ((name, planner), total) in schemes.iter().zip(&planners).zip(&mut sent) {
                        let plan = planner.plan(&epoch.instance, &mut seeded_stream(seed, 1))?;
                        verify(&epoch.instance, &plan)?.ensure_valid()?;
                        *total += plan.len();
                        table.push(vec![
                            cell("plans"),
                            cell(storage),
                            cell(fraction),
                            cell(seed),
                            cell(epoch.epoch),
                            cell(epoch.points_moved),
                            cell(name),
                            cell(plan.len()),
                            cell(""),
                            cell(""),
                        ]);
                    }
                }
                bar.inc(1);
            }
            let runs = (seeds.len() * epochs) as f64;
            let rate = |x: usize| x as f64 / runs / POINTS as f64;
            if alpha.is_none() {
                moved_curve.push((fraction, rate(moved)));
            }
            for (curve, &total) in curves.iter_mut().zip(&sent) {
                curve.push((fraction, rate(total)));
            }
            summary.push(format!(
                "| {storage} | {fraction:.1} | {:.0} | {} |",
                moved as f64 / runs,
                schemes
                    .iter()
                    .zip(&sent)
                    .map(|(s, &t)| format!("{s} {:.0}", t as f64 / runs))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (name, curve) in schemes.iter().zip(curves) {
            chart.series.push(Series::solid(format!("{name} ({storage})"), curve));
        }
    }
    let training = partial_local_training::run(ctx.quick, &|| bar.inc(1))?;
    bar.finish_and_clear();
    for row in training.rows {
        table.push(row);
    }
    let expected = fractions.iter().map(|&f| (f, f * (1.0 - 1.0 / WORKERS as f64))).collect();
    chart.series.push(Series::dashed("points moved", moved_curve));
    chart.series.push(Series::dashed("Q (1 - 1/n)", expected));
    let summary = format!(
        "Mean per epoch over {} epochs x {} seed(s). Each worker puts round(Q q/n) points into the exchange and the \
         pool is dealt back uniformly, so about Q q (1 - 1/n) points change worker (dashed). The exchange is an \
         ordinary shuffle: with no excess storage it is a no-excess instance, planned by Attia-Tandon's scheme and \
         by cycle packing; with spare storage Lee et al.'s coded scheme plans it.\n\n\
         | storage | Q | points moved | transmissions |\n| --- | --- | --- | --- |\n{}",
        epochs,
        seeds.len(),
        summary.join("\n")
    );
    let summary = format!("{summary}\n\n{}", training.summary)
        + &super::quick_note(
            ctx,
            "the plan counts over 1 seed x 3 epochs (the full run: 3 seeds x 5 epochs); training with q = 16 000 for 12 epochs (the full run: q = 40 000, 30 epochs)",
        );
    let mut figures = vec![(String::new(), chart)];
    figures.extend(training.figures);
    Ok(Outcome { table, figures, summary })
}
