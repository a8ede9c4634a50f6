//! [`LayerCounts`]: a counter per member of every worker set of one size.

/// Widest masks handled: the colex-rank tables cover three bytes.
const MAX_WORKERS: usize = 24;

/// For one layer (all masks of `k` of the `n` workers), a counter per (mask, member). Masks are
/// numbered by their colex rank `sum_i C(b_i, i + 1)` over their bits `b_0 < b_1 < ...` (the
/// order Gosper's hack lists them in), found with three table lookups; a mask's `k` counters
/// are adjacent. The largest layer of 20 workers takes 7.4 MB, so it stays in cache.
#[derive(Clone, Debug)]
pub(crate) struct LayerCounts {
    workers: usize,
    k: usize,
    binomial: Vec<Vec<u32>>,
    /// `rank_part[(chunk * 256 + byte) * (MAX_WORKERS + 1) + below]`: the rank contributed by the
    /// bits `byte` of byte `chunk` when `below` bits of the mask lie under that byte.
    rank_part: Vec<u32>,
    counts: Vec<u32>,
}

impl LayerCounts {
    /// Counters for masks of `workers` workers (at most 24).
    pub(crate) fn new(workers: usize) -> Self {
        assert!(workers <= MAX_WORKERS);
        let mut binomial = vec![vec![0u32; MAX_WORKERS + 2]; MAX_WORKERS + 2];
        for a in 0..MAX_WORKERS + 2 {
            binomial[a][0] = 1;
            for b in 1..=a {
                binomial[a][b] = binomial[a - 1][b - 1] + binomial[a - 1][b];
            }
        }
        let mut rank_part = vec![0u32; 3 * 256 * (MAX_WORKERS + 1)];
        for chunk in 0..3 {
            for byte in 0..256usize {
                for below in 0..=MAX_WORKERS {
                    let mut sum = 0u32;
                    let mut index = below;
                    for bit in (0..8).filter(|&b| byte >> b & 1 == 1) {
                        index += 1;
                        if index <= MAX_WORKERS + 1 {
                            sum += binomial[8 * chunk + bit][index];
                        }
                    }
                    rank_part[(chunk * 256 + byte) * (MAX_WORKERS + 1) + below] = sum;
                }
            }
        }
        LayerCounts { workers, k: 0, binomial, rank_part, counts: Vec::new() }
    }

    /// Starts layer `k`: every counter of every `k`-mask at zero.
    pub(crate) fn start_layer(&mut self, k: usize) {
        self.k = k;
        let masks = self.binomial[self.workers][k] as usize;
        self.counts.clear();
        self.counts.resize(masks * k, 0);
    }

    /// The colex rank of `mask` among the masks of its size.
    #[inline]
    fn rank(&self, mask: u32) -> usize {
        let stride = MAX_WORKERS + 1;
        let b0 = (mask & 0xFF) as usize;
        let b1 = (mask >> 8 & 0xFF) as usize;
        let b2 = (mask >> 16 & 0xFF) as usize;
        let below1 = b0.count_ones() as usize;
        let below2 = below1 + b1.count_ones() as usize;
        (self.rank_part[b0 * stride]
            + self.rank_part[(256 + b1) * stride + below1]
            + self.rank_part[(512 + b2) * stride + below2]) as usize
    }

    #[inline]
    fn index(&self, mask: u32, w: usize) -> usize {
        debug_assert_eq!(mask.count_ones() as usize, self.k);
        self.rank(mask) * self.k + (mask & ((1u32 << w) - 1)).count_ones() as usize
    }

    /// Adds `by` to the counter of member `w` of `mask`.
    #[inline]
    pub(crate) fn add(&mut self, mask: u32, w: usize, by: u32) {
        let i = self.index(mask, w);
        self.counts[i] += by;
    }

    /// Takes `by` from the counter of member `w` of `mask`.
    #[inline]
    pub(crate) fn sub(&mut self, mask: u32, w: usize, by: u32) {
        let i = self.index(mask, w);
        self.counts[i] -= by;
    }

    /// The smallest counter of the mask of colex rank `rank`.
    #[inline]
    pub(crate) fn min_at(&self, rank: u32) -> u32 {
        let start = rank as usize * self.k;
        self.counts[start..start + self.k].iter().copied().min().unwrap_or(0)
    }

    /// Calls `f(mask, rank, smallest counter)` for every mask of the layer, in colex order.
    pub(crate) fn for_each_mask(&self, mut f: impl FnMut(u32, u32, u32)) {
        if self.k == 0 || self.k > self.workers {
            return;
        }
        let end = 1u64 << self.workers;
        let mut mask = (1u64 << self.k) - 1;
        let mut rank = 0u32;
        while mask < end {
            f(mask as u32, rank, self.min_at(rank));
            // Gosper's hack: the next larger mask with as many bits.
            let low = mask & mask.wrapping_neg();
            let ripple = mask + low;
            mask = (((ripple ^ mask) >> 2) / low) | ripple;
            rank += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_gosper_order() {
        let mut counts = LayerCounts::new(9);
        for k in 1..=9 {
            counts.start_layer(k);
            let mut expected = 0u32;
            counts.for_each_mask(|mask, rank, _| {
                assert_eq!(rank, expected);
                assert_eq!(counts.rank(mask), rank as usize);
                expected += 1;
            });
            assert_eq!(expected, counts.binomial[9][k]);
        }
        let mut wide = LayerCounts::new(22);
        wide.start_layer(11);
        let last = ((1u32 << 11) - 1) << 11;
        assert_eq!(wide.rank(last) + 1, wide.binomial[22][11] as usize);
        wide.add(last, 13, 4);
        wide.add(last, 21, 2);
        wide.sub(last, 13, 1);
        let mut seen = None;
        wide.for_each_mask(|mask, rank, min| {
            if mask == last {
                seen = Some((rank, min));
            }
        });
        assert_eq!(seen, Some((wide.rank(last) as u32, 0)));
    }
}
