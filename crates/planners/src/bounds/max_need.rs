//! The simplest bound: the largest number of points one worker still needs.

use super::LowerBound;
use crate::ShuffleInstance;

/// `max_i |D_i \ C_i|`: that worker must receive that many point-sized packets' worth of
/// information its cache does not hold, whatever the scheme (linear or not).
pub fn max_need_bound(inst: &ShuffleInstance) -> LowerBound {
    LowerBound { value: inst.need_counts().into_iter().max().unwrap_or(0), kind: "max-need" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::best_lower_bound;

    #[test]
    fn paper_example_max_need_is_three() {
        let inst = crate::ShuffleInstance::paper_example();
        assert_eq!(best_lower_bound(&inst), LowerBound { value: 3, kind: "max-need" });
    }
}
