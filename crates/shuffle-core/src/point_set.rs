//! [`PointSet`]: a sorted set of point ids as an instance hands it out (a cache, a batch, the
//! points a worker needs), and its compact storage.
//!
//! A cache of `s` points out of `q` is stored either as a sorted list (4 bytes a point) or as
//! a bitset over all `q` ids (`q / 8` bytes), whichever is smaller: at `n = 1000`, `q = 1e6`,
//! `alpha = 0.1` the caches take 125 MB as bitsets against 400 MB as lists.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::bits;

/// A sorted, duplicate-free set of point ids, borrowed from an instance.
///
/// ```
/// use ubershuffle_core::ShuffleInstance;
/// let inst = ShuffleInstance::from_json(
///     r#"{"workers": 2, "points": 4, "cache": [[0, 1, 2], [2, 3]], "assignment": [[0, 3], [1, 2]]}"#,
/// )?;
/// let cache = inst.cache(0);
/// assert!(cache.contains(2) && !cache.contains(3));
/// assert_eq!(cache.iter().collect::<Vec<u32>>(), vec![0, 1, 2]);
/// assert_eq!(inst.needs(0).to_vec(), vec![3]);
/// // A set and a reference to it iterate alike.
/// let needs = inst.needs(1);
/// assert_eq!((&needs).into_iter().collect::<Vec<u32>>(), vec![1]);
/// # Ok::<(), ubershuffle_core::InstanceError>(())
/// ```
#[derive(Clone, Copy)]
pub struct PointSet<'a> {
    repr: Repr<'a>,
}

#[derive(Clone, Copy)]
enum Repr<'a> {
    Sorted(&'a [u32]),
    Bits { words: &'a [u64], len: usize },
}

impl<'a> PointSet<'a> {
    /// The set of the ids in `sorted`, which must be strictly increasing.
    pub fn from_sorted(sorted: &'a [u32]) -> Self {
        debug_assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        PointSet { repr: Repr::Sorted(sorted) }
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Sorted(list) => list.len(),
            Repr::Bits { len, .. } => len,
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `point` is in the set (a bit test or a binary search).
    #[inline]
    pub fn contains(&self, point: u32) -> bool {
        match self.repr {
            Repr::Sorted(list) => list.binary_search(&point).is_ok(),
            Repr::Bits { words, .. } => bits::get(words, point as usize),
        }
    }

    /// The points in increasing order.
    pub fn iter(&self) -> PointIter<'a> {
        match self.repr {
            Repr::Sorted(list) => PointIter { inner: IterRepr::Sorted(list.iter()) },
            Repr::Bits { words, len } => PointIter { inner: IterRepr::Bits(bits::Ones::new(words), len) },
        }
    }

    /// The points as a sorted vector.
    pub fn to_vec(&self) -> Vec<u32> {
        match self.repr {
            Repr::Sorted(list) => list.to_vec(),
            Repr::Bits { .. } => self.iter().collect(),
        }
    }

    /// The points as a sorted slice, when they are stored as one (batches and needs always
    /// are; caches when that is the smaller form).
    pub fn as_slice(&self) -> Option<&'a [u32]> {
        match self.repr {
            Repr::Sorted(list) => Some(list),
            Repr::Bits { .. } => None,
        }
    }
}

impl<'a> IntoIterator for PointSet<'a> {
    type Item = u32;
    type IntoIter = PointIter<'a>;
    fn into_iter(self) -> PointIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &PointSet<'a> {
    type Item = u32;
    type IntoIter = PointIter<'a>;
    fn into_iter(self) -> PointIter<'a> {
        self.iter()
    }
}

impl PartialEq for PointSet<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for PointSet<'_> {}

impl PartialEq<[u32]> for PointSet<'_> {
    fn eq(&self, other: &[u32]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl<const N: usize> PartialEq<[u32; N]> for PointSet<'_> {
    fn eq(&self, other: &[u32; N]) -> bool {
        self == other.as_slice()
    }
}

impl fmt::Debug for PointSet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for PointSet<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The points of a [`PointSet`] in increasing order.
#[derive(Clone, Debug)]
pub struct PointIter<'a> {
    inner: IterRepr<'a>,
}

#[derive(Clone, Debug)]
enum IterRepr<'a> {
    Sorted(std::slice::Iter<'a, u32>),
    /// The members of a bitset and how many are left.
    Bits(bits::Ones<'a>, usize),
}

impl Iterator for PointIter<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match &mut self.inner {
            IterRepr::Sorted(it) => it.next().copied(),
            IterRepr::Bits(ones, left) => {
                let p = ones.next()?;
                *left -= 1;
                Some(p as u32)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match &self.inner {
            IterRepr::Sorted(it) => it.len(),
            IterRepr::Bits(_, left) => *left,
        };
        (left, Some(left))
    }
}

impl ExactSizeIterator for PointIter<'_> {}

/// A set of point ids stored in the smaller of two forms (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoredPoints {
    /// A strictly increasing list.
    Sorted(Vec<u32>),
    /// Bit `p` set when `p` is a member; `len` members.
    Bits { words: Vec<u64>, len: usize },
}

impl StoredPoints {
    /// Stores `sorted` (strictly increasing ids below `points`) in the smaller form.
    pub(crate) fn compact(sorted: Vec<u32>, points: usize) -> Self {
        let list_bytes = sorted.len() * 4;
        let bit_bytes = bits::words_for(points) * 8;
        if bit_bytes < list_bytes {
            let mut words = vec![0u64; bits::words_for(points)];
            for &p in &sorted {
                bits::set(&mut words, p as usize);
            }
            StoredPoints::Bits { words, len: sorted.len() }
        } else {
            let mut sorted = sorted;
            sorted.shrink_to_fit();
            StoredPoints::Sorted(sorted)
        }
    }

    /// The set, borrowed.
    pub(crate) fn view(&self) -> PointSet<'_> {
        match self {
            StoredPoints::Sorted(list) => PointSet { repr: Repr::Sorted(list) },
            StoredPoints::Bits { words, len } => PointSet { repr: Repr::Bits { words, len: *len } },
        }
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            StoredPoints::Sorted(list) => list.capacity() * 4,
            StoredPoints::Bits { words, .. } => words.capacity() * 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_hold_the_same_set() {
        // 6 ids: 24 bytes as a list; 201 points take 32 bytes as bits, 128 points 16.
        let ids = vec![1u32, 5, 64, 65, 127, 200];
        let list = StoredPoints::compact(ids.clone(), 1000);
        let dense = StoredPoints::compact(ids.clone(), 201);
        assert!(matches!(dense, StoredPoints::Sorted(_)) && matches!(list, StoredPoints::Sorted(_)));
        let ids: Vec<u32> = ids.into_iter().filter(|&p| p < 128).collect();
        let list = StoredPoints::compact(ids.clone(), 1000);
        let dense = StoredPoints::compact(ids.clone(), 128);
        assert!(matches!(list, StoredPoints::Sorted(_)));
        assert!(matches!(dense, StoredPoints::Bits { .. }));
        for stored in [&list, &dense] {
            let set = stored.view();
            assert_eq!(set.len(), 5);
            assert_eq!(set.to_vec(), ids);
            assert_eq!(set.iter().len(), 5);
            assert!(set.contains(64) && set.contains(127) && !set.contains(2) && !set.contains(126));
        }
        assert_eq!(list.view(), dense.view());
        assert_eq!(dense.view(), [1, 5, 64, 65, 127]);
        assert_eq!(format!("{:?}", dense.view()), "[1, 5, 64, 65, 127]");
        assert!(dense.view().as_slice().is_none());
        assert_eq!(list.view().as_slice(), Some(&ids[..]));
    }
}
