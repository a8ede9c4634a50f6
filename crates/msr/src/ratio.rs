//! [`Ratio`]: exact non-overflowing-or-error rational numbers for the closed-form loads, the
//! storage fraction mu and the code rates, so that "executed count = closed form" is checked
//! with `==`, not a tolerance.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use super::MsrError;

/// A rational number `num / den` in lowest terms with `den > 0`. Arithmetic is checked and
/// returns [`MsrError::Overflow`] instead of wrapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ratio {
    num: i128,
    den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    // Both magnitudes fit an i128 again unless both are i128::MIN, which no caller produces.
    super::combinatorics::gcd(a.unsigned_abs(), b.unsigned_abs()) as i128
}

impl Ratio {
    /// Zero.
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };
    /// One.
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };

    /// `num / den` in lowest terms; an error when `den` is zero.
    pub fn new(num: i128, den: i128) -> Result<Ratio, MsrError> {
        if den == 0 {
            return Err(MsrError::InvalidParameter("a fraction with denominator 0".into()));
        }
        let g = gcd(num, den).max(1);
        let sign = if den < 0 { -1 } else { 1 };
        Ok(Ratio { num: sign * num / g, den: sign * den / g })
    }

    /// The integer `n`.
    pub fn integer(n: i128) -> Ratio {
        Ratio { num: n, den: 1 }
    }

    /// The numerator (in lowest terms, carrying the sign).
    pub fn numer(self) -> i128 {
        self.num
    }

    /// The denominator (in lowest terms, positive).
    pub fn denom(self) -> i128 {
        self.den
    }

    /// Whether the value is an integer.
    pub fn is_integer(self) -> bool {
        self.den == 1
    }

    /// The largest integer not above the value.
    pub fn floor(self) -> i128 {
        self.num.div_euclid(self.den)
    }

    /// The nearest `f64`.
    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// `self + rhs`.
    pub fn plus(self, rhs: Ratio) -> Result<Ratio, MsrError> {
        let g = gcd(self.den, rhs.den);
        let (a, b) = (self.den / g, rhs.den / g);
        let num = self
            .num
            .checked_mul(b)
            .and_then(|x| rhs.num.checked_mul(a).and_then(|y| x.checked_add(y)))
            .ok_or(MsrError::Overflow)?;
        let den = self.den.checked_mul(b).ok_or(MsrError::Overflow)?;
        Ratio::new(num, den)
    }

    /// `self - rhs`.
    pub fn minus(self, rhs: Ratio) -> Result<Ratio, MsrError> {
        self.plus(Ratio { num: -rhs.num, den: rhs.den })
    }

    /// `self * rhs` (cross-reduced first, so only genuinely large results overflow).
    pub fn times(self, rhs: Ratio) -> Result<Ratio, MsrError> {
        let g1 = gcd(self.num, rhs.den).max(1);
        let g2 = gcd(rhs.num, self.den).max(1);
        let num = (self.num / g1).checked_mul(rhs.num / g2).ok_or(MsrError::Overflow)?;
        let den = (self.den / g2).checked_mul(rhs.den / g1).ok_or(MsrError::Overflow)?;
        Ratio::new(num, den)
    }

    /// `self / rhs`; an error when `rhs` is zero.
    pub fn over(self, rhs: Ratio) -> Result<Ratio, MsrError> {
        if rhs.num == 0 {
            return Err(MsrError::InvalidParameter("division by zero".into()));
        }
        self.times(Ratio { num: rhs.den * rhs.num.signum(), den: rhs.num.abs() })
    }

    /// The smaller of the two.
    pub fn min(self, other: Ratio) -> Ratio {
        if other < self { other } else { self }
    }
}

/// Compares `a/b` with `c/d` (`b, d > 0`) exactly without multiplying, by comparing integer
/// parts and then the reciprocals of the fractional parts (a continued-fraction expansion).
fn compare(a: i128, b: i128, c: i128, d: i128) -> Ordering {
    let (qa, qc) = (a.div_euclid(b), c.div_euclid(d));
    if qa != qc {
        return qa.cmp(&qc);
    }
    let (ra, rc) = (a - qa * b, c - qc * d);
    match (ra == 0, rc == 0) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => compare(d, rc, b, ra),
    }
}

impl Ord for Ratio {
    fn cmp(&self, other: &Ratio) -> Ordering {
        compare(self.num, self.den, other.num, other.den)
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Ratio) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 { write!(f, "{}", self.num) } else { write!(f, "{}/{}", self.num, self.den) }
    }
}

impl FromStr for Ratio {
    type Err = MsrError;

    /// Parses a non-negative fraction `a/b` or a decimal `0.25` (`.25`, `1`) exactly.
    fn from_str(text: &str) -> Result<Ratio, MsrError> {
        let bad = || MsrError::BadNumber { text: text.to_string() };
        let digits = |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
        let t = text.trim();
        if let Some((n, d)) = t.split_once('/') {
            let (n, d) = (n.trim(), d.trim());
            if !digits(n) || !digits(d) {
                return Err(bad());
            }
            let (n, d): (i128, i128) = (n.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
            return if d == 0 { Err(bad()) } else { Ratio::new(n, d) };
        }
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        if (int.is_empty() && frac.is_empty())
            || !(int.is_empty() || digits(int))
            || !(frac.is_empty() || digits(frac))
        {
            return Err(bad());
        }
        let int: i128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| bad())? };
        let scale = 10i128.pow(frac.len() as u32);
        let frac_value: i128 = if frac.is_empty() { 0 } else { frac.parse().map_err(|_| bad())? };
        Ratio::new(int * scale + frac_value, scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: i128, d: i128) -> Ratio {
        Ratio::new(n, d).unwrap()
    }

    #[test]
    fn parses_fractions_and_decimals_exactly() {
        assert_eq!("1/3".parse::<Ratio>().unwrap(), r(1, 3));
        assert_eq!(" 2/6 ".parse::<Ratio>().unwrap(), r(1, 3));
        assert_eq!("0.25".parse::<Ratio>().unwrap(), r(1, 4));
        assert_eq!(".5".parse::<Ratio>().unwrap(), r(1, 2));
        assert_eq!("1".parse::<Ratio>().unwrap(), Ratio::ONE);
        assert_eq!("0.3333".parse::<Ratio>().unwrap(), r(3333, 10000));
        for bad in ["", ".", "1/0", "-1/2", "a", "1/2/3", "1e-3", "0.5.5", "+1", "1/", "99999999999999999999"]
        {
            assert!(bad.parse::<Ratio>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn arithmetic_and_order() {
        assert_eq!(r(1, 2).plus(r(1, 3)).unwrap(), r(5, 6));
        assert_eq!(r(1, 2).minus(r(2, 3)).unwrap(), r(-1, 6));
        assert_eq!(r(3, 4).times(r(2, 9)).unwrap(), r(1, 6));
        assert_eq!(r(3, 4).over(r(-3, 8)).unwrap(), r(-2, 1));
        assert!(r(1, 3) < r(1, 2) && r(-1, 2) < r(1, 3) && r(7, 3) > r(2, 1));
        assert!(r(19, 60) < r(7, 20));
        assert_eq!(r(2, 6).cmp(&r(1, 3)), Ordering::Equal);
        assert_eq!(r(-7, 2).floor(), -4);
        assert_eq!(r(7, 20).to_string(), "7/20");
        assert_eq!(Ratio::integer(i128::MAX).plus(Ratio::ONE), Err(MsrError::Overflow));
        assert!(r(1, 2).over(Ratio::ZERO).is_err());
    }
}
