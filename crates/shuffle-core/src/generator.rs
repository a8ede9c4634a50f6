//! Seeded random instances in the model of the UberShuffle paper: a worker's cache is its
//! previous batch plus further points drawn uniformly from the rest, and the new assignment is a
//! fresh uniformly random balanced one.

use crate::ShuffleInstance;
use crate::point_set::StoredPoints;
use crate::rng::{SeededRng, partial_shuffle, seeded, shuffle};

/// Why generator parameters are impossible.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum GeneratorError {
    /// No worker.
    #[error("--workers must be at least 1")]
    NoWorkers,
    /// More workers than points.
    #[error("more workers ({workers}) than points ({points}): every worker needs a batch")]
    MoreWorkersThanPoints {
        /// Workers asked for.
        workers: usize,
        /// Points asked for.
        points: usize,
    },
    /// Too many points for 32-bit ids.
    #[error("{points} points is more than this build supports (ids are 32-bit)")]
    TooManyPoints {
        /// Points asked for.
        points: usize,
    },
    /// `alpha` is not a number in `(0, 1]`.
    #[error("alpha must lie in (0, 1], got {alpha}")]
    AlphaOutOfRange {
        /// The value given.
        alpha: f64,
    },
    /// The cache cannot hold a worker's own batch.
    #[error(
        "cache size floor(alpha*q) = {cache_size} is below the batch size {batch} = ceil(q/n): \
         a worker must be able to cache its own batch (alpha >= {min_alpha:.6})"
    )]
    CacheTooSmall {
        /// `floor(alpha * q)`.
        cache_size: usize,
        /// `ceil(q / n)`.
        batch: usize,
        /// The smallest alpha that works.
        min_alpha: f64,
    },
}

/// Parameters of the random instance model, before validation.
///
/// ```
/// use ubershuffle_core::GeneratorParams;
/// let inst = GeneratorParams { workers: 4, points: 100, alpha: 0.4, seed: 7 }.check()?.generate();
/// assert_eq!(inst.cache_size(), 40);
/// # Ok::<(), ubershuffle_core::GeneratorError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneratorParams {
    /// Number of workers `n`.
    pub workers: usize,
    /// Number of points `q`.
    pub points: usize,
    /// Storage ratio `alpha`: each worker caches `s = floor(alpha * q)` points.
    pub alpha: f64,
    /// Seed of the ChaCha8 stream that draws the instance.
    pub seed: u64,
}

/// Validated generator parameters; [`CheckedGeneratorParams::generate`] draws the instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckedGeneratorParams {
    params: GeneratorParams,
    cache_size: usize,
}

/// `floor(alpha * q)`, with a tolerance of 1e-9 so that decimal alphas such as 0.29 with
/// q = 100 give the intended 29 rather than the 28 that binary rounding of 0.29 would give.
pub fn cache_size_for(alpha: f64, points: usize) -> usize {
    (alpha * points as f64 + 1e-9).floor() as usize
}

impl GeneratorParams {
    /// Checks the parameters once, so that generation cannot fail.
    pub fn check(self) -> Result<CheckedGeneratorParams, GeneratorError> {
        let GeneratorParams { workers, points, alpha, .. } = self;
        if workers == 0 {
            return Err(GeneratorError::NoWorkers);
        }
        if u32::try_from(points).is_err() {
            return Err(GeneratorError::TooManyPoints { points });
        }
        if workers > points {
            return Err(GeneratorError::MoreWorkersThanPoints { workers, points });
        }
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(GeneratorError::AlphaOutOfRange { alpha });
        }
        let cache_size = cache_size_for(alpha, points);
        let batch = points.div_ceil(workers);
        if cache_size < batch {
            return Err(GeneratorError::CacheTooSmall {
                cache_size,
                batch,
                min_alpha: batch as f64 / points as f64,
            });
        }
        Ok(CheckedGeneratorParams { params: self, cache_size })
    }
}

impl CheckedGeneratorParams {
    /// The cache size `s = floor(alpha * q)`.
    pub fn cache_size(&self) -> usize {
        self.cache_size
    }

    /// The parameters as given.
    pub fn params(&self) -> GeneratorParams {
        self.params
    }

    /// Draws the instance: same parameters, same instance, on every machine.
    pub fn generate(&self) -> ShuffleInstance {
        let mut rng = seeded(self.params.seed);
        self.generate_with(&mut rng)
    }

    /// Draws an instance from a caller's generator (for a sequence of epochs from one stream).
    pub fn generate_with(&self, rng: &mut SeededRng) -> ShuffleInstance {
        self.generate_with_previous(rng).0
    }

    /// [`CheckedGeneratorParams::generate`], with the previous epoch's batches the caches were
    /// drawn around (each cache holds its worker's previous batch): the same instance.
    ///
    /// ```
    /// use ubershuffle_core::GeneratorParams;
    /// let params = GeneratorParams { workers: 3, points: 30, alpha: 0.5, seed: 2 }.check()?;
    /// let (inst, previous) = params.generate_with_previous(&mut ubershuffle_core::seeded(2));
    /// assert_eq!(inst, params.generate());
    /// assert!(previous[1].iter().all(|&p| inst.cache(1).contains(p)));
    /// # Ok::<(), ubershuffle_core::GeneratorError>(())
    /// ```
    pub fn generate_with_previous(&self, rng: &mut SeededRng) -> (ShuffleInstance, Vec<Vec<u32>>) {
        let GeneratorParams { workers, points, .. } = self.params;
        let previous = balanced_assignment(rng, workers, points);
        // Each cache is stored compactly as soon as it is drawn, so that n = 1000 workers never
        // hold every cache as a list at once.
        let cache = previous
            .iter()
            .map(|batch| StoredPoints::compact(cache_around(rng, batch, points, self.cache_size), points))
            .collect();
        let assignment = balanced_assignment(rng, workers, points);
        let inst = ShuffleInstance::from_stored(workers, points, cache, assignment)
            .unwrap_or_else(|e| unreachable!("generated instances are valid: {e}"));
        (inst, previous)
    }
}

/// A uniformly random balanced assignment of `0..points` to `workers` batches (the first
/// `points % workers` batches get one point more), each batch sorted.
pub fn balanced_assignment(rng: &mut SeededRng, workers: usize, points: usize) -> Vec<Vec<u32>> {
    let mut order: Vec<u32> = (0..points as u32).collect();
    shuffle(rng, &mut order);
    let (base, extra) = (points / workers, points % workers);
    let mut rest = order.as_slice();
    (0..workers)
        .map(|w| {
            let size = base + usize::from(w < extra);
            let (batch, tail) = rest.split_at(size);
            rest = tail;
            let mut batch = batch.to_vec();
            batch.sort_unstable();
            batch
        })
        .collect()
}

/// A cache of `size` points: all of `batch` plus `size - |batch|` points drawn uniformly
/// without replacement from the other points.
pub fn cache_around(rng: &mut SeededRng, batch: &[u32], points: usize, size: usize) -> Vec<u32> {
    let mut in_batch = vec![false; points];
    for &p in batch {
        in_batch[p as usize] = true;
    }
    let mut rest: Vec<u32> = (0..points as u32).filter(|&p| !in_batch[p as usize]).collect();
    let extra = size - batch.len();
    partial_shuffle(rng, &mut rest, extra);
    let mut cache: Vec<u32> = batch.iter().copied().chain(rest[..extra].iter().copied()).collect();
    cache.sort_unstable();
    cache
}

/// An instance outside the paper's cache model, for robustness tests: a uniformly random
/// balanced assignment, and caches in which every worker holds every point independently with
/// probability `cache_probability` (so some needed points may be cached by nobody, and caches
/// need not hold the previous batch). At least one worker and one point per worker; same
/// arguments, same instance.
///
/// ```
/// use ubershuffle_core::arbitrary_instance;
/// let inst = arbitrary_instance(4, 30, 0.5, 7);
/// assert_eq!((inst.workers(), inst.points()), (4, 30));
/// ```
pub fn arbitrary_instance(
    workers: usize,
    points: usize,
    cache_probability: f64,
    seed: u64,
) -> ShuffleInstance {
    let workers = workers.max(1);
    let points = points.max(workers);
    let mut rng = seeded(seed);
    let assignment = balanced_assignment(&mut rng, workers, points);
    let cache = (0..workers)
        .map(|_| {
            (0..points as u32).filter(|_| crate::rng::uniform_unit(&mut rng) < cache_probability).collect()
        })
        .collect();
    ShuffleInstance::new(workers, points, cache, assignment)
        .unwrap_or_else(|e| unreachable!("arbitrary instances are valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(workers: usize, points: usize, alpha: f64) -> GeneratorParams {
        GeneratorParams { workers, points, alpha, seed: 11 }
    }

    #[test]
    fn same_seed_same_instance_and_seeds_differ() {
        let a = params(5, 200, 0.3).check().unwrap().generate();
        let b = params(5, 200, 0.3).check().unwrap().generate();
        assert_eq!(a, b);
        let c = GeneratorParams { seed: 12, ..params(5, 200, 0.3) }.check().unwrap().generate();
        assert_ne!(a, c);
    }

    #[test]
    fn caches_have_the_model_shape() {
        let inst = params(4, 103, 0.5).check().unwrap().generate();
        for w in 0..4 {
            assert_eq!(inst.cache(w).len(), 51);
            assert!(matches!(inst.assignment(w).len(), 25 | 26));
        }
    }

    #[test]
    fn decimal_alpha_gives_the_intended_cache_size() {
        assert_eq!(cache_size_for(0.29, 100), 29);
        assert_eq!(cache_size_for(0.55, 1_000_000), 550_000);
        assert_eq!(cache_size_for(0.325, 100_000), 32_500);
    }

    #[test]
    fn impossible_parameters_are_refused() {
        assert_eq!(params(0, 10, 0.5).check().unwrap_err(), GeneratorError::NoWorkers);
        assert!(matches!(params(11, 10, 0.5).check(), Err(GeneratorError::MoreWorkersThanPoints { .. })));
        assert!(matches!(params(2, 10, 1.5).check(), Err(GeneratorError::AlphaOutOfRange { .. })));
        assert!(matches!(params(2, 10, f64::NAN).check(), Err(GeneratorError::AlphaOutOfRange { .. })));
        let e = params(4, 100, 0.2).check().unwrap_err();
        assert!(e.to_string().contains("below the batch size 25"), "{e}");
    }

    #[test]
    fn edge_cases_generate() {
        // alpha exactly q/n: caches are the previous batches.
        let inst = params(4, 100, 0.25).check().unwrap().generate();
        assert!((0..4).all(|w| inst.cache(w).len() == 25));
        // Everything cached.
        let inst = params(3, 30, 1.0).check().unwrap().generate();
        assert_eq!(inst.uncoded_transmissions(), 0);
        // One worker.
        let inst = params(1, 10, 1.0).check().unwrap().generate();
        assert_eq!(inst.uncoded_transmissions(), 0);
    }
}
