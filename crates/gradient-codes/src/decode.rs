//! Least-squares decoding of coded gradients and the optimal decoding error.

use nalgebra::{DMatrix, DVector};

use super::{EncodingMatrix, GradientCodeError};

/// Residuals below this are rounding, reported as an exact recovery (error 0).
const EXACT: f64 = 1e-12;

/// The master's decoding for one set of available roles.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoding {
    /// `a[role]`: the weight of role `role`'s coded gradient (0 for unavailable roles).
    pub coefficients: Vec<f64>,
    /// The optimal decoding error `||B_S^T a - 1||^2` (Johri et al. eq. (2)): 0 when the
    /// gradient is recovered exactly, `n` when no role is available.
    pub error: f64,
}

/// Decodes from the roles in `available` (any order; duplicates count once): the least-squares
/// (minimum-norm) `a` minimising `||B_S^T a - 1||^2`, by nalgebra's SVD.
pub fn decode(b: &EncodingMatrix, available: &[usize]) -> Result<Decoding, GradientCodeError> {
    let mut mask = 0u64;
    for &role in available {
        if role >= b.workers() {
            return Err(GradientCodeError::RoleOutOfRange { role, workers: b.workers() });
        }
        mask |= 1 << role;
    }
    Ok(decode_mask(b, mask))
}

/// [`decode`] with the available roles as a bit mask (bit `i` = role `i`); bits at or beyond
/// `n` are ignored.
pub fn decode_mask(b: &EncodingMatrix, mask: u64) -> Decoding {
    let n = b.workers();
    let roles: Vec<usize> = (0..n).filter(|&i| mask >> i & 1 == 1).collect();
    let mut coefficients = vec![0.0; n];
    if roles.is_empty() {
        return Decoding { coefficients, error: n as f64 };
    }
    // A = B_S^T: column c is the row of the c-th available role.
    let a = DMatrix::from_fn(n, roles.len(), |j, c| b.entry(roles[c], j));
    let ones = DVector::from_element(n, 1.0);
    let svd = a.clone().svd(true, true);
    let largest = svd.singular_values.max();
    let x = match svd.solve(&ones, 1e-10 * largest.max(1.0)) {
        Ok(x) => x,
        // Unreachable: both factors were computed above.
        Err(_) => DVector::zeros(roles.len()),
    };
    let residual = &a * &x - ones;
    let mut error = residual.norm_squared();
    if error < EXACT {
        error = 0.0;
    }
    for (c, &role) in roles.iter().enumerate() {
        coefficients[role] = x[c];
    }
    Decoding { coefficients, error }
}

/// The decoding error of every set of available roles, indexed by mask (for exact
/// enumeration and Monte Carlo over many straggler patterns). Holds `2^n` values.
#[derive(Clone, Debug)]
pub struct ErrorTable {
    workers: usize,
    errors: Vec<f64>,
}

impl ErrorTable {
    /// The largest `n` a table is built for (`2^20` decodings).
    pub const MAX_WORKERS: usize = 20;

    /// Decodes every subset of roles of `b`.
    pub fn new(b: &EncodingMatrix) -> Result<Self, GradientCodeError> {
        let n = b.workers();
        if n > Self::MAX_WORKERS {
            return Err(GradientCodeError::BadWorkerCount { workers: n, max: Self::MAX_WORKERS });
        }
        let errors = (0..1u64 << n).map(|mask| decode_mask(b, mask).error).collect();
        Ok(ErrorTable { workers: n, errors })
    }

    /// Workers of the code.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The error when exactly the roles in `mask` are available.
    pub fn error(&self, mask: u64) -> f64 {
        self.errors[(mask & ((1u64 << self.workers) - 1)) as usize]
    }

    /// The mean error over all sets of exactly `r` available roles.
    pub fn mean_error_with(&self, r: usize) -> f64 {
        let (sum, count) = self
            .errors
            .iter()
            .enumerate()
            .filter(|(mask, _)| mask.count_ones() as usize == r)
            .fold((0.0, 0usize), |(s, c), (_, e)| (s + e, c + 1));
        if count == 0 { f64::NAN } else { sum / count as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::seeded;

    fn all_subsets_of_size(n: usize, r: usize) -> impl Iterator<Item = u64> {
        (0..1u64 << n).filter(move |m| m.count_ones() as usize == r)
    }

    #[test]
    fn uncoded_error_counts_missing_partitions() {
        let b = EncodingMatrix::uncoded(5).unwrap();
        let d = decode(&b, &[0, 3]).unwrap();
        assert!((d.error - 3.0).abs() < 1e-9);
        assert!((d.coefficients[0] - 1.0).abs() < 1e-9 && d.coefficients[1] == 0.0);
        assert_eq!(decode(&b, &[]).unwrap().error, 5.0);
        assert!(matches!(decode(&b, &[5]), Err(GradientCodeError::RoleOutOfRange { .. })));
    }

    #[test]
    fn frc_error_is_s_per_group_lost() {
        // n = 6, s = 2: groups {0,1}, {2,3}, {4,5}; losing group {2,3} loses 2 partitions.
        let b = EncodingMatrix::frc(6, 2).unwrap();
        assert_eq!(decode(&b, &[0, 5]).unwrap().error, 2.0);
        assert_eq!(decode(&b, &[0, 1, 2, 4]).unwrap().error, 0.0);
    }

    #[test]
    fn s_minus_one_stragglers_are_tolerated_exactly() {
        for (n, s) in [(6, 2), (6, 3), (8, 4)] {
            let frc = ErrorTable::new(&EncodingMatrix::frc(n, s).unwrap()).unwrap();
            let exact = ErrorTable::new(&EncodingMatrix::crc_exact(n, s, &mut seeded(9)).unwrap()).unwrap();
            for mask in all_subsets_of_size(n, n - s + 1) {
                assert_eq!(frc.error(mask), 0.0, "frc n={n} s={s} mask={mask:b}");
                assert_eq!(exact.error(mask), 0.0, "crc-exact n={n} s={s} mask={mask:b}");
            }
        }
    }

    #[test]
    fn the_decoded_combination_reaches_the_reported_error() {
        let b = EncodingMatrix::crc(7, 3).unwrap();
        let d = decode(&b, &[0, 2, 5]).unwrap();
        let residual: f64 = (0..7)
            .map(|j| (0..7).map(|i| d.coefficients[i] * b.entry(i, j)).sum::<f64>() - 1.0)
            .map(|r| r * r)
            .sum();
        assert!((residual - d.error).abs() < 1e-9);
        assert!(d.error > 0.0);
    }
}
