//! `table1`: the UberShuffle paper's Table 1 scaled to this machine: shuffle time and training
//! time per epoch of uncoded, coded (Lee et al.) and UberShuffle, running the real epoch loop
//! over emulated single-ported links of 1, 10 and 50 Gbit/s.
//!
//! Setups (the paper's rows (a) and (d), scaled; see [`SCALE_NOTE`]): n = 20 workers as in the
//! paper; matrix completion on a synthetic low-rank matrix whose data points are user rows of
//! m observed ratings (alpha = 0.2), and linear regression by parallel SGD on synthetic wide
//! samples (alpha = 0.14). Every epoch is planned, verified, encoded, pseudo-broadcast,
//! decoded, checked against the master's checksum and trained on.

use shuffle_core::exchange_policy::ExchangePolicy;

use super::epoch_runs::{self, RunSpec, Setup, have_planner, median_of};
use super::{Context, Outcome};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

/// The schemes of the paper's Table 1, by planner name.
const SCHEMES: [&str; 3] = ["uncoded", "coded", "ubershuffle"];
/// Emulated link rates, Gbit/s.
const RATES: [f64; 3] = [1.0, 10.0, 50.0];
/// Workers, as in the paper (20 m3.xlarge instances).
pub(crate) const WORKERS: usize = 20;

/// How the paper's setups were scaled to this machine, for the summary.
pub(crate) const SCALE_NOTE: &str = "Scaled from the paper: n = 20 workers as in the paper; q = 10 000 data points \
instead of 1e5 (MC) and 7e5 (LR), and records 1.2-1.5 KB wide instead of ~160 KB (MC, m = 1e4 ratings) and 1.6 MB \
(LR, m = 2e5 features), so that one epoch moves ~10 MB and a 1 Gbit/s epoch lasts about 0.1 s of emulated time: \
the emulator sleeps in real time for every transfer and a 2-core machine hosts all 21 nodes, so the paper's \
terabyte-scale epochs are out of reach. q stays large enough (500 points per worker) for the encoding tables to \
be filled unevenly, the finite-q effect UberShuffle addresses, and records stay wide enough that bytes on the \
wire, not per-message work, set the time at 1 Gbit/s (plan headers and orders are under 10 % of the payload). \
alpha is the paper's (0.2 for MC, 0.14 for LR).";

/// The paper's Table 1: (row, setup, q, m, alpha, UN, CS, US seconds).
const PAPER: [(&str, &str, &str, &str, f64, f64, f64, f64); 4] = [
    ("(a)", "MC, synthetic", "1e5", "1e4", 0.2, 105.5, 123.6, 65.2),
    ("(b)", "MC, synthetic", "3e5", "1000", 0.2, 35.0, 28.8, 25.3),
    ("(c)", "MC, real", "6.8e4", "68", 0.2, 0.42, 1.66, 1.52),
    ("(d)", "LR, synthetic", "7e5", "2e5", 0.14, 112.90, 94.60, 60.82),
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
    epoch: f64,
    compute: f64,
    transmissions: f64,
}

/// Runs the table.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let epochs = if ctx.quick { 3 } else { 8 };
    let seed = 1;
    let schemes: Vec<&str> = SCHEMES.iter().copied().filter(|s| have_planner(s)).collect();
    let missing: Vec<&str> = SCHEMES.iter().copied().filter(|s| !have_planner(s)).collect();
    let setups = setups(100_000, seed)?;
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
        "plan_s",
        "route_s",
        "encode_s",
        "transmit_s",
        "decode_s",
        "compute_s",
        "shuffle_s",
        "epoch_s",
        "loss",
    ]);
    let bar = ctx.progress((setups.len() * RATES.len() * schemes.len()) as u64, "table1");
    let mut figures = Vec::new();
    let mut sections = Vec::new();
    for setup in &setups {
        let mut cells: Vec<Vec<Cell>> = Vec::new();
        for &gbit in &RATES {
            let mut row = Vec::new();
            for &scheme in &schemes {
                let spec = RunSpec { scheme, policy: ExchangePolicy::Global, epochs, gbit: Some(gbit), seed };
                let report = epoch_runs::run(setup, &spec)?;
                for e in &report.epochs {
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
                        cell(format!("{:.6}", e.plan_seconds)),
                        cell(format!("{:.6}", e.route_seconds)),
                        cell(format!("{:.6}", e.encode_seconds)),
                        cell(format!("{:.6}", e.transmit_seconds)),
                        cell(format!("{:.6}", e.decode_seconds)),
                        cell(format!("{:.6}", e.compute_seconds)),
                        cell(format!("{:.6}", e.shuffle_seconds())),
                        cell(format!("{:.6}", e.epoch_seconds)),
                        cell(e.loss),
                    ]);
                }
                let ep = &report.epochs;
                row.push(Cell {
                    shuffle: median_of(ep, |e| e.shuffle_seconds()),
                    transmit: median_of(ep, |e| e.transmit_seconds),
                    epoch: median_of(ep, |e| e.epoch_seconds),
                    compute: median_of(ep, |e| e.compute_seconds),
                    transmissions: median_of(ep, |e| e.transmissions as f64),
                });
                bar.inc(1);
            }
            cells.push(row);
        }
        figures.push(figure(setup, &schemes, &cells));
        sections.push(section(setup, &schemes, &cells, epochs));
    }
    bar.finish_and_clear();
    let mut summary = format!(
        "Median per epoch over {epochs} epochs (seed 1){quick}. Shuffle = plan + route + encode + transmit + decode \
         (the paper's \"including all the extra computational overheads\"; `EpochMetrics::shuffle_seconds`); \
         transmit = first order sent to the last worker holding its packets; epoch = the whole epoch at the \
         master (shuffle, local training, aggregation, held-out loss). Times are emulated time on shaped \
         in-process links (single-ported nodes, coded packets pseudo-broadcast by scatter + ring as in Section \
         3.1); CPU work (planning, encoding, decoding, training) is charged at this machine's speed, with 21 \
         nodes sharing 2 cores.\n\n{SCALE_NOTE}\n\n",
        quick = if ctx.quick { " (the quick subset: 3 epochs per cell; the full run has 8)" } else { "" },
    );
    if !missing.is_empty() {
        summary.push_str(&format!(
            "**Not run:** {} (the planner is not built into this checkout).\n\n",
            missing.join(", ")
        ));
    }
    summary.push_str(&sections.join("\n\n"));
    summary.push_str("\n\nThe paper's Table 1 (20 EC2 workers, 1 Gbit/s Ethernet, seconds per shuffle):\n\n");
    summary.push_str("| row | setup | q | m | alpha | UN | CS | US | (CS-US)/CS | US/UN |\n");
    summary.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (row, setup, q, m, alpha, un, cs, us) in PAPER {
        summary.push_str(&format!(
            "| {row} | {setup} | {q} | {m} | {alpha} | {un} | {cs} | {us} | {:.1} % | {:.0} % |\n",
            100.0 * (cs - us) / cs,
            100.0 * us / un
        ));
    }
    Ok(Outcome { table, figures, summary })
}

fn figure(setup: &Setup, schemes: &[&str], cells: &[Vec<Cell>]) -> (String, LineChart) {
    let mut chart = LineChart {
        title: format!(
            "Shuffle time per epoch, {} (n = {}, q = {})",
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
    let suffix = if setup.key == "mc" { String::new() } else { setup.key.to_string() };
    (suffix, chart)
}

fn section(setup: &Setup, schemes: &[&str], cells: &[Vec<Cell>], epochs: usize) -> String {
    let idx = |name: &str| schemes.iter().position(|s| *s == name);
    let mut out = format!(
        "**{row} {learner}**: q = {q}, {width} ({bytes} B per point), alpha = {alpha}, n = {n}, {epochs} epochs.\n\n\
         | Gbit/s | scheme | transmissions | shuffle s | transmit s | training s per epoch | compute s | vs uncoded |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        row = setup.row,
        learner = setup.learner_name,
        q = setup.points(),
        width = setup.width_note,
        bytes = setup.record_bytes(),
        alpha = setup.alpha,
        n = setup.workers,
    );
    for (&gbit, row) in RATES.iter().zip(cells) {
        let un = idx("uncoded").map(|k| row[k].shuffle);
        for (k, scheme) in schemes.iter().enumerate() {
            let c = &row[k];
            let ratio = un.map_or("-".into(), |u| format!("{:.0} %", 100.0 * c.shuffle / u));
            out.push_str(&format!(
                "| {gbit} | {scheme} | {:.0} | {:.4} | {:.4} | {:.4} | {:.4} | {ratio} |\n",
                c.transmissions, c.shuffle, c.transmit, c.epoch, c.compute
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
        out.push_str(&format!("\n(CS-US)/CS: {}.", cols.join(", ")));
    }
    out
}
