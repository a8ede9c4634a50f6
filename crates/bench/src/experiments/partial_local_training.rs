//! The training half of `partial-local`: the real epoch loop under local, partial-local
//! (Q = 0.1, 0.3, 0.5) and global exchange: held-out loss per epoch and the bytes the
//! exchange moved, each exchange planned by uncoded shuffling and by UberShuffle.
//!
//! Linear regression by parallel SGD (Table 1's LR records, 1536 B), n = 8 workers, each
//! caching twice its batch (alpha = 0.25). Links are unshaped: this part counts bytes and
//! loss, not time. The two schemes draw the same exchanges from the same seed, so their losses
//! must agree epoch by epoch (checked); they differ in the bytes they send.

use serde::Serialize;
use ubershuffle_core::exchange_policy::ExchangePolicy;

use super::epoch_runs::{self, Compute, EpochRun};
use crate::report::{Figure, LineChart, Row, Series, markdown_table};

const WORKERS: usize = 8;
const ALPHA: f64 = 0.25;
const FEATURES: usize = 191;
const SCHEMES: [&str; 2] = ["uncoded", "ubershuffle"];
const SEED: u64 = 1;

/// The policies, as (label, policy).
fn policies() -> anyhow::Result<Vec<(String, ExchangePolicy)>> {
    let mut out = vec![("local".to_string(), ExchangePolicy::Local)];
    for q in [0.1, 0.3, 0.5] {
        out.push((format!("partial-local Q = {q}"), ExchangePolicy::new("partial-local", Some(q))?));
    }
    out.push(("global".to_string(), ExchangePolicy::Global));
    Ok(out)
}

/// One trained epoch (epoch 0: the loss before training).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TrainedEpoch {
    policy: String,
    fraction: f64,
    seed: u64,
    epoch: usize,
    points_moved: usize,
    scheme: &'static str,
    transmissions: usize,
    payload_bytes: u64,
    loss: f64,
}

impl Row for TrainedEpoch {}

/// What the training runs produced: rows, the loss and bytes figures, and the summary.
pub(crate) struct Training {
    /// One row per (policy, scheme, epoch).
    pub rows: Vec<TrainedEpoch>,
    /// `loss` and `bytes`.
    pub figures: Vec<Figure>,
    /// Markdown.
    pub summary: String,
}

/// Runs every policy with both schemes; the schemes must train identically on the same
/// exchanges.
pub(crate) fn run(quick: bool, progress: &dyn Fn()) -> anyhow::Result<Training> {
    let (points, epochs) = if quick { (16_000, 12) } else { (40_000, 30) };
    let setup = epoch_runs::linear_regression_setup(points, FEATURES, WORKERS, ALPHA, SEED)?;
    let policies = policies()?;
    let mut rows = Vec::new();
    for (label, policy) in &policies {
        for &scheme in &SCHEMES {
            let report = epoch_runs::run(
                &setup,
                &EpochRun {
                    scheme,
                    policy: *policy,
                    epochs,
                    gbit: None,
                    seed: SEED,
                    compute: Compute::ThreadCpu,
                },
            )?;
            let row = |epoch, points_moved, transmissions, payload_bytes, loss| TrainedEpoch {
                policy: label.clone(),
                fraction: policy.fraction(),
                seed: SEED,
                epoch,
                points_moved,
                scheme,
                transmissions,
                payload_bytes,
                loss,
            };
            rows.push(row(0, 0, 0, 0, report.initial_loss));
            rows.extend(
                report
                    .epochs
                    .iter()
                    .map(|e| row(e.epoch, e.uncoded_transmissions, e.transmissions, e.payload_bytes, e.loss)),
            );
            progress();
        }
        let losses = |scheme: &str| -> Vec<f64> {
            rows.iter().filter(|r| r.policy == *label && r.scheme == scheme).map(|r| r.loss).collect()
        };
        anyhow::ensure!(
            losses(SCHEMES[0]) == losses(SCHEMES[1]),
            "{label}: {} trained differently from {} on the same exchanges",
            SCHEMES[1],
            SCHEMES[0]
        );
    }
    let labels: Vec<&str> = policies.iter().map(|(l, _)| l.as_str()).collect();
    let figures = vec![
        Figure { suffix: "loss".into(), chart: loss_chart(&rows, &labels, points) },
        Figure { suffix: "bytes".into(), chart: bytes_chart(&rows, &labels, points, setup.record_bytes()) },
    ];
    let summary = summary(&rows, &labels, points, epochs, setup.record_bytes(), quick);
    Ok(Training { rows, figures, summary })
}

/// The trained epochs (from 1) of (policy, scheme).
fn trained<'a>(rows: &'a [TrainedEpoch], policy: &str, scheme: &str) -> Vec<&'a TrainedEpoch> {
    rows.iter().filter(|r| r.policy == policy && r.scheme == scheme && r.epoch > 0).collect()
}

/// The mean of `f` over the trained epochs of (policy, scheme).
fn mean(rows: &[TrainedEpoch], policy: &str, scheme: &str, f: fn(&TrainedEpoch) -> f64) -> f64 {
    let at = trained(rows, policy, scheme);
    at.iter().map(|r| f(r)).sum::<f64>() / at.len().max(1) as f64
}

fn loss_chart(rows: &[TrainedEpoch], labels: &[&str], points: usize) -> LineChart {
    let series = labels
        .iter()
        .map(|&l| {
            let curve = rows
                .iter()
                .filter(|r| r.policy == l && r.scheme == SCHEMES[0])
                .map(|r| (r.epoch as f64, r.loss));
            Series::solid(l, curve.collect())
        })
        .collect();
    LineChart {
        title: format!("Partial-local training: LR, n = {WORKERS}, q = {points}, alpha = {ALPHA}"),
        x_label: "epoch".into(),
        y_label: "held-out MSE".into(),
        log_y: true,
        series,
        ..Default::default()
    }
}

fn bytes_chart(rows: &[TrainedEpoch], labels: &[&str], points: usize, width: usize) -> LineChart {
    let series = SCHEMES
        .iter()
        .map(|&scheme| {
            let curve = labels.iter().filter_map(|&l| {
                let fraction = rows.iter().find(|r| r.policy == l)?.fraction;
                Some((fraction, mean(rows, l, scheme, |r| r.payload_bytes as f64) / 1e6))
            });
            Series::solid(scheme, curve.collect())
        })
        .collect();
    LineChart {
        title: format!("Bytes moved per epoch: LR, n = {WORKERS}, q = {points} ({width} B per point)"),
        x_label: "fraction Q exchanged per epoch".into(),
        y_label: "payload MB per epoch (mean)".into(),
        series,
        ..Default::default()
    }
}

fn summary(
    rows: &[TrainedEpoch],
    labels: &[&str],
    points: usize,
    epochs: usize,
    width: usize,
    quick: bool,
) -> String {
    let lines = labels.iter().map(|&l| {
        let loss_at = |e: usize| {
            rows.iter()
                .find(|r| r.policy == l && r.scheme == SCHEMES[0] && r.epoch == e)
                .map_or(f64::NAN, |r| r.loss)
        };
        vec![
            l.to_string(),
            format!("{:.0}", mean(rows, l, SCHEMES[0], |r| r.points_moved as f64)),
            format!("{:.2}", mean(rows, l, SCHEMES[0], |r| r.payload_bytes as f64) / 1e6),
            format!("{:.2}", mean(rows, l, SCHEMES[1], |r| r.payload_bytes as f64) / 1e6),
            format!("{:.4}", loss_at(1)),
            format!("{:.4}", loss_at(5)),
            format!("{:.4}", loss_at(epochs)),
        ]
    });
    format!(
        "**Training under each policy** (the real epoch loop: records encoded, sent, decoded, checked and trained \
         on). Linear regression by parallel SGD, q = {points} points of {FEATURES} features ({width} B), n = {WORKERS}, \
         alpha = {ALPHA}, {epochs} epochs{quick}, unshaped in-process links; every exchange is planned by uncoded \
         shuffling and by UberShuffle, which trained identically (checked) and moved the bytes shown. The data \
         are stored sorted by label and workers start from contiguous blocks of them (see `table1`), so a \
         worker's partition is a biased sample until the exchange mixes it.\n\n{}",
        markdown_table(
            &[
                "policy",
                "points moved per epoch",
                "uncoded MB per epoch",
                "ubershuffle MB per epoch",
                "loss after 1 epoch",
                "loss after 5",
                "final loss"
            ],
            lines
        ),
        quick = if quick { " (the quick subset; the full run has q = 40 000 and 30 epochs)" } else { "" },
    )
}
