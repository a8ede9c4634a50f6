//! [`ShuffleBlocks`]: the points of every block `C_i ∩ D_j` of a no-excess instance, and the
//! check that an instance is one.

use crate::ShuffleInstance;
use crate::no_excess::ShuffleMatrix;

/// The most workers whose shuffle matrix (`K^2` blocks) this crate builds.
pub const MAX_MATRIX_WORKERS: usize = 1024;

/// Why an instance is outside the no-excess storage model (caches = previous batches).
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum NoExcessError {
    /// Too many workers for a `K x K` matrix.
    #[error("{workers} workers is more than the shuffle matrix supports (at most {max})")]
    TooManyWorkers {
        /// Workers in the instance.
        workers: usize,
        /// [`MAX_MATRIX_WORKERS`].
        max: usize,
    },
    /// Two workers cache the same point.
    #[error(
        "point {point} is cached by both worker {first} and worker {second}: the caches are not \
         the previous batches (no excess storage)"
    )]
    CachedTwice {
        /// The point.
        point: u32,
        /// One worker caching it.
        first: usize,
        /// Another worker caching it.
        second: usize,
    },
    /// No worker caches a point.
    #[error(
        "point {point} is cached by no worker: the caches are not the previous batches (no excess storage)"
    )]
    Uncached {
        /// The point.
        point: u32,
    },
    /// A worker's cache and new batch differ in size.
    #[error(
        "worker {worker} caches {cache} points but its new batch has {batch}: with no excess \
         storage a worker caches exactly its previous batch, of the same size"
    )]
    SizeChanged {
        /// The worker.
        worker: usize,
        /// `|C_i|`.
        cache: usize,
        /// `|D_i|`.
        batch: usize,
    },
}

/// The points of a no-excess instance sorted into blocks: block `(i, j)` holds the points
/// worker `i` caches that worker `j` needs (`C_i ∩ D_j`, eq. (11)), in increasing id order.
/// Planners take points from the blocks one at a time with [`ShuffleBlocks::take`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShuffleBlocks {
    workers: usize,
    blocks: Vec<Vec<u32>>,
    taken: Vec<usize>,
}

impl ShuffleBlocks {
    /// Sorts the points of `inst` into blocks, or says why `inst` is not a no-excess instance:
    /// the caches must partition the points and every worker must cache as many points as its
    /// new batch holds.
    pub fn of(inst: &ShuffleInstance) -> Result<Self, NoExcessError> {
        let k = inst.workers();
        if k > MAX_MATRIX_WORKERS {
            return Err(NoExcessError::TooManyWorkers { workers: k, max: MAX_MATRIX_WORKERS });
        }
        let mut cacher = vec![u32::MAX; inst.points()];
        for worker in 0..k {
            for p in inst.cache(worker) {
                let slot = &mut cacher[p as usize];
                if *slot != u32::MAX {
                    return Err(NoExcessError::CachedTwice {
                        point: p,
                        first: *slot as usize,
                        second: worker,
                    });
                }
                *slot = worker as u32;
            }
        }
        if let Some(p) = cacher.iter().position(|&w| w == u32::MAX) {
            return Err(NoExcessError::Uncached { point: p as u32 });
        }
        for worker in 0..k {
            let (cache, batch) = (inst.cache(worker).len(), inst.assignment(worker).len());
            if cache != batch {
                return Err(NoExcessError::SizeChanged { worker, cache, batch });
            }
        }
        let mut blocks = vec![Vec::new(); k * k];
        for (p, &i) in cacher.iter().enumerate() {
            blocks[i as usize * k + inst.owner(p as u32)].push(p as u32);
        }
        Ok(ShuffleBlocks { workers: k, blocks, taken: vec![0; k * k] })
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The shuffle matrix: the size of every block.
    pub fn matrix(&self) -> ShuffleMatrix {
        ShuffleMatrix::from_checked_entries(self.workers, self.blocks.iter().map(Vec::len).collect())
    }

    /// The points of block `(from, to)` not taken yet, in increasing id order.
    pub fn remaining(&self, from: usize, to: usize) -> &[u32] {
        let b = from * self.workers + to;
        &self.blocks[b][self.taken[b]..]
    }

    /// Takes the next point of block `(from, to)`: one worker `from` caches and worker `to`
    /// needs. `None` when the block is used up.
    pub fn take(&mut self, from: usize, to: usize) -> Option<u32> {
        let b = from * self.workers + to;
        let p = self.blocks[b].get(self.taken[b]).copied()?;
        self.taken[b] += 1;
        Some(p)
    }
}

impl ShuffleMatrix {
    /// The shuffle matrix of a no-excess instance, or why `inst` is not one (see
    /// [`ShuffleBlocks::of`]).
    pub fn from_instance(inst: &ShuffleInstance) -> Result<Self, NoExcessError> {
        ShuffleBlocks::of(inst).map(|b| b.matrix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_outside_the_model_are_named() {
        let inst = crate::ShuffleInstance::paper_example();
        let e = ShuffleBlocks::of(&inst).unwrap_err();
        assert_eq!(e, NoExcessError::CachedTwice { point: 7, first: 0, second: 1 });
        let uncached =
            ShuffleInstance::new(2, 4, vec![vec![0], vec![1, 2]], vec![vec![0, 1], vec![2, 3]]).unwrap();
        assert_eq!(ShuffleBlocks::of(&uncached).unwrap_err(), NoExcessError::Uncached { point: 3 });
        let resized =
            ShuffleInstance::new(2, 3, vec![vec![0], vec![1, 2]], vec![vec![0, 1], vec![2]]).unwrap();
        assert_eq!(
            ShuffleBlocks::of(&resized).unwrap_err().to_string(),
            "worker 0 caches 1 points but its new batch has 2: with no excess storage a worker caches \
             exactly its previous batch, of the same size"
        );
    }

    #[test]
    fn blocks_hold_the_right_points_and_near_balanced_instances_are_accepted() {
        // K = 2 does not divide N = 3: worker 0 keeps its two-point batch size.
        let inst = ShuffleInstance::new(2, 3, vec![vec![0, 1], vec![2]], vec![vec![1, 2], vec![0]]).unwrap();
        let mut blocks = ShuffleBlocks::of(&inst).unwrap();
        assert_eq!(blocks.matrix().rows(), vec![vec![1, 1], vec![1, 0]]);
        assert_eq!(blocks.remaining(0, 1), &[0]);
        assert_eq!(blocks.take(0, 1), Some(0));
        assert_eq!(blocks.take(0, 1), None);
        assert_eq!(blocks.remaining(1, 0), &[2]);
    }
}
