//! The cache policy: what a worker keeps for the next epoch. Master and worker apply the same
//! deterministic rule, so no cache list travels on the wire.

/// The cache a worker keeps after an epoch: its whole new `batch` (it must hold it to train),
/// plus `capacity - |batch|` of its other cached points, chosen uniformly at random by ranking
/// them with a hash of the run's seed, the epoch, the worker and the point id.
///
/// Choice (the papers leave the policy open): extra points come from the worker's previous
/// cache only, not from points it learned in passing while decoding, so the master knows every
/// cache without being told. Since every assignment is uniformly random, the extra points stay a
/// uniformly random subset of the data, as in the UberShuffle paper's model.
pub fn next_cache(
    cache: &[u32],
    batch: &[u32],
    capacity: usize,
    seed: u64,
    epoch: u32,
    worker: u32,
) -> Vec<u32> {
    let mut batch_sorted = batch.to_vec();
    batch_sorted.sort_unstable();
    let room = capacity.saturating_sub(batch_sorted.len());
    let mut others: Vec<(u64, u32)> = cache
        .iter()
        .copied()
        .filter(|p| batch_sorted.binary_search(p).is_err())
        .map(|p| (rank(seed, epoch, worker, p), p))
        .collect();
    if others.len() > room {
        others.select_nth_unstable(room);
        others.truncate(room);
    }
    let mut kept: Vec<u32> = batch_sorted;
    kept.extend(others.into_iter().map(|(_, p)| p));
    kept.sort_unstable();
    kept
}

/// SplitMix64 of the four keys: a fixed, platform-independent pseudo-random rank.
fn rank(seed: u64, epoch: u32, worker: u32, point: u32) -> u64 {
    let mut z = seed ^ (u64::from(epoch) << 40) ^ (u64::from(worker) << 20) ^ u64::from(point).rotate_left(7);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_batch_and_fills_to_capacity_from_the_old_cache() {
        let cache: Vec<u32> = (0..20).collect();
        let batch = vec![3, 30, 31];
        let kept = next_cache(&cache, &batch, 10, 1, 2, 0);
        assert_eq!(kept.len(), 10);
        for p in &batch {
            assert!(kept.contains(p));
        }
        assert!(kept.iter().all(|p| batch.contains(p) || cache.contains(p)));
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(kept, next_cache(&cache, &batch, 10, 1, 2, 0));
        assert_ne!(kept, next_cache(&cache, &batch, 10, 1, 3, 0));
    }

    #[test]
    fn a_small_cache_keeps_everything() {
        assert_eq!(next_cache(&[1, 2], &[5], 10, 0, 1, 0), vec![1, 2, 5]);
        assert_eq!(next_cache(&[1, 2], &[5, 6], 2, 0, 1, 0), vec![5, 6]);
    }
}
