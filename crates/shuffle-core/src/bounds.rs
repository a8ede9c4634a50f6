//! Lower bounds on the number of transmissions any scheme needs for an instance, printed beside
//! every plan's count.

use crate::ShuffleInstance;

/// A lower bound on the transmissions of every scheme for one instance, and which bound it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerBound {
    /// The bound, in point-sized transmissions.
    pub value: usize,
    /// Which bound gave it (`max-need`, ...).
    pub kind: &'static str,
}

/// The largest number of points one worker still needs, `max_i |D_i \ C_i|`: that worker must
/// receive that many point-sized packets' worth of information its cache does not hold.
pub fn max_need_bound(inst: &ShuffleInstance) -> LowerBound {
    LowerBound { value: inst.need_counts().into_iter().max().unwrap_or(0), kind: "max-need" }
}

/// The best lower bound this crate knows for `inst`.
pub fn best_lower_bound(inst: &ShuffleInstance) -> LowerBound {
    max_need_bound(inst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_example_max_need_is_three() {
        let inst = crate::examples::ubershuffle_paper_example();
        assert_eq!(best_lower_bound(&inst), LowerBound { value: 3, kind: "max-need" });
    }
}
