//! Counting and enumerating subsets of servers (as `u64` bit masks, server `k` = bit `k`):
//! binomial coefficients, the k-subsets of a set in colexicographic order, and a subset's rank
//! in that order (which names the repetition code's batch of rows stored at that subset).

/// `C(n, k)`, exact; 0 when `k > n`. Exact for `n <= 64` (the largest, `C(64, 32)`, is below 2^61).
pub fn binomial(n: usize, k: usize) -> u128 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * (n - i) as u128 / (i + 1) as u128;
    }
    c
}

/// The greatest common divisor.
pub fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The least common multiple (`lcm(0, x) = 0`), or `None` on overflow.
pub fn lcm(a: u128, b: u128) -> Option<u128> {
    if a == 0 || b == 0 {
        return Some(0);
    }
    (a / gcd(a, b)).checked_mul(b)
}

/// The members of `mask`, ascending.
pub fn members(mask: u64) -> Vec<usize> {
    let mut out = Vec::with_capacity(mask.count_ones() as usize);
    let mut m = mask;
    while m != 0 {
        out.push(m.trailing_zeros() as usize);
        m &= m - 1;
    }
    out
}

/// The rank of `subset` among the subsets of its size of `0..64` in colexicographic order
/// (the combinatorial number system: the sum of `C(s_i, i + 1)` over its sorted members `s_i`).
/// The subsets of `0..n` of one size get the ranks `0..C(n, size)`, in the order
/// [`subsets_of`] lists them for the full set `0..n`.
pub fn colex_rank(subset: u64) -> usize {
    members(subset).iter().enumerate().map(|(i, &s)| binomial(s, i + 1) as usize).sum()
}

/// The `k`-subsets of `set`, in colexicographic order (Gosper's hack over the positions of
/// `set`'s members, then scattered back onto those members).
pub fn subsets_of(set: u64, k: usize) -> impl Iterator<Item = u64> {
    let elements = members(set);
    let n = elements.len();
    let mut next: Option<u64> = if k > n {
        None
    } else if k == 0 {
        Some(0)
    } else {
        Some(if k == 64 { u64::MAX } else { (1u64 << k) - 1 })
    };
    std::iter::from_fn(move || {
        let current = next?;
        next = if current == 0 {
            None
        } else {
            let low = current & current.wrapping_neg();
            let ripple = current.wrapping_add(low);
            let following = (((ripple ^ current) >> 2) / low) | ripple;
            (ripple != 0 && (n == 64 || following < (1u64 << n))).then_some(following)
        };
        Some(members(current).iter().fold(0u64, |acc, &p| acc | 1u64 << elements[p]))
    })
}

/// The mask of the servers `0..n`.
pub fn all_servers(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomials() {
        assert_eq!(binomial(18, 6), 18_564);
        assert_eq!(binomial(4, 5), 0);
        assert_eq!(binomial(0, 0), 1);
        assert_eq!(binomial(64, 32), 1_832_624_140_942_590_534);
    }

    #[test]
    fn subsets_are_colex_ordered_and_ranked() {
        for n in 0..8 {
            for k in 0..=n + 1 {
                let subsets: Vec<u64> = subsets_of(all_servers(n), k).collect();
                assert_eq!(subsets.len() as u128, binomial(n, k), "n={n} k={k}");
                for (rank, &s) in subsets.iter().enumerate() {
                    assert_eq!(s.count_ones() as usize, k);
                    assert_eq!(colex_rank(s), rank);
                }
            }
        }
        let set = 0b1011_0010u64;
        let pairs: Vec<u64> = subsets_of(set, 2).collect();
        assert_eq!(pairs, vec![0b1_0010, 0b10_0010, 0b11_0000, 0b1000_0010, 0b1001_0000, 0b1010_0000]);
    }

    #[test]
    fn lcm_and_members() {
        assert_eq!(lcm(4, 6), Some(12));
        assert_eq!(lcm(u128::MAX, 2), None);
        assert_eq!(members(0b1010_0001), vec![0, 5, 7]);
    }
}
