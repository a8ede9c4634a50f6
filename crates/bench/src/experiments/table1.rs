//! `table1`: the UberShuffle paper's Table 1 scaled to this machine: shuffle time and training
//! time per epoch of uncoded, coded (Lee et al.) and UberShuffle, running the real epoch loop
//! over emulated single-ported links of 1, 10 and 50 Gbit/s.
//!
//! Setups (the paper's rows (a) and (d), scaled; see [`SCALE_NOTE`]): n = 20 workers as in the
//! paper; matrix completion on a synthetic low-rank matrix whose data points are user rows of
//! m observed ratings (alpha = 0.2), and linear regression by parallel SGD on synthetic wide
//! samples (alpha = 0.14). Every epoch is planned, verified, encoded, pseudo-broadcast,
//! decoded, checked against the master's checksum and trained on.

use ubershuffle_core::exchange_policy::ExchangePolicy;

use ubershuffle_runtime::EpochMetrics;

use super::epoch_runs::{self, RunSpec, Setup, median_of};
use super::{Context, Outcome};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

/// The schemes of the paper's Table 1, by planner name.
const SCHEMES: [&str; 3] = ["uncoded", "coded", "ubershuffle"];
/// Emulated link rates, Gbit/s.
const RATES: [f64; 3] = [1.0, 10.0, 50.0];
/// Workers, as in the paper (20 m3.xlarge instances).
pub(crate) const WORKERS: usize = 20;
/// Data points q, as in the paper's row (a).
const POINTS: usize = 100_000;

/// How the paper's setups were scaled to this machine, for the summary.
pub(crate) const SCALE_NOTE: &str = "**Scale-down.** Kept from the paper: n = 20 workers, alpha (0.2 for MC, 0.14 \
for LR), and for MC q = 1e5 data points, each one user's row of observed ratings. Scaled down: the record width, \
from m = 1e4 ratings (~160 KB) to m = 100 (1208 B) for MC and from m = 2e5 features (1.6 MB) to m = 191 (1536 B) \
for LR, and for LR q from 7e5 to 1e5. Why: the emulator sleeps in real time for every transfer and one 2-core \
machine hosts all 21 nodes, so an epoch must move ~100 MB (0.8-1.1 s at 1 Gbit/s) rather than the paper's 13-14 GB \
for the whole table to run in about a minute; q is what sets the coding gain (how evenly the encoding tables \
fill, Section 3.2), so q is kept and the width cut. Records stay wide enough that bytes, not per-message work, set \
the time at 1 Gbit/s: the orders (plan headers) are 2-7 % of the payload, and uncoded shuffling runs at 97-99 % \
of its link model. **Broadcast overhead.** Consecutive 1 MiB pseudo-broadcasts to 20 workers run at the link \
model here (16.42 ms each against (2n-1)/n * 1 MiB/B = 16.36 ms, measured at the master in this experiment). An \
earlier version of the worker restored its cache (a ~24 MB copy) and scheduled its decoder between the order and the first \
broadcast; since every worker relays in each ring, the first chunk waited for the slowest of 20 such setups \
sharing 2 cores (95-630 ms instead of ~44 ms), and UberShuffle's transmit was 149 % of its link model at 1 Gbit/s. \
Workers now join the broadcasts first and do that work afterwards, counted in decode time.";

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

/// One (setup, rate, scheme) cell: medians over epochs.
struct Cell {
    shuffle: f64,
    transmit: f64,
    link_model: f64,
    epoch: f64,
    broadcasts: f64,
    unicasts: f64,
}

/// What the transmission of `e` takes on ideal single-ported links of `bytes_per_second`:
/// every broadcast packet pseudo-broadcast in `(2n-1)/n` of a unicast's time (the paper's
/// Theorem 3), every other packet and the orders once through the master's port.
fn link_model(e: &EpochMetrics, width: usize, bytes_per_second: f64) -> f64 {
    let n = e.workers as f64;
    let broadcast = e.broadcast_packets as f64 * width as f64 * (2.0 * n - 1.0) / n;
    let point_to_point = (e.unicast_packets * width) as f64 + e.control_bytes as f64;
    (broadcast + point_to_point) / bytes_per_second
}

/// Runs the table.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let epochs = if ctx.quick { 5 } else { 9 };
    let seed = 1;
    let schemes: &[&str] = &SCHEMES;
    let setups = setups(POINTS, seed)?;
    let mut table = CsvTable::new(&[
        "setup",
        "gbit",
        "scheme",
        "epoch",
        "transmissions",
        "uncoded_transmissions",
        "broadcast_packets",
        "unicast_packets",
        "payload_bytes",
        "control_bytes",
        "model_bytes",
        "plan_s",
        "route_s",
        "encode_s",
        "transmit_s",
        "link_model_s",
        "decode_s",
        "shuffle_s",
        "model_s",
        "compute_s",
        "epoch_s",
        "loss",
    ]);
    let bar = ctx.progress((setups.len() * RATES.len() * schemes.len()) as u64, "table1");
    let mut figures = Vec::new();
    let mut sections = Vec::new();
    for setup in &setups {
        let width = setup.record_bytes();
        let mut cells: Vec<Vec<Cell>> = Vec::new();
        for &gbit in &RATES {
            let rate = gbit * 1e9 / 8.0;
            let mut row = Vec::new();
            for &scheme in schemes {
                let spec = RunSpec { scheme, policy: ExchangePolicy::Global, epochs, gbit: Some(gbit), seed };
                let report = epoch_runs::run(setup, &spec)?;
                for e in &report.epochs {
                    let secs = |v: f64| cell(format!("{v:.6}"));
                    table.push(vec![
                        cell(setup.key),
                        cell(gbit),
                        cell(scheme),
                        cell(e.epoch),
                        cell(e.transmissions),
                        cell(e.uncoded_transmissions),
                        cell(e.broadcast_packets),
                        cell(e.unicast_packets),
                        cell(e.payload_bytes),
                        cell(e.control_bytes),
                        cell(e.model_bytes),
                        secs(e.plan_seconds),
                        secs(e.route_seconds),
                        secs(e.encode_seconds),
                        secs(e.transmit_seconds),
                        secs(link_model(e, width, rate)),
                        secs(e.decode_seconds),
                        secs(e.shuffle_seconds()),
                        secs(e.model_seconds),
                        secs(e.compute_seconds),
                        secs(e.epoch_seconds),
                        cell(e.loss),
                    ]);
                }
                let ep = &report.epochs;
                row.push(Cell {
                    shuffle: median_of(ep, |e| e.shuffle_seconds()),
                    transmit: median_of(ep, |e| e.transmit_seconds),
                    link_model: median_of(ep, |e| link_model(e, width, rate)),
                    epoch: median_of(ep, |e| e.epoch_seconds),
                    broadcasts: median_of(ep, |e| e.broadcast_packets as f64),
                    unicasts: median_of(ep, |e| e.unicast_packets as f64),
                });
                bar.inc(1);
            }
            cells.push(row);
        }
        figures.push(figure(setup, schemes, &cells));
        sections.push(section(setup, schemes, &cells, epochs));
    }
    bar.finish_and_clear();
    let mut summary = format!(
        "Median per epoch over {epochs} epochs (seed 1){quick}, n = {WORKERS}, q = {POINTS}. **Shuffle** = plan + \
         route + encode + transmit + decode, the paper's \"including all the extra computational overheads\" \
         (`EpochMetrics::shuffle_seconds`; the parts do not overlap): transmit runs from the first order (plan \
         headers) to the last worker holding its packets, less the master's encoding in between; decode is the \
         slowest worker's, in its CPU time. **Link model** = what the same packets take on ideal links (broadcast \
         packets pseudo-broadcast in (2n-1)/n of a unicast, Theorem 3; the rest and the orders once through the \
         master's port). **Training s per epoch** = the whole epoch at the master: shuffle, the model broadcast, \
         local training, aggregation and the held-out loss. Times are emulated time on shaped in-process links \
         (single-ported nodes); CPU work is charged at this machine's speed with 21 nodes on 2 cores, so at 10 \
         and 50 Gbit/s, where moving the bytes takes milliseconds, the times measure this machine's CPU (plan, \
         route, orders, copies) more than the network.\n\n{SCALE_NOTE}\n\n",
        quick = if ctx.quick { " (the quick subset: 5 epochs per cell; the full run has 9)" } else { "" },
    );
    summary.push_str(&sections.join("\n\n"));
    summary.push_str("\n\nThe paper's Table 1 (20 EC2 workers, 1 Gbit/s Ethernet, seconds per shuffle):\n\n");
    summary.push_str("| row | setup | q | m | alpha | UN | CS | US | (CS-US)/CS | CS/UN | US/UN |\n");
    summary.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for PaperRow { row, setup, q, m, alpha, seconds: (un, cs, us) } in PAPER {
        summary.push_str(&format!(
            "| {row} | {setup} | {q} | {m} | {alpha} | {un} | {cs} | {us} | {:.1} % | {:.0} % | {:.0} % |\n",
            100.0 * (cs - us) / cs,
            100.0 * cs / un,
            100.0 * us / un
        ));
    }
    summary.push_str(
        "\nThe paper's row (d) does not add up as printed: at 1 Gbit/s its 112.9 s of uncoded shuffling move about \
         14 GB, some 23 KB per moved point, not the 1.6 MB of m = 2e5 double-precision features.",
    );
    Ok(Outcome { table, figures, summary })
}

fn figure(setup: &Setup, schemes: &[&str], cells: &[Vec<Cell>]) -> (String, LineChart) {
    let mut chart = LineChart {
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
        ..Default::default()
    };
    for (k, scheme) in schemes.iter().enumerate() {
        let points = RATES.iter().zip(cells).map(|(&g, row)| (g, row[k].shuffle)).collect();
        chart.series.push(Series::solid(scheme.to_string(), points));
    }
    for (k, scheme) in schemes.iter().enumerate() {
        let points = RATES.iter().zip(cells).map(|(&g, row)| (g, row[k].link_model)).collect();
        chart.series.push(Series::dashed(format!("{scheme}, link model"), points));
    }
    let suffix = if setup.key == "mc" { String::new() } else { setup.key.to_string() };
    (suffix, chart)
}

/// The paper's numbers for a setup's row: (UN, CS, US) seconds.
fn paper_row(row: &str) -> Option<(f64, f64, f64)> {
    PAPER.iter().find(|p| p.row == row).map(|p| p.seconds)
}

fn section(setup: &Setup, schemes: &[&str], cells: &[Vec<Cell>], epochs: usize) -> String {
    let idx = |name: &str| schemes.iter().position(|s| *s == name);
    let paper = paper_row(setup.row);
    let mut out = format!(
        "**{row} {learner}**: q = {q}, {width} ({bytes} B per point), alpha = {alpha}, n = {n}, {epochs} epochs.\n\n\
         | Gbit/s | scheme | packets (broadcast + point to point) | shuffle s | transmit s | link model s | training s per epoch | shuffle vs uncoded | link model vs uncoded | paper, 1 Gbit/s |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        row = setup.row,
        learner = setup.learner_name,
        q = setup.points(),
        width = setup.width_note,
        bytes = setup.record_bytes(),
        alpha = setup.alpha,
        n = setup.workers,
    );
    for (&gbit, row) in RATES.iter().zip(cells) {
        let un = idx("uncoded").map(|k| &row[k]);
        for (k, scheme) in schemes.iter().enumerate() {
            let c = &row[k];
            let pct = |a: f64, b: f64| format!("{:.0} %", 100.0 * a / b);
            let vs = un.map_or("-".into(), |u| pct(c.shuffle, u.shuffle));
            let vs_model = un.map_or("-".into(), |u| pct(c.link_model, u.link_model));
            let paper_cell = match (gbit == 1.0, paper) {
                (true, Some((un, cs, us))) => match *scheme {
                    "uncoded" => format!("{un} s"),
                    "coded" => format!("{cs} s ({:.0} %)", 100.0 * cs / un),
                    "ubershuffle" => format!("{us} s ({:.0} %)", 100.0 * us / un),
                    _ => "-".into(),
                },
                _ => "-".into(),
            };
            out.push_str(&format!(
                "| {gbit} | {scheme} | {:.0} + {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {vs} | {vs_model} | {paper_cell} |\n",
                c.broadcasts, c.unicasts, c.shuffle, c.transmit, c.link_model, c.epoch
            ));
        }
    }
    if let (Some(cs), Some(us)) = (idx("coded"), idx("ubershuffle")) {
        let cols: Vec<String> = RATES
            .iter()
            .zip(cells)
            .map(|(g, row)| {
                let (c, u) = (row[cs].shuffle, row[us].shuffle);
                format!("{:.1} % at {g} Gbit/s", 100.0 * (c - u) / c)
            })
            .collect();
        let paper_cs_us =
            paper.map_or(String::new(), |(_, c, u)| format!(" (paper: {:.1} %)", 100.0 * (c - u) / c));
        out.push_str(&format!("\n(CS-US)/CS: {}{paper_cs_us}.", cols.join(", ")));
    }
    out
}
