//! The expected decoding error three ways: Theorems 1-2, exact enumeration, Monte Carlo.

#![allow(clippy::unwrap_used)]

use ubershuffle_core::rng::seeded;
use ubershuffle_gradient_codes::{EncodingMatrix, ErrorTable, RoleShuffle, decode_mask};
use ubershuffle_learners::gradient_coding::expected::{
    MonteCarloOptions, SlowWorkers, analytic, enumerate, enumerate_drawn, expected_error_report, monte_carlo,
    non_straggler_distribution, non_straggler_distribution_as_printed, slow_count_probability,
};
use ubershuffle_learners::straggler::HeterogeneousParams;

const PAPER: HeterogeneousParams = HeterogeneousParams::new(0.3, 0.8, 0.01);

/// Monte Carlo is accepted within 4 standard errors (a 99.99 % normal interval): with the
/// few dozen estimates of these tests, a correct estimator fails with probability below 0.5 %.
const Z: f64 = 4.0;
/// Plus this much, for settings where the error is so rare (e.g. no slow worker, p_as = 0.01)
/// that no run saw any and the standard error is 0.
const RARE: f64 = 1e-4;

fn assert_within(
    mc: &ubershuffle_learners::gradient_coding::expected::MonteCarloEstimate,
    exact: f64,
    what: &str,
) {
    let (lo, hi) = mc.interval(Z);
    assert!(lo - RARE <= exact && exact <= hi + RARE, "{what}: MC {mc:?} vs exact {exact}");
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-9 * (1.0 + a.abs()), "{what}: {a} vs {b}");
}

#[test]
fn the_paper_parameters_agree_three_ways() {
    for b in [
        EncodingMatrix::frc(8, 2).unwrap(),
        EncodingMatrix::crc(8, 2).unwrap(),
        EncodingMatrix::uncoded(8).unwrap(),
    ] {
        let table = ErrorTable::new(&b).unwrap();
        for shuffle in RoleShuffle::ALL {
            let theory = analytic(&b, SlowWorkers::Drawn, PAPER).unwrap();
            let exact = enumerate_drawn(&table, PAPER, shuffle).unwrap();
            assert_close(theory, exact, &format!("{:?} {shuffle}", b.kind()));
            let mc = monte_carlo(&b, SlowWorkers::Drawn, PAPER, shuffle, MonteCarloOptions::new(4000, 16, 3))
                .unwrap();
            assert_within(&mc, exact, &format!("{:?} {shuffle}", b.kind()));
        }
    }
    // The figures quoted in README and results/ (n = 8, s = 2; s = 1 is uncoded).
    let frc = analytic(&EncodingMatrix::frc(8, 2).unwrap(), SlowWorkers::Drawn, PAPER).unwrap();
    let crc = analytic(&EncodingMatrix::crc(8, 2).unwrap(), SlowWorkers::Drawn, PAPER).unwrap();
    let uncoded = analytic(&EncodingMatrix::uncoded(8).unwrap(), SlowWorkers::Drawn, PAPER).unwrap();
    assert!((frc - 0.488072).abs() < 1e-6, "{frc}");
    assert!((crc - 0.624412).abs() < 1e-6, "{crc}");
    assert!((uncoded - 8.0 * 0.247).abs() < 1e-12, "{uncoded}");
}

#[test]
fn per_slow_count_values_agree_and_shuffling_narrows_the_spread() {
    for b in [
        EncodingMatrix::frc(6, 3).unwrap(),
        EncodingMatrix::crc(7, 2).unwrap(),
        EncodingMatrix::crc(8, 3).unwrap(),
    ] {
        let n = b.workers();
        let table = ErrorTable::new(&b).unwrap();
        for m in [0, 1, n / 2, n] {
            let theory = analytic(&b, SlowWorkers::Exactly(m), PAPER).unwrap();
            let none = enumerate(&table, m, PAPER, RoleShuffle::None).unwrap();
            let random = enumerate(&table, m, PAPER, RoleShuffle::Random).unwrap();
            let cyclic = enumerate(&table, m, PAPER, RoleShuffle::Cyclic).unwrap();
            for e in [none, random, cyclic] {
                assert_close(theory, e.mean, &format!("{:?} n={n} m={m}", b.kind()));
            }
            // Random shuffling gives every placement the same long-run error.
            assert_close(random.min_over_placements, random.max_over_placements, "random spread");
            assert!(
                none.max_over_placements - none.min_over_placements
                    >= cyclic.max_over_placements - cyclic.min_over_placements - 1e-12
            );
            let mc = monte_carlo(
                &b,
                SlowWorkers::Exactly(m),
                PAPER,
                RoleShuffle::Cyclic,
                MonteCarloOptions::new(1500, 2 * n, 7 + m as u64),
            )
            .unwrap();
            assert_within(&mc, theory, &format!("{:?} n={n} m={m}", b.kind()));
        }
    }
}

#[test]
fn class_averaging_is_iid_with_the_marginal_probability() {
    // Averaged over the classes, each worker straggles independently with
    // q = p_hat p_ss + (1 - p_hat) p_as in one iteration: a fourth, independent check.
    let b = EncodingMatrix::crc(8, 2).unwrap();
    let table = ErrorTable::new(&b).unwrap();
    let q = PAPER.marginal_straggle();
    let iid: f64 = (0..256u64)
        .map(|s| {
            let k = s.count_ones() as i32;
            (1.0 - q).powi(k) * q.powi(8 - k) * table.error(s)
        })
        .sum();
    assert_close(iid, enumerate_drawn(&table, PAPER, RoleShuffle::None).unwrap(), "iid vs classes");
}

#[test]
fn distributions_sum_to_one_and_the_printed_formula_adds_impossible_terms() {
    for m in 0..=8 {
        let p = non_straggler_distribution(8, m, PAPER);
        assert_close(p.iter().sum::<f64>(), 1.0, "P_r sums to 1");
        let printed = non_straggler_distribution_as_printed(8, m, PAPER);
        // Equal where no i > m term exists (r <= m), different (and no longer summing to 1)
        // where the impossible terms come in.
        assert!((0..=m).all(|r| (p[r] - printed[r]).abs() < 1e-15));
        if m <= 2 {
            assert!(printed.iter().sum::<f64>() > 1.0 + 1e-6, "m = {m}");
        }
    }
    let total: f64 = (0..=8).map(|m| slow_count_probability(8, m, 0.3)).sum();
    assert_close(total, 1.0, "P_m sums to 1");
}

#[test]
fn zero_one_crc_is_not_always_s_minus_one_tolerant() {
    // Theorem 2 stops at r = n - s; for n = 5, s = 2 the 0/1 CRC loses accuracy with 4 of 5.
    let b = EncodingMatrix::crc(5, 2).unwrap();
    assert!(decode_mask(&b, 0b01111).error > 0.1);
    let b = EncodingMatrix::crc(8, 3).unwrap();
    assert!((0..256u64).filter(|m| m.count_ones() == 6).any(|m| decode_mask(&b, m).error > 0.1));
    let even = EncodingMatrix::crc(8, 2).unwrap();
    assert!((0..8).all(|w| decode_mask(&even, 0xff & !(1 << w)).error == 0.0));
}

#[test]
fn the_report_has_every_method() {
    let b = EncodingMatrix::crc_exact(6, 2, &mut seeded(1)).unwrap();
    let r =
        expected_error_report(&b, PAPER, RoleShuffle::Random, MonteCarloOptions::new(300, 12, 1)).unwrap();
    assert!(r.drawn.analytic.is_none(), "no theorem for the real-valued CRC");
    let exact = r.drawn.enumeration.unwrap().mean;
    assert_within(&r.drawn.monte_carlo, exact, "report");
    assert_eq!(r.by_slow_count.len(), 7);
    assert!((r.marginal_straggle - 0.247).abs() < 1e-12);
}
