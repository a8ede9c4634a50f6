//! Map-phase latency under shifted-exponential compute times (Zhang-Simeone eq. (4), from Li
//! et al.): each server's map time is `mu N + Exp` with mean `mu N (1 + 1/lambda)`, so the
//! q-th fastest of K finishes on average at `mu N (1 + (H_K - H_{K-q}) / lambda)`.
//!
//! The sampler here is deliberately small and local to the map-shuffle-reduce module; the
//! project's general straggler models live in the `learners` crate.

use ubershuffle_core::rng::{SeededRng, uniform_unit};

/// The harmonic number `H_n = 1 + 1/2 + ... + 1/n` (`H_0 = 0`).
pub fn harmonic(n: usize) -> f64 {
    (1..=n).map(|i| 1.0 / i as f64).sum()
}

/// `E[T_q] = mu N (1 + (H_K - H_{K-q}) / lambda)`, Zhang-Simeone eq. (4): the mean time until
/// the first `wait` of `servers` finish their map work (`mu N` is one server's work).
pub fn expected_map_latency(servers: usize, wait: usize, storage: f64, columns: f64, rate: f64) -> f64 {
    storage * columns * (1.0 + (harmonic(servers) - harmonic(servers - wait.min(servers))) / rate)
}

/// A shifted exponential: `shift + Exp(rate / shift)`, i.e. the CDF
/// `1 - exp(-(rate / shift)(t - shift))` for `t >= shift`, as in eq. (4) with `shift = mu N`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShiftedExponential {
    /// The minimum time (mu N).
    pub shift: f64,
    /// lambda: the exponential part has mean `shift / rate`.
    pub rate: f64,
}

impl ShiftedExponential {
    /// One draw, by inversion of the CDF.
    pub fn sample(&self, rng: &mut SeededRng) -> f64 {
        let u = uniform_unit(rng); // in [0, 1), so 1 - u is in (0, 1]
        self.shift - self.shift / self.rate * (1.0 - u).ln()
    }
}

/// One map phase: every server's sampled finishing time, the first `wait` finishers (the
/// non-stragglers, ascending by index) and the time the last of them finished.
#[derive(Clone, Debug, PartialEq)]
pub struct MapRound {
    /// Finishing time of each server.
    pub times: Vec<f64>,
    /// The first `wait` servers to finish, ascending by index.
    pub non_stragglers: Vec<usize>,
    /// T_q, when the master stops waiting.
    pub latency: f64,
}

/// Draws every server's map time and keeps the first `wait` finishers.
pub fn sample_map_round(
    servers: usize,
    wait: usize,
    model: ShiftedExponential,
    rng: &mut SeededRng,
) -> MapRound {
    let times: Vec<f64> = (0..servers).map(|_| model.sample(rng)).collect();
    let mut order: Vec<usize> = (0..servers).collect();
    order.sort_by(|&a, &b| times[a].total_cmp(&times[b]).then(a.cmp(&b)));
    let latency = order.get(wait.saturating_sub(1)).map_or(0.0, |&i| times[i]);
    let mut non_stragglers: Vec<usize> = order.into_iter().take(wait).collect();
    non_stragglers.sort_unstable();
    MapRound { times, non_stragglers, latency }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::seeded;

    #[test]
    fn sampled_mean_latency_matches_eq_4() {
        let (servers, storage, columns, rate) = (10, 0.5, 4.0, 2.0);
        let model = ShiftedExponential { shift: storage * columns, rate };
        let mut rng = seeded(4);
        for wait in [1, 5, 10] {
            let draws = 20_000;
            let mean: f64 =
                (0..draws).map(|_| sample_map_round(servers, wait, model, &mut rng).latency).sum::<f64>()
                    / draws as f64;
            let expected = expected_map_latency(servers, wait, storage, columns, rate);
            assert!(
                (mean - expected).abs() < 0.01 * expected,
                "q={wait}: sampled {mean}, eq. (4) {expected}"
            );
        }
    }

    #[test]
    fn first_finishers_are_the_fastest() {
        let model = ShiftedExponential { shift: 1.0, rate: 1.0 };
        let round = sample_map_round(8, 3, model, &mut seeded(2));
        assert_eq!(round.non_stragglers.len(), 3);
        let slowest_kept = round.non_stragglers.iter().map(|&i| round.times[i]).fold(0.0, f64::max);
        assert_eq!(slowest_kept, round.latency);
        for i in (0..8).filter(|i| !round.non_stragglers.contains(i)) {
            assert!(round.times[i] >= round.latency);
        }
        assert!(round.times.iter().all(|&t| t >= 1.0));
        assert_eq!(harmonic(0), 0.0);
        assert!((harmonic(3) - 11.0 / 6.0).abs() < 1e-12);
    }
}
