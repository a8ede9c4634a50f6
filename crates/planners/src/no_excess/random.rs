//! Seeded random no-excess instances and shuffle matrices, for the command line, tests and
//! experiments.

use crate::no_excess::ShuffleMatrix;
use crate::rng::{SeededRng, shuffle};
use crate::{GeneratorError, GeneratorParams, ShuffleInstance, balanced_assignment};

/// A random epoch with no excess storage: the previous batches and the new assignment are two
/// independent uniformly random balanced assignments (batch sizes by position, so each worker
/// keeps its batch size), and each worker caches exactly its previous batch.
///
/// When `workers` divides `points` this is the same instance, drawn from the same stream, as
/// the generator's model at `alpha = 1/n` (`GeneratorParams { alpha: 1/n, .. }`); unlike it,
/// it also works when `workers` does not divide `points`.
pub fn random_no_excess_instance(
    workers: usize,
    points: usize,
    rng: &mut SeededRng,
) -> Result<ShuffleInstance, GeneratorError> {
    // The generator's checks of workers and points (alpha = 1 always fits).
    GeneratorParams { workers, points, alpha: 1.0, seed: 0 }.check()?;
    let previous = balanced_assignment(rng, workers, points);
    let assignment = balanced_assignment(rng, workers, points);
    Ok(ShuffleInstance::new(workers, points, previous, assignment)
        .unwrap_or_else(|e| unreachable!("two balanced assignments make a valid instance: {e}")))
}

/// A random shuffle matrix with every row and column summing to `batch`: the sum of `batch`
/// independent uniformly random `workers x workers` permutation matrices. Every valid shuffle
/// matrix is such a sum (Birkhoff-von Neumann); small `batch` gives sparse matrices with few,
/// long cycles, unlike the near-uniform matrices of random reshuffles.
///
/// # Panics
/// Panics if `workers` or `batch` is zero, or `workers * batch` does not fit 32-bit ids (caller
/// bugs, not user input).
pub fn random_permutation_sum(workers: usize, batch: usize, rng: &mut SeededRng) -> ShuffleMatrix {
    assert!(workers > 0 && batch > 0, "a shuffle matrix needs workers and points");
    let mut rows = vec![vec![0usize; workers]; workers];
    let mut perm: Vec<usize> = (0..workers).collect();
    for _ in 0..batch {
        shuffle(rng, &mut perm);
        for (i, &j) in perm.iter().enumerate() {
            rows[i][j] += 1;
        }
    }
    ShuffleMatrix::new(rows).unwrap_or_else(|e| panic!("a sum of permutations is a shuffle matrix: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;

    #[test]
    fn same_as_the_generator_at_alpha_one_over_n() {
        for seed in 0..5 {
            let ours = random_no_excess_instance(4, 40, &mut seeded(seed)).unwrap();
            let theirs =
                GeneratorParams { workers: 4, points: 40, alpha: 0.25, seed }.check().unwrap().generate();
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn works_when_workers_do_not_divide_points_and_refuses_nonsense() {
        let inst = random_no_excess_instance(3, 10, &mut seeded(1)).unwrap();
        let s = ShuffleMatrix::from_instance(&inst).unwrap();
        assert_eq!((s.batch_size(0), s.batch_size(2)), (4, 3));
        assert_eq!(s.worst_case_transmissions(), None);
        assert_eq!(random_no_excess_instance(0, 10, &mut seeded(1)), Err(GeneratorError::NoWorkers));
        assert!(random_no_excess_instance(11, 10, &mut seeded(1)).is_err());
    }

    #[test]
    fn permutation_sums_have_equal_margins() {
        let s = random_permutation_sum(6, 3, &mut seeded(2));
        assert!((0..6).all(|w| s.batch_size(w) == 3));
        assert_eq!(s.points(), 18);
    }
}
