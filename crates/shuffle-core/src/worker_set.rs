//! [`WorkerSet`]: a set of workers of any size, as a bitset sized at run time.

use std::fmt;

use crate::bits;

/// A set of worker ids, stored as a bitset that grows to the largest member (so 1024 workers
/// take 128 bytes). Two sets are equal when they have the same members, whatever their
/// storage.
///
/// ```
/// use ubershuffle_core::WorkerSet;
/// let s: WorkerSet = [0, 3, 700].into_iter().collect();
/// assert!(s.contains(700) && !s.contains(1));
/// assert_eq!(s.len(), 3);
/// assert_eq!(s.to_string(), "{0,3,700}");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerSet {
    /// No trailing zero words, so that derived equality and order compare members.
    words: Vec<u64>,
}

impl WorkerSet {
    /// The empty set.
    pub fn new() -> Self {
        WorkerSet::default()
    }

    /// The set holding only `worker`.
    pub fn single(worker: usize) -> Self {
        let mut set = WorkerSet::new();
        set.insert(worker);
        set
    }

    /// The set `{0, 1, ..., n-1}`.
    pub fn all(n: usize) -> Self {
        (0..n).collect()
    }

    /// Whether `worker` is a member.
    pub fn contains(&self, worker: usize) -> bool {
        bits::get(&self.words, worker)
    }

    /// Adds `worker`.
    pub fn insert(&mut self, worker: usize) {
        if self.words.len() <= worker / 64 {
            self.words.resize(worker / 64 + 1, 0);
        }
        bits::set(&mut self.words, worker);
    }

    /// Removes `worker`.
    pub fn remove(&mut self, worker: usize) {
        if worker / 64 < self.words.len() {
            bits::clear(&mut self.words, worker);
            self.trim();
        }
    }

    /// This set with `worker` added.
    #[must_use]
    pub fn with(mut self, worker: usize) -> Self {
        self.insert(worker);
        self
    }

    /// This set with `worker` removed.
    #[must_use]
    pub fn without(mut self, worker: usize) -> Self {
        self.remove(worker);
        self
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        bits::count(&self.words)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset_of(&self, other: &WorkerSet) -> bool {
        bits::is_subset(&self.words, &other.words)
    }

    /// The members common to both sets.
    #[must_use]
    pub fn intersection(&self, other: &WorkerSet) -> WorkerSet {
        let words = self.words.iter().zip(&other.words).map(|(a, b)| a & b).collect();
        let mut set = WorkerSet { words };
        set.trim();
        set
    }

    /// The members of either set.
    #[must_use]
    pub fn union(&self, other: &WorkerSet) -> WorkerSet {
        let (long, short) = if self.words.len() >= other.words.len() { (self, other) } else { (other, self) };
        let mut words = long.words.clone();
        for (w, s) in words.iter_mut().zip(&short.words) {
            *w |= s;
        }
        WorkerSet { words }
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        bits::Ones::new(&self.words)
    }

    /// The set whose members are the set bits of `words` (bit `i` of word `k` is worker
    /// `64 k + i`).
    pub fn from_words(words: &[u64]) -> Self {
        let mut set = WorkerSet { words: words.to_vec() };
        set.trim();
        set
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

impl FromIterator<usize> for WorkerSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        let mut set = WorkerSet::new();
        for w in iter {
            set.insert(w);
        }
        set
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
    fn set_operations_past_128_workers() {
        let s: WorkerSet = [0, 3, 127, 1023].into_iter().collect();
        assert_eq!(s.len(), 4);
        assert!(s.contains(1023) && !s.contains(1) && !s.contains(5000));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 127, 1023]);
        assert!(s.clone().without(3).is_subset_of(&s));
        assert!(!s.is_subset_of(&s.clone().without(3)));
        // Removing the largest member gives the same set as never adding it.
        assert_eq!(s.clone().without(1023), [0, 3, 127].into_iter().collect());
        assert_eq!(WorkerSet::all(1024).len(), 1024);
        assert_eq!(s.intersection(&WorkerSet::all(128)).to_string(), "{0,3,127}");
        assert_eq!(WorkerSet::single(5).union(&s).len(), 5);
        assert!(WorkerSet::single(9).without(9).is_empty());
        assert_eq!(WorkerSet::from_words(&[0b1010, 0]), [1, 3].into_iter().collect());
    }
}
