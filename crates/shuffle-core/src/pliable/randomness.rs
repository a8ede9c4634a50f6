//! [`Randomness`], the constraint a pliable planner's assignment must keep, and the statistics
//! that measure how random the chosen assignments are ([`RandomnessStats`], per epoch, and
//! [`OwnerFrequencies`], over epochs).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// How much choice the master has over the next assignment: the randomness constraint of
/// pliable shuffling.
///
/// `Candidates(r)`: before planning, the master draws `r` uniformly random balanced
/// assignments, independently of the caches, the data and the model (the first is the
/// assignment today's schemes take as given). Each point's next owner must be one of its
/// owners in those `r` assignments, its *candidates*, and every worker gets a batch of the
/// usual balanced size. Whatever the planner does, a point goes to a given worker with
/// probability at most `1 - (1 - 1/n)^r <= r/n`, so its next owner keeps at least
/// `log2(n/r)` bits of min-entropy (of `log2 n`), and every worker's batch is a subset of a
/// uniformly random pool of about `r q/n` points: its share of any set of points defined by
/// the data is at most `r` times the fair share (see `docs/pliable.md` for what that means
/// for SGD).
///
/// `Candidates(1)` is fully random shuffling (no choice: today's schemes); `All` lets the
/// master pick any balanced assignment (most pliable: with enough cache every worker may keep
/// what it has, and nothing moves).
///
/// ```
/// use ubershuffle_core::pliable::Randomness;
/// let r: Randomness = "3".parse()?;
/// assert_eq!(r, Randomness::Candidates(3));
/// assert_eq!("all".parse::<Randomness>()?, Randomness::All);
/// assert!((Randomness::Candidates(1).guaranteed_min_entropy_bits(16) - 4.0).abs() < 1e-12);
/// assert_eq!(Randomness::All.guaranteed_min_entropy_bits(16), 0.0);
/// # Ok::<(), ubershuffle_core::pliable::ParseRandomnessError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Randomness {
    /// Each point's next owner is one of `r >= 1` candidates drawn uniformly at random.
    Candidates(usize),
    /// Any balanced assignment.
    All,
}

impl Randomness {
    /// Fully random shuffling: one candidate per point, the uniformly random assignment.
    pub const FULLY_RANDOM: Randomness = Randomness::Candidates(1);

    /// The default of the command line: four candidates per point (a batch holds at most four
    /// times its fair share of any set of points; `docs/pliable.md` and the `pliable`
    /// experiment say what it saves and what it costs SGD).
    pub const DEFAULT: Randomness = Randomness::Candidates(4);

    /// The candidates per point among `workers` workers (`All`: every worker).
    pub fn candidates(&self, workers: usize) -> usize {
        match *self {
            Randomness::Candidates(r) => r.min(workers),
            Randomness::All => workers,
        }
    }

    /// The min-entropy in bits that every point's next owner keeps whatever the planner does:
    /// `-log2(1 - (1 - 1/n)^r)` for `r` candidates among `n` workers (`log2 n` for one,
    /// about `log2(n/r)` for few), 0 for `All`.
    pub fn guaranteed_min_entropy_bits(&self, workers: usize) -> f64 {
        match *self {
            Randomness::Candidates(r) if workers > 0 => {
                let n = workers as f64;
                let reach = 1.0 - (1.0 - 1.0 / n).powi(r.min(i32::MAX as usize) as i32);
                (-reach.log2()).max(0.0)
            }
            _ => 0.0,
        }
    }

    /// The largest share of any set of points a worker's batch can hold, relative to the fair
    /// share `1/n`, in expectation over the draw of the candidates: `r` (`n` for `All`).
    pub fn density_bound(&self, workers: usize) -> usize {
        self.candidates(workers)
    }
}

impl Default for Randomness {
    fn default() -> Self {
        Randomness::DEFAULT
    }
}

impl fmt::Display for Randomness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Randomness::Candidates(r) => write!(f, "{r}"),
            Randomness::All => f.write_str("all"),
        }
    }
}

impl Serialize for Randomness {
    /// As the command line spells it: a number, or `"all"`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Randomness {
    /// As [`Serialize`] writes it (a number or `"all"`), or a bare number.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Form {
            Number(usize),
            Text(String),
        }
        match Form::deserialize(deserializer)? {
            Form::Number(r) => r.to_string().parse(),
            Form::Text(text) => text.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// A `--candidates` value that is neither a positive number nor `all`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("candidates must be a positive number of workers or 'all', got '{0}'")]
pub struct ParseRandomnessError(pub String);

impl FromStr for Randomness {
    type Err = ParseRandomnessError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "all" | "any" => Ok(Randomness::All),
            t => match t.parse::<usize>() {
                Ok(r) if r >= 1 => Ok(Randomness::Candidates(r)),
                _ => Err(ParseRandomnessError(s.to_string())),
            },
        }
    }
}

/// How random one epoch's assignment is, measured on the assignment itself.
///
/// The marginal of a balanced assignment is always uniform (every worker gets `q/n` points),
/// so the statistics compare each point's new owner with where the point was:
/// - `owner_entropy_bits`: the conditional entropy `H(next owner | previous owner)`, by the
///   plug-in estimate over the `n x n` table of moves (uniform shuffling: close to
///   `log2 n`, a little below it from the finite sample; no shuffling: 0);
/// - `stay_fraction`: the points that stayed with their previous owner (uniform: `1/n`);
/// - `cached_fraction`: the points given to a worker that already caches them (uniform:
///   about the storage ratio; a pliable planner raises it, since those cost nothing).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RandomnessStats {
    /// `H(next owner | previous owner)` in bits, when the previous owners are known.
    pub owner_entropy_bits: Option<f64>,
    /// `log2 n`: the entropy of a uniformly random owner.
    pub uniform_entropy_bits: f64,
    /// Points whose owner did not change, as a fraction of all, when known.
    pub stay_fraction: Option<f64>,
    /// Points assigned to a worker caching them, as a fraction of all.
    pub cached_fraction: f64,
}

impl RandomnessStats {
    /// Measures the assignment `next` (the owner of every point) of `workers` workers against
    /// the `previous` owners (when known); `cached(point, owner)` says whether the owner
    /// caches the point.
    pub fn measure(
        workers: usize,
        next: &[u32],
        previous: Option<&[u32]>,
        cached: impl Fn(u32, usize) -> bool,
    ) -> Self {
        let q = next.len().max(1) as f64;
        let cached_count = next.iter().enumerate().filter(|&(p, &w)| cached(p as u32, w as usize)).count();
        let (owner_entropy_bits, stay_fraction) = match previous.filter(|p| p.len() == next.len()) {
            Some(previous) => {
                let mut moves = vec![0u64; workers * workers];
                let mut stayed = 0usize;
                for (&to, &from) in next.iter().zip(previous) {
                    let (to, from) = (to as usize, from as usize);
                    if to < workers && from < workers {
                        moves[from * workers + to] += 1;
                        stayed += usize::from(to == from);
                    }
                }
                (Some(conditional_entropy_bits(&moves, workers)), Some(stayed as f64 / q))
            }
            None => (None, None),
        };
        RandomnessStats {
            owner_entropy_bits,
            uniform_entropy_bits: (workers.max(1) as f64).log2(),
            stay_fraction,
            cached_fraction: cached_count as f64 / q,
        }
    }
}

/// `H(column | row)` in bits of a `k x k` table of counts (plug-in).
fn conditional_entropy_bits(table: &[u64], k: usize) -> f64 {
    let total: u64 = table.iter().sum();
    if total == 0 || k == 0 {
        return 0.0;
    }
    let mut h = 0.0;
    for row in table.chunks_exact(k) {
        let n: u64 = row.iter().sum();
        if n == 0 {
            continue;
        }
        let row_h: f64 = row
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n as f64;
                -p * p.log2()
            })
            .sum();
        h += n as f64 / total as f64 * row_h;
    }
    h
}

/// How often every point went to every worker over a run's epochs, and its chi-square
/// against uniform assignment.
///
/// Under uniformly random shuffling each point's owner is uniform and independent across
/// epochs, so `sum_w (N_pw - E/n)^2 / (E/n)` over the `n` workers has mean `n - 1` for every
/// point after `E` epochs, whatever `E`; [`OwnerFrequencies::chi_square_per_df`] divides the
/// sum over points by `q (n - 1)`, so it is about 1 under uniform shuffling and grows as
/// points keep returning to the same workers. Counts are 16-bit (saturating), `q n` of them.
///
/// ```
/// use ubershuffle_core::pliable::OwnerFrequencies;
/// let mut f = OwnerFrequencies::new(2, 2);
/// f.record(&[0, 1]);
/// f.record(&[0, 1]); // the same owners twice: far from uniform
/// assert_eq!(f.epochs(), 2);
/// assert!(f.chi_square_per_df() > 1.5);
/// ```
#[derive(Clone, Debug)]
pub struct OwnerFrequencies {
    workers: usize,
    counts: Vec<u16>,
    epochs: u64,
}

impl OwnerFrequencies {
    /// No epoch recorded yet, for `points` points and `workers` workers.
    pub fn new(points: usize, workers: usize) -> Self {
        OwnerFrequencies { workers, counts: vec![0; points * workers], epochs: 0 }
    }

    /// Records one epoch's owners (`owners[p]` the worker of point `p`; others are ignored).
    pub fn record(&mut self, owners: &[u32]) {
        for (p, &w) in owners.iter().enumerate() {
            let w = w as usize;
            if w < self.workers
                && let Some(c) = self.counts.get_mut(p * self.workers + w)
            {
                *c = c.saturating_add(1);
            }
        }
        self.epochs += 1;
    }

    /// Epochs recorded.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// The chi-square statistic against uniform assignment divided by its degrees of freedom
    /// `q (n - 1)`: about 1 under uniform shuffling (NaN before any epoch or with one worker).
    pub fn chi_square_per_df(&self) -> f64 {
        let n = self.workers;
        if self.epochs == 0 || n < 2 {
            return f64::NAN;
        }
        let expected = self.epochs as f64 / n as f64;
        let points = self.counts.len() / n;
        let chi: f64 = self
            .counts
            .iter()
            .map(|&c| {
                let d = f64::from(c) - expected;
                d * d / expected
            })
            .sum();
        chi / (points * (n - 1)).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{seeded, uniform_below};

    #[test]
    fn parse_and_print() {
        assert_eq!("1".parse::<Randomness>().unwrap(), Randomness::FULLY_RANDOM);
        assert_eq!(" all ".parse::<Randomness>().unwrap(), Randomness::All);
        assert!("0".parse::<Randomness>().is_err());
        let e = "x".parse::<Randomness>().unwrap_err();
        assert_eq!(e.to_string(), "candidates must be a positive number of workers or 'all', got 'x'");
        assert_eq!(Randomness::Candidates(4).to_string(), "4");
        assert_eq!(Randomness::All.to_string(), "all");
    }

    #[test]
    fn guarantees_shrink_with_the_candidates() {
        let n = 20;
        let bits: Vec<f64> =
            (1..=n).map(|r| Randomness::Candidates(r).guaranteed_min_entropy_bits(n)).collect();
        assert!((bits[0] - (20f64).log2()).abs() < 1e-12);
        assert!(bits.windows(2).all(|w| w[1] < w[0]));
        // About log2(n / r) for few candidates.
        assert!((bits[1] - (10f64).log2()).abs() < 0.1);
        assert_eq!(Randomness::Candidates(50).candidates(20), 20);
    }

    #[test]
    fn entropy_of_staying_and_of_uniform_moves() {
        let n = 4;
        let previous: Vec<u32> = (0..4000).map(|p| (p % n) as u32).collect();
        let still = RandomnessStats::measure(n, &previous, Some(&previous), |_, _| true);
        assert_eq!(still.owner_entropy_bits, Some(0.0));
        assert_eq!(still.stay_fraction, Some(1.0));
        assert_eq!(still.cached_fraction, 1.0);
        let mut rng = seeded(3);
        let moved: Vec<u32> = (0..4000).map(|_| uniform_below(&mut rng, n as u64) as u32).collect();
        let random = RandomnessStats::measure(n, &moved, Some(&previous), |_, _| false);
        let h = random.owner_entropy_bits.unwrap();
        assert!(h > 1.98 && h <= 2.0, "{h}");
        assert!((random.stay_fraction.unwrap() - 0.25).abs() < 0.03);
        assert_eq!(random.cached_fraction, 0.0);
        assert_eq!(RandomnessStats::measure(n, &moved, None, |_, _| false).owner_entropy_bits, None);
    }

    #[test]
    fn chi_square_is_near_one_under_uniform_owners() {
        let (q, n) = (2000, 5);
        let mut f = OwnerFrequencies::new(q, n);
        assert!(f.chi_square_per_df().is_nan());
        let mut rng = seeded(1);
        for _ in 0..6 {
            let owners: Vec<u32> = (0..q).map(|_| uniform_below(&mut rng, n as u64) as u32).collect();
            f.record(&owners);
        }
        let chi = f.chi_square_per_df();
        assert!((chi - 1.0).abs() < 0.05, "{chi}");
        let mut fixed = OwnerFrequencies::new(q, n);
        let owners: Vec<u32> = (0..q).map(|p| (p % n) as u32).collect();
        for _ in 0..6 {
            fixed.record(&owners);
        }
        assert!(fixed.chi_square_per_df() > 5.0);
    }
}
