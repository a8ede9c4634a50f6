//! Enumerating the subsets of a given size of a small worker set, without allocating.

/// Calls `f(S)` for every `S ⊆ set` with `|S| = size`, in lexicographic order of the chosen
/// positions (the mask is updated incrementally, amortised O(1) per subset), until `f` returns
/// false. Returns how many subsets it visited.
///
/// Sets within the low 64 bits (every instance the subset searches reach) are enumerated in
/// 64-bit arithmetic, which takes fewer instructions than 128-bit.
pub(crate) fn for_each_combination(set: u128, size: usize, mut f: impl FnMut(u128) -> bool) -> u64 {
    match u64::try_from(set) {
        Ok(narrow) => combinations_in(narrow, size, |s| f(u128::from(s))),
        Err(_) => combinations_in(set, size, f),
    }
}

/// The masks [`combinations_in`] works with.
trait Bits:
    Copy + Default + std::ops::BitOr<Output = Self> + std::ops::BitAnd<Output = Self> + PartialEq
{
    /// The width in bits.
    const WIDTH: usize;
    /// The mask with only bit `i` set.
    fn bit(i: u32) -> Self;
    /// The lowest set bit's position.
    fn lowest(self) -> u32;
    /// The mask without its lowest set bit.
    fn without_lowest(self) -> Self;
    /// The mask without the bits of `other`.
    fn minus(self, other: Self) -> Self;
}

macro_rules! bits_for {
    ($t:ty) => {
        impl Bits for $t {
            const WIDTH: usize = <$t>::BITS as usize;
            #[inline]
            fn bit(i: u32) -> Self {
                1 << i
            }
            #[inline]
            fn lowest(self) -> u32 {
                self.trailing_zeros()
            }
            #[inline]
            fn without_lowest(self) -> Self {
                self & (self - 1)
            }
            #[inline]
            fn minus(self, other: Self) -> Self {
                self & !other
            }
        }
    };
}
bits_for!(u64);
bits_for!(u128);

/// [`for_each_combination`] in the width of `B`: the bit of each position is computed once.
#[inline]
fn combinations_in<B: Bits>(set: B, size: usize, mut f: impl FnMut(B) -> bool) -> u64 {
    let mut bits = [B::default(); 128];
    let mut m = 0;
    let mut rest = set;
    while rest != B::default() {
        bits[m] = B::bit(rest.lowest());
        rest = rest.without_lowest();
        m += 1;
    }
    debug_assert!(m <= B::WIDTH);
    if size > m {
        return 0;
    }
    let mut combo = [0u8; 128];
    let mut mask = B::default();
    for (i, slot) in combo.iter_mut().enumerate().take(size) {
        *slot = i as u8;
        mask = mask | bits[i];
    }
    let mut visited = 0u64;
    loop {
        visited += 1;
        if !f(mask) {
            return visited;
        }
        // The rightmost position that can still move right.
        let mut i = size;
        loop {
            if i == 0 {
                return visited;
            }
            i -= 1;
            if (combo[i] as usize) < m - size + i {
                break;
            }
        }
        for &c in &combo[i..size] {
            mask = mask.minus(bits[c as usize]);
        }
        combo[i] += 1;
        mask = mask | bits[combo[i] as usize];
        for j in i + 1..size {
            combo[j] = combo[j - 1] + 1;
            mask = mask | bits[combo[j] as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subset_of_each_size_once() {
        let set = 0b1011_0101_1000u128 | 1 << 127;
        for size in 0..=7 {
            let mut seen = Vec::new();
            let visited = for_each_combination(set, size, |s| {
                seen.push(s);
                true
            });
            assert_eq!(visited as usize, seen.len());
            let expected: Vec<u128> = (0..1u128 << 12)
                .flat_map(|s| [s, s | 1 << 127])
                .filter(|&s| s & !set == 0 && s.count_ones() as usize == size)
                .collect();
            let mut expected = expected;
            expected.sort_unstable();
            seen.sort_unstable();
            assert_eq!(seen, expected, "size {size}");
        }
        assert_eq!(for_each_combination(0, 0, |_| true), 1);
        assert_eq!(for_each_combination(0b1111, 2, |s| s != 0b0101), 2);
    }
}
