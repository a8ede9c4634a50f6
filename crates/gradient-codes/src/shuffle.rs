//! [`RoleShuffle`]: which worker plays which row of the encoding matrix in an iteration.

use std::fmt;
use std::str::FromStr;

use ubershuffle_core::rng::{SeededRng, shuffle};

use super::GradientCodeError;

/// How the rows (roles) of the encoding matrix are assigned to workers each iteration, so that
/// persistently slow workers do not always block the same partitions (Johri et al., Section III;
/// their "shuffling the columns of B" in their transposed convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoleShuffle {
    /// Worker `w` always plays role `w`.
    None,
    /// Iteration `t`: worker `w` plays role `(w + t) mod n` (their Remark 1, pre-decided).
    Cyclic,
    /// Iteration `t`: a fresh uniformly random permutation drawn from the run's seeded RNG.
    Random,
}

impl RoleShuffle {
    /// Every shuffle, in table order.
    pub const ALL: [RoleShuffle; 3] = [RoleShuffle::None, RoleShuffle::Cyclic, RoleShuffle::Random];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RoleShuffle::None => "none",
            RoleShuffle::Cyclic => "cyclic",
            RoleShuffle::Random => "random",
        }
    }

    /// `roles[w]`: the role worker `w` plays in iteration `iteration` of an `n`-worker run.
    /// Only [`RoleShuffle::Random`] draws from `rng`.
    pub fn roles(self, workers: usize, iteration: usize, rng: &mut SeededRng) -> Vec<usize> {
        let mut roles: Vec<usize> = (0..workers).collect();
        match self {
            RoleShuffle::None => {}
            RoleShuffle::Cyclic => {
                for (w, role) in roles.iter_mut().enumerate() {
                    *role = (w + iteration) % workers;
                }
            }
            RoleShuffle::Random => shuffle(rng, &mut roles),
        }
        roles
    }
}

/// The roles played by the workers in `workers_mask` under `roles` (a mask of roles).
pub fn roles_mask(roles: &[usize], workers_mask: u64) -> u64 {
    roles.iter().enumerate().filter(|(w, _)| workers_mask >> w & 1 == 1).fold(0, |m, (_, &r)| m | 1 << r)
}

impl fmt::Display for RoleShuffle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RoleShuffle {
    type Err = GradientCodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RoleShuffle::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| GradientCodeError::UnknownShuffle(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::rng::seeded;

    #[test]
    fn roles_are_permutations() {
        let mut rng = seeded(1);
        assert_eq!(RoleShuffle::None.roles(4, 7, &mut rng), vec![0, 1, 2, 3]);
        assert_eq!(RoleShuffle::Cyclic.roles(4, 1, &mut rng), vec![1, 2, 3, 0]);
        assert_eq!(RoleShuffle::Cyclic.roles(4, 6, &mut rng), vec![2, 3, 0, 1]);
        let mut r = RoleShuffle::Random.roles(9, 0, &mut rng);
        r.sort_unstable();
        assert_eq!(r, (0..9).collect::<Vec<_>>());
        assert_eq!(roles_mask(&[2, 0, 1], 0b011), 0b101);
        assert_eq!("cyclic".parse::<RoleShuffle>(), Ok(RoleShuffle::Cyclic));
        assert!("sometimes".parse::<RoleShuffle>().is_err());
    }
}
