//! The papers' worked examples as ready-made instances, for tests, docs and the command line.

use crate::ShuffleInstance;

/// The UberShuffle paper's running example (Examples 1-3: n = 3, q = 9), with the paper's
/// 1-based point ids `d_1..d_9` converted to 0-based ids `0..8`.
///
/// Uncoded needs 6 transmissions, coded shuffling 4 and UberShuffle 3.
pub fn ubershuffle_paper_example() -> ShuffleInstance {
    ShuffleInstance::new(
        3,
        9,
        vec![vec![1, 2, 3, 7], vec![5, 6, 7, 8], vec![0, 2, 3, 4]],
        vec![vec![2, 4, 7], vec![0, 3, 8], vec![1, 5, 6]],
    )
    .unwrap_or_else(|e| unreachable!("the paper's example is a valid instance: {e}"))
}

/// An instance outside the paper's cache model, for robustness tests: a uniformly random
/// balanced assignment, and caches in which every worker holds every point independently with
/// probability `cache_probability` (so some needed points may be cached by nobody, and caches
/// need not hold the previous batch). Same arguments, same instance.
pub fn arbitrary_instance(
    workers: usize,
    points: usize,
    cache_probability: f64,
    seed: u64,
) -> ShuffleInstance {
    let mut rng = crate::rng::seeded(seed);
    let assignment = crate::balanced_assignment(&mut rng, workers.max(1), points.max(workers.max(1)));
    let points = points.max(workers.max(1));
    let cache = (0..workers.max(1))
        .map(|_| {
            (0..points as u32).filter(|_| crate::rng::uniform_unit(&mut rng) < cache_probability).collect()
        })
        .collect();
    ShuffleInstance::new(workers.max(1), points, cache, assignment)
        .unwrap_or_else(|e| unreachable!("arbitrary instances are valid: {e}"))
}
