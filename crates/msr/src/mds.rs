//! [`RowCode`]: the outer code on A's rows. At rate 1 it is the identity (A stored uncoded);
//! below rate 1 it is a Reed-Solomon (Vandermonde) code over GF(2^31 - 1): coded row `i` is
//! `sum_l alpha_i^l a_l` with `alpha_i = i + 1`, so any M coded rows determine A, and any M
//! intermediate values `c_i . x` determine `A x` by polynomial interpolation.

use super::MsrError;
use super::field::{Fp, batch_inverse};
use super::matrix::FpMatrix;

/// The outer code mapping M rows of A to `coded_rows` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowCode {
    /// No code: coded row i is row i of A.
    Identity {
        /// M.
        rows: usize,
    },
    /// A Vandermonde (Reed-Solomon) code: coded row i evaluates the polynomial whose
    /// coefficients are A's rows at `alpha_i = i + 1`.
    Vandermonde {
        /// M.
        rows: usize,
        /// Coded rows, more than M.
        coded_rows: usize,
    },
}

/// The evaluation point of coded row `i`.
fn point(i: usize) -> Fp {
    Fp::new(i as u64 + 1)
}

impl RowCode {
    /// The code for `rows -> coded_rows` (identity when equal).
    pub fn new(rows: usize, coded_rows: usize) -> Result<RowCode, MsrError> {
        if coded_rows < rows || rows == 0 {
            return Err(MsrError::Internal(format!("cannot code {rows} rows into {coded_rows}")));
        }
        if coded_rows as u64 >= u64::from(super::field::MODULUS) {
            return Err(MsrError::InfeasibleSize(format!(
                "{coded_rows} coded rows exceed the field's points"
            )));
        }
        Ok(if coded_rows == rows {
            RowCode::Identity { rows }
        } else {
            RowCode::Vandermonde { rows, coded_rows }
        })
    }

    /// M.
    pub fn rows(&self) -> usize {
        match *self {
            RowCode::Identity { rows } | RowCode::Vandermonde { rows, .. } => rows,
        }
    }

    /// The coded rows of `a` (one per code row; Horner's rule per column of A).
    pub fn encode(&self, a: &FpMatrix) -> FpMatrix {
        match *self {
            RowCode::Identity { .. } => a.clone(),
            RowCode::Vandermonde { rows, coded_rows } => {
                let mut out = FpMatrix::zeros(coded_rows, a.cols());
                for i in 0..coded_rows {
                    let x = point(i);
                    for d in 0..a.cols() {
                        let mut acc = Fp::ZERO;
                        for l in (0..rows).rev() {
                            acc = acc * x + a.get(l, d);
                        }
                        out.set(i, d, acc);
                    }
                }
                out
            }
        }
    }

    /// A decoder for the intermediate values of exactly these M distinct coded rows.
    pub fn decoder(&self, coded_rows: &[usize]) -> Result<RowDecoder, MsrError> {
        let m = self.rows();
        if coded_rows.len() != m {
            return Err(MsrError::Internal(format!("decoding needs {m} rows, got {}", coded_rows.len())));
        }
        match *self {
            RowCode::Identity { .. } => {
                let mut position = vec![usize::MAX; m];
                for (k, &row) in coded_rows.iter().enumerate() {
                    if row >= m || position[row] != usize::MAX {
                        return Err(MsrError::Internal(format!("row {row} repeated or out of range")));
                    }
                    position[row] = k;
                }
                Ok(RowDecoder::Identity { position })
            }
            RowCode::Vandermonde { .. } => {
                let xs: Vec<Fp> = coded_rows.iter().map(|&i| point(i)).collect();
                // M(z) = prod (z - x_j), coefficients ascending, leading 1.
                let mut master = vec![Fp::ONE];
                for &x in &xs {
                    let mut next = vec![Fp::ZERO; master.len() + 1];
                    for (d, &c) in master.iter().enumerate() {
                        next[d + 1] += c;
                        next[d] -= x * c;
                    }
                    master = next;
                }
                // Barycentric weights 1 / prod_{j != i} (x_i - x_j) = 1 / M'(x_i).
                let mut weights: Vec<Fp> = xs
                    .iter()
                    .map(|&x| {
                        (1..master.len())
                            .rev()
                            .fold(Fp::ZERO, |acc, d| acc * x + master[d] * Fp::new(d as u64))
                    })
                    .collect();
                if !batch_inverse(&mut weights) {
                    return Err(MsrError::Internal("repeated coded row in an MDS decoding set".into()));
                }
                Ok(RowDecoder::Interpolation { xs, master, weights })
            }
        }
    }
}

/// Recovers `A x` from the intermediate values of one fixed set of M coded rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowDecoder {
    /// Uncoded rows: value k is row `position^-1(k)` of `A x`.
    Identity {
        /// For each row of A, where its value sits in the input.
        position: Vec<usize>,
    },
    /// Lagrange interpolation in coefficient form.
    Interpolation {
        /// The evaluation points.
        xs: Vec<Fp>,
        /// The coefficients of `prod (z - x_j)`.
        master: Vec<Fp>,
        /// `1 / prod_{j != i} (x_i - x_j)`.
        weights: Vec<Fp>,
    },
}

impl RowDecoder {
    /// `A x` from `values[k]`, the intermediate value of the k-th coded row of the set.
    pub fn decode(&self, values: &[Fp]) -> Vec<Fp> {
        self.decode_many(std::slice::from_ref(&values.to_vec())).pop().unwrap_or_default()
    }

    /// [`RowDecoder::decode`] for several columns of X at once (each entry holds the values of
    /// the same coded rows for one column). Interpolation walks each point's quotient
    /// polynomial once for all columns and reduces modulo p only at the end.
    pub fn decode_many(&self, columns: &[Vec<Fp>]) -> Vec<Vec<Fp>> {
        match self {
            RowDecoder::Identity { position } => {
                columns.iter().map(|v| position.iter().map(|&k| v[k]).collect()).collect()
            }
            RowDecoder::Interpolation { xs, master, weights } => {
                let (m, c) = (xs.len(), columns.len());
                // acc[d * c + col]: coefficient d of column col, as a sum of products below 2^62.
                let mut acc = vec![0u128; m * c];
                let mut scales = vec![0u64; c];
                for (i, (&x, &w)) in xs.iter().zip(weights).enumerate() {
                    for (s, v) in scales.iter_mut().zip(columns) {
                        *s = u64::from((v[i] * w).value());
                    }
                    // Synthetic division: master(z) / (z - x), coefficients from the top.
                    let mut q = master[m];
                    for d in (0..m).rev() {
                        let qv = u64::from(q.value());
                        for (a, &s) in acc[d * c..(d + 1) * c].iter_mut().zip(&scales) {
                            *a += u128::from(s * qv);
                        }
                        q = master[d] + x * q;
                    }
                }
                (0..c).map(|col| (0..m).map(|d| Fp::from_wide(acc[d * c + col])).collect()).collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::{partial_shuffle, seeded};

    #[test]
    fn any_m_coded_rows_recover_a_x() {
        let mut rng = seeded(5);
        for (m, n) in [(1, 3), (4, 4), (5, 9), (12, 30)] {
            let a = FpMatrix::random(m, 3, &mut rng);
            let x = FpMatrix::random(3, 2, &mut rng);
            let code = RowCode::new(m, n).unwrap();
            let coded = code.encode(&a);
            let truth = a.times(&x);
            for _ in 0..5 {
                let mut rows: Vec<usize> = (0..n).collect();
                partial_shuffle(&mut rng, &mut rows, m);
                rows.truncate(m);
                let decoder = code.decoder(&rows).unwrap();
                for col in 0..2 {
                    let values: Vec<Fp> = rows.iter().map(|&i| coded.row_times_column(i, &x, col)).collect();
                    assert_eq!(decoder.decode(&values), truth.column(col), "m={m} n={n}");
                }
                let both: Vec<Vec<Fp>> = (0..2)
                    .map(|col| rows.iter().map(|&i| coded.row_times_column(i, &x, col)).collect())
                    .collect();
                assert_eq!(decoder.decode_many(&both), vec![truth.column(0), truth.column(1)]);
            }
        }
    }

    #[test]
    fn decoder_rejects_bad_row_sets() {
        let code = RowCode::new(3, 6).unwrap();
        assert!(code.decoder(&[0, 1]).is_err());
        assert!(code.decoder(&[0, 1, 1]).is_err());
        assert!(RowCode::new(3, 3).unwrap().decoder(&[0, 0, 1]).is_err());
        assert!(RowCode::new(4, 3).is_err());
    }
}
