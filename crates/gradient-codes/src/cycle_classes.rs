//! Cycle classes of binary words (Johri et al., Section IV-B; Tavares, Allard and Shiva).
//!
//! The cycle class of a word `v` of length `n` is the set of its distinct cyclic shifts; its
//! order `e` (the class size) divides `n`. Non-straggler sets of a CRC code that are cyclic
//! shifts of each other have the same decoding error, so Theorem 2 sums over one
//! representative per class, weighted by the order.

/// One cycle class: its smallest member (as a mask, bit `i` = position `i`), weight, order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleClass {
    /// The representative: the numerically smallest cyclic shift.
    pub representative: u64,
    /// The number of ones.
    pub weight: usize,
    /// The number of distinct cyclic shifts (divides `n`).
    pub order: usize,
}

fn rotate(word: u64, n: usize) -> u64 {
    let full = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    ((word << 1) | (word >> (n - 1))) & full
}

/// Every cycle class of binary words of length `n` (`1 <= n <= 24`), by enumerating all `2^n`
/// words and keeping the smallest shift of each; sorted by weight, then representative.
///
/// # Panics
/// Panics if `n` is 0 or above 24 (a caller bug: the enumeration is exponential).
pub fn cycle_classes(n: usize) -> Vec<CycleClass> {
    assert!((1..=24).contains(&n), "cycle_classes enumerates 2^n words; n must be in 1..=24");
    let mut classes = Vec::new();
    for word in 0..1u64 << n {
        let mut shifted = word;
        let mut order = 0;
        let mut smallest = true;
        loop {
            shifted = rotate(shifted, n);
            order += 1;
            if shifted < word {
                smallest = false;
                break;
            }
            if shifted == word {
                break;
            }
        }
        if smallest {
            classes.push(CycleClass { representative: word, weight: word.count_ones() as usize, order });
        }
    }
    classes.sort_by_key(|c| (c.weight, c.representative));
    classes
}

/// Möbius function.
fn mobius(mut k: usize) -> i128 {
    let mut result = 1;
    let mut p = 2;
    while p * p <= k {
        if k.is_multiple_of(p) {
            k /= p;
            if k.is_multiple_of(p) {
                return 0;
            }
            result = -result;
        }
        p += 1;
    }
    if k > 1 { -result } else { result }
}

fn binomial(n: usize, k: usize) -> i128 {
    if k > n {
        return 0;
    }
    (0..k).fold(1i128, |acc, i| acc * (n - i) as i128 / (i as i128 + 1))
}

/// Johri et al. Lemma 1: the number `N(r, e)` of cycle classes of weight `r` and order `e`
/// among words of length `n`, the coefficient of `x^r` in
/// `R_e(x) = (1/e) sum_{d | e} mu(e/d) (1 + x^{n/d})^d`. Zero when `e` does not divide `n`.
pub fn cycle_class_count(n: usize, r: usize, e: usize) -> u64 {
    if e == 0 || n == 0 || !n.is_multiple_of(e) {
        return 0;
    }
    let mut total: i128 = 0;
    for d in (1..=e).filter(|d| e.is_multiple_of(*d)) {
        let step = n / d;
        if r.is_multiple_of(step) {
            total += mobius(e / d) * binomial(d, r / step);
        }
    }
    u64::try_from(total / e as i128).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_partition_all_words() {
        for n in 1..=10 {
            let classes = cycle_classes(n);
            let covered: usize = classes.iter().map(|c| c.order).sum();
            assert_eq!(covered, 1 << n, "n = {n}");
            assert!(classes.iter().all(|c| n % c.order == 0));
        }
        // n = 4: 0000, 0001, 0011, 0101, 0111, 1111.
        let four = cycle_classes(4);
        assert_eq!(four.len(), 6);
        assert_eq!(four.iter().find(|c| c.representative == 0b0101).map(|c| c.order), Some(2));
    }

    #[test]
    fn lemma1_counts_match_the_enumeration() {
        for n in 1..=12 {
            let classes = cycle_classes(n);
            for r in 0..=n {
                for e in 1..=n {
                    let enumerated = classes.iter().filter(|c| c.weight == r && c.order == e).count() as u64;
                    assert_eq!(cycle_class_count(n, r, e), enumerated, "n={n} r={r} e={e}");
                }
            }
        }
    }
}
