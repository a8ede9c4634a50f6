//! [`Schedule`]: where every rank's records are, epoch by epoch, as the engine reads it off the
//! sampler's epoch chain. The engine never draws epochs itself: the caller hands it the
//! schedule of the epoch it asks for (`ubershuffle.CodedShuffleSampler`'s core, or any chain a
//! Rust program keeps), and the engine steps a copy of it to deliver the next epoch ahead.

use std::time::Duration;

use ubershuffle_core::epoch_chain::{ChainParams, DrawnEpoch, EpochChain};
use ubershuffle_core::pliable::Randomness;
use ubershuffle_core::{PlannerOptions, ShufflePlanner};
use ubershuffle_planners::planner_by_name;

/// The next epoch's draw for a coded delivery: the draw, the scheme's planner and, for a
/// pliable scheme, its candidates.
pub type NextDraw = (DrawnEpoch, Box<dyn ShufflePlanner>, Option<Randomness>);

/// One epoch of an epoch chain, as the engine reads it (see the module's docs). Every rank of
/// a plane follows the same chain, so every rank computes the same schedule; the digests
/// check it.
pub trait Schedule: Send {
    /// The epoch.
    fn epoch(&self) -> u64;
    /// Every training rank's target this epoch, sorted: what it must hold while the epoch
    /// trains (its batch, and in store mode the rest of its cache).
    fn targets(&self) -> Vec<Vec<u32>>;
    /// Every training rank's batch this epoch, sorted.
    fn batches(&self) -> Vec<Vec<u32>>;
    /// A fingerprint of where the chain stands, equal on every rank that follows it.
    fn digest(&self) -> u64;
    /// Whether the next epoch starts a new chain (nothing is cached for it: a store sends its
    /// records whole).
    fn next_starts_a_chain(&self) -> bool;
    /// The schedule of the next epoch.
    fn stepped(&self) -> Result<Box<dyn Schedule>, String>;
    /// An owned copy of this schedule.
    fn boxed_copy(&self) -> Box<dyn Schedule>;
    /// The next epoch's draw, when it is a step of this chain (store mode plans it), its
    /// planner's search budget at most `most` when given.
    fn draw_next(&self, most: Option<Duration>) -> Result<Option<NextDraw>, String>;
}

/// A [`Schedule`] of a plain epoch chain (no resumption onto another world size, no pliable
/// scheme): what a Rust program that keeps its own sampler hands the engine. Epoch `e` is the
/// chain's `e`-th epoch, as `ubershuffle plan --policy ... --epochs` counts them.
#[derive(Clone, Debug)]
pub struct ChainSchedule {
    chain: EpochChain,
    epoch: u64,
    scheme: String,
}

impl ChainSchedule {
    /// Epoch 0 of the chain of `params`, its coded deliveries planned by the built-in
    /// `scheme` (`"auto"`, `"uncoded"`, ...).
    pub fn new(params: ChainParams, scheme: &str) -> Result<ChainSchedule, String> {
        planner_by_name(scheme, &PlannerOptions::default()).map_err(|e| e.to_string())?;
        let chain = EpochChain::new(params).map_err(|e| e.to_string())?;
        Ok(ChainSchedule { chain, epoch: 0, scheme: scheme.to_string() })
    }

    /// The schedule of `epoch` (stepped on from this one's; an earlier epoch is refused).
    pub fn at(&self, epoch: u64) -> Result<ChainSchedule, String> {
        if epoch < self.epoch {
            return Err(format!("epoch {epoch} is before this schedule's {}", self.epoch));
        }
        let mut s = self.clone();
        while s.epoch < epoch {
            let drawn = s.chain.draw(&s.chain.all_workers(), 0).map_err(|e| e.to_string())?;
            s.chain.commit_drawn(&drawn);
            s.epoch += 1;
        }
        Ok(s)
    }
}

/// SplitMix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A fingerprint of an epoch and its lists (batches, then caches).
/// `segment_start` is the epoch the chain's world size took effect (0 for a chain that never
/// changed it): `ubershuffle.CodedShuffleSampler`'s digest is this one, so that a Rust chain
/// and a Python sampler of the same settings agree.
pub fn lists_digest(epoch: u64, (world, segment_start): (usize, u64), lists: &[&[Vec<u32>]]) -> u64 {
    let mut h = mix(epoch ^ mix(world as u64 ^ mix(segment_start)));
    for group in lists {
        for list in group.iter() {
            h = mix(h ^ list.len() as u64);
            for &p in list {
                h = mix(h ^ u64::from(p));
            }
        }
    }
    h
}

impl Schedule for ChainSchedule {
    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn targets(&self) -> Vec<Vec<u32>> {
        self.chain.state().caches.clone()
    }

    fn batches(&self) -> Vec<Vec<u32>> {
        self.chain.state().batches.clone()
    }

    fn digest(&self) -> u64 {
        let state = self.chain.state();
        lists_digest(self.epoch, (state.batches.len(), 0), &[&state.batches, &state.caches])
    }

    fn next_starts_a_chain(&self) -> bool {
        false
    }

    fn stepped(&self) -> Result<Box<dyn Schedule>, String> {
        Ok(Box::new(self.at(self.epoch + 1)?))
    }

    fn boxed_copy(&self) -> Box<dyn Schedule> {
        Box::new(self.clone())
    }

    fn draw_next(&self, most: Option<Duration>) -> Result<Option<NextDraw>, String> {
        let drawn = self.chain.draw(&self.chain.all_workers(), 0).map_err(|e| e.to_string())?;
        let mut options = PlannerOptions::default();
        if let Some(most) = most {
            let budget = options.time_budget.min(most);
            options = options.with_time_budget(budget);
        }
        let planner = planner_by_name(&self.scheme, &options).map_err(|e| e.to_string())?;
        Ok(Some((drawn, planner, None)))
    }
}
