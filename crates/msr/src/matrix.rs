//! [`FpMatrix`]: a small dense row-major matrix over GF(2^31 - 1), enough for A, X, the coded
//! rows and the reference product A X.

use ubershuffle_core::rng::SeededRng;

use super::field::Fp;

/// A dense `rows x cols` matrix over [`Fp`], row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FpMatrix {
    rows: usize,
    cols: usize,
    data: Vec<Fp>,
}

impl FpMatrix {
    /// The zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> FpMatrix {
        FpMatrix { rows, cols, data: vec![Fp::ZERO; rows * cols] }
    }

    /// A matrix of uniformly random entries drawn from `rng`, row by row.
    pub fn random(rows: usize, cols: usize, rng: &mut SeededRng) -> FpMatrix {
        FpMatrix { rows, cols, data: (0..rows * cols).map(|_| Fp::random(rng)).collect() }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Entry `(i, j)`.
    ///
    /// # Panics
    /// Panics when out of range (a caller bug).
    pub fn get(&self, i: usize, j: usize) -> Fp {
        assert!(i < self.rows && j < self.cols, "({i}, {j}) outside {}x{}", self.rows, self.cols);
        self.data[i * self.cols + j]
    }

    /// Sets entry `(i, j)`.
    ///
    /// # Panics
    /// Panics when out of range (a caller bug).
    pub fn set(&mut self, i: usize, j: usize, value: Fp) {
        assert!(i < self.rows && j < self.cols, "({i}, {j}) outside {}x{}", self.rows, self.cols);
        self.data[i * self.cols + j] = value;
    }

    /// Row `i` as a slice.
    pub fn row(&self, i: usize) -> &[Fp] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Column `j`, copied.
    pub fn column(&self, j: usize) -> Vec<Fp> {
        (0..self.rows).map(|i| self.get(i, j)).collect()
    }

    /// The inner product of row `i` with column `j` of `other` (one intermediate value when
    /// `self` holds coded rows and `other` is X).
    pub fn row_times_column(&self, i: usize, other: &FpMatrix, j: usize) -> Fp {
        self.row(i).iter().enumerate().fold(Fp::ZERO, |acc, (l, &a)| acc + a * other.get(l, j))
    }

    /// The product `self * other`.
    ///
    /// # Panics
    /// Panics when the inner dimensions differ (a caller bug).
    pub fn times(&self, other: &FpMatrix) -> FpMatrix {
        assert_eq!(self.cols, other.rows, "inner dimensions differ");
        let mut out = FpMatrix::zeros(self.rows, other.cols);
        for i in 0..self.rows {
            for (l, &a) in self.row(i).iter().enumerate() {
                for j in 0..other.cols {
                    out.data[i * other.cols + j] += a * other.data[l * other.cols + j];
                }
            }
        }
        out
    }
}
