//! An example `ubershuffle` plugin: the pairwise-XOR scheme, written as an ordinary
//! [`ShufflePlanner`] and exported in one line at the bottom of this file.
//!
//! Build it with `cargo build --release -p pairwise-xor-plugin` and run it with
//! `ubershuffle plan --plugin target/release/libpairwise_xor.so --workers 20 --points 100000 --alpha 0.4`.
//!
//! # The scheme
//!
//! If worker `i` needs point `p` and worker `j` caches it, while `j` needs point `p'` that `i`
//! caches, the one transmission `p XOR p'` serves both: `i` cancels `p'`, `j` cancels `p`. Every
//! such pair saves one transmission over uncoded; points left unpaired are unicast. Finding the
//! most pairs is a maximum matching; this planner finds a large one greedily:
//!
//! - bucket every needed point of `i` by each other worker `j` that caches it;
//! - within a bucket, put the least flexible points first (those cached by the fewest other
//!   workers, which have the fewest other chances to be paired), ties in random order;
//! - visit the worker pairs `{i, j}` round-robin in a random order, pairing one point of each
//!   side per visit, until no pair can be formed. Taking one pair per visit spreads each
//!   worker's points over all its partners instead of exhausting them on the first partner.
//!
//! At most half of the uncoded transmissions are saved (each XOR serves two workers), so on
//! instances where many points are cached widely, Lee et al.'s multi-point XORs can do better;
//! at finite `q` with uneven encoding tables this scheme often wins (see
//! `cargo xtask experiments plugins`).

use ubershuffle_plugin_api::shuffle_core::rng::shuffle;
use ubershuffle_plugin_api::shuffle_core::{
    Part, Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner,
};

/// The pairwise-XOR scheme (see the crate documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct PairwiseXor;

impl PairwiseXor {
    /// The scheme's name.
    pub const NAME: &'static str = "pairwise-xor";
    /// What the scheme does.
    pub const DESCRIPTION: &'static str =
        "XOR pairs of points two workers need from each other's caches, unicast the rest (plugin example)";
}

/// Marks a point no worker needs (its owner caches it already).
const NOT_NEEDED: u32 = u32::MAX;

impl ShufflePlanner for PairwiseXor {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let n = inst.workers();
        // needer[p]: the worker that needs p, or NOT_NEEDED.
        let mut needer = vec![NOT_NEEDED; inst.points()];
        for worker in 0..n {
            for p in inst.needs(worker) {
                needer[p as usize] = worker as u32;
            }
        }
        // buckets[i * n + j]: the points i needs that j caches; options[p]: how many buckets hold p.
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); n * n];
        let mut options = vec![0u32; inst.points()];
        for j in 0..n {
            for p in inst.cache(j) {
                let i = needer[p as usize];
                if i != NOT_NEEDED && i as usize != j {
                    buckets[i as usize * n + j].push(p);
                    options[p as usize] += 1;
                }
            }
        }
        for bucket in &mut buckets {
            shuffle(rng, bucket);
            bucket.sort_by_key(|&p| options[p as usize]); // stable: ties keep their random order
        }

        let mut pairs: Vec<(usize, usize)> = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).collect();
        let mut cursor = vec![0usize; n * n];
        let mut used = vec![false; inst.points()];
        // The next unused point of bucket `b`, skipping those paired elsewhere.
        let next = |b: usize, cursor: &mut [usize], used: &[bool]| -> Option<u32> {
            while let Some(&p) = buckets[b].get(cursor[b]) {
                if !used[p as usize] {
                    return Some(p);
                }
                cursor[b] += 1;
            }
            None
        };
        let mut plan = Plan::with_capacity(inst.uncoded_transmissions(), inst.uncoded_transmissions());
        while !pairs.is_empty() {
            shuffle(rng, &mut pairs);
            pairs.retain(|&(i, j)| {
                let (ij, ji) = (i * n + j, j * n + i);
                match (next(ij, &mut cursor, &used), next(ji, &mut cursor, &used)) {
                    (Some(p), Some(q)) => {
                        used[p as usize] = true;
                        used[q as usize] = true;
                        plan.push(&[Part::new(p, i), Part::new(q, j)]);
                        true
                    }
                    _ => false, // one side is exhausted for good
                }
            });
        }
        for worker in 0..n {
            for p in inst.needs(worker) {
                if !used[p as usize] {
                    plan.push(&[Part::new(p, worker)]);
                }
            }
        }
        Ok(plan)
    }
}

ubershuffle_plugin_api::export_planners!(PairwiseXor);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_plugin_api::shuffle_core::arbitrary_instance;
    use ubershuffle_plugin_api::shuffle_core::{GeneratorParams, seeded, verify};

    fn check(inst: &ShuffleInstance, seed: u64) -> usize {
        let plan = PairwiseXor.plan(inst, &mut seeded(seed)).unwrap();
        let report = verify(inst, &plan).unwrap();
        assert!(report.is_valid(), "{report:?}");
        assert!(plan.len() <= inst.uncoded_transmissions());
        assert!(2 * plan.len() >= inst.uncoded_transmissions(), "each XOR serves at most two workers");
        plan.len()
    }

    #[test]
    fn paper_example() {
        // Every needed point pairs up: 4 + 1 (workers 0 and 2), and 0, 3 with 5, 6 (workers 1
        // and 2): 3 transmissions, as UberShuffle sends in the paper's Example 3 (coded sends 4).
        for seed in 0..4 {
            assert_eq!(check(&ShuffleInstance::paper_example(), seed), 3);
        }
    }

    #[test]
    fn verifies_and_beats_uncoded_on_generated_instances() {
        for seed in 0..12 {
            let workers = 2 + (seed as usize % 11);
            let alpha = [0.2, 0.35, 0.5, 0.7][seed as usize % 4];
            let points = 300 + 97 * seed as usize;
            let Ok(params) = (GeneratorParams { workers, points, alpha, seed }).check() else { continue };
            let inst = params.generate();
            let sent = check(&inst, seed);
            assert!(sent < inst.uncoded_transmissions(), "n={workers} alpha={alpha}: {sent}");
        }
    }

    #[test]
    fn verifies_on_arbitrary_instances() {
        for seed in 0..10 {
            check(&arbitrary_instance(1 + seed as usize % 7, 50 + 13 * seed as usize, 0.3, seed), seed);
        }
    }

    #[test]
    fn pairs_nearly_everything_when_caches_are_large() {
        let inst =
            GeneratorParams { workers: 10, points: 5000, alpha: 0.4, seed: 3 }.check().unwrap().generate();
        let sent = check(&inst, 1);
        // A perfect matching would send half of uncoded; the greedy gets within a few percent.
        assert!((sent as f64) < 0.55 * inst.uncoded_transmissions() as f64, "{sent}");
    }

    #[test]
    fn deterministic_under_a_seed() {
        let inst =
            GeneratorParams { workers: 6, points: 600, alpha: 0.4, seed: 2 }.check().unwrap().generate();
        assert_eq!(
            PairwiseXor.plan(&inst, &mut seeded(9)).unwrap(),
            PairwiseXor.plan(&inst, &mut seeded(9)).unwrap()
        );
    }
}
