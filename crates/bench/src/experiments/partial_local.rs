//! `partial-local`: how many points move per epoch when each worker exchanges a fraction Q of
//! its partition (Nguyen et al.'s partial-local shuffling), and how many transmissions the
//! exchange costs when it is itself planned by a coded scheme.
//!
//! n = 8 workers, q = 2000 points, Q from 0 (local) to 1 (global) in steps of 0.1; with no
//! excess storage (caches = current batches: uncoded, coded, worst-case, cycle-packing) and
//! with alpha = 0.25 (twice the batch: uncoded, coded). Consecutive epochs of one
//! [`EpochChain`] (the chain `ubershuffle run` goes through, caches carried over); every plan
//! passes `verify` before it is counted.
//!
//! Then the real epoch loop under local, partial-local Q in {0.1, 0.3, 0.5} and global
//! ([`super::partial_local_training`]): loss against epochs and bytes moved per epoch.

use serde::Serialize;
use ubershuffle_core::PlannerOptions;
use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
use ubershuffle_core::exchange_policy::ExchangePolicy;

use super::{Context, partial_local_training};
use crate::report::{LineChart, Report, Row, Series, markdown_table};

/// The experiment's name.
pub const NAME: &str = "partial-local";
/// What it shows.
pub const ABOUT: &str = "Partial-local exchange (fraction Q per epoch): points moved and what coded schemes send for it; loss vs epochs and bytes moved under local, partial-local and global in the real epoch loop";

const WORKERS: usize = 8;
const POINTS: usize = 2000;
const EXCESS_ALPHA: f64 = 0.25;

/// The storage settings: label, alpha (None: no excess storage), schemes.
const STORAGES: [(&str, Option<f64>, &[&str]); 2] = [
    ("no excess", None, &["uncoded", "coded", "worst-case", "cycle-packing"]),
    ("alpha = 0.25", Some(EXCESS_ALPHA), &["uncoded", "coded"]),
];

/// One planned exchange epoch.
#[derive(Clone, Debug, Serialize)]
struct Exchange {
    storage: &'static str,
    fraction: f64,
    seed: u64,
    epoch: usize,
    points_moved: usize,
    scheme: &'static str,
    transmissions: usize,
}

impl Row for Exchange {}

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let (seeds, epochs): (&[u64], usize) = if ctx.quick { (&[1], 3) } else { (&[1, 2, 3], 5) };
    let fractions: Vec<f64> = (0..=10).map(|i| f64::from(i) / 10.0).collect();
    let bar = ctx.progress((STORAGES.len() * fractions.len() * seeds.len() + 10) as u64, NAME);
    let mut rows = Vec::new();
    for (storage, alpha, schemes) in STORAGES {
        let planners = schemes
            .iter()
            .map(|s| super::planner(s, &PlannerOptions::default()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for &fraction in &fractions {
            for &seed in seeds {
                let params =
                    ChainParams::new(WORKERS, POINTS, ExchangePolicy::PartialLocal { fraction }, seed);
                let params = match alpha {
                    Some(alpha) => params.with_alpha(alpha)?,
                    None => params,
                };
                let mut chain = EpochChain::new(params)?;
                for _ in 0..epochs {
                    let drawn = chain.draw(&chain.all_workers(), 0)?;
                    let mut last = None;
                    for (&scheme, planner) in schemes.iter().zip(&planners) {
                        let epoch = drawn.clone().plan(planner.as_ref(), None)?;
                        epoch.verify()?;
                        rows.push(Exchange {
                            storage,
                            fraction,
                            seed,
                            epoch: epoch.epoch,
                            points_moved: epoch.points_moved,
                            scheme,
                            transmissions: epoch.plan.len(),
                        });
                        last = Some(epoch);
                    }
                    // Every scheme plans the policy's assignment: the caches go on the same way.
                    if let Some(epoch) = last {
                        chain.commit(&epoch);
                    }
                }
                bar.inc(1);
            }
        }
    }
    let training = partial_local_training::run(ctx.quick, &|| bar.inc(1))?;
    bar.finish_and_clear();
    let summary = format!("{}\n\n{}", summary(&rows, &fractions, epochs, seeds.len()), training.summary)
        + &ctx.quick_note(
            "the plan counts over 1 seed x 3 epochs (the full run: 3 seeds x 5 epochs); training with q = 16 000 for 12 epochs (the full run: q = 40 000, 30 epochs)",
        );
    let mut report = Report::new(summary)
        .table(format!("{NAME}.csv"), &rows)?
        .table(format!("{NAME}-training.csv"), &training.rows)?
        .figure("", chart(&rows, &fractions));
    report.figures.extend(training.figures);
    Ok(report)
}

/// Mean of `f` per epoch over the rows of (storage, fraction, scheme), divided by q.
fn rate(rows: &[Exchange], storage: &str, fraction: f64, scheme: &str, f: fn(&Exchange) -> usize) -> f64 {
    let at: Vec<&Exchange> = rows
        .iter()
        .filter(|r| r.storage == storage && r.fraction == fraction && r.scheme == scheme)
        .collect();
    at.iter().map(|r| f(r) as f64).sum::<f64>() / at.len().max(1) as f64 / POINTS as f64
}

fn chart(rows: &[Exchange], fractions: &[f64]) -> LineChart {
    let mut series = Vec::new();
    for (storage, _, schemes) in STORAGES {
        for &scheme in schemes {
            let curve =
                fractions.iter().map(|&f| (f, rate(rows, storage, f, scheme, |r| r.transmissions))).collect();
            series.push(Series::solid(format!("{scheme} ({storage})"), curve));
        }
    }
    let (storage, _, schemes) = STORAGES[0];
    let moved =
        fractions.iter().map(|&f| (f, rate(rows, storage, f, schemes[0], |r| r.points_moved))).collect();
    series.push(Series::dashed("points moved", moved));
    series.push(Series::dashed("Q", fractions.iter().map(|&f| (f, f)).collect()));
    LineChart {
        title: format!("Partial-local exchange, n = {WORKERS}, q = {POINTS}"),
        x_label: "fraction Q exchanged per epoch".into(),
        y_label: "per epoch / q (mean)".into(),
        series,
        ..Default::default()
    }
}

fn summary(rows: &[Exchange], fractions: &[f64], epochs: usize, seeds: usize) -> String {
    let lines = STORAGES.iter().flat_map(|&(storage, _, schemes)| {
        fractions.iter().map(move |&f| {
            let per_epoch = |scheme, g| rate(rows, storage, f, scheme, g) * POINTS as f64;
            let sent: Vec<String> =
                schemes.iter().map(|s| format!("{s} {:.0}", per_epoch(s, |r| r.transmissions))).collect();
            vec![
                storage.to_string(),
                format!("{f:.1}"),
                format!("{:.0}", per_epoch(schemes[0], |r| r.points_moved)),
                sent.join(", "),
            ]
        })
    });
    format!(
        "Mean per epoch over {epochs} epochs x {seeds} seed(s). Each worker puts round(Q q/n) points into the \
         exchange and the pool is dealt to the other workers, as many to each as it gave, so Q q points change worker (dashed). The \
         exchange is an ordinary shuffle: with no excess storage it is a no-excess instance, planned by \
         Attia-Tandon's scheme and by cycle packing; with spare storage Lee et al.'s coded scheme plans it.\n\n{}",
        markdown_table(&["storage", "Q", "points moved", "transmissions"], lines)
    )
}
