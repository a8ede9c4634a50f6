//! Drawing an epoch: the exchange policy's assignment, or the one the learner dictates
//! ([`ubershuffle_learners::Learner::assignment`]: a gradient code's roles), delivered alike.

use ubershuffle_core::epoch_chain::DrawnEpoch;
use ubershuffle_transport::Transport;

use super::Master;
use crate::RuntimeError;

impl<T: Transport> Master<'_, T> {
    /// The next epoch over `live` (attempt `attempt`): its caches and new assignment. A
    /// chain that keeps every place draws over every worker, from the epoch's first stream.
    pub(super) fn draw(&self, live: &[usize], attempt: u32) -> Result<DrawnEpoch, RuntimeError> {
        let epoch = self.state.chain.completed_epochs() + 1;
        Ok(match self.learner.assignment(epoch) {
            Some(next) => self.state.chain.draw_assigned(live, attempt, next)?,
            None if self.keep_places => self.state.chain.draw(&self.state.chain.all_workers(), 0)?,
            None => self.state.chain.draw(live, attempt)?,
        })
    }
}
