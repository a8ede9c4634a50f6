//! Bitsets as slices of 64-bit words: the one implementation behind [`crate::WorkerSet`],
//! compact caches ([`crate::PointSet`]) and the request index of the packing planners.

/// Words needed for `bits` bits.
#[inline]
pub const fn words_for(bits: usize) -> usize {
    bits.div_ceil(64)
}

/// Whether bit `i` is set (false past the end).
#[inline]
pub fn get(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

/// Sets bit `i` (which must lie inside `words`).
#[inline]
pub fn set(words: &mut [u64], i: usize) {
    words[i / 64] |= 1 << (i % 64);
}

/// Clears bit `i` (which must lie inside `words`).
#[inline]
pub fn clear(words: &mut [u64], i: usize) {
    words[i / 64] &= !(1 << (i % 64));
}

/// The number of set bits.
#[inline]
pub fn count(words: &[u64]) -> usize {
    words.iter().map(|w| w.count_ones() as usize).sum()
}

/// The number of set bits among bits `range` (which must lie inside `words`).
pub fn count_range(words: &[u64], range: std::ops::Range<usize>) -> usize {
    if range.start >= range.end {
        return 0;
    }
    let (first, last) = (range.start / 64, (range.end - 1) / 64);
    let low = u64::MAX << (range.start % 64);
    let high = u64::MAX >> (63 - (range.end - 1) % 64);
    if first == last {
        return (words[first] & low & high).count_ones() as usize;
    }
    (words[first] & low).count_ones() as usize
        + count(&words[first + 1..last])
        + (words[last] & high).count_ones() as usize
}

/// `|a ∩ b|` over the common length.
#[inline]
pub fn and_count(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).map(|(x, y)| (x & y).count_ones() as usize).sum()
}

/// Whether every bit of `a` is set in `b` (bits of `a` past `b`'s end must be clear).
#[inline]
pub fn is_subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().enumerate().all(|(k, x)| x & !b.get(k).copied().unwrap_or(0) == 0)
}

/// The set bits in increasing order.
#[derive(Clone, Debug)]
pub struct Ones<'a> {
    words: &'a [u64],
    index: usize,
    current: u64,
}

impl<'a> Ones<'a> {
    /// The set bits of `words`.
    pub fn new(words: &'a [u64]) -> Self {
        Ones { words, index: 0, current: words.first().copied().unwrap_or(0) }
    }
}

impl Iterator for Ones<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.current == 0 {
            self.index += 1;
            self.current = *self.words.get(self.index)?;
        }
        let bit = self.current.trailing_zeros() as usize;
        self.current &= self.current - 1;
        Some(self.index * 64 + bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_operations() {
        let mut a = vec![0u64; words_for(130)];
        assert_eq!(a.len(), 3);
        for i in [0, 63, 64, 129] {
            set(&mut a, i);
        }
        assert!(get(&a, 63) && get(&a, 129) && !get(&a, 1) && !get(&a, 5000));
        assert_eq!(Ones::new(&a).collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        assert_eq!(count(&a), 4);
        let mut b = a.clone();
        clear(&mut b, 63);
        assert!(is_subset(&b, &a) && !is_subset(&a, &b));
        assert_eq!(and_count(&a, &b), 3);
        assert!(is_subset(&[1], &[1, 0]) && !is_subset(&[0, 1], &[1]));
        assert_eq!(Ones::new(&[]).count(), 0);
        for (start, end) in [(0, 130), (1, 64), (63, 65), (64, 64), (5, 6), (0, 0), (100, 129)] {
            let expected = (start..end).filter(|&i| get(&a, i)).count();
            assert_eq!(count_range(&a, start..end), expected, "{start}..{end}");
        }
    }
}
