//! [`RunData`]: the records a run shuffles and the records its loss is measured on.

use ubershuffle_codes::Records;

/// The training and held-out records the master holds.
#[derive(Clone, Debug)]
pub struct RunData {
    /// The data set being shuffled: record `i` is data point `i`.
    pub train: Records,
    /// Records the loss is measured on.
    pub held_out: Records,
}
