//! Enumerating the subsets of a given size of a small worker set, without allocating.

/// Calls `f(S)` for every `S ⊆ set` with `|S| = size`, in lexicographic order of the chosen
/// positions (the mask is updated incrementally, amortised O(1) per subset), until `f` returns
/// false. Returns how many subsets it visited.
pub(crate) fn for_each_combination(set: u128, size: usize, mut f: impl FnMut(u128) -> bool) -> u64 {
    let mut positions = [0u8; 128];
    let mut m = 0;
    let mut rest = set;
    while rest != 0 {
        positions[m] = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        m += 1;
    }
    if size > m {
        return 0;
    }
    let bit = |k: usize| 1u128 << positions[k];
    let mut combo = [0u8; 128];
    let mut mask = 0u128;
    for (i, slot) in combo.iter_mut().enumerate().take(size) {
        *slot = i as u8;
        mask |= bit(i);
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
            mask &= !bit(c as usize);
        }
        combo[i] += 1;
        mask |= bit(combo[i] as usize);
        for j in i + 1..size {
            combo[j] = combo[j - 1] + 1;
            mask |= bit(combo[j] as usize);
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
