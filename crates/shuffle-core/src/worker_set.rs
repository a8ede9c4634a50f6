//! A set of workers as a 128-bit mask: the label of an encoding table and the cachers of a point.

use std::fmt;

/// The most workers a [`WorkerSet`] can hold; planners that group points by worker sets
/// (coded, UberShuffle) refuse larger instances with a typed error.
pub const MAX_SET_WORKERS: usize = 128;

/// A set of worker ids below [`MAX_SET_WORKERS`], stored as a bit mask.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct WorkerSet(u128);

impl WorkerSet {
    /// The empty set.
    pub const EMPTY: WorkerSet = WorkerSet(0);

    /// The set holding only `worker`.
    pub fn single(worker: usize) -> Self {
        debug_assert!(worker < MAX_SET_WORKERS);
        WorkerSet(1u128 << worker)
    }

    /// The set `{0, 1, ..., n-1}`.
    pub fn all(n: usize) -> Self {
        debug_assert!(n <= MAX_SET_WORKERS);
        if n == MAX_SET_WORKERS { WorkerSet(u128::MAX) } else { WorkerSet((1u128 << n) - 1) }
    }

    /// The set from its raw mask (bit `i` set when worker `i` is a member).
    pub const fn from_bits(bits: u128) -> Self {
        WorkerSet(bits)
    }

    /// The raw mask.
    pub const fn bits(self) -> u128 {
        self.0
    }

    /// Whether `worker` is a member.
    pub fn contains(self, worker: usize) -> bool {
        worker < MAX_SET_WORKERS && self.0 >> worker & 1 == 1
    }

    /// This set with `worker` added.
    #[must_use]
    pub fn with(self, worker: usize) -> Self {
        WorkerSet(self.0 | 1u128 << worker)
    }

    /// This set with `worker` removed.
    #[must_use]
    pub fn without(self, worker: usize) -> Self {
        WorkerSet(self.0 & !(1u128 << worker))
    }

    /// Adds `worker` in place.
    pub fn insert(&mut self, worker: usize) {
        self.0 |= 1u128 << worker;
    }

    /// The number of members.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset_of(self, other: WorkerSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The members common to both sets.
    #[must_use]
    pub fn intersection(self, other: WorkerSet) -> Self {
        WorkerSet(self.0 & other.0)
    }

    /// The members of either set.
    #[must_use]
    pub fn union(self, other: WorkerSet) -> Self {
        WorkerSet(self.0 | other.0)
    }

    /// The members in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let w = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            Some(w)
        })
    }
}

impl FromIterator<usize> for WorkerSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        iter.into_iter().fold(WorkerSet::EMPTY, WorkerSet::with)
    }
}

impl fmt::Debug for WorkerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for WorkerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (k, w) in self.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, "{w}")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let s: WorkerSet = [0, 3, 127].into_iter().collect();
        assert_eq!(s.len(), 3);
        assert!(s.contains(127) && !s.contains(1) && !s.contains(500));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 127]);
        assert!(s.without(3).is_subset_of(s));
        assert!(!s.is_subset_of(s.without(3)));
        assert_eq!(WorkerSet::all(128).len(), 128);
        assert_eq!(WorkerSet::all(3), WorkerSet::from_bits(0b111));
        assert_eq!(s.to_string(), "{0,3,127}");
    }
}
