//! The expected optimal decoding error per iteration under the heterogeneous straggler model,
//! three independent ways:
//!
//! - **analytic**: Johri et al.'s Theorem 1 (FRC, closed form) and Theorem 2 (0/1 CRC, a sum
//!   over cycle classes), with Remark 2 to average over the class draw;
//! - **exact enumeration**: every placement of the slow workers and every one of the `2^n`
//!   straggler patterns with its exact probability, decoding each pattern (`n <= 12`);
//! - **Monte Carlo**: simulated runs of the straggler model ([`HeterogeneousStragglers`]) and
//!   the role shuffle, with a confidence interval from the spread of the run means.
//!
//! Either for exactly `m` slow workers placed uniformly at random (the paper's
//! `(n, m)`-heterogeneous model) or with every worker slow with probability `p_hat`.
//!
//! Two facts the numbers show (and the tests check): averaged over where the slow workers
//! are, the expected error is the same with or without shuffling, because relabelling workers
//! does not change a uniformly random placement; shuffling changes the error of a *given*
//! placement, which without shuffling ranges from [`Enumerated::min_over_placements`] to
//! [`Enumerated::max_over_placements`], and with random shuffling is the same for all.

use std::collections::HashMap;

use ubershuffle_core::rng::{partial_shuffle, seeded_stream};
use ubershuffle_gradient_codes::{
    EncodingMatrix, ErrorTable, GradientCodeKind, RoleShuffle, cycle_classes, decode_mask, roles_mask,
};

use crate::LearnerError;
use crate::straggler::{HeterogeneousParams, HeterogeneousStragglers, StragglerModel};

/// How the slow workers are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlowWorkers {
    /// Exactly `m` slow workers, at a uniformly random placement (the `(n, m)` model).
    Exactly(usize),
    /// Each worker slow with probability `p_hat`, independently (the heterogeneous model).
    Drawn,
}

/// The binomial coefficient as a float (exact for the sizes used here).
pub fn binomial(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Johri et al. Remark 2: `P_m = C(n, m) p_hat^m (1 - p_hat)^(n - m)`, the probability that
/// exactly `m` of `n` workers are slow.
pub fn slow_count_probability(n: usize, m: usize, p_slow: f64) -> f64 {
    binomial(n, m) * p_slow.powi(m as i32) * (1.0 - p_slow).powi((n - m) as i32)
}

/// Johri et al. Theorem 1's `P_r`: the probability of exactly `r` non-stragglers (index `r`)
/// when `m` of `n` workers are slow: `i` of the `m` slow ones and `r - i` of the `n - m`
/// active ones finish, summed over `i`.
pub fn non_straggler_distribution(n: usize, m: usize, params: HeterogeneousParams) -> Vec<f64> {
    let (pss, pas) = (params.p_slow_straggle, params.p_active_straggle);
    (0..=n)
        .map(|r| {
            (0..=r.min(m))
                .filter(|&i| r - i <= n - m)
                .map(|i| {
                    binomial(m, i)
                        * binomial(n - m, r - i)
                        * (1.0 - pss).powi(i as i32)
                        * pss.powi((m - i) as i32)
                        * (1.0 - pas).powi((r - i) as i32)
                        * pas.powi((n - m + i - r) as i32)
                })
                .sum()
        })
        .collect()
}

/// `P_r` exactly as Theorem 1 prints it: `i` runs over `0..=r` with `r'(i) = min(i, m)` in the
/// binomials but `i` itself in the exponents. It differs from [`non_straggler_distribution`]
/// only by the terms with `i > m` (impossible events, with negative powers of `p_ss`); kept to
/// test whether that reading explains the paper's numbers.
pub fn non_straggler_distribution_as_printed(n: usize, m: usize, params: HeterogeneousParams) -> Vec<f64> {
    let (pss, pas) = (params.p_slow_straggle, params.p_active_straggle);
    (0..=n)
        .map(|r| {
            (0..=r)
                .filter(|&i| r - i.min(m) <= n - m && n + i >= m + r)
                .map(|i| {
                    let ri = i.min(m);
                    binomial(m, ri)
                        * binomial(n - m, r - ri)
                        * (1.0 - pss).powi(i as i32)
                        * pss.powi(m as i32 - i as i32)
                        * (1.0 - pas).powi((r - i) as i32)
                        * pas.powi((n - m + i - r) as i32)
                })
                .sum()
        })
        .collect()
}

/// Johri et al. Theorem 1: `E_err(FRC, n, m, s) = n sum_{r=0}^{n-s} P_r C(n-s, r) / C(n, r)`
/// for the `(s-1)`-tolerant FRC with random shuffling (each group of `s` roles is lost with
/// probability `C(n-s, r)/C(n, r)` given `r` non-stragglers, and costs `s`). `p_r` is the
/// distribution of the number of non-stragglers. `s = 1` is uncoded.
pub fn theorem1_frc(n: usize, s: usize, p_r: &[f64]) -> f64 {
    n as f64 * (0..=n.saturating_sub(s)).map(|r| p_r[r] * binomial(n - s, r) / binomial(n, r)).sum::<f64>()
}

/// Johri et al. Theorem 2: `E_err(CRC, n, m, s) = sum_r P_r sum_i e_i / C(n, r) err(A_{v_i})`
/// over the cycle classes `v_i` of weight `r` with orders `e_i`, for a 0/1 CRC matrix (whose
/// rows are cyclic shifts of each other, so cyclically shifted role sets decode equally well).
///
/// Choice: the paper sums `r` up to `n - s` only, relying on `(s-1)`-tolerance; the 0/1 CRC
/// is `(s-1)`-tolerant when `s` divides `n` (one of its `s` tilings by disjoint roles survives
/// any `s - 1` losses) but not in general otherwise (for `n = 5, s = 2`, four consecutive roles
/// cannot rebuild the all-ones vector; `n = 8, s = 3` fails too), so we sum over every `r`. For
/// `n = 8, s = 2` the extra terms are zero and both readings agree. `None` for `n > 20` (the
/// classes are enumerated).
pub fn theorem2_crc(b: &EncodingMatrix, p_r: &[f64]) -> Option<f64> {
    let n = b.workers();
    if b.kind() != GradientCodeKind::Crc || n > 20 {
        return None;
    }
    let mut total = 0.0;
    for class in cycle_classes(n) {
        let weight = p_r[class.weight] * class.order as f64 / binomial(n, class.weight);
        if weight > 0.0 {
            total += weight * decode_mask(b, class.representative).error;
        }
    }
    Some(total)
}

/// The analytic expected error (Theorems 1-2; Remark 2 for [`SlowWorkers::Drawn`]), or `None`
/// where the paper gives no formula (the real-valued CRC) or the class enumeration is too big.
pub fn analytic(b: &EncodingMatrix, slow: SlowWorkers, params: HeterogeneousParams) -> Option<f64> {
    let n = b.workers();
    let for_m = |m: usize| {
        let p_r = non_straggler_distribution(n, m, params);
        match b.kind() {
            GradientCodeKind::Uncoded => Some(theorem1_frc(n, 1, &p_r)),
            GradientCodeKind::Frc => Some(theorem1_frc(n, b.replication(), &p_r)),
            GradientCodeKind::Crc => theorem2_crc(b, &p_r),
            GradientCodeKind::CrcExact => None,
            _ => None, // a kind the papers give no formula for
        }
    };
    match slow {
        SlowWorkers::Exactly(m) => for_m(m),
        SlowWorkers::Drawn => {
            (0..=n).map(|m| for_m(m).map(|e| slow_count_probability(n, m, params.p_slow) * e)).sum()
        }
    }
}

/// The largest `n` for exact enumeration.
pub const MAX_ENUMERATION_WORKERS: usize = 12;

/// The result of exact enumeration for `m` slow workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Enumerated {
    /// The expected error per iteration, averaged over the placements of the slow workers.
    pub mean: f64,
    /// The smallest long-run error per iteration of any single placement.
    pub min_over_placements: f64,
    /// The largest long-run error per iteration of any single placement.
    pub max_over_placements: f64,
}

/// The long-run mean error of each set of on-time workers under `shuffle`: for cyclic
/// shuffling, the mean over the `n` shifts; for random, the mean over every set of that size.
/// `None` for a shuffle this enumeration does not know.
fn error_by_on_time_set(table: &ErrorTable, shuffle: RoleShuffle) -> Option<Vec<f64>> {
    let n = table.workers();
    let masks = 0..1u64 << n;
    Some(match shuffle {
        RoleShuffle::None => masks.map(|s| table.error(s)).collect(),
        RoleShuffle::Cyclic => {
            let mut rng = seeded_stream(0, 0); // unused by cyclic roles
            let shifts: Vec<Vec<usize>> = (0..n).map(|t| RoleShuffle::Cyclic.roles(n, t, &mut rng)).collect();
            masks
                .map(|s| shifts.iter().map(|roles| table.error(roles_mask(roles, s))).sum::<f64>() / n as f64)
                .collect()
        }
        RoleShuffle::Random => {
            let by_size: Vec<f64> = (0..=n).map(|r| table.mean_error_with(r)).collect();
            masks.map(|s| by_size[s.count_ones() as usize]).collect()
        }
        _ => return None,
    })
}

/// Exact enumeration for exactly `m` slow workers: for every placement `M` of the slow
/// workers, `sum_S P(S | M) err(S)` over all `2^n` sets `S` of on-time workers, with
/// `P(S | M)` the product of the workers' own probabilities and `err` the decoding error of
/// the roles they play (averaged over the shuffle's roles). `None` for `n > 12` or `m > n`.
pub fn enumerate(
    table: &ErrorTable,
    m: usize,
    params: HeterogeneousParams,
    shuffle: RoleShuffle,
) -> Option<Enumerated> {
    let n = table.workers();
    if n > MAX_ENUMERATION_WORKERS || m > n {
        return None;
    }
    let errors = error_by_on_time_set(table, shuffle)?;
    let (pss, pas) = (params.p_slow_straggle, params.p_active_straggle);
    // P(S | M) depends on a = |S & M| (slow on time) and b = |S \ M| (active on time).
    let slow_part: Vec<f64> =
        (0..=m).map(|a| (1.0 - pss).powi(a as i32) * pss.powi((m - a) as i32)).collect();
    let active_part: Vec<f64> =
        (0..=n - m).map(|b| (1.0 - pas).powi(b as i32) * pas.powi((n - m - b) as i32)).collect();
    let (mut sum, mut count) = (0.0, 0usize);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for placement in (0..1u64 << n).filter(|p| p.count_ones() as usize == m) {
        let e: f64 = (0..1u64 << n)
            .map(|s| {
                let a = (s & placement).count_ones() as usize;
                let b = (s & !placement).count_ones() as usize;
                slow_part[a] * active_part[b] * errors[s as usize]
            })
            .sum();
        sum += e;
        count += 1;
        lo = lo.min(e);
        hi = hi.max(e);
    }
    Some(Enumerated { mean: sum / count as f64, min_over_placements: lo, max_over_placements: hi })
}

/// Exact enumeration averaged over the class draw: `sum_m P_m` [`enumerate`]`(m).mean`.
pub fn enumerate_drawn(table: &ErrorTable, params: HeterogeneousParams, shuffle: RoleShuffle) -> Option<f64> {
    let n = table.workers();
    (0..=n)
        .map(|m| {
            enumerate(table, m, params, shuffle).map(|e| slow_count_probability(n, m, params.p_slow) * e.mean)
        })
        .sum()
}

/// A Monte Carlo estimate: the mean of independent runs' mean errors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MonteCarloEstimate {
    /// The estimate.
    pub mean: f64,
    /// Its standard error (standard deviation of the run means over `sqrt(runs)`).
    pub std_error: f64,
    /// Independent runs.
    pub runs: usize,
    /// Iterations per run.
    pub iterations: usize,
}

impl MonteCarloEstimate {
    /// The normal-approximation confidence interval `mean +- z std_error` (z = 1.96 for 95 %).
    pub fn interval(&self, z: f64) -> (f64, f64) {
        (self.mean - z * self.std_error, self.mean + z * self.std_error)
    }
}

/// Options of [`monte_carlo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MonteCarloOptions {
    /// Independent runs (each draws its own slow workers).
    pub runs: usize,
    /// Iterations per run (a multiple of `n` covers whole cyclic-shift periods).
    pub iterations: usize,
    /// Seed of the runs.
    pub seed: u64,
}

impl MonteCarloOptions {
    /// `runs` runs of `iterations` iterations, drawn from `seed`.
    pub const fn new(runs: usize, iterations: usize, seed: u64) -> Self {
        MonteCarloOptions { runs, iterations, seed }
    }
}

/// Decoding errors by mask: a full table for small `n`, decoded on demand and remembered above.
enum ErrorOracle<'a> {
    Table(ErrorTable),
    Memo(&'a EncodingMatrix, HashMap<u64, f64>),
}

impl ErrorOracle<'_> {
    fn error(&mut self, mask: u64) -> f64 {
        match self {
            ErrorOracle::Table(t) => t.error(mask),
            ErrorOracle::Memo(b, memo) => *memo.entry(mask).or_insert_with(|| decode_mask(b, mask).error),
        }
    }
}

/// The most iterations a Monte Carlo estimate simulates in all (`runs x iterations`): about
/// ten seconds on one core. Larger requests are refused before anything is allocated.
pub const MAX_MONTE_CARLO_DRAWS: usize = 100_000_000;

/// Monte Carlo: `runs` simulated runs of `iterations` iterations each. A run draws its slow
/// workers (exactly `m` at a uniformly random placement, or each with probability `p_hat`),
/// then each iteration draws the stragglers from [`HeterogeneousStragglers`] and the roles from
/// `shuffle` (cyclic: worker `w` plays `(w + t) mod n` at iteration `t`), and decodes.
pub fn monte_carlo(
    b: &EncodingMatrix,
    slow: SlowWorkers,
    params: HeterogeneousParams,
    shuffle: RoleShuffle,
    options: MonteCarloOptions,
) -> Result<MonteCarloEstimate, LearnerError> {
    let n = b.workers();
    if options.runs < 2 || options.iterations == 0 {
        return Err(LearnerError::InvalidParameter(
            "Monte Carlo needs at least 2 runs of 1 iteration".into(),
        ));
    }
    if let SlowWorkers::Exactly(m) = slow
        && m > n
    {
        return Err(LearnerError::InvalidParameter(format!("{m} slow workers out of {n}")));
    }
    if options.runs.saturating_mul(options.iterations) > MAX_MONTE_CARLO_DRAWS {
        return Err(LearnerError::InvalidParameter(format!(
            "{} runs x {} iterations exceed the Monte Carlo reach of {MAX_MONTE_CARLO_DRAWS} simulated iterations",
            options.runs, options.iterations
        )));
    }
    let mut oracle =
        if n <= 16 { ErrorOracle::Table(ErrorTable::new(b)?) } else { ErrorOracle::Memo(b, HashMap::new()) };
    let mut run_means = Vec::new();
    run_means.try_reserve_exact(options.runs).map_err(|_| {
        LearnerError::InvalidParameter(format!("no memory for the means of {} runs", options.runs))
    })?;
    for run in 0..options.runs {
        let mut rng = seeded_stream(options.seed, run as u64);
        let mut model = match slow {
            SlowWorkers::Exactly(m) => {
                let mut workers: Vec<usize> = (0..n).collect();
                partial_shuffle(&mut rng, &mut workers, m);
                HeterogeneousStragglers::with_slow_workers(n, &workers[..m], params)?
            }
            SlowWorkers::Drawn => HeterogeneousStragglers::draw(n, params, &mut rng)?,
        };
        let mut total = 0.0;
        for t in 0..options.iterations {
            let outcome = model.next_iteration(&mut rng);
            let roles = shuffle.roles(n, t, &mut rng);
            // Encoding matrices have at most 64 workers, so the mask exists.
            let late = outcome.late_mask().ok_or_else(|| {
                LearnerError::InvalidParameter(format!("{n} workers: gradient codes take at most 64"))
            })?;
            let on_time = !late & if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            total += oracle.error(roles_mask(&roles, on_time));
        }
        run_means.push(total / options.iterations as f64);
    }
    let runs = run_means.len() as f64;
    let mean = run_means.iter().sum::<f64>() / runs;
    let var = run_means.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (runs - 1.0);
    Ok(MonteCarloEstimate {
        mean,
        std_error: (var / runs).sqrt(),
        runs: options.runs,
        iterations: options.iterations,
    })
}

/// All three methods for one choice of slow workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreeWays {
    /// Theorems 1-2 (and Remark 2), where the paper gives a formula.
    pub analytic: Option<f64>,
    /// Exact enumeration (`n <= 12`); for [`SlowWorkers::Drawn`] min and max are not defined
    /// and equal the mean.
    pub enumeration: Option<Enumerated>,
    /// Monte Carlo.
    pub monte_carlo: MonteCarloEstimate,
}

/// The expected error by every method, averaged over the class draw and for each `m`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectedErrorReport {
    /// Each worker's straggle probability averaged over its class, `p_hat p_ss + (1-p_hat) p_as`.
    pub marginal_straggle: f64,
    /// Averaged over the class draw.
    pub drawn: ThreeWays,
    /// `(m, P_m, values)` for `m = 0..=n` slow workers.
    pub by_slow_count: Vec<(usize, f64, ThreeWays)>,
}

/// Computes the [`ExpectedErrorReport`] of code `b` under `params` and `shuffle`.
pub fn expected_error_report(
    b: &EncodingMatrix,
    params: HeterogeneousParams,
    shuffle: RoleShuffle,
    options: MonteCarloOptions,
) -> Result<ExpectedErrorReport, LearnerError> {
    let params = params.check()?;
    let n = b.workers();
    let table = if n <= MAX_ENUMERATION_WORKERS { Some(ErrorTable::new(b)?) } else { None };
    let three = |slow: SlowWorkers, seed: u64| -> Result<ThreeWays, LearnerError> {
        let enumeration = table.as_ref().and_then(|t| match slow {
            SlowWorkers::Exactly(m) => enumerate(t, m, params, shuffle),
            SlowWorkers::Drawn => enumerate_drawn(t, params, shuffle).map(|mean| Enumerated {
                mean,
                min_over_placements: mean,
                max_over_placements: mean,
            }),
        });
        Ok(ThreeWays {
            analytic: analytic(b, slow, params),
            enumeration,
            monte_carlo: monte_carlo(
                b,
                slow,
                params,
                shuffle,
                MonteCarloOptions::new(options.runs, options.iterations, seed),
            )?,
        })
    };
    let drawn = three(SlowWorkers::Drawn, options.seed)?;
    let by_slow_count = (0..=n)
        .map(|m| {
            let seed = options.seed.wrapping_add(1 + m as u64);
            Ok((m, slow_count_probability(n, m, params.p_slow), three(SlowWorkers::Exactly(m), seed)?))
        })
        .collect::<Result<Vec<_>, LearnerError>>()?;
    Ok(ExpectedErrorReport { marginal_straggle: params.marginal_straggle(), drawn, by_slow_count })
}
