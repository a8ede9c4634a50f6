//! Iterated greedy clique partition (Culberson's iterated greedy colouring, on the complement):
//! a local search that takes a plan of XOR packets and repacks it into fewer packets, never more.

use crate::rng::{shuffle, uniform_below};
use crate::{Part, Plan, SeededRng, ShuffleInstance};

/// A needed point: its point, its worker and its home (its cachers plus its worker).
#[derive(Clone, Copy, Debug)]
struct Entry {
    point: u32,
    worker: usize,
    home: u128,
}

/// A packet being filled: its receivers, the workers every member's home holds, its members.
#[derive(Clone, Debug)]
struct Packet {
    receivers: u128,
    common_home: u128,
    members: Vec<u32>,
}

impl Packet {
    /// Whether `entry` may join: a new receiver whose home holds every receiver, and which
    /// every member's home holds.
    #[inline]
    fn fits(&self, entry: &Entry) -> bool {
        let bit = 1u128 << entry.worker;
        self.receivers & bit == 0 && self.receivers & !entry.home == 0 && self.common_home & bit != 0
    }
}

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
/// packets, for at most `budget` work units (one unit per packet examined).
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
pub(crate) fn repack(inst: &ShuffleInstance, plan: &Plan, rng: &mut SeededRng, budget: u64) -> Option<Plan> {
    if inst.workers() > 128 {
        return None;
    }
    let mut entries = Vec::with_capacity(plan.total_parts());
    let mut classes: Vec<Vec<u32>> = Vec::with_capacity(plan.len());
    for transmission in plan.iter() {
        let mut packet = Packet { receivers: 0, common_home: u128::MAX, members: Vec::new() };
        for part in transmission {
            let home = inst.cachers_of(part.point).iter().fold(1u128 << part.worker, |m, w| m | 1 << w);
            let entry = Entry { point: part.point, worker: part.worker, home };
            if !packet.fits(&entry) {
                return None;
            }
            packet.receivers |= 1 << part.worker;
            packet.common_home &= home;
            packet.members.push(entries.len() as u32);
            entries.push(entry);
        }
        classes.push(packet.members);
    }
    let start = classes.len();
    let mut work = 0u64;
    let mut stale = 0;
    let mut packets: Vec<Packet> = Vec::new();
    while stale < PATIENCE && work < budget {
        let order = match uniform_below(rng, 10) {
            0..=2 => ClassOrder::Reverse,
            3..=6 => ClassOrder::LargestFirst,
            7 => ClassOrder::SmallestFirst,
            _ => ClassOrder::Random,
        };
        match order {
            ClassOrder::Reverse => classes.reverse(),
            ClassOrder::LargestFirst => classes.sort_by_key(|c| std::cmp::Reverse(c.len())),
            ClassOrder::SmallestFirst => classes.sort_by_key(Vec::len),
            ClassOrder::Random => shuffle(rng, &mut classes),
        }
        packets.clear();
        for &e in classes.iter().flatten() {
            if work > budget {
                // The pass is cut short: the last complete one stands.
                break;
            }
            let entry = &entries[e as usize];
            let found = packets.iter().position(|p| p.fits(entry));
            work += found.map_or(packets.len(), |i| i + 1) as u64;
            let i = found.unwrap_or_else(|| {
                packets.push(Packet { receivers: 0, common_home: u128::MAX, members: Vec::new() });
                packets.len() - 1
            });
            let packet = &mut packets[i];
            packet.receivers |= 1 << entry.worker;
            packet.common_home &= entry.home;
            packet.members.push(e);
        }
        if work > budget {
            break;
        }
        debug_assert!(packets.len() <= classes.len(), "a greedy pass never opens more packets");
        stale = if packets.len() < classes.len() { 0 } else { stale + 1 };
        classes.clear();
        classes.extend(packets.iter().map(|p| p.members.clone()));
    }
    (classes.len() < start).then(|| {
        let mut repacked = Plan::with_capacity(classes.len(), entries.len());
        for class in &classes {
            repacked.push_iter(
                class.iter().map(|&e| Part::new(entries[e as usize].point, entries[e as usize].worker)),
            );
        }
        repacked
    })
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
            repack(&inst, &greedy, &mut seeded(3), 5_000_000).expect("the greedy's packets repack");
        assert!(verify(&inst, &repacked).unwrap().is_valid());
        assert!(repacked.len() < greedy.len());
        assert_eq!(repack(&inst, &greedy, &mut seeded(3), 5_000_000), Some(repacked), "deterministic");
        // No budget: no pass completes, nothing changes.
        assert_eq!(repack(&inst, &greedy, &mut seeded(3), 0), None);
    }
}
