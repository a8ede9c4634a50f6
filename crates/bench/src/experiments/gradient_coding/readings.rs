//! Readings of the paper's parameters: which one, if any, gives its quoted 1.976 and 0.5173?

use serde::Serialize;
use ubershuffle_core::rng::seeded;
use ubershuffle_gradient_codes::{EncodingMatrix, ErrorTable, RoleShuffle};
use ubershuffle_learners::gradient_coding::expected::{
    SlowWorkers, analytic, enumerate_drawn, non_straggler_distribution,
    non_straggler_distribution_as_printed, slow_count_probability, theorem1_frc, theorem2_crc,
};
use ubershuffle_learners::straggler::HeterogeneousParams;

use super::expected_error::{ExpectedError, paper_value};
use super::{N, PAPER, PAPER_CRC, PAPER_FRC, S};
use crate::report::{Row, markdown_table};

/// A reading "matches" a paper figure within this.
const MATCH: f64 = 1e-3;

/// One reading and the paper figure it comes closest to.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Reading {
    reading: String,
    workers: usize,
    value: f64,
    closest_paper_figure: f64,
    difference: f64,
}

impl Row for Reading {}

impl Reading {
    fn new(reading: String, value: f64) -> Reading {
        let closest =
            if (value - PAPER_FRC).abs() <= (value - PAPER_CRC).abs() { PAPER_FRC } else { PAPER_CRC };
        Reading { reading, workers: N, value, closest_paper_figure: closest, difference: value - closest }
    }
}

/// `f(m)` averaged over the number m of slow workers.
fn over_slow_counts(f: &dyn Fn(usize) -> f64) -> f64 {
    (0..=N).map(|m| slow_count_probability(N, m, PAPER.p_slow) * f(m)).sum()
}

/// Every reading we tried (analytic unless its name says otherwise).
pub(super) fn measure() -> anyhow::Result<Vec<Reading>> {
    let (frc, crc) = (EncodingMatrix::frc(N, S)?, EncodingMatrix::crc(N, S)?);
    let exactly = |b: &EncodingMatrix, m| analytic(b, SlowWorkers::Exactly(m), PAPER).unwrap_or(f64::NAN);
    let mut rows = vec![
        Reading::new(
            format!("Theorem 1, FRC, s = {S} (our model)"),
            over_slow_counts(&|m| theorem1_frc(N, S, &non_straggler_distribution(N, m, PAPER))),
        ),
        Reading::new(
            format!("Theorem 2, CRC, s = {S} (our model)"),
            analytic(&crc, SlowWorkers::Drawn, PAPER).unwrap_or(f64::NAN),
        ),
        Reading::new(
            "Theorem 1 with s = 1 (no redundancy) = n (p_hat p_ss + (1-p_hat) p_as)".into(),
            over_slow_counts(&|m| theorem1_frc(N, 1, &non_straggler_distribution(N, m, PAPER))),
        ),
        Reading::new(
            format!("Theorem 1, FRC, s = {S}, with P_r exactly as printed (r'(i) = min(i, m))"),
            over_slow_counts(&|m| theorem1_frc(N, S, &non_straggler_distribution_as_printed(N, m, PAPER))),
        ),
        Reading::new(
            format!("Theorem 2, CRC, s = {S}, with P_r as printed"),
            over_slow_counts(&|m| {
                theorem2_crc(&crc, &non_straggler_distribution_as_printed(N, m, PAPER)).unwrap_or(f64::NAN)
            }),
        ),
    ];
    for m in [2usize, 3] {
        let p_m = slow_count_probability(N, m, PAPER.p_slow);
        rows.extend([
            Reading::new(
                format!("Remark 2 read literally, E(n, m, s) P_m without the sum, m = {m}: FRC"),
                p_m * exactly(&frc, m),
            ),
            Reading::new(format!("Remark 2 read literally, m = {m}: CRC"), p_m * exactly(&crc, m)),
            Reading::new(format!("(n, m) model, m = {m}: FRC"), exactly(&frc, m)),
            Reading::new(format!("(n, m) model, m = {m}: CRC"), exactly(&crc, m)),
        ]);
    }
    rows.extend(other_codes(&frc)?);
    Ok(rows)
}

/// Readings with another code or another straggler model.
fn other_codes(frc: &EncodingMatrix) -> anyhow::Result<Vec<Reading>> {
    let crc3 = EncodingMatrix::crc(N, S + 1)?;
    let mut rows = vec![Reading::new(
        format!("\"s\" read as stragglers tolerated (s + 1 = {} partitions per worker): CRC", S + 1),
        analytic(&crc3, SlowWorkers::Drawn, PAPER).unwrap_or(f64::NAN),
    )];
    for seed in 1..=3 {
        let exact = EncodingMatrix::crc_exact(N, S, &mut seeded(seed))?;
        rows.push(Reading::new(
            format!("Tandon et al.'s real-valued CRC, s = {S}, coefficients seed {seed} (enumeration)"),
            enumerate_drawn(&ErrorTable::new(&exact)?, PAPER, RoleShuffle::Random).unwrap_or(f64::NAN),
        ));
    }
    let iid = HeterogeneousParams::new(1.0, PAPER.p_slow, 0.0);
    let crc = EncodingMatrix::crc(N, S)?;
    rows.push(Reading::new(
        format!("CRC, s = {S}, i.i.d. stragglers with p = p_hat = {}", PAPER.p_slow),
        analytic(&crc, SlowWorkers::Drawn, iid).unwrap_or(f64::NAN),
    ));
    rows.push(Reading::new(
        format!("FRC, s = {S}, i.i.d. stragglers with p = p_hat = {}", PAPER.p_slow),
        analytic(frc, SlowWorkers::Drawn, iid).unwrap_or(f64::NAN),
    ));
    Ok(rows)
}

/// The readings' table and what they say about the paper's two figures.
pub(super) fn section(readings: &[Reading], errors: &[ExpectedError]) -> String {
    let table = readings.iter().map(|r| {
        let mark = if r.difference.abs() < MATCH {
            format!("**{} (matches)**", r.closest_paper_figure)
        } else {
            format!("{} (off by {:+.4})", r.closest_paper_figure, r.difference)
        };
        vec![r.reading.clone(), format!("{:.4}", r.value), mark]
    });
    format!(
        "\nThe paper quotes E_err(FRC) = {PAPER_FRC} and E_err(CRC) = {PAPER_CRC} for these parameters (Section V). \
         Readings of its parameters we computed (analytic unless noted; the paper's two numbers are only compared \
         with, never used to compute):\n\n{}\nFinding: {} {} {}\n",
        markdown_table(&["reading", "value", "closest paper figure"], table),
        matched(readings, PAPER_FRC),
        matched(readings, PAPER_CRC),
        ordering(errors),
    )
}

/// Which readings give `figure`, or the closest one.
fn matched(readings: &[Reading], figure: f64) -> String {
    let hits: Vec<String> = readings
        .iter()
        .filter(|r| (r.value - figure).abs() < MATCH)
        .map(|r| format!("\"{}\" ({:.4})", r.reading, r.value))
        .collect();
    if !hits.is_empty() {
        return format!("{figure} is given by {}.", hits.join(" and "));
    }
    let distance = |r: &&Reading| (r.value - figure).abs();
    let nearest = readings.iter().map(|r| distance(&r)).fold(f64::INFINITY, f64::min);
    let closest: Vec<&Reading> = readings.iter().filter(|r| distance(r) - nearest < 1e-9).collect();
    let names: Vec<String> = closest.iter().map(|r| format!("\"{}\"", r.reading)).collect();
    match closest.first() {
        Some(c) => {
            format!("No reading gives {figure}; the closest, {:.4}, is {}.", c.value, names.join(" and "))
        }
        None => format!("No reading gives {figure}."),
    }
}

/// Whether our model orders CRC and FRC as the paper does.
fn ordering(errors: &[ExpectedError]) -> String {
    let (Some(frc), Some(crc)) =
        (paper_value(errors, "frc", "analytic"), paper_value(errors, "crc", "analytic"))
    else {
        return String::new();
    };
    let ours = if crc > frc { "larger" } else { "smaller" };
    let paper = if PAPER_CRC > PAPER_FRC { "larger" } else { "smaller" };
    format!(
        "By the model's own definition, at these parameters the 0/1 CRC has a {ours} expected error than FRC \
         ({crc:.4} against {frc:.4}); the paper's has a {paper} one, {} ordering.",
        if ours == paper { "the same" } else { "the opposite" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paper_figure_is_matched_or_its_closest_readings_are_named() {
        let readings = [
            Reading::new("a".into(), 1.9761),
            Reading::new("b".into(), 0.40),
            Reading::new("c".into(), 0.60),
            Reading::new("d".into(), 0.40),
        ];
        assert_eq!(readings[0].closest_paper_figure, PAPER_FRC);
        assert_eq!(readings[2].closest_paper_figure, PAPER_CRC);
        assert_eq!(matched(&readings, PAPER_FRC), "1.976 is given by \"a\" (1.9761).");
        assert_eq!(
            matched(&readings, 0.45),
            "No reading gives 0.45; the closest, 0.4000, is \"b\" and \"d\"."
        );
    }
}
