//! [`PaperSetting`]: the shuffling model of Song, Fragouli and Zhao, "A pliable index coding
//! approach to data shuffling" (arXiv 1701.05540): `m` messages, `n` workers each caching `s`
//! of them, and every worker satisfied by any messages it does not have.
//!
//! The paper's text was not available to this project (only its abstract); the setting is
//! reconstructed from it and from pliable index coding (Brahma and Fragouli; Song and
//! Fragouli), and the choices are stated in `docs/pliable.md`: caches are uniformly random
//! `s`-subsets, drawn independently per worker (the random side-information graphs of pliable
//! index coding); the data-shuffling constraints are that every message goes to exactly one
//! worker, batches are balanced, and every message a worker gets is new to it.

use crate::ShuffleInstance;
use crate::pliable_assigner::Assigner;
use crate::rng::{partial_shuffle, seeded_stream};
use ubershuffle_core::pliable::{CacherBits, Menu};
use ubershuffle_core::pliable::{PliableError, PliableRequest, Randomness};

/// The paper's setting: `messages` messages (`m`), `workers` workers (`n`), each caching
/// `cache` messages (`s`) drawn uniformly at random, every message to go to one worker that
/// does not cache it, balanced batches of `m/n`.
///
/// ```
/// use ubershuffle_planners::PaperSetting;
/// let setting = PaperSetting { messages: 200, workers: 20, cache: 50, seed: 1 };
/// assert_eq!(setting.average_cachers(), 5.0);
/// let request = setting.request()?;
/// assert!(request.is_fresh());
/// # Ok::<(), ubershuffle_core::pliable::PliableError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaperSetting {
    /// Messages (data points) `m`.
    pub messages: usize,
    /// Workers `n`.
    pub workers: usize,
    /// Messages each worker caches, `s`.
    pub cache: usize,
    /// Seed of the caches and of the fully random fresh assignment.
    pub seed: u64,
}

impl PaperSetting {
    /// `ns/m`: the average number of workers caching a message, the order of the paper's gain.
    pub fn average_cachers(&self) -> f64 {
        self.workers as f64 * self.cache as f64 / self.messages.max(1) as f64
    }

    /// Draws the setting as a fresh pliable request with every worker a candidate. Its fully
    /// random assignment (what index coding is given) places the messages in a random order,
    /// each with a random one of the workers with the most room that do not cache it.
    pub fn request(&self) -> Result<PliableRequest, PliableError> {
        let PaperSetting { messages: m, workers: n, cache: s, seed } = *self;
        if n == 0 || m < n {
            return Err(PliableError::Setting(format!(
                "the paper's setting needs at least one worker and a message per worker ({m} messages, {n} workers)"
            )));
        }
        if s >= m {
            return Err(PliableError::Setting(format!(
                "cache of {s} messages out of {m}: a worker would have nothing new to get"
            )));
        }
        let mut rng = seeded_stream(seed, 0);
        let all: Vec<u32> = (0..m as u32).collect();
        let caches: Vec<Vec<u32>> = (0..n)
            .map(|_| {
                let mut ids = all.clone();
                partial_shuffle(&mut rng, &mut ids, s);
                ids.truncate(s);
                ids
            })
            .collect();
        let (base, extra) = (m / n, m % n);
        let sizes: Vec<usize> = (0..n).map(|w| base + usize::from(w < extra)).collect();
        // Placeholder batches (the first sizes[w] messages each): only the caches are read.
        let mut start = 0u32;
        let blocks: Vec<Vec<u32>> = sizes
            .iter()
            .map(|&k| {
                let b: Vec<u32> = (start..start + k as u32).collect();
                start += k as u32;
                b
            })
            .collect();
        let shell = ShuffleInstance::new(n, m, caches, blocks)?;
        let cachers = CacherBits::of(&shell);
        let menu =
            Menu { workers: n, sizes, cachers: &cachers, layers: Vec::new(), fresh: true, previous: None };
        let (batches, _) = Assigner::new(&menu).finish(&mut rng).map_err(|reason| {
            PliableError::Setting(format!("no balanced assignment of new messages exists here: {reason}"))
        })?;
        let inst = shell.with_assignment(batches)?;
        PliableRequest::new(inst, Randomness::All, &mut rng)?.fresh()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_have_the_size_asked_and_batches_are_new() {
        let setting = PaperSetting { messages: 120, workers: 12, cache: 30, seed: 4 };
        let request = setting.request().unwrap();
        let inst = request.fully_random();
        for w in 0..12 {
            assert_eq!(inst.cache(w).len(), 30);
            assert_eq!(inst.assignment(w).len(), 10);
            assert!(inst.assignment(w).iter().all(|p| !inst.cache(w).contains(p)));
        }
        assert_eq!(inst.uncoded_transmissions(), 120);
        assert_eq!(request.fully_random(), setting.request().unwrap().fully_random());
    }

    #[test]
    fn impossible_settings_say_why() {
        let e = PaperSetting { messages: 5, workers: 8, cache: 1, seed: 0 }.request().unwrap_err();
        assert!(e.to_string().contains("a message per worker"), "{e}");
        let e = PaperSetting { messages: 50, workers: 5, cache: 50, seed: 0 }.request().unwrap_err();
        assert!(e.to_string().contains("nothing new"), "{e}");
    }
}
