//! [`Placement`]: the inner repetition code. The coded rows are cut into C(K, r) equal batches,
//! one per r-subset S of servers (in colexicographic order), and batch S is stored at every
//! server of S (Zhang-Simeone Section III-C, "Map phase"). Each server stores
//! C(K-1, r-1) batches, r / K of the coded rows.

use std::ops::Range;

use super::MsrError;
use super::combinatorics::{all_servers, binomial, colex_rank, subsets_of};

/// Which coded rows each server stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    servers: usize,
    repetition: usize,
    rows_per_batch: usize,
    batch_servers: Vec<u64>,
}

impl Placement {
    /// Places `coded_rows` rows on `servers` servers with repetition `repetition`; the rows
    /// must split evenly into the C(K, r) batches.
    pub fn new(servers: usize, repetition: usize, coded_rows: usize) -> Result<Placement, MsrError> {
        let batches = binomial(servers, repetition);
        if repetition == 0 || batches == 0 || !(coded_rows as u128).is_multiple_of(batches) || coded_rows == 0
        {
            return Err(MsrError::Internal(format!(
                "{coded_rows} coded rows do not split into C({servers}, {repetition}) batches"
            )));
        }
        let batch_servers: Vec<u64> = subsets_of(all_servers(servers), repetition).collect();
        Ok(Placement { servers, repetition, rows_per_batch: coded_rows / batch_servers.len(), batch_servers })
    }

    /// K.
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// r.
    pub fn repetition(&self) -> usize {
        self.repetition
    }

    /// Coded rows per batch.
    pub fn rows_per_batch(&self) -> usize {
        self.rows_per_batch
    }

    /// Total coded rows.
    pub fn coded_rows(&self) -> usize {
        self.rows_per_batch * self.batch_servers.len()
    }

    /// The rows of the batch stored at exactly the servers of `subset` (an r-subset).
    pub fn batch_rows(&self, subset: u64) -> Range<usize> {
        let b = colex_rank(subset) * self.rows_per_batch;
        b..b + self.rows_per_batch
    }

    /// The servers storing coded row `row`.
    pub fn holders(&self, row: usize) -> u64 {
        self.batch_servers[row / self.rows_per_batch]
    }

    /// Every batch's servers, in batch order.
    pub fn batches(&self) -> &[u64] {
        &self.batch_servers
    }

    /// The rows `server` stores, ascending.
    pub fn stored_rows(&self, server: usize) -> Vec<usize> {
        let b = self.rows_per_batch;
        self.batch_servers
            .iter()
            .enumerate()
            .filter(|(_, s)| *s & (1u64 << server) != 0)
            .flat_map(|(t, _)| t * b..(t + 1) * b)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_stores_r_over_k_and_ranks_agree() {
        let p = Placement::new(6, 3, 40).unwrap();
        assert_eq!(p.rows_per_batch(), 2);
        for k in 0..6 {
            let rows = p.stored_rows(k);
            assert_eq!(rows.len(), 20);
            assert!(rows.iter().all(|&i| p.holders(i) & (1 << k) != 0));
        }
        for (t, &s) in p.batches().iter().enumerate() {
            assert_eq!(p.batch_rows(s), 2 * t..2 * t + 2);
        }
        assert!(Placement::new(6, 3, 30).is_err());
    }
}
