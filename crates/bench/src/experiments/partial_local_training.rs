//! The training half of `partial-local`: the real epoch loop under local, partial-local
//! (Q = 0.1, 0.3, 0.5) and global exchange: held-out loss per epoch and the bytes the
//! exchange moved, each exchange planned by uncoded shuffling and by UberShuffle.
//!
//! Linear regression by parallel SGD (Table 1's LR records, 1536 B), n = 8 workers, each
//! caching twice its batch (alpha = 0.25). Links are unshaped: this part counts bytes and
//! loss, not time. The two schemes draw the same exchanges from the same seed, so their losses
//! must agree epoch by epoch (checked); they differ in the bytes they send.

use ubershuffle_core::exchange_policy::ExchangePolicy;

use super::epoch_runs::{self, RunSpec};
use crate::csv_table::cell;
use crate::svg_chart::{LineChart, Series};

const WORKERS: usize = 8;
const ALPHA: f64 = 0.25;
const FEATURES: usize = 191;
/// The policies, as (label, policy).
fn policies() -> anyhow::Result<Vec<(String, ExchangePolicy)>> {
    let mut out = vec![("local".to_string(), ExchangePolicy::Local)];
    for q in [0.1, 0.3, 0.5] {
        out.push((format!("partial-local Q = {q}"), ExchangePolicy::new("partial-local", Some(q))?));
    }
    out.push(("global".to_string(), ExchangePolicy::Global));
    Ok(out)
}

/// What the training runs produced: rows for the experiment's table (in its columns), the
/// loss and bytes figures, and the summary paragraph.
pub(crate) struct Training {
    /// Rows: part, storage, fraction, seed, epoch, points_moved, scheme, transmissions,
    /// payload_bytes, loss.
    pub rows: Vec<Vec<String>>,
    /// `("loss", chart)`, `("bytes", chart)`.
    pub figures: Vec<(String, LineChart)>,
    /// Markdown.
    pub summary: String,
}

/// Runs every policy with both schemes.
pub(crate) fn run(quick: bool, progress: &dyn Fn()) -> anyhow::Result<Training> {
    let (points, epochs) = if quick { (16_000, 12) } else { (40_000, 30) };
    let seed = 1;
    let setup = epoch_runs::linear_regression_setup(points, FEATURES, WORKERS, ALPHA, seed)?;
    let schemes = ["uncoded", "ubershuffle"];
    let mut rows = Vec::new();
    let mut loss_chart = LineChart {
        title: format!("Partial-local training: LR, n = {WORKERS}, q = {points}, alpha = {ALPHA}"),
        x_label: "epoch".into(),
        y_label: "held-out MSE".into(),
        log_y: true,
        ..Default::default()
    };
    let mut bytes_chart = LineChart {
        title: format!(
            "Bytes moved per epoch: LR, n = {WORKERS}, q = {points} ({} B per point)",
            setup.record_bytes()
        ),
        x_label: "fraction Q exchanged per epoch".into(),
        y_label: "payload MB per epoch (mean)".into(),
        ..Default::default()
    };
    let mut table = String::from(
        "| policy | points moved per epoch | uncoded MB per epoch | ubershuffle MB per epoch | loss after 1 epoch | loss after 5 | final loss |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut bytes_curves: Vec<Vec<(f64, f64)>> = vec![Vec::new(); schemes.len()];
    for (label, policy) in policies()? {
        let mut losses: Option<Vec<f64>> = None;
        let mut moved = 0.0;
        let mut megabytes = Vec::new();
        for (k, &scheme) in schemes.iter().enumerate() {
            let spec = RunSpec { scheme, policy, epochs, gbit: None, seed };
            let report = epoch_runs::run(&setup, &spec)?;
            let curve: Vec<f64> =
                std::iter::once(report.initial_loss).chain(report.epochs.iter().map(|e| e.loss)).collect();
            match &losses {
                None => losses = Some(curve.clone()),
                Some(first) if *first != curve => {
                    anyhow::bail!(
                        "{label}: {scheme} trained differently from {} on the same exchanges",
                        schemes[0]
                    )
                }
                Some(_) => {}
            }
            let n = report.epochs.len().max(1) as f64;
            moved = report.epochs.iter().map(|e| e.uncoded_transmissions as f64).sum::<f64>() / n;
            let mb = report.epochs.iter().map(|e| e.payload_bytes as f64).sum::<f64>() / n / 1e6;
            megabytes.push(mb);
            bytes_curves[k].push((policy.fraction(), mb));
            for e in &report.epochs {
                rows.push(vec![
                    cell("training"),
                    cell(format!("alpha = {ALPHA}")),
                    cell(policy.fraction()),
                    cell(seed),
                    cell(e.epoch),
                    cell(e.uncoded_transmissions),
                    cell(scheme),
                    cell(e.transmissions),
                    cell(e.payload_bytes),
                    cell(e.loss),
                ]);
            }
            progress();
        }
        let losses = losses.unwrap_or_default();
        let at = |e: usize| losses.get(e).copied().unwrap_or(f64::NAN);
        loss_chart.series.push(Series::solid(
            label.clone(),
            losses.iter().enumerate().map(|(e, &l)| (e as f64, l)).collect(),
        ));
        let mb = |k: usize| megabytes.get(k).map_or("-".into(), |m| format!("{m:.2}"));
        table.push_str(&format!(
            "| {label} | {moved:.0} | {} | {} | {:.4} | {:.4} | {:.4} |\n",
            mb(0),
            mb(1),
            at(1),
            at(5),
            at(epochs)
        ));
    }
    for (scheme, curve) in schemes.iter().zip(bytes_curves) {
        bytes_chart.series.push(Series::solid(scheme.to_string(), curve));
    }
    let summary = format!(
        "**Training under each policy** (the real epoch loop: records encoded, sent, decoded, checked and trained \
         on). Linear regression by parallel SGD, q = {points} points of {FEATURES} features ({} B), n = {WORKERS}, \
         alpha = {ALPHA}, {epochs} epochs{quick}, unshaped in-process links; every exchange is planned by uncoded \
         shuffling and by UberShuffle, which trained identically (checked) and moved the bytes shown. The data \
         are stored sorted by label and workers start from contiguous blocks of them (see `table1`), so a \
         worker's partition is a biased sample until the exchange mixes it.\n\n{table}",
        setup.record_bytes(),
        quick = if quick { " (the quick subset; the full run has q = 40 000 and 30 epochs)" } else { "" },
    );
    Ok(Training { rows, figures: vec![("loss".into(), loss_chart), ("bytes".into(), bytes_chart)], summary })
}
