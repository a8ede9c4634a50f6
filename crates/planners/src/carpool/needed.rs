//! [`Needed`]: a point a worker needs, with its home, as the carpool local searches see it.

use crate::{Part, ShuffleInstance};

/// A needed point: its point, its worker and its home (its cachers plus its worker, as a
/// mask; up to 128 workers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Needed {
    pub(crate) point: u32,
    pub(crate) worker: usize,
    pub(crate) home: u128,
}

impl Needed {
    /// The needed point `part` names in `inst`.
    pub(crate) fn of(inst: &ShuffleInstance, part: &Part) -> Needed {
        let home = inst.cachers_of(part.point).iter().fold(1u128 << part.worker, |m, w| m | 1 << w);
        Needed { point: part.point, worker: part.worker, home }
    }

    /// Whether it may join a packet with `receivers` whose members' homes all hold
    /// `common_home`: a new receiver whose home holds every receiver, and which every member's
    /// home holds.
    #[inline]
    pub(crate) fn fits(&self, receivers: u128, common_home: u128) -> bool {
        let bit = 1u128 << self.worker;
        receivers & bit == 0 && receivers & !self.home == 0 && common_home & bit != 0
    }

    /// The part it is in a plan.
    pub(crate) fn part(&self) -> Part {
        Part::new(self.point, self.worker)
    }
}
