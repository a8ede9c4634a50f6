//! Coded map-shuffle-reduce: closed forms against the issue's and the paper's numbers, and
//! real executions (GF(2^31 - 1), MDS + repetition, coded multicast, decoding, Y = A X
//! compared exactly) whose counted messages must equal the closed forms for every straggler
//! set tried.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use ubershuffle_core::rng::{partial_shuffle, seeded};
use ubershuffle_msr::{
    Execution, Fp, MatrixTask, MsrParams, MsrSetting, Phase, Ratio, Scheme, SchemeDesign, binomial, execute,
    improved_candidates, improved_design, improved_design_at, is_feasible, smallest_sizes, subsets_of,
    unified_design,
};

fn ratio(text: &str) -> Ratio {
    text.parse().unwrap()
}

fn setting(k: usize, mu: &str, q: usize) -> MsrSetting {
    MsrParams::new(k, ratio(mu), q).check().unwrap()
}

fn loads(k: usize, mu: &str, q: usize) -> (Ratio, Ratio) {
    let s = setting(k, mu, q);
    (unified_design(&s).unwrap().load, improved_design(&s).unwrap().load)
}

#[test]
fn unified_matches_the_issue_checks() {
    assert_eq!(loads(4, "1/2", 2).0, ratio("1/2"));
    assert_eq!(loads(4, "1/2", 3).0, ratio("2/3"));
    assert_eq!(loads(4, "1/2", 4).0, ratio("1/4"));
    assert_eq!(loads(18, "1/3", 18).0, ratio("1/9"));
}

#[test]
fn closed_forms_match_an_independent_evaluation() {
    // Values from a separate Python evaluation of the same formulas with exact fractions.
    for (k, mu, q, unified, improved) in [
        (18, "1/3", 8, "81/136", "3101/10200"),
        (18, "1/3", 11, "1185/2992", "2167/10200"),
        (10, "1/2", 7, "25/72", "799/5040"),
        (10, "1/2", 5, "7/15", "479/2016"),
        (10, "1/5", 9, "8/9", "22/45"),
        (6, "1/2", 5, "9/25", "13/60"),
    ] {
        assert_eq!(loads(k, mu, q), (ratio(unified), ratio(improved)), "K={k} mu={mu} q={q}");
    }
}

#[test]
fn the_papers_example_is_k6_q4_and_improves() {
    let s = setting(6, "1/2", 4);
    let unified = unified_design(&s).unwrap();
    assert_eq!((unified.repetition, unified.mds_rate, unified.load), (2, ratio("2/3"), ratio("7/20")));
    let improved = improved_design(&s).unwrap();
    assert_eq!((improved.repetition, improved.mds_rate, improved.load), (3, Ratio::ONE, ratio("19/60")));
    assert_eq!(smallest_sizes(&[&improved]).unwrap(), (20, 12));
    assert_eq!(smallest_sizes(&[&unified, &improved]).unwrap(), (20, 12));
    let task = MatrixTask::random(20, 3, 12, 1);
    for q_set in subsets_of(0b11_1111, 4) {
        let non_stragglers: Vec<usize> = (0..6).filter(|i| q_set & 1 << i != 0).collect();
        let report = execute(&improved, &task, &non_stragglers).unwrap();
        assert!(report.product_matches);
        // Section III-A: 4 messages of 3 IVs, 36 of 2, 36 unicasts: 76 = 19/60 * 240.
        assert_eq!(report.messages_per_phase, vec![4, 36, 36]);
        for &k in &non_stragglers {
            assert_eq!(report.received_per_phase[k], vec![3, 18, 9], "server {k} of {non_stragglers:?}");
        }
        let report = execute(&unified, &task, &non_stragglers).unwrap();
        assert!(report.product_matches);
        assert_eq!(report.messages, 84); // 7/20 * 240
    }
}

#[test]
fn the_issues_example_k4_q3_improves_strictly() {
    assert_eq!(loads(4, "1/2", 3), (ratio("2/3"), ratio("5/12")));
    let improved = improved_design(&setting(4, "1/2", 3)).unwrap();
    assert_eq!((improved.repetition, improved.mds_rate), (2, Ratio::ONE));
}

#[test]
fn improved_is_never_worse_and_the_unified_pair_is_feasible() {
    for k in 1..=24usize {
        for (a, b) in [(1, 5), (1, 4), (1, 3), (2, 5), (1, 2), (2, 3), (3, 4), (1, 1)] {
            let mu = Ratio::new(a, b).unwrap();
            for q in 1..=k {
                let Ok(s) = MsrParams::new(k, mu, q).check() else { continue };
                let unified = unified_design(&s).unwrap();
                let improved = improved_design(&s).unwrap();
                assert!(improved.load <= unified.load, "K={k} mu={mu} q={q}");
                // Remark 2 / Appendix (16): the unified pair satisfies (10a)-(10c) ...
                assert!(is_feasible(&s, unified.repetition, unified.mds_rate).unwrap());
                // ... and Remark 3: at that very pair the reconstructed load (11) is no larger.
                let at_pair = improved_design_at(&s, unified.repetition, unified.mds_rate).unwrap().unwrap();
                assert!(at_pair.load <= unified.load, "K={k} mu={mu} q={q}");
                // Every candidate uses all the storage and needs 1 - mu per column.
                for c in improved_candidates(&s).unwrap() {
                    assert_eq!(c.storage_used, mu);
                }
            }
        }
    }
}

#[test]
fn the_endpoints_coincide_as_the_paper_says() {
    for (k, mu, q_low) in [(18, "1/3", 3), (10, "1/5", 5), (10, "1/2", 2)] {
        let (u, i) = loads(k, mu, q_low);
        assert_eq!(u, i);
        let (u, i) = loads(k, mu, k);
        assert_eq!(u, i);
    }
}

/// Executes both schemes of `s` on every given straggler pattern and checks every count.
fn execute_and_check(s: &MsrSetting, patterns: &[Vec<usize>], seed: u64) {
    for design in [&unified_design(s).unwrap(), &improved_design(s).unwrap()] {
        // Each scheme at its own smallest sizes (the common ones can be far larger).
        let (rows, columns) = smallest_sizes(&[design]).unwrap();
        let task = MatrixTask::random(rows, 2, columns, seed);
        let expected = design.closed_form_messages(rows, columns).unwrap();
        for non_stragglers in patterns {
            let report = execute(design, &task, non_stragglers).unwrap();
            let label = format!(
                "{} K={} mu={} q={} Q={non_stragglers:?} M={rows} N={columns}",
                design.scheme.name(),
                s.servers(),
                s.storage(),
                s.wait()
            );
            assert!(report.product_matches, "{label}");
            assert_eq!(u128::from(report.messages), expected, "{label}");
            assert_eq!(report.load, design.load, "{label}");
            received_matches_the_phases(
                design,
                &report.received_per_phase,
                non_stragglers,
                rows,
                columns,
                &label,
            );
        }
    }
}

/// Every non-straggler receives exactly what the phases promise: `B_j M N / q` IVs for a full
/// phase, the share for a partial or unicast one; at most the stragglers receive nothing.
fn received_matches_the_phases(
    design: &SchemeDesign,
    received: &[Vec<u64>],
    non_stragglers: &[usize],
    rows: usize,
    columns: usize,
    label: &str,
) {
    let per_server = Ratio::new((rows * columns) as i128, design.setting.wait() as i128).unwrap();
    for (p, phase) in design.phases.iter().enumerate() {
        let fraction = match *phase {
            Phase::Full { redundancy } => design.supply(redundancy).unwrap(),
            Phase::Partial { share, .. } | Phase::Unicast { share, .. } => share,
        };
        let want = fraction.times(per_server).unwrap();
        for (k, got) in received.iter().enumerate() {
            let expect = if non_stragglers.contains(&k) { want.numer() as u64 } else { 0 };
            assert!(want.is_integer(), "{label}");
            assert_eq!(got[p], expect, "{label} server {k} phase {phase}");
        }
    }
}

const STORAGES: [&str; 7] = ["1/5", "1/4", "1/3", "2/5", "1/2", "2/3", "1"];

#[test]
fn executed_counts_equal_closed_forms_on_every_straggler_set_small_k() {
    for k in 1..=6usize {
        for mu in STORAGES {
            for q in 1..=k {
                let Ok(s) = MsrParams::new(k, ratio(mu), q).check() else { continue };
                let patterns: Vec<Vec<usize>> = subsets_of((1u64 << k) - 1, q)
                    .map(|m| (0..k).filter(|i| m & 1 << i != 0).collect())
                    .collect();
                assert_eq!(patterns.len() as u128, binomial(k, q));
                execute_and_check(&s, &patterns, (k * 100 + q) as u64);
            }
        }
    }
}

#[test]
fn executed_counts_equal_closed_forms_on_sampled_straggler_sets_k7_to_10() {
    let mut rng = seeded(77);
    for k in 7..=10usize {
        for mu in ["1/5", "1/3", "1/2"] {
            for q in 1..=k {
                let Ok(s) = MsrParams::new(k, ratio(mu), q).check() else { continue };
                let patterns: Vec<Vec<usize>> = (0..2)
                    .map(|_| {
                        let mut all: Vec<usize> = (0..k).collect();
                        partial_shuffle(&mut rng, &mut all, q);
                        all.truncate(q);
                        all
                    })
                    .collect();
                execute_and_check(&s, &patterns, k as u64);
            }
        }
    }
}

#[test]
fn the_unified_whole_phase_option_is_executed() {
    // s_q = 3 and B_2 / 2 is below the rest, so the unified scheme runs the whole j=2 phase and
    // its receivers end with more than M rows.
    let s = setting(8, "1/2", 6);
    let unified = unified_design(&s).unwrap();
    assert_eq!(unified.phases, vec![Phase::Full { redundancy: 3 }, Phase::Full { redundancy: 2 }]);
    let need = Ratio::ONE.minus(unified.storage_used).unwrap();
    assert!(unified.supply(3).unwrap().plus(unified.supply(2).unwrap()).unwrap() > need);
    execute_and_check(&s, &[vec![0, 1, 2, 4, 5, 7]], 3);
}

#[test]
fn a_corrupted_message_is_caught_by_the_product_check() {
    let s = setting(6, "1/2", 4);
    for design in [unified_design(&s).unwrap(), improved_design(&s).unwrap()] {
        let task = MatrixTask::random(20, 3, 12, 9);
        let execution = Execution::prepare(&design, &task, &[0, 2, 3, 5]).unwrap();
        let mut values = execution.encode().unwrap();
        assert!(execution.reduce(&values).unwrap().product_matches);
        let middle = values.len() / 2;
        values[middle] += Fp::ONE;
        assert!(!execution.reduce(&values).unwrap().product_matches, "{}", design.scheme.name());
    }
}

#[test]
fn sizes_that_do_not_divide_are_refused_with_the_multiple_needed() {
    let s = setting(6, "1/2", 4);
    let improved = improved_design(&s).unwrap();
    assert_eq!(improved.scheme, Scheme::Improved);
    let e = improved.layout(10).unwrap_err().to_string();
    assert!(e.contains("multiple of 20"), "{e}");
    let e = improved.columns_per_server(20, 8).unwrap_err().to_string();
    assert!(e.contains("multiple of q * 3 = 12"), "{e}");
    let task = MatrixTask::random(20, 2, 12, 0);
    assert!(execute(&improved, &task, &[0, 1, 2]).is_err());
    assert!(execute(&improved, &task, &[0, 1, 2, 9]).is_err());
}
