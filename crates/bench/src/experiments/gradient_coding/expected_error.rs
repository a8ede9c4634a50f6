//! The expected decoding error of FRC, CRC and uncoded three ways (Theorems 1-2, exact
//! enumeration, Monte Carlo): at the paper's setting, against p_ss, and against n.

use serde::Serialize;
use ubershuffle_gradient_codes::{EncodingMatrix, ErrorTable, GradientCodeKind, RoleShuffle};
use ubershuffle_learners::gradient_coding::expected::{
    MAX_ENUMERATION_WORKERS, MonteCarloEstimate, MonteCarloOptions, SlowWorkers, analytic, enumerate_drawn,
    monte_carlo,
};
use ubershuffle_learners::straggler::HeterogeneousParams;

use super::{N, PAPER, S, Z95};
use crate::report::{LineChart, Row, Series, markdown_table};

/// The sweep of the paper's example.
const PAPER_SWEEP: &str = "paper_example";
const P_SS_SWEEP: &str = "vs_p_ss";
const N_SWEEP: &str = "vs_n";
/// Monte Carlo of the paper's example: runs, iterations per run, seed.
const PAPER_MONTE_CARLO: MonteCarloOptions = MonteCarloOptions::new(20_000, 16, 1);
/// p_ss = step / 10 for these steps.
const P_SS_STEPS: std::ops::RangeInclusive<u64> = 1..=9;
/// The p_ss steps the summary's table shows.
const P_SS_SHOWN: [u64; 3] = [2, 5, 8];
const SIZES: [usize; 7] = [4, 6, 8, 10, 12, 16, 20];

/// One expected error, by one method.
#[derive(Clone, Debug, Serialize)]
pub(super) struct ExpectedError {
    sweep: &'static str,
    code: &'static str,
    workers: usize,
    replication: usize,
    p_slow_straggle: f64,
    method: &'static str,
    value: f64,
    std_error: Option<f64>,
    ci_low: Option<f64>,
    ci_high: Option<f64>,
}

impl Row for ExpectedError {}

/// The three methods' rows for `b` at `params` (enumeration only up to
/// [`MAX_ENUMERATION_WORKERS`]); analytic and enumeration rows only where they exist.
fn three_ways(
    sweep: &'static str,
    b: &EncodingMatrix,
    params: HeterogeneousParams,
    options: MonteCarloOptions,
) -> anyhow::Result<Vec<ExpectedError>> {
    let row = |method, value, mc: Option<&MonteCarloEstimate>| ExpectedError {
        sweep,
        code: b.kind().name(),
        workers: b.workers(),
        replication: b.replication(),
        p_slow_straggle: params.p_slow_straggle,
        method,
        value,
        std_error: mc.map(|m| m.std_error),
        ci_low: mc.map(|m| m.interval(Z95).0),
        ci_high: mc.map(|m| m.interval(Z95).1),
    };
    let mut rows = Vec::new();
    if let Some(a) = analytic(b, SlowWorkers::Drawn, params) {
        rows.push(row("analytic", a, None));
    }
    if b.workers() <= MAX_ENUMERATION_WORKERS
        && let Some(e) = enumerate_drawn(&ErrorTable::new(b)?, params, RoleShuffle::Random)
    {
        rows.push(row("enumeration", e, None));
    }
    let mc = monte_carlo(b, SlowWorkers::Drawn, params, RoleShuffle::Random, options)?;
    rows.push(row("monte_carlo", mc.mean, Some(&mc)));
    Ok(rows)
}

/// The paper's example, then the sweeps against p_ss (`runs` Monte Carlo runs per point) and
/// against n (`runs / 2`).
pub(super) fn measure(runs: usize) -> anyhow::Result<Vec<ExpectedError>> {
    let mut rows = Vec::new();
    for b in [EncodingMatrix::frc(N, S)?, EncodingMatrix::crc(N, S)?, EncodingMatrix::uncoded(N)?] {
        rows.extend(three_ways(PAPER_SWEEP, &b, PAPER, PAPER_MONTE_CARLO)?);
    }
    for b in [EncodingMatrix::uncoded(N)?, EncodingMatrix::frc(N, S)?, EncodingMatrix::crc(N, S)?] {
        for step in P_SS_STEPS {
            let params = HeterogeneousParams::new(PAPER.p_slow, step as f64 / 10.0, PAPER.p_active_straggle);
            let options = MonteCarloOptions::new(runs, 2 * N, 100 + step);
            rows.extend(three_ways(P_SS_SWEEP, &b, params, options)?);
        }
    }
    for n in SIZES {
        for b in [EncodingMatrix::frc(n, S)?, EncodingMatrix::crc(n, S)?] {
            let options = MonteCarloOptions::new(runs / 2, 2 * n, 200 + n as u64);
            rows.extend(three_ways(N_SWEEP, &b, PAPER, options)?);
        }
    }
    Ok(rows)
}

/// The row of (`sweep`, `code`, `workers`, `p_ss`, `method`).
fn find<'a>(
    rows: &'a [ExpectedError],
    sweep: &str,
    code: &str,
    workers: usize,
    p_ss: f64,
    method: &str,
) -> Option<&'a ExpectedError> {
    rows.iter().find(|r| {
        r.sweep == sweep
            && r.code == code
            && r.workers == workers
            && (r.p_slow_straggle - p_ss).abs() < 1e-12
            && r.method == method
    })
}

/// The paper example's value of `code` by `method`.
pub(super) fn paper_value(rows: &[ExpectedError], code: &str, method: &str) -> Option<f64> {
    find(rows, PAPER_SWEEP, code, N, PAPER.p_slow_straggle, method).map(|r| r.value)
}

fn four(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.4}"))
}

pub(super) fn paper_section(rows: &[ExpectedError]) -> String {
    let codes = [("FRC", "frc"), ("CRC (0/1)", "crc"), ("uncoded (s = 1)", "uncoded")];
    let table = codes.iter().map(|&(label, code)| {
        let mc = find(rows, PAPER_SWEEP, code, N, PAPER.p_slow_straggle, "monte_carlo");
        vec![
            label.to_string(),
            four(paper_value(rows, code, "analytic")),
            four(paper_value(rows, code, "enumeration")),
            mc.map_or("-".into(), |m| {
                format!(
                    "{:.4} ({:.4} .. {:.4})",
                    m.value,
                    m.ci_low.unwrap_or(f64::NAN),
                    m.ci_high.unwrap_or(f64::NAN)
                )
            }),
        ]
    });
    let q = PAPER.p_slow * PAPER.p_slow_straggle + (1.0 - PAPER.p_slow) * PAPER.p_active_straggle;
    format!(
        "### The paper's example: n = {N}, s = {S}, p_hat = {}, p_ss = {}, p_as = {}\n\n\
         Expected decoding error per iteration, averaged over the class draw (random shuffling; averaged over the \
         draw the value does not depend on the shuffle, see below):\n\n{}\n\
         The three Monte Carlo estimates ({} runs of {} iterations) share their random draws (same seed), so their \
         deviations from the exact values are correlated. Averaged over the classes each worker straggles \
         independently with q = p_hat p_ss + (1 - p_hat) p_as = {q:.3} in an iteration, so FRC's error is n q^s \
         (each of the n/s groups is lost with probability q^s and costs s) = {:.4}.\n",
        PAPER.p_slow,
        PAPER.p_slow_straggle,
        PAPER.p_active_straggle,
        markdown_table(
            &["code", "analytic (Thm 1 / Thm 2)", "exact enumeration", "Monte Carlo (95 % CI)"],
            table
        ),
        PAPER_MONTE_CARLO.runs,
        PAPER_MONTE_CARLO.iterations,
        N as f64 * q.powi(S as i32),
    )
}

/// The chart's and the summary's name of a code.
fn label(code: &str) -> String {
    if code == GradientCodeKind::Uncoded.name() {
        code.to_string()
    } else {
        format!("{} s = {S}", code.to_uppercase())
    }
}

pub(super) fn p_ss_chart(rows: &[ExpectedError]) -> LineChart {
    let curve = |code: &str, method: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.sweep == P_SS_SWEEP && r.code == code && r.method == method)
            .map(|r| (r.p_slow_straggle, r.value))
            .collect()
    };
    let series = ["uncoded", "frc", "crc"]
        .iter()
        .flat_map(|&code| {
            [
                Series::dashed(format!("{} (Thm)", label(code)), curve(code, "analytic")),
                Series::solid(format!("{} (MC)", label(code)), curve(code, "monte_carlo")),
            ]
        })
        .collect();
    LineChart {
        title: format!(
            "Expected decoding error per iteration, n = {N}, s = {S}, p_hat = {}, p_as = {}",
            PAPER.p_slow, PAPER.p_active_straggle
        ),
        x_label: "p_ss (straggle probability of a slow worker)".into(),
        y_label: "E[err] = E ||B_S^T a - 1||^2".into(),
        series,
        ..Default::default()
    }
}

pub(super) fn p_ss_section(rows: &[ExpectedError], runs: usize) -> String {
    let value =
        |code: &str, p_ss: f64, method: &str| find(rows, P_SS_SWEEP, code, N, p_ss, method).map(|r| r.value);
    let table = P_SS_SHOWN.iter().map(|&step| {
        let p = step as f64 / 10.0;
        let cells =
            [("frc", "analytic"), ("frc", "monte_carlo"), ("crc", "analytic"), ("crc", "monte_carlo")];
        std::iter::once(format!("{p:.1}"))
            .chain(cells.iter().map(|&(c, m)| four(value(c, p, m))))
            .collect::<Vec<_>>()
    });
    let (mut theory_gap, mut mc_gap): (f64, f64) = (0.0, 0.0);
    for e in rows.iter().filter(|r| r.sweep == P_SS_SWEEP && r.method == "enumeration") {
        if let Some(a) = value(e.code, e.p_slow_straggle, "analytic") {
            theory_gap = theory_gap.max((a - e.value).abs());
        }
        if let Some(mc) = find(rows, P_SS_SWEEP, e.code, N, e.p_slow_straggle, "monte_carlo") {
            mc_gap = mc_gap.max((mc.value - e.value).abs() / mc.std_error.unwrap_or(f64::NAN).max(1e-12));
        }
    }
    format!(
        "\n### Against p_ss (n = {N}, s = {S})\n\n{}\n\
         Analytic and exact enumeration differ by at most {theory_gap:.1e} over the sweep; Monte Carlo ({runs} runs \
         of {} iterations per point) is within {mc_gap:.1} standard errors of enumeration at worst.\n",
        markdown_table(&["p_ss", "FRC analytic", "FRC MC", "CRC analytic", "CRC MC"], table),
        2 * N
    )
}

pub(super) fn n_chart(rows: &[ExpectedError]) -> LineChart {
    let curve = |code: &str, method: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.sweep == N_SWEEP && r.code == code && r.method == method)
            .map(|r| (r.workers as f64, r.value))
            .collect()
    };
    LineChart {
        title: format!(
            "Expected decoding error vs n (s = {S}, p_hat = {}, p_ss = {}, p_as = {})",
            PAPER.p_slow, PAPER.p_slow_straggle, PAPER.p_active_straggle
        ),
        x_label: "workers n".into(),
        y_label: "E[err]".into(),
        series: vec![
            Series::dashed("FRC (Thm 1)", curve("frc", "analytic")),
            Series::solid("FRC (MC)", curve("frc", "monte_carlo")),
            Series::dashed("CRC (Thm 2)", curve("crc", "analytic")),
            Series::solid("CRC (MC)", curve("crc", "monte_carlo")),
        ],
        ..Default::default()
    }
}

pub(super) fn n_section(rows: &[ExpectedError]) -> String {
    let value = |code: &str, n: usize| {
        find(rows, N_SWEEP, code, n, PAPER.p_slow_straggle, "analytic").map(|r| r.value)
    };
    let per_worker = |code: &str| -> Vec<f64> {
        SIZES.iter().filter_map(|&n| value(code, n).map(|v| v / n as f64)).collect()
    };
    let table = SIZES.iter().map(|&n| {
        let (frc, crc) = (value("frc", n), value("crc", n));
        vec![
            n.to_string(),
            four(frc),
            four(crc),
            four(frc.map(|v| v / n as f64)),
            four(crc.map(|v| v / n as f64)),
        ]
    });
    let (frc, crc) = (per_worker("frc"), per_worker("crc"));
    let span = |v: &[f64]| {
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    };
    let (frc_lo, frc_hi) = span(&frc);
    let crc_above = frc.iter().zip(&crc).filter(|(f, c)| c > f).count();
    let q = PAPER.p_slow * PAPER.p_slow_straggle + (1.0 - PAPER.p_slow) * PAPER.p_active_straggle;
    format!(
        "\n### Against n (s = {S})\n\n{}\n\
         Enumeration runs up to n = {MAX_ENUMERATION_WORKERS}; beyond, analytic (Theorem 2 enumerates cycle classes) \
         and Monte Carlo. FRC / n {} (q^2 = {:.4}); CRC / n goes from {} at \
         n = {} to {} at n = {} and is above FRC / n at {crc_above} of {} sizes.\n",
        markdown_table(&["n", "FRC", "CRC", "FRC / n", "CRC / n"], table),
        if frc_hi - frc_lo <= 1e-9 * frc_hi {
            format!("is {frc_lo:.4} at every n")
        } else {
            format!("lies between {frc_lo:.4} and {frc_hi:.4}")
        },
        q * q,
        four(crc.first().copied()),
        SIZES[0],
        four(crc.last().copied()),
        SIZES[SIZES.len() - 1],
        crc.len().min(frc.len()),
    )
}
