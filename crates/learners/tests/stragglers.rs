//! Statistics of the straggler models: empirical frequencies against the model's
//! probabilities, within 5 standard errors of a binomial proportion (for a correct model a
//! failure has probability below 1e-6 per check; the seeds are fixed, so runs are repeatable).

#![allow(clippy::unwrap_used)]

use ubershuffle_core::rng::seeded;
use ubershuffle_learners::StragglerModel;
use ubershuffle_learners::straggler::{
    HeterogeneousParams, HeterogeneousStragglers, IidStragglers, NoStragglers, ShiftedExponential,
    TwoStateMarkov,
};

/// Asserts that `hits / trials` is within 5 standard errors of `p`.
fn assert_frequency(hits: usize, trials: usize, p: f64, what: &str) {
    let freq = hits as f64 / trials as f64;
    let se = (p * (1.0 - p) / trials as f64).sqrt().max(1.0 / trials as f64);
    assert!((freq - p).abs() <= 5.0 * se, "{what}: {freq} over {trials} trials, expected {p} (se {se})");
}

#[test]
fn no_stragglers_are_never_late() {
    let mut m = NoStragglers::new(5).unwrap();
    let mut rng = seeded(1);
    assert!((0..100).all(|_| m.next_iteration(&mut rng).late_count() == 0));
}

#[test]
fn iid_stragglers_are_late_with_probability_p_independently() {
    let (n, iterations, p) = (10, 20_000, 0.3);
    let mut m = IidStragglers::new(n, p).unwrap();
    let mut rng = seeded(2);
    let (mut late, mut both) = (0, 0);
    for _ in 0..iterations {
        let o = m.next_iteration(&mut rng);
        late += o.late_count();
        both += usize::from(o.is_late(0) && o.is_late(1));
    }
    assert_frequency(late, n * iterations, p, "late");
    assert_frequency(both, iterations, p * p, "two workers late together");
    assert!(IidStragglers::new(3, 1.5).is_err());
}

#[test]
fn heterogeneous_classes_and_per_class_rates() {
    let params = HeterogeneousParams::new(0.3, 0.8, 0.05);
    // The class draw: slow with probability p_hat over 2000 models of 10 workers.
    let mut rng = seeded(3);
    let slow: usize = (0..2000)
        .map(|_| {
            HeterogeneousStragglers::draw(10, params, &mut rng).unwrap().slow().iter().filter(|&&s| s).count()
        })
        .sum();
    assert_frequency(slow, 20_000, 0.3, "slow class");
    // Per-iteration rates of a fixed (n, m) model, and the classes stay put.
    let mut m = HeterogeneousStragglers::with_slow_workers(8, &[1, 6], params).unwrap();
    let iterations = 20_000;
    let (mut slow_late, mut active_late) = (0, 0);
    for _ in 0..iterations {
        let o = m.next_iteration(&mut rng);
        slow_late += usize::from(o.is_late(1)) + usize::from(o.is_late(6));
        active_late += (0..8).filter(|&w| w != 1 && w != 6 && o.is_late(w)).count();
    }
    assert_frequency(slow_late, 2 * iterations, 0.8, "slow workers straggle");
    assert_frequency(active_late, 6 * iterations, 0.05, "active workers straggle");
    assert_eq!(m.slow(), &[false, true, false, false, false, false, true, false]);
    assert!((params.marginal_straggle() - (0.3 * 0.8 + 0.7 * 0.05)).abs() < 1e-15);
    assert!(HeterogeneousStragglers::with_slow_workers(4, &[4], params).is_err());
}

#[test]
fn shifted_exponential_times_and_deadline() {
    let (shift, rate, deadline) = (1.0, 2.0, 1.5);
    let mut m = ShiftedExponential::new(4, shift, rate, deadline).unwrap();
    let mut rng = seeded(4);
    let iterations = 20_000;
    let (mut late, mut sum, mut below_shift) = (0, 0.0, 0);
    for _ in 0..iterations {
        let o = m.next_iteration(&mut rng);
        late += o.late_count();
        sum += o.compute_times.iter().sum::<f64>();
        below_shift += o.compute_times.iter().filter(|&&t| t < shift).count();
    }
    let p_late = (-rate * (deadline - shift)).exp();
    assert!((m.late_probability(0) - p_late).abs() < 1e-15);
    assert_frequency(late, 4 * iterations, p_late, "late past the deadline");
    // Mean shift + 1/rate = 1.5, standard deviation 1/rate = 0.5: 5 se of the mean of 80 000.
    let mean = sum / (4 * iterations) as f64;
    assert!((mean - 1.5).abs() < 5.0 * 0.5 / (80_000f64).sqrt(), "mean {mean}");
    assert_eq!(below_shift, 0);
    assert!(ShiftedExponential::new(4, 1.0, 0.0, 1.0).is_err());
}

#[test]
fn markov_stragglers_persist() {
    let (p_fall, p_recover) = (0.05, 0.2);
    let mut m = TwoStateMarkov::new(6, p_fall, p_recover).unwrap();
    let mut rng = seeded(5);
    let iterations = 40_000;
    let mut previous: Option<Vec<bool>> = None;
    let (mut late, mut stayed, mut was_late) = (0, 0, 0);
    for _ in 0..iterations {
        let o = m.next_iteration(&mut rng);
        let now: Vec<bool> = (0..6).map(|w| o.is_late(w)).collect();
        late += o.late_count();
        if let Some(prev) = &previous {
            for w in 0..6 {
                if prev[w] {
                    was_late += 1;
                    stayed += usize::from(now[w]);
                }
            }
        }
        previous = Some(now);
    }
    // Stationary fraction 0.2. Consecutive iterations are correlated, so the proportion's
    // variance is inflated by (1 + rho) / (1 - rho) with rho = 1 - p_fall - p_recover = 0.75,
    // i.e. 7x: check against 5 standard errors of an effective sample 7 times smaller.
    let freq = late as f64 / (6 * iterations) as f64;
    let se = (0.2 * 0.8 * 7.0 / (6 * iterations) as f64).sqrt();
    assert!((freq - m.stationary_late()).abs() < 5.0 * se, "{freq}");
    // A late worker stays late with probability 1 - p_recover (transitions are independent).
    assert_frequency(stayed, was_late, 1.0 - p_recover, "stays late");
    assert!(TwoStateMarkov::new(2, 0.0, 0.0).is_err());
}
