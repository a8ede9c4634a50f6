//! The training half of `pliable`: the real epoch loop with the assignment chosen by
//! `pliable-greedy` under several randomness levels, against uniformly random shuffling: held-out
//! loss per epoch, transmissions, and the randomness of every epoch's assignment.
//!
//! n = 20 workers, alpha = 0.325 (the setting of the counts), data stored sorted and workers
//! starting from contiguous blocks of it (see [`super::epoch_runs`]), so that an assignment that
//! fails to mix the data trains on biased batches. Unshaped links: this part counts loss and
//! transmissions, not time.

use std::time::Duration;

use serde::Serialize;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;

use super::epoch_runs::{self, Compute, EpochRun, Setup};
use crate::report::{Figure, LineChart, Row, Series, markdown_table};

const WORKERS: usize = 20;
const ALPHA: f64 = 0.325;
const FEATURES: usize = 191;
const SEED: u64 = 1;
/// The planners' search budget in the training runs (work units): small, so that every epoch
/// plans fast; the counts are the first part's business.
const BUDGET: Duration = Duration::from_millis(100);
/// The uniformly random runs' scheme (any scheme trains the same on the same assignments).
const UNIFORM_SCHEME: &str = "clique-cover";
/// The pliable runs' scheme.
const PLIABLE_SCHEME: &str = "pliable-greedy";

/// The levels trained, per learner (linear regression, matrix completion), full and quick.
const LR_LEVELS: [Randomness; 4] =
    [Randomness::Candidates(2), Randomness::Candidates(3), Randomness::Candidates(4), Randomness::All];
const MC_LEVELS: [Randomness; 2] = [Randomness::Candidates(4), Randomness::All];
const QUICK_LR_LEVELS: [Randomness; 3] =
    [Randomness::Candidates(2), Randomness::Candidates(4), Randomness::All];
const QUICK_MC_LEVELS: [Randomness; 1] = [Randomness::Candidates(4)];

/// The size of a training run.
struct Scale {
    /// Linear regression's points.
    points: usize,
    /// Matrix completion's users.
    users: usize,
    epochs: usize,
    lr_levels: &'static [Randomness],
    mc_levels: &'static [Randomness],
}

impl Scale {
    fn of(quick: bool) -> Self {
        if quick {
            Scale {
                points: 10_000,
                users: 2_000,
                epochs: 10,
                lr_levels: &QUICK_LR_LEVELS,
                mc_levels: &QUICK_MC_LEVELS,
            }
        } else {
            Scale { points: 40_000, users: 4_000, epochs: 30, lr_levels: &LR_LEVELS, mc_levels: &MC_LEVELS }
        }
    }
}

/// What the training runs of a quick or full run are, in words.
pub(crate) fn describe(quick: bool) -> String {
    let s = Scale::of(quick);
    let list = |xs: &[Randomness]| xs.iter().map(Randomness::to_string).collect::<Vec<_>>().join(", ");
    format!(
        "{} epochs, linear regression on {} points at {} candidates, matrix completion on {} users at {}",
        s.epochs,
        s.points,
        list(s.lr_levels),
        s.users,
        list(s.mc_levels)
    )
}

/// Runs of the epoch loop at most (for the progress bar).
pub(crate) const RUNS: usize = 3 + LR_LEVELS.len() + MC_LEVELS.len();

/// One trained epoch (epoch 0: the loss before training).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TrainedEpoch {
    learner: &'static str,
    /// "uniform" or "pliable".
    assignment: &'static str,
    candidates: String,
    epoch: usize,
    loss: f64,
    transmissions: usize,
    uncoded_transmissions: usize,
    owner_entropy_bits: f64,
    stay_fraction: f64,
    cached_fraction: f64,
    chi_square_per_df: Option<f64>,
}

impl Row for TrainedEpoch {}

/// What the training runs produced.
pub(crate) struct Training {
    /// One row per (learner, assignment, epoch).
    pub rows: Vec<TrainedEpoch>,
    /// Loss and randomness figures.
    pub figures: Vec<Figure>,
    /// Markdown.
    pub summary: String,
    /// The final linear-regression loss at the goal's level, in percent above uniform.
    pub goal_loss: Option<f64>,
}

/// Trains both learners uniformly and at every level; `goal` is the counts' goal level (it is
/// trained too if not among the levels).
pub(crate) fn run(quick: bool, goal: Option<Randomness>, progress: &dyn Fn()) -> anyhow::Result<Training> {
    let Scale { points, users, epochs, lr_levels, mc_levels } = Scale::of(quick);
    let lr = epoch_runs::linear_regression_setup(points, FEATURES, WORKERS, ALPHA, SEED)?;
    let mc = epoch_runs::matrix_completion(users, 400, 40, WORKERS, ALPHA, SEED)?;
    let mut lr_levels = lr_levels.to_vec();
    if let Some(g) = goal.filter(|g| !lr_levels.contains(g)) {
        lr_levels.insert(lr_levels.len() - 1, g);
    }
    let mut rows = Vec::new();
    for (setup, name, levels) in
        [(&lr, "linear regression", &lr_levels[..]), (&mc, "matrix completion", mc_levels)]
    {
        rows.extend(train(setup, name, None, epochs)?);
        progress();
        for &level in levels {
            rows.extend(train(setup, name, Some(level), epochs)?);
            progress();
        }
    }
    let goal_loss = goal.and_then(|g| final_vs_uniform(&rows, "linear regression", &g.to_string()));
    let figures = vec![
        Figure {
            suffix: "loss".into(),
            chart: loss_chart(&rows, "linear regression", &format!("{points} points")),
        },
        Figure {
            suffix: "loss-mc".into(),
            chart: loss_chart(&rows, "matrix completion", &format!("{users} users")),
        },
        Figure { suffix: "loss-ratio".into(), chart: loss_ratio_chart(&rows) },
        Figure { suffix: "randomness".into(), chart: randomness_chart(&rows) },
        Figure { suffix: "chi-square".into(), chart: chi_square_chart(&rows) },
    ];
    let summary = summary(&rows, points, users, epochs, quick);
    Ok(Training { rows, figures, summary, goal_loss })
}

fn train(
    setup: &Setup,
    learner: &'static str,
    level: Option<Randomness>,
    epochs: usize,
) -> anyhow::Result<Vec<TrainedEpoch>> {
    let scheme = if level.is_some() { PLIABLE_SCHEME } else { UNIFORM_SCHEME };
    let spec = EpochRun {
        scheme,
        policy: ExchangePolicy::Global,
        epochs,
        gbit: None,
        seed: SEED,
        compute: Compute::ThreadCpu,
    };
    let report = epoch_runs::run_choosing(setup, &spec, level, BUDGET)?;
    let (assignment, candidates) = match level {
        Some(r) => ("pliable", r.to_string()),
        None => ("uniform", "1".to_string()),
    };
    let row = |epoch, loss| TrainedEpoch {
        learner,
        assignment,
        candidates: candidates.clone(),
        epoch,
        loss,
        transmissions: 0,
        uncoded_transmissions: 0,
        owner_entropy_bits: f64::NAN,
        stay_fraction: f64::NAN,
        cached_fraction: f64::NAN,
        chi_square_per_df: None,
    };
    let mut rows = vec![row(0, report.initial_loss)];
    rows.extend(report.epochs.iter().map(|e| TrainedEpoch {
        transmissions: e.transmissions,
        uncoded_transmissions: e.uncoded_transmissions,
        owner_entropy_bits: e.owner_entropy_bits,
        stay_fraction: e.stay_fraction,
        cached_fraction: e.cached_fraction,
        chi_square_per_df: e.owner_chi_square_per_df,
        ..row(e.epoch, e.loss)
    }));
    Ok(rows)
}

/// The runs of a learner, as (assignment, candidates) in the order trained.
fn runs<'a>(rows: &'a [TrainedEpoch], learner: &str) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in rows.iter().filter(|r| r.learner == learner) {
        let key = (r.assignment, r.candidates.as_str());
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

fn epochs_of<'a>(rows: &'a [TrainedEpoch], learner: &str, run: (&str, &str)) -> Vec<&'a TrainedEpoch> {
    rows.iter().filter(|r| r.learner == learner && (r.assignment, r.candidates.as_str()) == run).collect()
}

fn label(run: (&str, &str)) -> String {
    match run {
        ("uniform", _) => "uniformly random".into(),
        (_, c) => format!("pliable, {c} candidates"),
    }
}

/// The final loss of the pliable run at `candidates`, in percent above the uniform run's.
fn final_vs_uniform(rows: &[TrainedEpoch], learner: &str, candidates: &str) -> Option<f64> {
    let last = |run| epochs_of(rows, learner, run).last().map(|r| r.loss);
    let (u, p) = (last(("uniform", "1"))?, last(("pliable", candidates))?);
    Some(100.0 * (p / u - 1.0))
}

fn mean(at: &[&TrainedEpoch], f: fn(&TrainedEpoch) -> f64) -> f64 {
    let trained: Vec<f64> = at.iter().filter(|r| r.epoch > 0).map(|r| f(r)).collect();
    trained.iter().sum::<f64>() / trained.len().max(1) as f64
}

fn loss_chart(rows: &[TrainedEpoch], learner: &str, data: &str) -> LineChart {
    let series = runs(rows, learner)
        .into_iter()
        .map(|run| {
            let curve = epochs_of(rows, learner, run).iter().map(|r| (r.epoch as f64, r.loss)).collect();
            if run.0 == "uniform" {
                Series::dashed(label(run), curve)
            } else {
                Series::solid(label(run), curve)
            }
        })
        .collect();
    LineChart {
        title: format!("Pliable training: {learner}, n = {WORKERS}, {data}, alpha = {ALPHA}"),
        x_label: "epoch".into(),
        y_label: "held-out loss".into(),
        log_y: true,
        series,
        ..Default::default()
    }
}

/// Every pliable run's loss over the uniform run's, epoch by epoch (the loss charts' curves
/// lie on top of each other).
fn loss_ratio_chart(rows: &[TrainedEpoch]) -> LineChart {
    let mut series = Vec::new();
    for learner in ["linear regression", "matrix completion"] {
        let uniform = epochs_of(rows, learner, ("uniform", "1"));
        for run in runs(rows, learner).into_iter().filter(|run| run.0 != "uniform") {
            let curve = epochs_of(rows, learner, run)
                .iter()
                .filter(|r| r.epoch > 0)
                .filter_map(|r| {
                    let base = uniform.iter().find(|u| u.epoch == r.epoch)?;
                    Some((r.epoch as f64, r.loss / base.loss))
                })
                .collect();
            let short = if learner == "linear regression" { "LR" } else { "MC" };
            series.push(Series::solid(format!("{short}, {} candidates", run.1), curve));
        }
    }
    LineChart {
        title: format!("Pliable training: loss / uniform shuffling's loss, n = {WORKERS}"),
        x_label: "epoch".into(),
        y_label: "held-out loss / uniform's".into(),
        series,
        ..Default::default()
    }
}

/// The chi-square over epochs of every linear-regression run, after each epoch.
fn chi_square_chart(rows: &[TrainedEpoch]) -> LineChart {
    linear_regression_chart(
        rows,
        format!("Owners over epochs against uniform: chi-square / df, n = {WORKERS} (uniform: 1)"),
        "chi-square / degrees of freedom",
        |r| r.chi_square_per_df,
    )
}

/// The owner entropy of every linear-regression run, per epoch after the first assignment.
fn randomness_chart(rows: &[TrainedEpoch]) -> LineChart {
    linear_regression_chart(
        rows,
        format!("Randomness per epoch: H(next owner | previous owner), n = {WORKERS} (uniform: log2 n)"),
        "bits",
        |r| (r.epoch > 0).then_some(r.owner_entropy_bits),
    )
}

/// A curve per linear-regression run of `value` against the epoch (epochs where it is `None`
/// left out).
fn linear_regression_chart(
    rows: &[TrainedEpoch],
    title: String,
    y_label: &str,
    value: impl Fn(&TrainedEpoch) -> Option<f64>,
) -> LineChart {
    let learner = "linear regression";
    let series = runs(rows, learner)
        .into_iter()
        .map(|run| {
            let curve = epochs_of(rows, learner, run)
                .iter()
                .filter_map(|r| value(r).map(|v| (r.epoch as f64, v)))
                .collect();
            Series::solid(label(run), curve)
        })
        .collect();
    LineChart { title, x_label: "epoch".into(), y_label: y_label.into(), series, ..Default::default() }
}

fn summary(rows: &[TrainedEpoch], points: usize, users: usize, epochs: usize, quick: bool) -> String {
    let mut text = format!(
        "**Training** (the real epoch loop: the master chooses each epoch's batches, sends them with their \
         packets, and every worker decodes and checks its records before training). n = {WORKERS}, alpha = {ALPHA}, \
         {epochs} epochs{quick}; linear regression by parallel SGD on {points} points of {FEATURES} features, matrix \
         completion on {users} users; the data are stored sorted and workers start from contiguous blocks of \
         them (see `table1`), so a worker's batch is a biased sample until the assignments mix it. Uniform runs \
         draw a fresh uniformly random assignment every epoch; pliable runs let `{PLIABLE_SCHEME}` choose it \
         within the candidates. Entropy and stay are means over the epochs; chi-square/df is that of every \
         point's worker counts over all epochs against uniform (about 1 under uniform shuffling).\n\n",
        quick = if quick { " (quick subset)" } else { "" },
    );
    for learner in ["linear regression", "matrix completion"] {
        let lines = runs(rows, learner).into_iter().map(|run| {
            let at = epochs_of(rows, learner, run);
            let last = at.last().copied();
            let vs = if run.0 == "uniform" {
                "-".to_string()
            } else {
                final_vs_uniform(rows, learner, run.1).map_or("-".into(), |d| format!("{d:+.2} %"))
            };
            vec![
                label(run),
                format!("{:.0}", mean(&at, |r| r.transmissions as f64)),
                format!("{:.3}", mean(&at, |r| r.owner_entropy_bits)),
                format!("{:.1} %", 100.0 * mean(&at, |r| r.stay_fraction)),
                last.and_then(|r| r.chi_square_per_df).map_or("-".into(), |c| format!("{c:.2}")),
                at.iter().find(|r| r.epoch == 1).map_or("-".into(), |r| format!("{:.4}", r.loss)),
                last.map_or("-".into(), |r| format!("{:.5}", r.loss)),
                vs,
            ]
        });
        text += &format!(
            "{learner}:\n\n{}\n",
            markdown_table(
                &[
                    "assignment",
                    "transmissions per epoch",
                    "entropy, bits",
                    "stay",
                    "chi-square/df",
                    "loss after 1 epoch",
                    "final loss",
                    "final vs uniform"
                ],
                lines
            )
        );
    }
    text
}
