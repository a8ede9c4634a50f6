//! [`ShuffleMatrix`]: Attia-Tandon's `K x K` shuffle matrix, its validation, its text form
//! `"2,1,2;2,1,2;1,3,1"`, and the instance it describes.

use std::fmt;
use std::str::FromStr;

use crate::ShuffleInstance;

/// Why a matrix is not a shuffle matrix. Rows and columns are workers `0..K`.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum ShuffleMatrixError {
    /// No row at all.
    #[error("the shuffle matrix is empty: give rows separated by ';', entries by ','")]
    Empty,
    /// An entry is not a whole number.
    #[error("entry {column} of row {row} is \"{text}\": entries must be non-negative integers")]
    NotAnInteger {
        /// Its row.
        row: usize,
        /// Its column.
        column: usize,
        /// The text given.
        text: String,
    },
    /// An entry is negative.
    #[error("entry {column} of row {row} is {text}: entries count points and cannot be negative")]
    Negative {
        /// Its row.
        row: usize,
        /// Its column.
        column: usize,
        /// The text given.
        text: String,
    },
    /// A row has the wrong number of entries.
    #[error("row {row} has {got} entries but there are {rows} rows: the shuffle matrix must be square")]
    NotSquare {
        /// The row.
        row: usize,
        /// Its entries.
        got: usize,
        /// Rows in the matrix.
        rows: usize,
    },
    /// A row's sum differs from row 0's (every worker holds N/K points, eq. (13)).
    #[error("row {row} sums to {got} but row 0 sums to {want}: every row and column must sum to N/K")]
    RowSum {
        /// The row.
        row: usize,
        /// Its sum.
        got: usize,
        /// Row 0's sum.
        want: usize,
    },
    /// A column's sum differs from the rows' (every worker needs N/K points, eq. (13)).
    #[error("column {column} sums to {got} but the rows sum to {want}: every row and column must sum to N/K")]
    ColumnSum {
        /// The column.
        column: usize,
        /// Its sum.
        got: usize,
        /// The rows' common sum.
        want: usize,
    },
    /// All sums are zero: no worker would have a batch.
    #[error("the rows sum to 0: every worker needs a batch, so N/K must be at least 1")]
    EmptyBatches,
    /// Too many points for 32-bit ids.
    #[error("the matrix holds {points} points, more than this build supports (ids are 32-bit)")]
    TooManyPoints {
        /// `N`, the sum of all entries (saturated).
        points: usize,
    },
}

/// Attia-Tandon's shuffle matrix (Definition 2, eq. (12)): `S[i][j] = |C_i ∩ D_j|`, the number
/// of points worker `i` caches (its previous batch) that worker `j` needs in the new epoch.
/// Diagonal entries are points a worker keeps; the off-diagonal sum is what uncoded sends.
///
/// Invariant: for every worker `i`, row `i` and column `i` have the same sum (its batch size,
/// eq. (13)), and batch sizes differ by at most one. Matrices built by [`ShuffleMatrix::new`]
/// or parsed from text follow the paper exactly (every row and column sums to `N/K`);
/// [`ShuffleMatrix::from_instance`] also accepts instances
/// whose `K` does not divide `N`, where each worker keeps its batch size.
///
/// ```
/// use ubershuffle_planners::no_excess::ShuffleMatrix;
/// let s: ShuffleMatrix = "2,1,2;2,1,2;1,3,1".parse()?;
/// assert_eq!((s.workers(), s.points(), s.uncoded_transmissions()), (3, 15, 11));
/// assert_eq!(s.achievable_transmissions(), 6); // Attia-Tandon Example 1
/// let inst = s.to_instance();
/// assert_eq!(ShuffleMatrix::from_instance(&inst)?, s);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShuffleMatrix {
    workers: usize,
    entries: Vec<usize>,
}

impl ShuffleMatrix {
    /// Validates `rows` as a shuffle matrix in the paper's model: square, and every row and
    /// every column summing to the same `N/K >= 1`.
    pub fn new(rows: Vec<Vec<usize>>) -> Result<Self, ShuffleMatrixError> {
        let k = rows.len();
        if k == 0 {
            return Err(ShuffleMatrixError::Empty);
        }
        if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != k) {
            return Err(ShuffleMatrixError::NotSquare { row, got: r.len(), rows: k });
        }
        let sum = |it: &mut dyn Iterator<Item = usize>| it.fold(0usize, |a, b| a.saturating_add(b));
        let want = sum(&mut rows[0].iter().copied());
        for (row, r) in rows.iter().enumerate() {
            let got = sum(&mut r.iter().copied());
            if got != want {
                return Err(ShuffleMatrixError::RowSum { row, got, want });
            }
        }
        for column in 0..k {
            let got = sum(&mut rows.iter().map(|r| r[column]));
            if got != want {
                return Err(ShuffleMatrixError::ColumnSum { column, got, want });
            }
        }
        if want == 0 {
            return Err(ShuffleMatrixError::EmptyBatches);
        }
        let points = want.saturating_mul(k);
        if u32::try_from(points).is_err() {
            return Err(ShuffleMatrixError::TooManyPoints { points });
        }
        Ok(ShuffleMatrix { workers: k, entries: rows.into_iter().flatten().collect() })
    }

    /// Builds a matrix from counts the caller has already checked against the invariant (row
    /// `i` and column `i` sums equal, batch sizes within one of each other, `N` fits 32 bits).
    pub(crate) fn from_checked_entries(workers: usize, entries: Vec<usize>) -> Self {
        debug_assert_eq!(entries.len(), workers * workers);
        ShuffleMatrix { workers, entries }
    }

    /// Parses rows separated by `;`, entries by `,` (spaces allowed): `"2,1,2;2,1,2;1,3,1"` is
    /// Attia-Tandon's Example 1, eq. (23). Row `i`, column `j` is `S[i][j]`, workers 0-based.
    pub fn parse(text: &str) -> Result<Self, ShuffleMatrixError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ShuffleMatrixError::Empty);
        }
        let rows = text
            .split(';')
            .enumerate()
            .map(|(row, line)| {
                line.split(',').enumerate().map(|(column, entry)| parse_entry(row, column, entry)).collect()
            })
            .collect::<Result<Vec<Vec<usize>>, _>>()?;
        Self::new(rows)
    }

    /// Number of workers `K`.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Number of points `N`, the sum of all entries.
    pub fn points(&self) -> usize {
        self.entries.iter().sum()
    }

    /// `S[i][j]`: points worker `i` caches that worker `j` needs.
    pub fn get(&self, i: usize, j: usize) -> usize {
        self.entries[i * self.workers + j]
    }

    /// The rows, for printing and JSON.
    pub fn rows(&self) -> Vec<Vec<usize>> {
        self.entries.chunks(self.workers.max(1)).map(<[usize]>::to_vec).collect()
    }

    /// Worker `i`'s batch size: the sum of row `i` (equal to the sum of column `i`).
    pub fn batch_size(&self, worker: usize) -> usize {
        (0..self.workers).map(|j| self.get(worker, j)).sum()
    }

    /// The sum of the off-diagonal entries: the unicasts of the uncoded scheme (Example 1:
    /// `R_uncoded = 11`).
    pub fn uncoded_transmissions(&self) -> usize {
        self.points() - (0..self.workers).map(|i| self.get(i, i)).sum::<usize>()
    }

    /// The instance this matrix describes, with point ids laid out in order: the block
    /// `C_i ∩ D_j` gets the next `S[i][j]` ids, blocks taken row by row (`(0,0), (0,1), ...,
    /// (1,0), ...`). So worker `i` caches one contiguous range of ids, and the same matrix always
    /// gives the same instance.
    pub fn to_instance(&self) -> ShuffleInstance {
        let k = self.workers;
        let mut cache = vec![Vec::new(); k];
        let mut assignment = vec![Vec::new(); k];
        let mut next = 0u32;
        for (i, held) in cache.iter_mut().enumerate() {
            for (j, batch) in assignment.iter_mut().enumerate() {
                for _ in 0..self.get(i, j) {
                    held.push(next);
                    batch.push(next);
                    next += 1;
                }
            }
        }
        ShuffleInstance::new(k, next as usize, cache, assignment)
            .unwrap_or_else(|e| unreachable!("a shuffle matrix describes a valid instance: {e}"))
    }
}

fn parse_entry(row: usize, column: usize, entry: &str) -> Result<usize, ShuffleMatrixError> {
    let text = entry.trim();
    if let Ok(value) = text.parse::<usize>() {
        return Ok(value);
    }
    let negative =
        text.strip_prefix('-').is_some_and(|rest| rest.trim().parse::<f64>().is_ok_and(|v| v > 0.0));
    let text = text.to_string();
    Err(if negative {
        ShuffleMatrixError::Negative { row, column, text }
    } else {
        ShuffleMatrixError::NotAnInteger { row, column, text }
    })
}

impl FromStr for ShuffleMatrix {
    type Err = ShuffleMatrixError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// The text form [`ShuffleMatrix::parse`] reads: `2,1,2;2,1,2;1,3,1`.
impl fmt::Display for ShuffleMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<String> = self
            .rows()
            .iter()
            .map(|r| r.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
            .collect();
        f.write_str(&rows.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        ShuffleMatrix::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_example_1_and_prints_it_back() {
        let s = ShuffleMatrix::parse(" 2, 1,2 ; 2,1,2;1,3,1 ").unwrap();
        assert_eq!(s.rows(), vec![vec![2, 1, 2], vec![2, 1, 2], vec![1, 3, 1]]);
        assert_eq!(s.to_string(), "2,1,2;2,1,2;1,3,1");
        assert_eq!(s.batch_size(2), 5);
    }

    #[test]
    fn bad_matrices_get_one_line_errors_naming_the_problem() {
        assert!(err("").contains("empty"));
        assert!(
            err("2,-1,2;2,1,2;1,3,1").contains("entry 1 of row 0 is -1")
                && err("1,-0.5;1,1").contains("negative")
        );
        assert!(err("2,x,2;2,1,2;1,3,1").contains("\"x\": entries must be non-negative integers"));
        assert!(err("2,1.5,2;2,1,2;1,3,1").contains("non-negative integers"));
        assert!(err("2,1,2;2,1,2;1,3,1;").contains("row 3 is \"\""));
        assert!(err("1,1;1,1;1,1").contains("row 0 has 2 entries but there are 3 rows"));
        assert!(err("2,1;1,1").contains("row 1 sums to 2 but row 0 sums to 3"));
        assert!(err("2,1;0,3").contains("column 0 sums to 2 but the rows sum to 3"));
        assert!(err("0,0;0,0").contains("must be at least 1"));
        assert!(err("4294967295,4294967295;4294967295,4294967295").contains("32-bit"));
        for text in ["", "1,-1;1,1", "a", "1;2", "1,1;1,1,1", "2,1;1,1", "0"] {
            assert_eq!(err(text).lines().count(), 1, "{text}");
        }
    }

    #[test]
    fn instance_lays_blocks_out_in_order() {
        let s = ShuffleMatrix::parse("1,2;2,1").unwrap();
        let inst = s.to_instance();
        assert_eq!(inst.cache(0), [0, 1, 2]);
        assert_eq!(inst.cache(1), [3, 4, 5]);
        assert_eq!(inst.assignment(0), [0, 3, 4]);
        assert_eq!(inst.assignment(1), [1, 2, 5]);
        assert_eq!(inst.uncoded_transmissions(), s.uncoded_transmissions());
    }
}
