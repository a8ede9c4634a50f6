//! [`EncodingMatrix`] and the FRC / CRC constructions.

use std::fmt;
use std::str::FromStr;

use nalgebra::{DMatrix, DVector};
use ubershuffle_core::rng::{SeededRng, standard_normal};

use super::GradientCodeError;

/// The largest number of workers a gradient code supports (straggler sets are `u64` masks).
pub const MAX_WORKERS: usize = 64;

/// Which gradient code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GradientCodeKind {
    /// No redundancy: role `i` holds partition `i` (identity matrix; any `s` is ignored).
    Uncoded,
    /// Fractional repetition code (Tandon et al.): groups of `s` roles share `s` partitions.
    Frc,
    /// Cyclic repetition code with 0/1 entries: role `i` holds partitions `i..i+s-1 mod n`.
    Crc,
    /// Tandon et al.'s real-valued cyclic repetition code (exact from any `n-s+1` roles).
    CrcExact,
}

impl GradientCodeKind {
    /// Every kind, in the order tables list them.
    pub const ALL: [GradientCodeKind; 4] =
        [GradientCodeKind::Uncoded, GradientCodeKind::Frc, GradientCodeKind::Crc, GradientCodeKind::CrcExact];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GradientCodeKind::Uncoded => "uncoded",
            GradientCodeKind::Frc => "frc",
            GradientCodeKind::Crc => "crc",
            GradientCodeKind::CrcExact => "crc-exact",
        }
    }

    /// Builds the `n`-worker matrix with replication `s`; `rng` draws the real coefficients of
    /// [`GradientCodeKind::CrcExact`] (the others ignore it).
    pub fn build(
        self,
        workers: usize,
        replication: usize,
        rng: &mut SeededRng,
    ) -> Result<EncodingMatrix, GradientCodeError> {
        match self {
            GradientCodeKind::Uncoded => EncodingMatrix::uncoded(workers),
            GradientCodeKind::Frc => EncodingMatrix::frc(workers, replication),
            GradientCodeKind::Crc => EncodingMatrix::crc(workers, replication),
            GradientCodeKind::CrcExact => EncodingMatrix::crc_exact(workers, replication, rng),
        }
    }
}

impl fmt::Display for GradientCodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GradientCodeKind {
    type Err = GradientCodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GradientCodeKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| GradientCodeError::UnknownCode(s.to_string()))
    }
}

/// An `n x n` gradient-code encoding matrix: row `i` is worker role `i`, column `j` is data
/// partition `j`; role `i` sends `sum_j B[i][j] g_j`.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodingMatrix {
    kind: GradientCodeKind,
    n: usize,
    replication: usize,
    entries: Vec<f64>,
}

fn check_shape(workers: usize, replication: usize) -> Result<(), GradientCodeError> {
    if workers == 0 || workers > MAX_WORKERS {
        return Err(GradientCodeError::BadWorkerCount { workers, max: MAX_WORKERS });
    }
    if replication == 0 || replication > workers {
        return Err(GradientCodeError::BadReplication { workers, replication });
    }
    Ok(())
}

impl EncodingMatrix {
    fn zeros(kind: GradientCodeKind, n: usize, replication: usize) -> Self {
        EncodingMatrix { kind, n, replication, entries: vec![0.0; n * n] }
    }

    fn set(&mut self, role: usize, partition: usize, value: f64) {
        self.entries[role * self.n + partition] = value;
    }

    /// The identity: role `i` computes partition `i` only (no redundancy).
    pub fn uncoded(workers: usize) -> Result<Self, GradientCodeError> {
        check_shape(workers, 1)?;
        let mut b = Self::zeros(GradientCodeKind::Uncoded, workers, 1);
        for i in 0..workers {
            b.set(i, i, 1.0);
        }
        Ok(b)
    }

    /// Fractional repetition (Tandon et al., Section 3): roles `g*s..g*s+s` form group `g`
    /// and all hold partitions `g*s..g*s+s`, with entries 1. Needs `s | n`.
    pub fn frc(workers: usize, replication: usize) -> Result<Self, GradientCodeError> {
        check_shape(workers, replication)?;
        if !workers.is_multiple_of(replication) {
            return Err(GradientCodeError::NotDivisible { workers, replication });
        }
        let mut b = Self::zeros(GradientCodeKind::Frc, workers, replication);
        for role in 0..workers {
            let first = role / replication * replication;
            for partition in first..first + replication {
                b.set(role, partition, 1.0);
            }
        }
        Ok(b)
    }

    /// Cyclic repetition with 0/1 entries: role `i` holds partitions `i, i+1, ..., i+s-1 (mod n)`.
    pub fn crc(workers: usize, replication: usize) -> Result<Self, GradientCodeError> {
        check_shape(workers, replication)?;
        let mut b = Self::zeros(GradientCodeKind::Crc, workers, replication);
        for role in 0..workers {
            for k in 0..replication {
                b.set(role, (role + k) % workers, 1.0);
            }
        }
        Ok(b)
    }

    /// Tandon et al.'s cyclic repetition scheme (their Algorithm 2) on the same cyclic support:
    /// draw a Gaussian `H` of size `(s-1) x n` with `H 1 = 0`; row `i` has 1 on partition `i`
    /// and on `i+1..i+s-1` the solution of `H_{[i+1..]} x = -H_i`, so every row lies in the
    /// null space of `H`, which contains `1` and is spanned by any `n-s+1` rows (almost surely):
    /// the master recovers the exact gradient from any `n-s+1` roles.
    pub fn crc_exact(
        workers: usize,
        replication: usize,
        rng: &mut SeededRng,
    ) -> Result<Self, GradientCodeError> {
        check_shape(workers, replication)?;
        let mut b = Self::zeros(GradientCodeKind::CrcExact, workers, replication);
        let tolerated = replication - 1;
        if tolerated == 0 {
            for i in 0..workers {
                b.set(i, i, 1.0);
            }
            return Ok(b);
        }
        // A singular block has probability zero; redraw H in that case.
        'draw: loop {
            let mut h = DMatrix::<f64>::from_fn(tolerated, workers, |_, _| standard_normal(rng));
            for r in 0..tolerated {
                let sum: f64 = (0..workers - 1).map(|c| h[(r, c)]).sum();
                h[(r, workers - 1)] = -sum;
            }
            for role in 0..workers {
                let cols: Vec<usize> = (1..replication).map(|k| (role + k) % workers).collect();
                let block = DMatrix::from_fn(tolerated, tolerated, |r, c| h[(r, cols[c])]);
                let rhs = DVector::from_fn(tolerated, |r, _| -h[(r, role)]);
                let Some(x) = block.lu().solve(&rhs) else { continue 'draw };
                if x.iter().any(|v| !v.is_finite() || v.abs() > 1e8) {
                    continue 'draw;
                }
                b.set(role, role, 1.0);
                for (k, &c) in cols.iter().enumerate() {
                    b.set(role, c, x[k]);
                }
            }
            return Ok(b);
        }
    }

    /// Which code this is.
    pub fn kind(&self) -> GradientCodeKind {
        self.kind
    }

    /// Number of workers (= roles = partitions).
    pub fn workers(&self) -> usize {
        self.n
    }

    /// Partitions per worker `s`.
    pub fn replication(&self) -> usize {
        self.replication
    }

    /// Entry `B[role][partition]`.
    pub fn entry(&self, role: usize, partition: usize) -> f64 {
        self.entries[role * self.n + partition]
    }

    /// Row `role`: the coefficient of every partition.
    pub fn row(&self, role: usize) -> &[f64] {
        &self.entries[role * self.n..(role + 1) * self.n]
    }

    /// The partitions role `role` computes, with their coefficients.
    pub fn support(&self, role: usize) -> Vec<(usize, f64)> {
        self.row(role).iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(j, v)| (j, *v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::seeded;

    #[test]
    fn frc_groups_and_crc_cycles() {
        let b = EncodingMatrix::frc(6, 2).unwrap();
        assert_eq!(b.support(0), vec![(0, 1.0), (1, 1.0)]);
        assert_eq!(b.support(1), vec![(0, 1.0), (1, 1.0)]);
        assert_eq!(b.support(5), vec![(4, 1.0), (5, 1.0)]);
        let c = EncodingMatrix::crc(5, 3).unwrap();
        assert_eq!(c.support(4), vec![(0, 1.0), (1, 1.0), (4, 1.0)]);
        for j in 0..5 {
            let holders = (0..5).filter(|&i| c.entry(i, j) != 0.0).count();
            assert_eq!(holders, 3, "every partition is held by s workers");
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert_eq!(
            EncodingMatrix::frc(8, 3),
            Err(GradientCodeError::NotDivisible { workers: 8, replication: 3 })
        );
        assert!(matches!(EncodingMatrix::crc(4, 5), Err(GradientCodeError::BadReplication { .. })));
        assert!(matches!(EncodingMatrix::crc(0, 1), Err(GradientCodeError::BadWorkerCount { .. })));
        assert!(matches!(EncodingMatrix::crc(65, 1), Err(GradientCodeError::BadWorkerCount { .. })));
        assert!("lt".parse::<GradientCodeKind>().is_err());
        assert_eq!("crc-exact".parse::<GradientCodeKind>(), Ok(GradientCodeKind::CrcExact));
    }

    #[test]
    fn crc_exact_keeps_the_cyclic_support() {
        let b = EncodingMatrix::crc_exact(7, 3, &mut seeded(4)).unwrap();
        for role in 0..7 {
            let support: Vec<usize> = b.support(role).iter().map(|&(j, _)| j).collect();
            let mut want: Vec<usize> = (0..3).map(|k| (role + k) % 7).collect();
            want.sort_unstable();
            assert_eq!(support, want);
        }
        assert_eq!(b, EncodingMatrix::crc_exact(7, 3, &mut seeded(4)).unwrap());
    }
}
