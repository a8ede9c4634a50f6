//! `fig4`: the UberShuffle paper's Fig. 4: held-out loss against (emulated) wall-clock time of
//! the learners under uncoded, coded, UberShuffle and clique-cover shuffling and without
//! shuffling, running the real epoch loop on an emulated cluster of 1 Gbit/s single-ported
//! nodes.
//!
//! The setups and runs are Table 1's at 1 Gbit/s ([`super::table1::setups`], the same epochs:
//! run together, the two experiments share them), with the data stored sorted and the workers
//! starting from contiguous blocks of it ([`super::epoch_runs`]). The shuffling schemes draw
//! the same assignments from the same seed, so they train identically epoch by epoch and differ
//! only in how long each epoch takes; "no shuffling" (the local policy) keeps every worker's
//! first block, moves no data and trains on biased batches. Computing is charged by the
//! committed cost model, so every time repeats exactly. The full run also runs every curve
//! again with every compute price halved and doubled (Table 1's band); the quick run does not.
//!
//! Table 1's setups converge within an epoch (a worker's thousands of local SGD steps reach the
//! noise floor at once), so their curves cannot tell the schemes apart by convergence. The
//! convergence panel (`lr-slow`, [`convergence_setup`]) is the same learner and data on fewer
//! points with a tenth of the step: the loss falls over tens of epochs, and order matters (the
//! data are sorted by label, so without shuffling each worker keeps one range of labels). Its
//! target is read off the uncoded run's curve: uncoded's loss after two thirds of its epochs.

use serde::Serialize;
use ubershuffle_core::exchange_policy::ExchangePolicy;

use super::Context;
use super::epoch_runs::{self, Compute, EpochRun, Setup};
use super::table1::{self, setups};
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table};

/// The experiment's name.
pub const NAME: &str = "fig4";
/// What it shows.
pub const ABOUT: &str = "UberShuffle paper, Fig. 4: held-out loss vs emulated wall-clock time under uncoded, coded, UberShuffle, clique-cover and no shuffling, real epoch loop on an emulated 1 Gbit/s cluster";

/// The curves: label, planner, whether it shuffles (global) or not (local).
const CURVES: [(&str, &str, bool); 5] = [
    ("uncoded", "uncoded", true),
    ("coded", "coded", true),
    ("ubershuffle", "ubershuffle", true),
    ("clique-cover", "clique-cover", true),
    ("no shuffling", "uncoded", false),
];
const GBIT: f64 = table1::GBIT;
/// The target loss: uncoded's loss after this share of its epochs (rounded up), so that the
/// uncoded run reaches it only after most of its run and the others are compared on the way.
const TARGET_SHARE: f64 = 2.0 / 3.0;

/// The loss after one epoch (epoch 0: before training).
#[derive(Clone, Debug, Serialize)]
struct LossRow {
    setup: &'static str,
    scheme: &'static str,
    epoch: usize,
    time_s: f64,
    loss: f64,
    shuffle_s: f64,
    epoch_s: f64,
    payload_bytes: u64,
    /// `time_s` of the same run with every compute price of the cost model halved (empty where
    /// the run has no band).
    time_s_half_compute: Option<f64>,
    /// `time_s` with every compute price doubled.
    time_s_double_compute: Option<f64>,
}

/// Every column is checked: the runs are charged by the committed cost model.
impl Row for LossRow {}

/// The convergence panel: Table 1's linear regression on fewer points with a tenth of the local
/// SGD step, so that one epoch of local SGD (a thousand samples per worker) moves the model only
/// part of the way and the loss falls over many epochs; the data stay sorted by label, so a
/// worker that is never reshuffled trains on one range of labels throughout.
const SLOW_POINTS: usize = 20_000;
/// Its local SGD step (Table 1's: 0.002).
const SLOW_STEP: f64 = 0.0002;

/// Epochs of the convergence panel in the quick and the full run.
fn slow_epochs(quick: bool) -> usize {
    if quick { 30 } else { 60 }
}

/// The convergence panel's setup.
fn convergence_setup(seed: u64) -> anyhow::Result<Setup> {
    let mut setup =
        epoch_runs::linear_regression_stepped(SLOW_POINTS, 191, table1::WORKERS, 0.14, seed, SLOW_STEP)?;
    setup.key = "lr-slow";
    setup.row = "(d), converging";
    Ok(setup)
}

/// Runs the figure.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sweep = table1::sweep(ctx.quick);
    let (points, epochs, seed) = (table1::POINTS, sweep.at_1g, table1::SEED);
    let model = epoch_runs::committed()?;
    let prices =
        sweep.band.then(|| table1::BAND.map(|f| ubershuffle_runtime::cost_model::scaled(&model, "all", f)));
    let mut setups: Vec<(Setup, usize)> = setups(points, seed)?.into_iter().map(|s| (s, epochs)).collect();
    setups.push((convergence_setup(seed)?, slow_epochs(ctx.quick)));
    // The quick run draws the paper's curves; the full run adds clique-cover (Table 1's schemes).
    let curves: Vec<_> = CURVES.iter().filter(|(_, scheme, _)| sweep.schemes.contains(scheme)).collect();
    let bar = ctx.progress((setups.len() * curves.len()) as u64, NAME);
    let mut rows = Vec::new();
    for (setup, epochs) in &setups {
        for &&(label, scheme, shuffles) in &curves {
            let policy = if shuffles { ExchangePolicy::Global } else { ExchangePolicy::Local };
            let spec = |m| EpochRun {
                scheme,
                policy,
                epochs: *epochs,
                gbit: Some(GBIT),
                seed,
                compute: Compute::Charged(m),
            };
            let report = epoch_runs::run(setup, &spec(&model))?;
            let band = match &prices {
                Some([half, double]) => {
                    Some([epoch_runs::run(setup, &spec(half))?, epoch_runs::run(setup, &spec(double))?])
                }
                None => None,
            };
            rows.extend(curve_rows(setup, label, &report, band.as_ref().map(|[h, d]| [h, d])));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let setups: Vec<Setup> = setups.into_iter().map(|(s, _)| s).collect();
    let mut report = Report::new(summary(ctx, &setups, &rows, points, epochs))
        .table(format!("{NAME}.csv"), &rows)?
        .headlines(headlines(&setups, &rows));
    for setup in &setups {
        let suffix = if setup.key == "mc" { "" } else { setup.key };
        report = report.figure(suffix, figure(setup, &rows));
    }
    Ok(report)
}

/// The rows of one curve: epoch 0 (before training), then every epoch, with the same run's
/// clocks under the halved and doubled prices beside (when the run has the band).
fn curve_rows(
    setup: &Setup,
    label: &'static str,
    report: &ubershuffle_runtime::RunReport,
    band: Option<[&ubershuffle_runtime::RunReport; 2]>,
) -> Vec<LossRow> {
    let clocks = band.map(|b| b.map(|r| elapsed(&r.epochs)));
    let at = |k: usize, epoch: usize| {
        let clock = clocks.as_ref()?;
        Some(if epoch == 0 { 0.0 } else { clock[k].get(epoch - 1).copied().unwrap_or(f64::NAN) })
    };
    let row = |epoch: usize, time_s, loss, shuffle_s, epoch_s, payload_bytes| LossRow {
        setup: setup.key,
        scheme: label,
        epoch,
        time_s,
        loss,
        shuffle_s,
        epoch_s,
        payload_bytes,
        time_s_half_compute: at(0, epoch),
        time_s_double_compute: at(1, epoch),
    };
    let mut rows = vec![row(0, 0.0, report.initial_loss, 0.0, 0.0, 0)];
    for (e, time) in report.epochs.iter().zip(elapsed(&report.epochs)) {
        rows.push(row(e.epoch, time, e.loss, e.shuffle_seconds(), e.epoch_seconds, e.payload_bytes));
    }
    rows
}

/// The emulated time at the end of each epoch since the start.
fn elapsed(epochs: &[ubershuffle_runtime::EpochMetrics]) -> Vec<f64> {
    epochs
        .iter()
        .scan(0.0, |time, e| {
            *time += e.epoch_seconds;
            Some(*time)
        })
        .collect()
}

/// The rows of one curve, in epoch order.
fn curve<'a>(rows: &'a [LossRow], setup: &str, label: &str) -> Vec<&'a LossRow> {
    rows.iter().filter(|r| r.setup == setup && r.scheme == label).collect()
}

/// The curves that ran on `setup`.
fn ran<'a>(
    rows: &'a [LossRow],
    setup: &'a str,
) -> impl Iterator<Item = &'static (&'static str, &'static str, bool)> + 'a {
    CURVES.iter().filter(move |(label, ..)| !curve(rows, setup, label).is_empty())
}

fn figure(setup: &Setup, rows: &[LossRow]) -> LineChart {
    let series = ran(rows, setup.key)
        .map(|&(label, _, shuffles)| {
            let points = curve(rows, setup.key, label).iter().map(|r| (r.time_s, r.loss)).collect();
            if shuffles { Series::solid(label, points) } else { Series::dashed(label, points) }
        })
        .collect();
    LineChart {
        title: format!(
            "{} {}: held-out loss vs emulated time, 1 Gbit/s",
            setup.row,
            setup.key.to_uppercase()
        ),
        x_label: "emulated seconds since the start".into(),
        y_label: "held-out loss".into(),
        log_y: true,
        series,
        ..Default::default()
    }
}

/// The epoch whose uncoded loss is a setup's target ([`TARGET_SHARE`] of its epochs).
fn target_epoch(rows: &[LossRow], setup: &str) -> usize {
    let epochs = curve(rows, setup, "uncoded").iter().map(|r| r.epoch).max().unwrap_or(0);
    (epochs as f64 * TARGET_SHARE).ceil() as usize
}

/// The target loss of a setup: the uncoded run's loss after [`target_epoch`].
fn target(rows: &[LossRow], setup: &str) -> f64 {
    let epoch = target_epoch(rows, setup);
    curve(rows, setup, "uncoded").iter().find(|r| r.epoch == epoch).map_or(f64::NAN, |r| r.loss)
}

/// The first epoch after which a curve's loss is at most `target`.
fn epoch_to(rows: &[LossRow], setup: &str, label: &str, target: f64) -> Option<usize> {
    curve(rows, setup, label).iter().find(|r| r.loss <= target).map(|r| r.epoch)
}

/// The first time a curve's loss is at most `target`.
fn time_to(rows: &[LossRow], setup: &str, label: &str, target: f64) -> Option<f64> {
    time_to_by(rows, setup, label, target, |r| r.time_s)
}

/// The first time a curve's loss is at most `target`, by the clock `time` (the run's, or the
/// same run's with compute prices halved or doubled).
fn time_to_by(
    rows: &[LossRow],
    setup: &str,
    label: &str,
    target: f64,
    time: fn(&LossRow) -> f64,
) -> Option<f64> {
    curve(rows, setup, label).iter().find(|r| r.loss <= target).map(|r| time(r))
}

/// A curve's time to the target relative to uncoded's, in percent, by the clock `time` (NaN
/// where the run has no such clock).
fn versus_uncoded_by(rows: &[LossRow], setup: &str, label: &str, time: fn(&LossRow) -> f64) -> Option<f64> {
    let goal = target(rows, setup);
    match (time_to_by(rows, setup, label, goal, time), time_to_by(rows, setup, "uncoded", goal, time)) {
        (Some(t), Some(b)) if b > 0.0 && t.is_finite() => Some(100.0 * (t - b) / b),
        _ => None,
    }
}

/// A curve's time to the target relative to uncoded's, as "+x.x %".
fn versus_uncoded(rows: &[LossRow], setup: &str, label: &str) -> Option<String> {
    versus_uncoded_by(rows, setup, label, |r| r.time_s).map(|p| format!("{p:+.1} %"))
}

/// A curve's time to the target relative to uncoded's over the band of compute prices (the
/// committed ones, halved and doubled): "a to b %" (`None` without a band, or not reached).
fn band_versus_uncoded(rows: &[LossRow], setup: &str, label: &str) -> Option<String> {
    let clocks: [fn(&LossRow) -> f64; 3] = [
        |r| r.time_s,
        |r| r.time_s_half_compute.unwrap_or(f64::NAN),
        |r| r.time_s_double_compute.unwrap_or(f64::NAN),
    ];
    let all: Option<Vec<f64>> = clocks.iter().map(|&c| versus_uncoded_by(rows, setup, label, c)).collect();
    let all = all?;
    let (lo, hi) = (
        all.iter().copied().fold(f64::INFINITY, f64::min),
        all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    Some(format!("{lo:+.1} to {hi:+.1} %"))
}

fn section(setup: &Setup, rows: &[LossRow], epochs: usize) -> String {
    let goal = target(rows, setup.key);
    let lines = ran(rows, setup.key).map(|&(label, _, _)| {
        let c = curve(rows, setup.key, label);
        let trained: Vec<&&LossRow> = c.iter().filter(|r| r.epoch > 0).collect();
        let n = trained.len().max(1) as f64;
        vec![
            label.to_string(),
            format!("{:.3}", trained.iter().map(|r| r.epoch_s).sum::<f64>() / n),
            format!("{:.3}", trained.iter().map(|r| r.shuffle_s).sum::<f64>() / n),
            format!("{:.4}", c.last().map_or(f64::NAN, |r| r.loss)),
            time_to(rows, setup.key, label, goal).map_or("not reached".into(), |t| format!("{t:.2} s")),
            epoch_to(rows, setup.key, label, goal).map_or("-".into(), |e| e.to_string()),
            versus_uncoded(rows, setup.key, label).unwrap_or_else(|| "-".into()),
        ]
    });
    format!(
        "**{} {}** ({}, {} B per point). Target loss {goal:.4} (uncoded's loss after epoch {}).\n\n{}",
        setup.row,
        setup.learner_name,
        setup.width_note,
        setup.record_bytes(),
        target_epoch(rows, setup.key),
        markdown_table(
            &[
                "scheme",
                "s per epoch",
                "shuffle s per epoch",
                &format!("loss after {epochs} epochs"),
                "time to target",
                "epochs to target",
                "vs uncoded"
            ],
            lines
        )
    )
}

fn summary(ctx: &Context, setups: &[Setup], rows: &[LossRow], points: usize, epochs: usize) -> String {
    let sections: Vec<String> = setups.iter().map(|s| section(s, rows, epochs)).collect();
    format!(
        "Held-out loss (MSE for LR, RMSE for MC) after each epoch against the emulated time since the start, \
         on 1 Gbit/s links, n = {n}, q = {points}, {epochs} epochs{quick}; setups and runs as in `table1` (same \
         record widths and alpha, per-node emulated clocks, computing charged by the committed cost model). \
         The data are stored sorted (samples by label, user rows by mean rating) and the workers start from \
         contiguous blocks of them: the shuffling schemes reshuffle from the first epoch, no shuffling keeps \
         the blocks. The `lr-slow` panel (Table 1's LR on q = {SLOW_POINTS} with local step {SLOW_STEP}, \
         {slow} epochs) is the one that converges over many epochs; each panel's target is uncoded's loss after \
         two thirds of its epochs. Time per epoch is the whole epoch at the master: shuffle, model broadcast, local \
         training (each worker on its own emulated node), aggregation, held-out loss.\n\n{}\n\n\
         The paper (Fig. 4, 20 EC2 workers, 1 Gbit/s): in (a) and (b) (MC, synthetic) UberShuffle converges \
         fastest, cutting the convergence time by at least 19.8 % and 32.1 %; in (c) (MC, MovieLens) every \
         shuffling scheme beats no shuffling and the coded ones are slightly slower than uncoded; in (d) (LR, \
         synthetic) both coded schemes clearly beat the others and uncoded shuffling fails to beat no \
         shuffling because of its communication cost.",
        sections.join("\n\n"),
        n = super::table1::WORKERS,
        slow = slow_epochs(ctx.quick),
        quick = if ctx.quick {
            format!(
                " (the quick subset, at the committed prices only; the full run has {} epochs and runs every \
                 curve again with every compute price halved and doubled)",
                table1::sweep(false).at_1g
            )
        } else {
            String::new()
        },
    )
}

fn headlines(setups: &[Setup], rows: &[LossRow]) -> Vec<Headline> {
    setups
        .iter()
        .filter(|s| s.key == "lr-slow")
        .map(|s| {
            let vs = |label| versus_uncoded(rows, s.key, label).unwrap_or_else(|| "not reached".into());
            let band = |label| band_versus_uncoded(rows, s.key, label);
            let has_band = rows.iter().any(|r| r.setup == s.key && r.time_s_half_compute.is_some());
            let goal = target(rows, s.key);
            let epochs = |label| epoch_to(rows, s.key, label, goal).map_or("never".into(), |e| format!("epoch {e}"));
            Headline {
                what: format!(
                    "Fig. 4 {} LR (q = {SLOW_POINTS}, local step {SLOW_STEP}), time to uncoded's loss after epoch {} vs \
                     uncoded, 1 Gbit/s",
                    s.row,
                    target_epoch(rows, s.key)
                ),
                ours: format!(
                    "coded {}, UberShuffle {} (no shuffling: {}){}",
                    vs("coded"),
                    vs("ubershuffle"),
                    epochs("no shuffling"),
                    if has_band {
                        let or_not = |b: Option<String>| b.unwrap_or_else(|| "not reached".into());
                        format!(
                            "; compute prices x0.5 to x2: coded {}, UberShuffle {}",
                            or_not(band("coded")),
                            or_not(band("ubershuffle"))
                        )
                    } else {
                        String::new()
                    }
                ),
                paper: "both coded schemes clearly faster".into(),
                table: format!("{NAME}.csv"),
                rows: format!(
                    "setup={}, time_s at the first loss at most uncoded's after epoch {}{}",
                    s.key,
                    target_epoch(rows, s.key),
                    if has_band { "; the band: time_s_half_compute and time_s_double_compute" } else { "" }
                ),
                machine: false,
            }
        })
        .collect()
}
