//! [`MaskIndex`]: finds the table of a worker set in constant time.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The most workers for which the index is a dense array of `2^n` slots (16 MiB at 22).
const DENSE_MAX_WORKERS: usize = 22;

/// Marks a free slot of the dense array.
const ABSENT: u32 = u32::MAX;

/// A map from worker-set masks to table ids: a dense array over all `2^n` masks for small `n`
/// (the subset searches of the UberShuffle planners probe it millions of times), a hash map
/// with a cheap multiplicative hash above that.
#[derive(Clone, Debug)]
pub(crate) enum MaskIndex {
    /// Slot `mask` holds the id, or [`ABSENT`].
    Dense(Vec<u32>),
    /// Masks of more than [`DENSE_MAX_WORKERS`] workers.
    Hashed(HashMap<u128, u32, BuildHasherDefault<MaskHasher>>),
}

impl MaskIndex {
    /// An empty index for masks of `workers` workers.
    pub(crate) fn new(workers: usize) -> Self {
        if workers <= DENSE_MAX_WORKERS {
            MaskIndex::Dense(vec![ABSENT; 1 << workers])
        } else {
            MaskIndex::Hashed(HashMap::default())
        }
    }

    /// The id stored for `mask`.
    #[inline]
    pub(crate) fn get(&self, mask: u128) -> Option<u32> {
        match self {
            MaskIndex::Dense(slots) => match slots[mask as usize] {
                ABSENT => None,
                id => Some(id),
            },
            MaskIndex::Hashed(map) => map.get(&mask).copied(),
        }
    }

    /// Stores `id` for `mask`.
    pub(crate) fn insert(&mut self, mask: u128, id: u32) {
        match self {
            MaskIndex::Dense(slots) => slots[mask as usize] = id,
            MaskIndex::Hashed(map) => {
                map.insert(mask, id);
            }
        }
    }
}

/// A fast hash for 128-bit masks (a multiply-xorshift mix; not for untrusted keys, but the
/// keys are worker sets of the instance, whose collisions cost time, never correctness).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MaskHasher(u64);

impl Hasher for MaskHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x1000_0000_01B3);
        }
    }

    fn write_u128(&mut self, value: u128) {
        let mixed = (value as u64) ^ ((value >> 64) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        self.0 = (self.0 ^ mixed).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_hashed_agree() {
        let mut dense = MaskIndex::new(10);
        let mut hashed = MaskIndex::new(40);
        for (id, mask) in [3u128, 1000, 17, 512].into_iter().enumerate() {
            dense.insert(mask, id as u32);
            hashed.insert(mask, id as u32);
        }
        for mask in 0..1024u128 {
            assert_eq!(dense.get(mask), hashed.get(mask));
        }
        assert_eq!(hashed.get(1 << 39), None);
        hashed.insert(1 << 39, 9);
        assert_eq!(hashed.get(1 << 39), Some(9));
    }
}
