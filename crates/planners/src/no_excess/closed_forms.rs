//! Attia-Tandon's closed forms on a shuffle matrix: leftovers (eq. (15)), the pairwise phase
//! (eq. (26)), the achievable count of leftover combining (eq. (43)) and the worst case of
//! Theorem 3.

use crate::no_excess::ShuffleMatrix;

impl ShuffleMatrix {
    /// Attia-Tandon eq. (15): the leftover `Ω[i][j] = S[i][j] - min(S[i][j], S[j][i])`, the
    /// points from `i` to `j` that the pairwise phase cannot pair with points from `j` to `i`.
    /// Zero on the diagonal.
    pub fn leftover(&self, i: usize, j: usize) -> usize {
        if i == j { 0 } else { self.get(i, j) - self.get(i, j).min(self.get(j, i)) }
    }

    /// `sum_{j != k} Ω[k][j]`: worker `k`'s outgoing leftovers, which it decodes without
    /// receiving a packet of its own when it is the ignored worker (Claim 2).
    pub fn outgoing_leftovers(&self, k: usize) -> usize {
        (0..self.workers()).map(|j| self.leftover(k, j)).sum()
    }

    /// The worker to ignore in leftover combining: the one with the most outgoing leftovers
    /// (the maximiser in eq. (43)); the lowest id among ties.
    pub fn ignored_worker(&self) -> usize {
        (0..self.workers()).rev().max_by_key(|&k| self.outgoing_leftovers(k)).unwrap_or(0)
    }

    /// Attia-Tandon eq. (26): the order-2 XORs of the pairwise phase,
    /// `sum_{i<j} min(S[i][j], S[j][i])`.
    pub fn pairwise_transmissions(&self) -> usize {
        let k = self.workers();
        (0..k)
            .flat_map(|i| (i + 1..k).map(move |j| (i, j)))
            .map(|(i, j)| self.get(i, j).min(self.get(j, i)))
            .sum()
    }

    /// Attia-Tandon eq. (43) (Theorem 1): the transmissions of pairwise XORs followed by
    /// leftover combining with the best ignored worker,
    /// `sum_{i<j} max(S[i][j], S[j][i]) - max_k sum_{j != k} Ω[k][j]`.
    ///
    /// ```
    /// use ubershuffle_planners::no_excess::ShuffleMatrix;
    /// let s: ShuffleMatrix = "2,1,2;2,1,2;1,3,1".parse()?;
    /// assert_eq!(s.pairwise_transmissions(), 4); // Example 1: four order-2 symbols
    /// assert_eq!(s.achievable_transmissions(), 6); // ... and 3 leftovers in 2 symbols
    /// # Ok::<(), ubershuffle_planners::no_excess::ShuffleMatrixError>(())
    /// ```
    pub fn achievable_transmissions(&self) -> usize {
        let k = self.workers();
        let max_sum: usize = (0..k)
            .flat_map(|i| (i + 1..k).map(move |j| (i, j)))
            .map(|(i, j)| self.get(i, j).max(self.get(j, i)))
            .sum();
        max_sum - (0..k).map(|w| self.outgoing_leftovers(w)).max().unwrap_or(0)
    }

    /// Attia-Tandon Theorem 3 (eq. (22)): the optimal worst case over all shuffles, `(K-1) N/K`,
    /// met by cyclic shuffles (eq. (49)). `None` when batch sizes differ (`K` does not divide
    /// `N`), which is outside the paper's model.
    pub fn worst_case_transmissions(&self) -> Option<usize> {
        let k = self.workers();
        let batch = self.batch_size(0);
        (0..k).all(|w| self.batch_size(w) == batch).then_some((k - 1) * batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_1_leftovers_match_eq_24() {
        let s = ShuffleMatrix::parse("2,1,2;2,1,2;1,3,1").unwrap();
        let omega: Vec<Vec<usize>> = (0..3).map(|i| (0..3).map(|j| s.leftover(i, j)).collect()).collect();
        assert_eq!(omega, vec![vec![0, 0, 1], vec![1, 0, 0], vec![0, 1, 0]]);
        assert_eq!(s.ignored_worker(), 0);
        assert_eq!(s.worst_case_transmissions(), Some(10));
    }

    #[test]
    fn cyclic_shuffle_costs_the_worst_case() {
        let s = ShuffleMatrix::parse("0,4,0,0;0,0,4,0;0,0,0,4;4,0,0,0").unwrap();
        assert_eq!(s.achievable_transmissions(), 12);
        assert_eq!(s.worst_case_transmissions(), Some(12));
    }
}
