//! [`Fp`]: the prime field GF(p) for the Mersenne prime p = 2^31 - 1, in which the matrices of
//! the map-shuffle-reduce task and every intermediate value live.
//!
//! Why this prime: products of two elements fit in a `u64`, reduction is two shifts and adds,
//! and p is far above any number of coded rows the schemes use (a Vandermonde code needs
//! distinct evaluation points, one per coded row), so MDS decoding never runs out of points.

use std::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use ubershuffle_core::rng::{SeededRng, uniform_below};

/// The field's modulus, the Mersenne prime 2^31 - 1.
pub const MODULUS: u32 = (1 << 31) - 1;

/// An element of GF(2^31 - 1), always stored reduced (`0 <= value < MODULUS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fp(u32);

/// Reduces any `u64` modulo 2^31 - 1 (two folds of the high bits, then one conditional subtraction).
fn reduce(x: u64) -> u32 {
    let p = u64::from(MODULUS);
    let x = (x & p) + (x >> 31);
    let x = (x & p) + (x >> 31);
    (if x >= p { x - p } else { x }) as u32
}

impl Fp {
    /// Zero.
    pub const ZERO: Fp = Fp(0);
    /// One.
    pub const ONE: Fp = Fp(1);

    /// The element congruent to `value`.
    pub fn new(value: u64) -> Fp {
        Fp(reduce(value))
    }

    /// The element congruent to a wide accumulator (`2^64 = 4 mod p`, so `hi 2^64 + lo = 4 hi + lo`).
    pub fn from_wide(value: u128) -> Fp {
        Fp::new((value >> 64) as u64) * Fp(4) + Fp::new(value as u64)
    }

    /// The reduced representative in `0..MODULUS`.
    pub fn value(self) -> u32 {
        self.0
    }

    /// `self` to the power `exponent` (square and multiply).
    pub fn pow(self, mut exponent: u64) -> Fp {
        let (mut base, mut acc) = (self, Fp::ONE);
        while exponent > 0 {
            if exponent & 1 == 1 {
                acc *= base;
            }
            base *= base;
            exponent >>= 1;
        }
        acc
    }

    /// The multiplicative inverse (Fermat: `self^(p-2)`), or `None` for zero.
    pub fn inverse(self) -> Option<Fp> {
        (self.0 != 0).then(|| self.pow(u64::from(MODULUS) - 2))
    }

    /// A uniformly random element drawn from `rng`.
    pub fn random(rng: &mut SeededRng) -> Fp {
        Fp(uniform_below(rng, u64::from(MODULUS)) as u32)
    }
}

/// Replaces every element of `values` by its inverse with one field inversion and three
/// multiplications per element (Montgomery's trick). Returns `false`, leaving `values`
/// unchanged, if any element is zero.
pub fn batch_inverse(values: &mut [Fp]) -> bool {
    let mut prefix = Vec::with_capacity(values.len());
    let mut acc = Fp::ONE;
    for &v in values.iter() {
        prefix.push(acc);
        acc *= v;
    }
    let Some(mut inv) = acc.inverse() else { return false };
    for (v, before) in values.iter_mut().zip(prefix).rev() {
        let next = inv * *v;
        *v = inv * before;
        inv = next;
    }
    true
}

impl Add for Fp {
    type Output = Fp;
    fn add(self, rhs: Fp) -> Fp {
        let s = self.0 + rhs.0; // < 2^32: both are below 2^31
        Fp(if s >= MODULUS { s - MODULUS } else { s })
    }
}

impl Sub for Fp {
    type Output = Fp;
    fn sub(self, rhs: Fp) -> Fp {
        Fp(if self.0 >= rhs.0 { self.0 - rhs.0 } else { self.0 + MODULUS - rhs.0 })
    }
}

impl Neg for Fp {
    type Output = Fp;
    fn neg(self) -> Fp {
        Fp::ZERO - self
    }
}

impl Mul for Fp {
    type Output = Fp;
    fn mul(self, rhs: Fp) -> Fp {
        Fp(reduce(u64::from(self.0) * u64::from(rhs.0)))
    }
}

impl AddAssign for Fp {
    fn add_assign(&mut self, rhs: Fp) {
        *self = *self + rhs;
    }
}

impl SubAssign for Fp {
    fn sub_assign(&mut self, rhs: Fp) {
        *self = *self - rhs;
    }
}

impl MulAssign for Fp {
    fn mul_assign(&mut self, rhs: Fp) {
        *self = *self * rhs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::seeded;

    #[test]
    fn arithmetic_agrees_with_u128_modular_arithmetic() {
        let p = u128::from(MODULUS);
        let mut rng = seeded(11);
        let edge = [0, 1, 2, MODULUS - 2, MODULUS - 1];
        let mut values: Vec<Fp> = edge.iter().map(|&v| Fp(v)).collect();
        values.extend((0..200).map(|_| Fp::random(&mut rng)));
        for &a in &values {
            for &b in values.iter().take(20) {
                let (x, y) = (u128::from(a.value()), u128::from(b.value()));
                assert_eq!(u128::from((a * b).value()), x * y % p);
                assert_eq!(u128::from((a + b).value()), (x + y) % p);
                assert_eq!(u128::from((a - b).value()), (x + p - y) % p);
            }
        }
        assert_eq!(Fp::new(u64::MAX).value() as u128, u128::from(u64::MAX) % p);
        for wide in [0, 1, u128::MAX, u128::MAX / 3, 1u128 << 64, (1u128 << 64) - 1] {
            assert_eq!(u128::from(Fp::from_wide(wide).value()), wide % p);
        }
    }

    #[test]
    fn inverses() {
        assert_eq!(Fp::ZERO.inverse(), None);
        let mut rng = seeded(12);
        let mut values: Vec<Fp> = (0..50).map(|_| Fp::random(&mut rng)).filter(|v| *v != Fp::ZERO).collect();
        let originals = values.clone();
        assert!(batch_inverse(&mut values));
        for (v, inv) in originals.iter().zip(&values) {
            assert_eq!(*v * *inv, Fp::ONE);
            assert_eq!(v.inverse(), Some(*inv));
        }
        let mut with_zero = vec![Fp::ONE, Fp::ZERO];
        assert!(!batch_inverse(&mut with_zero));
        assert_eq!(with_zero, vec![Fp::ONE, Fp::ZERO]);
    }
}
