//! Epochs whose assignment is given rather than drawn by the policy: a learner that decides
//! which points each worker computes on (a gradient code's roles) still has its data moved,
//! planned and verified by the chain like any other epoch.

use super::{ChainError, DrawnEpoch, EpochChain, STREAM_EPOCH, STREAM_PLANNER};
use crate::ShuffleInstance;
use crate::instance::sorted_difference;
use crate::rng::seeded_stream;

impl EpochChain {
    /// Draws the next epoch with the given assignment `next` (one sorted batch per worker,
    /// together every point once) instead of the policy's. Every worker must be live: the
    /// batches of a lost worker cannot be dealt to others without changing what they compute.
    /// Nothing changes until [`EpochChain::commit`].
    pub fn draw_assigned(
        &self,
        live: &[usize],
        attempt: u32,
        next: Vec<Vec<u32>>,
    ) -> Result<DrawnEpoch, ChainError> {
        let workers = self.params.workers;
        if live.len() != workers || live.iter().enumerate().any(|(k, &w)| k != w) {
            return Err(ChainError::State(format!(
                "the assignment is given for all {workers} workers, but only {} are live",
                live.len()
            )));
        }
        if next.len() != workers {
            return Err(ChainError::State(format!("{} batches given for {workers} workers", next.len())));
        }
        let capacity = self.params.cache_capacity.unwrap_or(usize::MAX);
        if let Some(b) = next.iter().find(|b| b.len() > capacity) {
            return Err(ChainError::State(format!("a batch of {} exceeds the cache ({capacity})", b.len())));
        }
        let epoch = self.state.completed_epochs + 1;
        let stream = (epoch as u64) << 8 | u64::from(attempt);
        let previous = self.state.batches.clone();
        let points_moved =
            previous.iter().zip(&next).map(|(old, new)| sorted_difference(new, old).len()).sum();
        let instance = ShuffleInstance::new(workers, self.params.points, self.state.caches.clone(), next)?;
        Ok(DrawnEpoch {
            epoch,
            live: live.to_vec(),
            instance,
            previous,
            points_exchanged: points_moved,
            points_moved,
            policy: self.params.policy,
            candidate_rng: seeded_stream(self.params.seed, STREAM_EPOCH + stream),
            planner_rng: seeded_stream(self.params.seed, STREAM_PLANNER + stream),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::epoch_chain::ChainParams;
    use crate::exchange_policy::ExchangePolicy;

    #[test]
    fn a_given_assignment_is_drawn_as_given_and_refused_without_every_worker() {
        let params = ChainParams::new(3, 9, ExchangePolicy::Local, 1).with_cache_capacity(3);
        let blocks: Vec<Vec<u32>> = vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
        let chain = EpochChain::starting_from(params, blocks.clone()).unwrap();
        let rotated = vec![blocks[1].clone(), blocks[2].clone(), blocks[0].clone()];
        let drawn = chain.draw_assigned(&[0, 1, 2], 0, rotated.clone()).unwrap();
        assert_eq!(drawn.epoch, 1);
        assert_eq!(drawn.points_moved, 9);
        for (k, batch) in rotated.iter().enumerate() {
            assert_eq!(drawn.instance.assignment(k).to_vec(), *batch);
        }
        assert!(chain.draw_assigned(&[0, 2], 0, rotated.clone()).is_err());
        assert!(
            chain.draw_assigned(&[0, 1, 2], 0, vec![vec![0, 1, 2, 3], vec![4, 5], vec![6, 7, 8]]).is_err()
        );
    }
}
