//! Iterated greedy clique partition (Culberson's iterated greedy colouring, on the complement):
//! a local search that takes a plan of XOR packets and repacks it into fewer packets, never more.

use super::needed::Needed;
use crate::rng::{shuffle, uniform_below};
use crate::{Plan, SeededRng, ShuffleInstance};

/// How the packets are ordered before each greedy pass.
#[derive(Clone, Copy, Debug)]
enum ClassOrder {
    /// The reverse of the last pass's order.
    Reverse,
    /// Largest packets first (ties in the last order).
    LargestFirst,
    /// Smallest packets first (ties in the last order).
    SmallestFirst,
    /// A random order.
    Random,
}

/// Greedy passes in a row that may fail to improve before the search stops.
const PATIENCE: usize = 5000;

/// Repacks `plan`, a plan of XOR packets of distinct receivers each caching every other
/// receiver's point (every built-in planner's but the no-excess ones'), into fewer such
/// packets, until `work` (one unit per packet examined, added to what it holds) reaches
/// `budget`.
///
/// Each pass lists the packets in some order and puts their points, in that order, each into
/// the first packet it fits, opening a new one when none fits. Since a packet's points fit
/// together, a pass never opens more packets than it was given (Culberson's argument for
/// iterated greedy colouring: the points of the `i`-th packet all fit by the `i`-th new
/// packet), and a reordering that lets some points join earlier packets saves one. Orders:
/// the reverse of the last, largest first, smallest first, random (drawn from `rng`).
///
/// Returns the repacked plan if it is smaller, or `None` (also for a plan of other packets,
/// or more than 128 workers).
pub(crate) fn repack(
    inst: &ShuffleInstance,
    plan: &Plan,
    rng: &mut SeededRng,
    work: &mut u64,
    budget: u64,
) -> Option<Plan> {
    if inst.workers() > 128 {
        return None;
    }
    // The packets as ranges of one flat list of entries, so a pass allocates nothing.
    let mut entries = Vec::with_capacity(plan.total_parts());
    let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(plan.len());
    for transmission in plan.iter() {
        let (mut receivers, mut common_home) = (0u128, u128::MAX);
        ranges.push((entries.len() as u32, transmission.len() as u32));
        for part in transmission {
            let entry = Needed::of(inst, part);
            if !entry.fits(receivers, common_home) {
                return None;
            }
            receivers |= 1 << part.worker;
            common_home &= entry.home;
            entries.push(entry);
        }
    }
    let start = ranges.len();
    let mut order: Vec<u32> = (0..entries.len() as u32).collect();
    let mut stale = 0;
    let mut pass = GreedyPass::default();
    while stale < PATIENCE && *work < budget {
        let order_kind = match uniform_below(rng, 10) {
            0..=2 => ClassOrder::Reverse,
            3..=6 => ClassOrder::LargestFirst,
            7 => ClassOrder::SmallestFirst,
            _ => ClassOrder::Random,
        };
        match order_kind {
            ClassOrder::Reverse => ranges.reverse(),
            ClassOrder::LargestFirst => ranges.sort_by_key(|&(_, len)| std::cmp::Reverse(len)),
            ClassOrder::SmallestFirst => ranges.sort_by_key(|&(_, len)| len),
            ClassOrder::Random => shuffle(rng, &mut ranges),
        }
        if !pass.run(&entries, &order, &ranges, work, budget) {
            // The pass is cut short: the last complete one stands.
            break;
        }
        debug_assert!(pass.packets() <= ranges.len(), "a greedy pass never opens more packets");
        stale = if pass.packets() < ranges.len() { 0 } else { stale + 1 };
        pass.classes_into(&mut order, &mut ranges);
    }
    (ranges.len() < start).then(|| {
        let mut repacked = Plan::with_capacity(ranges.len(), entries.len());
        for &(from, len) in &ranges {
            repacked.push_iter(
                order[from as usize..(from + len) as usize].iter().map(|&e| entries[e as usize].part()),
            );
        }
        repacked
    })
}

/// One greedy pass: each entry, in the classes' order, joins the first packet it fits.
#[derive(Default)]
struct GreedyPass {
    /// Each packet's receivers.
    receivers: Vec<u128>,
    /// The workers every member's home holds, for each packet.
    common_home: Vec<u128>,
    /// The entries in the order the pass took them, with the packet each joined.
    taken: Vec<(u32, u32)>,
    /// How many entries each packet holds.
    sizes: Vec<u32>,
}

impl GreedyPass {
    /// Runs the pass over `order` taken class by class as `ranges` says, counting one work unit
    /// per packet examined. False if the budget ran out before the pass completed.
    fn run(
        &mut self,
        entries: &[Needed],
        order: &[u32],
        ranges: &[(u32, u32)],
        work: &mut u64,
        budget: u64,
    ) -> bool {
        self.receivers.clear();
        self.common_home.clear();
        self.taken.clear();
        for &(from, len) in ranges {
            for &e in &order[from as usize..(from + len) as usize] {
                if *work > budget {
                    return false;
                }
                let entry = &entries[e as usize];
                let found =
                    (0..self.receivers.len()).find(|&i| entry.fits(self.receivers[i], self.common_home[i]));
                *work += found.map_or(self.receivers.len(), |i| i + 1) as u64;
                let i = found.unwrap_or_else(|| {
                    self.receivers.push(0);
                    self.common_home.push(u128::MAX);
                    self.receivers.len() - 1
                });
                self.receivers[i] |= 1 << entry.worker;
                self.common_home[i] &= entry.home;
                self.taken.push((e, i as u32));
            }
        }
        *work <= budget
    }

    /// How many packets the pass opened.
    fn packets(&self) -> usize {
        self.receivers.len()
    }

    /// The pass's packets as the next classes: `order` grouped by packet (each packet's entries
    /// in the order they joined), `ranges` in the packets' order.
    fn classes_into(&mut self, order: &mut [u32], ranges: &mut Vec<(u32, u32)>) {
        self.sizes.clear();
        self.sizes.resize(self.receivers.len(), 0);
        for &(_, packet) in &self.taken {
            self.sizes[packet as usize] += 1;
        }
        ranges.clear();
        let mut at = 0u32;
        for size in &mut self.sizes {
            ranges.push((at, *size));
            // From here on, where the packet's next entry goes.
            let next = at;
            at += *size;
            *size = next;
        }
        for &(e, packet) in &self.taken {
            let slot = &mut self.sizes[packet as usize];
            order[*slot as usize] = e;
            *slot += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::UberShufflePlanner;
    use crate::{GeneratorParams, ShufflePlanner, seeded, verify};

    #[test]
    fn repacks_into_fewer_valid_packets_and_respects_the_budget() {
        let inst =
            GeneratorParams { workers: 10, points: 400, alpha: 0.4, seed: 2 }.check().unwrap().generate();
        let greedy = UberShufflePlanner::default().plan(&inst, &mut seeded(1)).unwrap();
        let repacked =
            repack(&inst, &greedy, &mut seeded(3), &mut 0, 5_000_000).expect("the greedy's packets repack");
        assert!(verify(&inst, &repacked).unwrap().is_valid());
        assert!(repacked.len() < greedy.len());
        assert_eq!(
            repack(&inst, &greedy, &mut seeded(3), &mut 0, 5_000_000),
            Some(repacked),
            "deterministic"
        );
        // No budget: no pass completes, nothing changes.
        assert_eq!(repack(&inst, &greedy, &mut seeded(3), &mut 0, 0), None);
    }
}
