//! `table1`: the UberShuffle paper's Table 1 scaled to this machine: shuffle time and whole
//! epochs of uncoded, coded (Lee et al.), UberShuffle and clique-cover, running the real epoch
//! loop on an emulated cluster of single-ported nodes at 1, 10 and 50 Gbit/s (n = 20), and on
//! an emulated 100-node cluster at 1 Gbit/s.
//!
//! The quick run is the paper's comparison alone: 1 Gbit/s, n = 20, three epochs per cell at the
//! committed prices. The full run adds 10 and 50 Gbit/s, the 100-node cluster, more epochs, and
//! runs every cell again with every compute price halved and doubled (the band).
//!
//! Setups (the paper's rows (a) and (d), scaled; see [`scale_note`]): n = 20 workers as in the
//! paper; matrix completion on a synthetic low-rank matrix whose data points are user rows of
//! m observed ratings (alpha = 0.2), and linear regression by parallel SGD on synthetic wide
//! samples (alpha = 0.14). Every epoch is planned, verified, encoded, pseudo-broadcast,
//! decoded, checked against the master's checksum and trained on. Computing is charged by the
//! committed cost model (`results/cost-model.toml`), so every time in the table is the same in
//! every run, on any host, and `--check` compares them all.

use serde::Serialize;
use ubershuffle_core::PlanError;
use ubershuffle_core::epoch_chain::ChainError;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_runtime::{CostModel, EpochMetrics, RuntimeError};

use super::Context;
use super::epoch_runs::{self, Compute, EpochRun, Setup};
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "table1";
/// What it shows.
pub const ABOUT: &str = "UberShuffle paper, Table 1 scaled: shuffle time and whole epochs of uncoded, coded, UberShuffle and clique-cover on an emulated cluster at 1, 10 and 50 Gbit/s (n = 20) and of 100 nodes, real epoch loop on per-node emulated clocks";

/// The schemes: the paper's Table 1, and the cluster-scale planner.
pub(crate) const SCHEMES: [&str; 4] = ["uncoded", "coded", "ubershuffle", "clique-cover"];
/// The paper's schemes: the quick run's.
const PAPER_SCHEMES: [&str; 3] = ["uncoded", "coded", "ubershuffle"];
/// Emulated link rates, Gbit/s.
const RATES: [f64; 3] = [1.0, 10.0, 50.0];
/// Workers, as in the paper (20 m3.xlarge instances).
pub(crate) const WORKERS: usize = 20;
/// Data points q, as in the paper's row (a).
pub(crate) const POINTS: usize = 100_000;
/// The emulated cluster at scale.
const SCALE_WORKERS: usize = 100;
/// The rate of the main comparison and of the cluster at scale.
pub(crate) const GBIT: f64 = 1.0;
/// The seed of every run.
pub(crate) const SEED: u64 = 1;
/// The paper's shuffle time of UberShuffle as a share of uncoded's, and how close ours should
/// come (points).
const SHARE_TOLERANCE: f64 = 10.0;

/// What a quick or a full run of the table measures.
pub(crate) struct Sweep {
    /// The schemes (shared with `fig4`).
    pub schemes: &'static [&'static str],
    /// Emulated link rates, Gbit/s.
    rates: &'static [f64],
    /// Epochs per run at 1 Gbit/s (shared with `fig4`).
    pub at_1g: usize,
    /// Epochs per run at the other rates.
    elsewhere: usize,
    /// Epochs of the cluster at scale (`None`: the cluster at scale does not run).
    at_scale: Option<usize>,
    /// Whether every cell runs again with every compute price halved and doubled ([`BAND`];
    /// shared with `fig4`).
    pub band: bool,
}

/// The quick run: the paper's comparison (its schemes at 1 Gbit/s, n = 20) at the committed
/// prices.
const QUICK: Sweep =
    Sweep { schemes: &PAPER_SCHEMES, rates: &[GBIT], at_1g: 3, elsewhere: 0, at_scale: None, band: false };
/// The full run.
const FULL: Sweep =
    Sweep { schemes: &SCHEMES, rates: &RATES, at_1g: 9, elsewhere: 9, at_scale: Some(5), band: true };

/// The sweep of a quick or a full run.
pub(crate) fn sweep(quick: bool) -> &'static Sweep {
    if quick { &QUICK } else { &FULL }
}

impl Sweep {
    /// Epochs per cell at `gbit`.
    fn epochs_at(&self, gbit: f64) -> usize {
        if gbit == GBIT { self.at_1g } else { self.elsewhere }
    }

    /// What the sweep runs, in words.
    fn describe(&self) -> String {
        let rates: Vec<String> = self.rates.iter().map(f64::to_string).collect();
        let elsewhere = if self.rates.len() > 1 {
            format!(", {} at the other rates", self.elsewhere)
        } else {
            String::new()
        };
        let scale = self.at_scale.map_or_else(String::new, |e| format!(", {e} at n = {SCALE_WORKERS}"));
        let band = if self.band { ", every cell also with compute prices halved and doubled" } else { "" };
        format!(
            "at {} Gbit/s, {} epochs per cell at {GBIT} Gbit/s{elsewhere}{scale}{band}",
            rates.join(", "),
            self.at_1g
        )
    }
}

/// A row of the paper's Table 1.
struct PaperRow {
    row: &'static str,
    setup: &'static str,
    q: &'static str,
    m: &'static str,
    alpha: f64,
    /// Shuffle seconds of uncoded, coded and UberShuffle.
    seconds: (f64, f64, f64),
}

/// The paper's Table 1.
const PAPER: [PaperRow; 4] = [
    PaperRow {
        row: "(a)",
        setup: "MC, synthetic",
        q: "1e5",
        m: "1e4",
        alpha: 0.2,
        seconds: (105.5, 123.6, 65.2),
    },
    PaperRow {
        row: "(b)",
        setup: "MC, synthetic",
        q: "3e5",
        m: "1000",
        alpha: 0.2,
        seconds: (35.0, 28.8, 25.3),
    },
    PaperRow { row: "(c)", setup: "MC, real", q: "6.8e4", m: "68", alpha: 0.2, seconds: (0.42, 1.66, 1.52) },
    PaperRow {
        row: "(d)",
        setup: "LR, synthetic",
        q: "7e5",
        m: "2e5",
        alpha: 0.14,
        seconds: (112.90, 94.60, 60.82),
    },
];

/// The scaled setups with `points` data points each: matrix completion with user rows of
/// m = 100 ratings of 2000 items (1208 B), alpha = 0.2, and linear regression with m = 191
/// features (1536 B), alpha = 0.14.
pub(crate) fn setups(points: usize, seed: u64) -> anyhow::Result<Vec<Setup>> {
    Ok(vec![
        epoch_runs::matrix_completion(points, 2000, 100, WORKERS, 0.2, seed)?,
        epoch_runs::linear_regression_setup(points, 191, WORKERS, 0.14, seed)?,
    ])
}

/// The cluster at scale: matrix completion as in row (a) on 100 workers, with rows of m = 20
/// ratings (248 B) so that 100 caches of 20 000 points fit this machine's memory.
fn scale_setup(seed: u64) -> anyhow::Result<Setup> {
    let mut setup = epoch_runs::matrix_completion(POINTS, 2000, 20, SCALE_WORKERS, 0.2, seed)?;
    setup.key = "mc-100";
    setup.row = "(a), n = 100";
    Ok(setup)
}

/// One epoch of one (setup, rate, scheme) run.
#[derive(Clone, Debug, Serialize)]
struct EpochRow {
    setup: &'static str,
    workers: usize,
    gbit: f64,
    scheme: &'static str,
    epoch: usize,
    transmissions: usize,
    uncoded_transmissions: usize,
    broadcast_packets: usize,
    unicast_packets: usize,
    payload_bytes: u64,
    control_bytes: u64,
    model_bytes: u64,
    record_bytes: usize,
    plan_s: f64,
    verify_s: f64,
    route_s: f64,
    model_s: f64,
    encode_s: f64,
    transmit_s: f64,
    link_model_s: f64,
    decode_s: f64,
    train_s: f64,
    waiting_s: f64,
    aggregate_s: f64,
    shuffle_s: f64,
    epoch_s: f64,
    loss: f64,
    /// `shuffle_s` with every compute price of the cost model halved (the same run otherwise;
    /// empty where the run has no band).
    shuffle_s_half_compute: Option<f64>,
    /// `shuffle_s` with every compute price doubled.
    shuffle_s_double_compute: Option<f64>,
    /// `epoch_s` with every compute price halved.
    epoch_s_half_compute: Option<f64>,
    /// `epoch_s` with every compute price doubled.
    epoch_s_double_compute: Option<f64>,
}

/// The factors of the sensitivity band: every compute price halved, and doubled.
pub(crate) const BAND: [f64; 2] = [0.5, 2.0];

/// Every column is checked: the runs are charged by the committed cost model.
impl Row for EpochRow {}

/// What the transmission of `e` takes on ideal single-ported links of `bytes_per_second`:
/// every broadcast packet pseudo-broadcast in `(2n-1)/n` of a unicast's time (the paper's
/// Theorem 3), every other packet and the orders once through the master's port.
fn link_model(e: &EpochMetrics, width: usize, bytes_per_second: f64) -> f64 {
    let n = e.workers as f64;
    let broadcast = e.broadcast_packets as f64 * width as f64 * (2.0 * n - 1.0) / n;
    let point_to_point = (e.unicast_packets * width) as f64 + e.control_bytes as f64;
    (broadcast + point_to_point) / bytes_per_second
}

fn epoch_row(setup: &Setup, gbit: f64, scheme: &'static str, e: &EpochMetrics) -> EpochRow {
    let width = setup.record_bytes();
    EpochRow {
        setup: setup.key,
        workers: setup.workers,
        gbit,
        scheme,
        epoch: e.epoch,
        transmissions: e.transmissions,
        uncoded_transmissions: e.uncoded_transmissions,
        broadcast_packets: e.broadcast_packets,
        unicast_packets: e.unicast_packets,
        payload_bytes: e.payload_bytes,
        control_bytes: e.control_bytes,
        model_bytes: e.model_bytes,
        record_bytes: width,
        plan_s: e.plan_seconds,
        verify_s: e.verify_seconds,
        route_s: e.route_seconds,
        model_s: e.model_seconds,
        encode_s: e.encode_seconds,
        transmit_s: e.transmit_seconds,
        link_model_s: link_model(e, width, gbit * 1e9 / 8.0),
        decode_s: e.decode_seconds,
        train_s: e.train_seconds,
        waiting_s: e.waiting_seconds,
        aggregate_s: e.aggregate_seconds,
        shuffle_s: e.shuffle_seconds(),
        epoch_s: e.epoch_seconds,
        loss: e.loss,
        shuffle_s_half_compute: None,
        shuffle_s_double_compute: None,
        epoch_s_half_compute: None,
        epoch_s_double_compute: None,
    }
}

/// A scheme that refused a setup (a planner past its reach): its one-line error.
struct Refusal {
    setup: &'static str,
    scheme: &'static str,
    error: String,
}

/// The run of `scheme` on `setup` at `gbit`: its rows, or (for a planner past its reach) the
/// refusal.
fn run_cell(
    setup: &Setup,
    gbit: f64,
    scheme: &'static str,
    epochs: usize,
    model: &CostModel,
    band: bool,
) -> anyhow::Result<Result<Vec<EpochRow>, Refusal>> {
    let spec = EpochRun {
        scheme,
        policy: ExchangePolicy::Global,
        epochs,
        gbit: Some(gbit),
        seed: SEED,
        compute: Compute::Charged(model),
    };
    match epoch_runs::run(setup, &spec) {
        Ok(report) => {
            let mut rows: Vec<EpochRow> =
                report.epochs.iter().map(|e| epoch_row(setup, gbit, scheme, e)).collect();
            if band {
                with_band(setup, &spec, model, &mut rows)?;
            }
            Ok(Ok(rows))
        }
        Err(e) => match e.downcast_ref::<RuntimeError>() {
            // A planner past its reach refuses at once: a finding, not a failure (the epoch
            // chain passes the planner's refusal on).
            Some(
                RuntimeError::Plan(p @ (PlanError::TooManyWorkers { .. } | PlanError::OverBudget { .. }))
                | RuntimeError::Chain(ChainError::Plan(
                    p @ (PlanError::TooManyWorkers { .. } | PlanError::OverBudget { .. }),
                )),
            ) => Ok(Err(Refusal { setup: setup.key, scheme, error: p.to_string() })),
            _ => Err(e),
        },
    }
}

/// Runs `spec` again with every compute price of `model` halved and doubled ([`BAND`]) and
/// fills those columns of `rows`, epoch by epoch.
fn with_band(
    setup: &Setup,
    spec: &EpochRun<'_>,
    model: &CostModel,
    rows: &mut [EpochRow],
) -> anyhow::Result<()> {
    for factor in BAND {
        let scaled = ubershuffle_runtime::cost_model::scaled(model, "all", factor);
        let again = EpochRun {
            scheme: spec.scheme,
            policy: spec.policy,
            epochs: spec.epochs,
            gbit: spec.gbit,
            seed: spec.seed,
            compute: Compute::Charged(&scaled),
        };
        let report = epoch_runs::run(setup, &again)?;
        anyhow::ensure!(report.epochs.len() == rows.len(), "the run with prices x{factor} has other epochs");
        for (row, e) in rows.iter_mut().zip(&report.epochs) {
            let (shuffle, epoch) = if factor < 1.0 {
                (&mut row.shuffle_s_half_compute, &mut row.epoch_s_half_compute)
            } else {
                (&mut row.shuffle_s_double_compute, &mut row.epoch_s_double_compute)
            };
            (*shuffle, *epoch) = (Some(e.shuffle_seconds()), Some(e.epoch_seconds));
        }
    }
    Ok(())
}

/// Runs the table.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sweep = sweep(ctx.quick);
    let model = epoch_runs::committed()?;
    let setups = setups(POINTS, SEED)?;
    let scale = sweep.at_scale.map(|epochs| scale_setup(SEED).map(|s| (s, epochs))).transpose()?;
    let runs = setups.len() * sweep.rates.len() + usize::from(scale.is_some());
    let bar = ctx.progress((runs * sweep.schemes.len()) as u64, NAME);
    let (mut rows, mut refusals) = (Vec::new(), Vec::new());
    let cells = setups
        .iter()
        .flat_map(|s| sweep.rates.iter().map(move |&g| (s, g, sweep.epochs_at(g))))
        .chain(scale.iter().map(|(s, epochs)| (s, GBIT, *epochs)));
    for (setup, gbit, epochs) in cells {
        for &scheme in sweep.schemes {
            match run_cell(setup, gbit, scheme, epochs, &model, sweep.band)? {
                Ok(r) => rows.extend(r),
                Err(refusal) => refusals.push(refusal),
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let scale = scale.map(|(s, _)| s);
    let mut report = Report::new(summary(ctx, &setups, scale.as_ref(), &rows, &refusals))
        .table(format!("{NAME}.csv"), &rows)?
        .headlines(headlines(&setups, &rows));
    for setup in &setups {
        let suffix = if setup.key == "mc" { "" } else { setup.key };
        report = report.figure(suffix, figure(setup, &rows));
    }
    Ok(report)
}

/// Medians over epochs of one (setup, rate, scheme) cell.
#[derive(Clone, Copy, Debug)]
struct Cell {
    epochs: usize,
    shuffle: f64,
    transmit: f64,
    link_model: f64,
    plan: f64,
    route: f64,
    encode: f64,
    decode: f64,
    train: f64,
    epoch: f64,
    /// Shuffle and epoch with compute prices halved and doubled.
    band: [(f64, f64); 2],
    transmissions: f64,
    broadcasts: f64,
    unicasts: f64,
    control_share: f64,
}

/// A band cell as a number (NaN where the run has no band).
fn nan(value: Option<f64>) -> f64 {
    value.unwrap_or(f64::NAN)
}

fn cell(rows: &[EpochRow], setup: &str, gbit: f64, scheme: &str) -> Option<Cell> {
    let at: Vec<&EpochRow> =
        rows.iter().filter(|r| r.setup == setup && r.gbit == gbit && r.scheme == scheme).collect();
    if at.is_empty() {
        return None;
    }
    let m = |f: fn(&EpochRow) -> f64| median(at.iter().map(|r| f(r)));
    Some(Cell {
        epochs: at.len(),
        shuffle: m(|r| r.shuffle_s),
        transmit: m(|r| r.transmit_s),
        link_model: m(|r| r.link_model_s),
        plan: m(|r| r.plan_s),
        route: m(|r| r.route_s),
        encode: m(|r| r.encode_s),
        decode: m(|r| r.decode_s),
        train: m(|r| r.train_s),
        epoch: m(|r| r.epoch_s),
        band: [
            (m(|r| nan(r.shuffle_s_half_compute)), m(|r| nan(r.epoch_s_half_compute))),
            (m(|r| nan(r.shuffle_s_double_compute)), m(|r| nan(r.epoch_s_double_compute))),
        ],
        transmissions: m(|r| r.transmissions as f64),
        broadcasts: m(|r| r.broadcast_packets as f64),
        unicasts: m(|r| r.unicast_packets as f64),
        control_share: m(|r| r.control_bytes as f64 / (r.payload_bytes as f64).max(1.0)),
    })
}

fn figure(setup: &Setup, rows: &[EpochRow]) -> LineChart {
    let curve = |scheme: &str, f: fn(&Cell) -> f64| -> Vec<(f64, f64)> {
        RATES.iter().filter_map(|&g| cell(rows, setup.key, g, scheme).map(|c| (g, f(&c)))).collect()
    };
    let mut series: Vec<Series> = SCHEMES
        .iter()
        .map(|s| Series::solid(*s, curve(s, |c| c.shuffle)))
        .filter(|s| !s.points.is_empty())
        .collect();
    series.extend(
        SCHEMES
            .iter()
            .map(|s| Series::dashed(format!("{s}, link model"), curve(s, |c| c.link_model)))
            .filter(|s| !s.points.is_empty()),
    );
    LineChart {
        title: format!(
            "{} {}: shuffle time per epoch (n = {}, q = {})",
            setup.row,
            setup.key.to_uppercase(),
            setup.workers,
            setup.points()
        ),
        x_label: "emulated link rate (Gbit/s)".into(),
        y_label: "median shuffle seconds per epoch (emulated)".into(),
        log_x: true,
        log_y: true,
        series,
    }
}

/// The paper's numbers for a setup's row: (UN, CS, US) seconds.
fn paper_row(row: &str) -> Option<(f64, f64, f64)> {
    PAPER.iter().find(|p| p.row == row).map(|p| p.seconds)
}

fn pct(a: f64, b: f64) -> String {
    format!("{:.0} %", 100.0 * a / b)
}

/// The table of one setup: every rate and scheme.
fn section(setup: &Setup, rows: &[EpochRow], rates: &[f64], refusals: &[Refusal]) -> String {
    let paper = paper_row(setup.row);
    let lines = rates.iter().flat_map(|&gbit| {
        SCHEMES.iter().filter_map(move |&scheme| {
            let c = cell(rows, setup.key, gbit, scheme)?;
            let un = cell(rows, setup.key, gbit, "uncoded")?;
            let paper_cell = match (gbit == GBIT && setup.workers == WORKERS, paper) {
                (true, Some((u, cs, us))) => match scheme {
                    "uncoded" => format!("{u} s"),
                    "coded" => format!("{cs} s ({})", pct(cs, u)),
                    "ubershuffle" => format!("{us} s ({})", pct(us, u)),
                    _ => "-".into(),
                },
                _ => "-".into(),
            };
            Some(vec![
                gbit.to_string(),
                scheme.to_string(),
                format!("{:.0} + {:.0}", c.broadcasts, c.unicasts),
                format!("{:.3}", c.shuffle),
                format!("{:.3}", c.transmit),
                format!("{:.3}", c.link_model),
                format!("{:.3}", c.plan + c.route + c.encode),
                format!("{:.3}", c.decode),
                format!("{:.3}", c.train),
                format!("{:.3}", c.epoch),
                pct(c.shuffle, un.shuffle),
                pct(c.epoch, un.epoch),
                paper_cell,
            ])
        })
    });
    let refused: Vec<String> = refusals
        .iter()
        .filter(|r| r.setup == setup.key)
        .map(|r| format!("`{}` refused this setup at once (`{}`).", r.scheme, r.error))
        .collect();
    let epochs: Vec<String> = rates
        .iter()
        .filter_map(|&g| cell(rows, setup.key, g, "uncoded").map(|c| format!("{} at {g} Gbit/s", c.epochs)))
        .collect();
    format!(
        "**{} {}**: q = {}, {} ({} B per point), alpha = {}, n = {}; epochs per cell: {}.\n\n{}{}",
        setup.row,
        setup.learner_name,
        setup.points(),
        setup.width_note,
        setup.record_bytes(),
        setup.alpha,
        setup.workers,
        epochs.join(", "),
        markdown_table(
            &[
                "Gbit/s",
                "scheme",
                "packets (broadcast + point to point)",
                "shuffle s",
                "transmit s",
                "link model s",
                "plan + route + encode s",
                "decode s",
                "train s",
                "epoch s",
                "shuffle vs uncoded",
                "epoch vs uncoded",
                "paper, 1 Gbit/s",
            ],
            lines
        ),
        if refused.is_empty() { String::new() } else { format!("\n{}", refused.join(" ")) }
    )
}

/// The goals at 1 Gbit/s, n = 20, as sentences computed from the cells.
fn goals(setups: &[Setup], rows: &[EpochRow]) -> String {
    let lines: Vec<String> = setups
        .iter()
        .filter_map(|s| {
            let (un, us) = (cell(rows, s.key, GBIT, "uncoded")?, cell(rows, s.key, GBIT, "ubershuffle")?);
            let (paper_un, _, paper_us) = paper_row(s.row)?;
            let ours = 100.0 * us.shuffle / un.shuffle;
            let theirs = 100.0 * paper_us / paper_un;
            let gap = ours - theirs;
            let overhead = |c: &Cell| c.plan + c.route + c.encode + c.decode;
            let verdict = if gap.abs() <= SHARE_TOLERANCE {
                format!("within {SHARE_TOLERANCE:.0} points of the paper's {theirs:.0} %")
            } else {
                format!(
                    "{:.0} points from the paper's {theirs:.0} %: UberShuffle sends {} of uncoded's transmissions \
                     ({:.0} of {:.0}, {:.0} of them broadcast), and a pseudo-broadcast packet occupies the \
                     master's link (2n-1)/n = {:.2} times as long as a unicast, so its link model is {} of \
                     uncoded's and its transmit {}; planning, routing, encoding and decoding take {:.3} s against \
                     uncoded's {:.3} s",
                    gap.abs(),
                    pct(us.transmissions, un.transmissions),
                    us.transmissions,
                    un.transmissions,
                    us.broadcasts,
                    (2.0 * s.workers as f64 - 1.0) / s.workers as f64,
                    pct(us.link_model, un.link_model),
                    pct(us.transmit, un.transmit),
                    overhead(&us),
                    overhead(&un),
                )
            };
            Some(format!(
                "- {} {}: UberShuffle's whole epoch takes {:.3} s against uncoded's {:.3} s ({}, {}); its \
                 shuffle takes {:.3} s against {:.3} s ({}), {verdict}.",
                s.row,
                s.key.to_uppercase(),
                us.epoch,
                un.epoch,
                pct(us.epoch, un.epoch),
                if us.epoch < un.epoch { "below uncoded's" } else { "not below uncoded's" },
                us.shuffle,
                un.shuffle,
                pct(us.shuffle, un.shuffle),
            ))
        })
        .collect();
    lines.join("\n")
}

/// The checks on the time model: transmit never below the link model, the phases adding up.
fn checks(rows: &[EpochRow]) -> String {
    let lowest = rows.iter().map(|r| r.transmit_s / r.link_model_s).fold(f64::INFINITY, f64::min);
    let worst = rows
        .iter()
        .map(|r| {
            let phases = r.plan_s
                + r.verify_s
                + r.route_s
                + r.model_s
                + r.encode_s
                + r.transmit_s
                + r.decode_s
                + r.train_s
                + r.waiting_s
                + r.aggregate_s;
            (phases - r.epoch_s).abs()
        })
        .fold(0.0, f64::max);
    let below = rows.iter().filter(|r| r.transmit_s < r.link_model_s).count();
    let transmit = if below == 0 {
        "transmit is at least its link model in every row".to_string()
    } else {
        format!("transmit is below its link model in {below} row(s), which the time model forbids")
    };
    format!(
        "Checks over all {} rows: {transmit} (the smallest ratio is {lowest:.4}); the ten phases (plan, verify, \
         route, model, encode, transmit, decode, train, waiting, aggregate) add up to the epoch within \
         {worst:.1e} s.",
        rows.len()
    )
}

/// How the paper's setups were scaled to this machine, with this run's order overhead.
fn scale_note(setups: &[Setup], rows: &[EpochRow]) -> String {
    let shares: Vec<f64> = setups
        .iter()
        .flat_map(|s| SCHEMES.iter().filter_map(|sc| cell(rows, s.key, GBIT, sc).map(|c| c.control_share)))
        .collect();
    let lo = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = shares.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "**Scale-down.** Kept from the paper: n = 20 workers, alpha (0.2 for MC, 0.14 for LR), and for MC \
         q = 1e5 data points, each one user's row of observed ratings. Scaled down: the record width, from \
         m = 1e4 ratings (~160 KB) to m = 100 for MC and from m = 2e5 features (1.6 MB) to m = 191 for LR \
         (record sizes below), and for LR q from 7e5 to 1e5: one 2-core machine holds every node's cache, \
         so an epoch moves about 100 MB rather than the paper's 13-14 GB. q is what sets the coding gain \
         (how evenly the encoding tables fill, Section 3.2), so q is kept and the width cut. In this run at \
         1 Gbit/s the orders (plan headers) are {:.0}-{:.0} % of the payload.",
        100.0 * lo,
        100.0 * hi
    )
}

fn summary(
    ctx: &Context,
    setups: &[Setup],
    scale: Option<&Setup>,
    rows: &[EpochRow],
    refusals: &[Refusal],
) -> String {
    let sweep = sweep(ctx.quick);
    let sections: Vec<String> = setups.iter().map(|s| section(s, rows, sweep.rates, refusals)).collect();
    let paper = PAPER.iter().map(|p| {
        let (un, cs, us) = p.seconds;
        vec![
            p.row.into(),
            p.setup.into(),
            p.q.into(),
            p.m.into(),
            p.alpha.to_string(),
            un.to_string(),
            cs.to_string(),
            us.to_string(),
            format!("{:.1} %", 100.0 * (cs - us) / cs),
            pct(cs, un),
            pct(us, un),
        ]
    });
    let at_scale = scale.map_or_else(String::new, |scale| {
        format!(
            "\n\n**An emulated cluster of {SCALE_WORKERS} nodes on this machine's cores.** {}\n\n{}",
            scale_sentence(scale, rows),
            section(scale, rows, &[GBIT], refusals)
        )
    });
    format!(
        "Medians per epoch (seed {SEED}), n = {WORKERS}, q = {POINTS}; {}. Every node of the emulated \
         cluster (the master and each worker thread) keeps its own clock: links advance it by the link model of \
         single-ported nodes (each node's uplink and downlink carry one message at a time at the link rate), \
         computing by the committed cost model's price of the work done (`results/cost-model.toml`, \
         `cargo xtask calibrate`), never by this machine's wall time, so the times are what an n-node cluster \
         with this machine's per-core speed would see and come out the same in every run \
         (`docs/training-runs.md`). **Shuffle** = plan + route + encode + transmit + decode, the paper's \
         \"including all the extra computational overheads\" (`EpochMetrics::shuffle_seconds`): transmit runs \
         from the first order (plan headers) to the last worker holding its packets, less the master's \
         encoding in between; decode is the part of the master's wait during which the worker whose update \
         came last decoded. **Link model** = what the same packets take on ideal links (broadcast packets \
         pseudo-broadcast in (2n-1)/n of a unicast, Theorem 3; the rest and the orders once through the \
         master's port). **Epoch** = the whole epoch at the master, the sum of its ten phases: plan, verify, \
         route, model broadcast, encode, transmit, decode, train, waiting, aggregate (with the held-out \
         loss).\n\n**Goals at {GBIT} Gbit/s, n = {WORKERS}.**\n{}\n\n{}\n\n{}{at_scale}\n\n\
         The paper's Table 1 (20 EC2 workers, 1 Gbit/s Ethernet, seconds per shuffle):\n\n{}\n\
         The paper's row (d) does not add up as printed: at 1 Gbit/s its 112.9 s of uncoded shuffling move about \
         14 GB, some 23 KB per moved point, not the 1.6 MB of m = 2e5 double-precision features.",
        sweep.describe(),
        goals(setups, rows),
        scale_note(setups, rows),
        sections.join("\n\n"),
        markdown_table(
            &["row", "setup", "q", "m", "alpha", "UN", "CS", "US", "(CS-US)/CS", "CS/UN", "US/UN"],
            paper
        ),
    ) + &format!("\n\n{}", checks(rows))
        + &ctx.quick_note(&format!(
            "the paper's comparison alone ({}); the full run: {}",
            QUICK.describe(),
            FULL.describe()
        ))
}

/// What the cluster at scale showed, in a sentence: the shortest coded epoch against uncoded's,
/// with the transmit it saved and the computing it added.
fn scale_sentence(scale: &Setup, rows: &[EpochRow]) -> String {
    let best = SCHEMES
        .iter()
        .filter(|&&s| s != "uncoded")
        .filter_map(|&s| cell(rows, scale.key, GBIT, s).map(|c| (s, c)))
        .min_by(|a, b| a.1.epoch.total_cmp(&b.1.epoch));
    let Some(un) = cell(rows, scale.key, GBIT, "uncoded") else {
        return "No uncoded run completed at scale.".into();
    };
    let intro = format!(
        "{} worker threads and the master ran the epoch loop at {GBIT} Gbit/s; uncoded's epoch took {:.3} s",
        scale.workers, un.epoch
    );
    match best {
        Some((scheme, c)) => format!(
            "{intro}, the shortest coded one `{scheme}`'s {:.3} s ({} of uncoded's, {}): it sent {} of \
             uncoded's transmissions, its transmit took {:.3} s against {:.3} s and its planning, routing and \
             encoding {:.3} s against {:.3} s.",
            c.epoch,
            pct(c.epoch, un.epoch),
            if c.epoch < un.epoch { "below it" } else { "not below it" },
            pct(c.transmissions, un.transmissions),
            c.transmit,
            un.transmit,
            c.plan + c.route + c.encode,
            un.plan + un.route + un.encode,
        ),
        None => format!("{intro}; no coded scheme completed."),
    }
}

fn headlines(setups: &[Setup], rows: &[EpochRow]) -> Vec<Headline> {
    setups
        .iter()
        .filter_map(|s| {
            let un = cell(rows, s.key, GBIT, "uncoded")?;
            let (cs, us) = (cell(rows, s.key, GBIT, "coded")?, cell(rows, s.key, GBIT, "ubershuffle")?);
            let paper =
                paper_row(s.row).map_or("-".into(), |(u, c, x)| format!("{}, {}", pct(c, u), pct(x, u)));
            let band = band_note(&un, &cs, &us);
            Some(Headline {
                what: format!(
                    "Table 1 {} {}, shuffle time vs uncoded at emulated 1 Gbit/s (UberShuffle's whole epoch)",
                    s.row,
                    s.key.to_uppercase()
                ),
                ours: format!(
                    "coded {}, UberShuffle {} (epoch {}){}",
                    pct(cs.shuffle, un.shuffle),
                    pct(us.shuffle, un.shuffle),
                    pct(us.epoch, un.epoch),
                    band.as_ref().map_or_else(String::new, |b| format!("; {b}"))
                ),
                paper,
                table: format!("{NAME}.csv"),
                rows: format!(
                    "setup={}, gbit=1, median of shuffle_s (epoch_s) over epochs{}",
                    s.key,
                    if band.is_some() {
                        "; the band: the columns ending _half_compute and _double_compute"
                    } else {
                        ""
                    }
                ),
                machine: false,
            })
        })
        .collect()
}

/// What holds with every compute price halved and doubled: each coded scheme's shuffle share
/// of uncoded's over the band, and whether it stays below uncoded across it (`None` without a
/// band).
fn band_note(un: &Cell, cs: &Cell, us: &Cell) -> Option<String> {
    if !un.band.iter().all(|(shuffle, _)| shuffle.is_finite()) {
        return None;
    }
    let shares = |c: &Cell| -> Vec<f64> {
        std::iter::once((c.shuffle, un.shuffle))
            .chain((0..2).map(|k| (c.band[k].0, un.band[k].0)))
            .map(|(a, b)| a / b)
            .collect()
    };
    let range = |v: &[f64]| {
        let (lo, hi) = (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        (format!("{:.0}-{:.0} %", 100.0 * lo, 100.0 * hi), hi < 1.0)
    };
    let ((c_range, c_holds), (u_range, u_holds)) = (range(&shares(cs)), range(&shares(us)));
    let holds: Vec<&str> =
        [("UberShuffle", u_holds), ("coded", c_holds)].iter().filter(|(_, h)| *h).map(|(n, _)| *n).collect();
    let verdict = if holds.is_empty() {
        "neither stays below uncoded across it".to_string()
    } else {
        format!("below uncoded across it: {}", holds.join(", "))
    };
    Some(format!("compute prices x0.5 to x2: coded {c_range}, UberShuffle {u_range}; {verdict}"))
}
