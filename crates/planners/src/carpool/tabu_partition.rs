//! Tabu search for fewer packets (TabuCol, Hertz and de Werra's tabu search for graph colouring,
//! on the complement): a local search that takes a plan of XOR packets and tries to pack the
//! same needed points into one packet fewer, again and again.
//!
//! Two needed points may share a packet when their workers differ and each worker caches the
//! other's point; a plan is a partition of the needed points into such groups. To find one of
//! `k` groups, the search deals every point a group and moves points between groups, one at a
//! time, to remove conflicts (two points in one group that may not share it): each step makes
//! the move that leaves the fewest conflicts, except moves back that it made recently (tabu)
//! unless they beat the best count so far. The greedy repacking of
//! [`super::iterated_greedy`] and the table lowering of [`super::lowering`] stop at local
//! optima this walk gets out of: on small instances it finds the carpool model's optimum where
//! they stay a packet or two above it.

use super::needed::Needed;
use crate::rng::uniform_below;
use crate::{Plan, SeededRng, ShuffleInstance};

/// The most needed points the search takes on: each step scans every conflicting point
/// against every group, and each move updates every point, so past this it would spend its
/// budget on a few steps.
pub(crate) const TABU_MAX_POINTS: usize = 4096;

/// Steps without a new best conflict count after which the search gives up on `k` groups.
const STEPS_WITHOUT_PROGRESS: u64 = 20_000;

/// Walks for the same `k` after the first stalls, each from the best partition with fresh
/// random tie-breaks, while the budget lasts: on carpool-fresh's n = 12, alpha = 0.5, seed 1002
/// the first walk for 39 packets stalls and a later one finds them.
const RESTARTS: u32 = 8;

/// Steps a move back stays tabu: this many plus a tenth of the conflicts plus up to this many
/// more drawn at random (the usual dynamic tenure).
const TENURE: u64 = 10;

/// Repacks `plan` (XOR packets of distinct receivers each caching every other receiver's point)
/// into fewer packets by tabu search, one packet fewer at a time (a stalled walk is tried again
/// up to [`RESTARTS`] times), until `work` (one unit per
/// group examined for a point, and per point updated by a move; added to what it holds)
/// reaches `budget`. Returns the smallest plan found if it is smaller than `plan`, else `None`
/// (also past 128 workers or [`TABU_MAX_POINTS`] needed points, or for a plan of other
/// packets).
pub(crate) fn tabu_repack(
    inst: &ShuffleInstance,
    plan: &Plan,
    rng: &mut SeededRng,
    work: &mut u64,
    budget: u64,
) -> Option<Plan> {
    if inst.workers() > 128 || plan.total_parts() > TABU_MAX_POINTS || plan.len() < 2 {
        return None;
    }
    let mut points: Vec<Needed> = Vec::with_capacity(plan.total_parts());
    let mut best: Vec<u32> = Vec::with_capacity(plan.total_parts());
    for (g, transmission) in plan.iter().enumerate() {
        for part in transmission {
            points.push(Needed::of(inst, part));
            best.push(g as u32);
        }
    }
    let groups_at_start = plan.len();
    let mut groups = groups_at_start;
    let mut failed = 0;
    while groups > 1 && *work < budget {
        match Search::new(&points, &best, groups - 1, rng, work).run(rng, work, budget) {
            Some(found) => {
                best = found;
                groups -= 1;
                failed = 0;
            }
            // A walk that stalled may still find `groups - 1` from another draw.
            None if failed < RESTARTS => failed += 1,
            None => break,
        }
    }
    (groups < groups_at_start).then(|| {
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); groups];
        for (i, &g) in best.iter().enumerate() {
            members[g as usize].push(i as u32);
        }
        let mut repacked = Plan::with_capacity(groups, points.len());
        for group in members.iter().filter(|m| !m.is_empty()) {
            repacked.push_iter(group.iter().map(|&i| points[i as usize].part()));
        }
        repacked
    })
}

/// Whether two needed points may share a packet.
fn compatible(a: &Needed, b: &Needed) -> bool {
    a.worker != b.worker && b.home >> a.worker & 1 == 1 && a.home >> b.worker & 1 == 1
}

/// The search for a partition into `k` groups.
struct Search<'a> {
    points: &'a [Needed],
    k: usize,
    /// Each point's group.
    group: Vec<u32>,
    /// `conflicts[i * k + g]`: the points of group `g` that point `i` may not share a packet with.
    conflicts: Vec<u32>,
    /// `tabu_until[i * k + g]`: the step before which point `i` may not move into group `g`.
    tabu_until: Vec<u64>,
    /// Conflicting pairs in the partition.
    total: u64,
}

impl<'a> Search<'a> {
    /// Starts from the partition `from` of one group more: the points of its smallest group go
    /// to the groups where they conflict least, and the last group takes the smallest's place.
    fn new(points: &'a [Needed], from: &[u32], k: usize, rng: &mut SeededRng, work: &mut u64) -> Self {
        let n = points.len();
        let mut sizes = vec![0usize; k + 1];
        for &g in from {
            sizes[g as usize] += 1;
        }
        let smallest = (0..=k).min_by_key(|&g| (sizes[g], g)).unwrap_or(k) as u32;
        let mut search = Search {
            points,
            k,
            group: vec![u32::MAX; n],
            conflicts: vec![0; n * k],
            tabu_until: vec![0; n * k],
            total: 0,
        };
        let mut homeless = Vec::new();
        for (i, &g) in from.iter().enumerate() {
            match g {
                g if g == smallest => homeless.push(i),
                g if g == k as u32 => search.place(i, smallest, work),
                g => search.place(i, g, work),
            }
        }
        for i in homeless {
            let row = &search.conflicts[i * k..(i + 1) * k];
            let least = row.iter().copied().min().unwrap_or(0);
            let ties: Vec<u32> = (0..k as u32).filter(|&g| row[g as usize] == least).collect();
            let g = ties[uniform_below(rng, ties.len() as u64) as usize];
            search.place(i, g, work);
        }
        search
    }

    /// Puts point `i` (in no group) into group `g`.
    fn place(&mut self, i: usize, g: u32, work: &mut u64) {
        self.group[i] = g;
        self.total += u64::from(self.conflicts[i * self.k + g as usize]);
        self.update(i, g, 1, work);
    }

    /// Adds `delta` (1 or -1) to every other point's conflicts with group `g` where it may not
    /// share a packet with point `i`.
    fn update(&mut self, i: usize, g: u32, delta: i32, work: &mut u64) {
        *work += self.points.len() as u64;
        let a = &self.points[i];
        for (j, b) in self.points.iter().enumerate() {
            if j != i && !compatible(a, b) {
                let c = &mut self.conflicts[j * self.k + g as usize];
                *c = c.saturating_add_signed(delta);
            }
        }
    }

    /// Moves points until no two in a group conflict (the partition, `Some`) or
    /// [`STEPS_WITHOUT_PROGRESS`] steps pass without a new lowest count, or the budget ends.
    fn run(mut self, rng: &mut SeededRng, work: &mut u64, budget: u64) -> Option<Vec<u32>> {
        let k = self.k;
        let mut best_total = self.total;
        let mut since_best = 0u64;
        let mut step = 0u64;
        let mut moves: Vec<(usize, u32)> = Vec::new();
        while self.total > 0 {
            if since_best >= STEPS_WITHOUT_PROGRESS || *work >= budget {
                return None;
            }
            step += 1;
            // The best move of a conflicting point: the fewest conflicts after it; ties drawn.
            let mut best_delta = i64::MAX;
            moves.clear();
            for i in 0..self.points.len() {
                let from = self.group[i] as usize;
                let here = i64::from(self.conflicts[i * k + from]);
                if here == 0 {
                    continue;
                }
                *work += k as u64;
                for g in 0..k {
                    if g == from {
                        continue;
                    }
                    let delta = i64::from(self.conflicts[i * k + g]) - here;
                    let allowed =
                        self.tabu_until[i * k + g] <= step || (self.total as i64 + delta) < best_total as i64;
                    if !allowed || delta > best_delta {
                        continue;
                    }
                    if delta < best_delta {
                        best_delta = delta;
                        moves.clear();
                    }
                    moves.push((i, g as u32));
                }
            }
            let Some(&(i, to)) = moves.get(uniform_below(rng, moves.len().max(1) as u64) as usize) else {
                // Every move is tabu: wait for one to be allowed again.
                since_best += 1;
                continue;
            };
            let from = self.group[i];
            self.total = (self.total as i64 + best_delta) as u64;
            self.update(i, from, -1, work);
            self.group[i] = to;
            self.update(i, to, 1, work);
            self.tabu_until[i * k + from as usize] =
                step + TENURE + self.total / 10 + uniform_below(rng, TENURE + 1);
            if self.total < best_total {
                best_total = self.total;
                since_best = 0;
            } else {
                since_best += 1;
            }
        }
        Some(self.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::UberShufflePlanner;
    use crate::{GeneratorParams, ShufflePlanner, seeded, verify};

    #[test]
    fn packs_the_greedy_into_fewer_valid_packets_deterministically() {
        let inst =
            GeneratorParams { workers: 8, points: 300, alpha: 0.5, seed: 3 }.check().unwrap().generate();
        let greedy = UberShufflePlanner::default().plan(&inst, &mut seeded(1)).unwrap();
        let packed = tabu_repack(&inst, &greedy, &mut seeded(2), &mut 0, 20_000_000)
            .expect("the greedy's packets repack");
        assert!(verify(&inst, &packed).unwrap().is_valid());
        assert!(packed.len() < greedy.len(), "{} vs {}", packed.len(), greedy.len());
        assert_eq!(tabu_repack(&inst, &greedy, &mut seeded(2), &mut 0, 20_000_000), Some(packed));
        // No budget: nothing changes.
        assert_eq!(tabu_repack(&inst, &greedy, &mut seeded(2), &mut 0, 0), None);
    }

    #[test]
    fn only_points_that_may_share_a_packet_are_compatible() {
        let a = Needed { point: 0, worker: 0, home: 0b011 };
        let b = Needed { point: 1, worker: 1, home: 0b011 };
        let c = Needed { point: 2, worker: 2, home: 0b101 };
        assert!(compatible(&a, &b) && compatible(&b, &a));
        assert!(!compatible(&a, &c), "worker 0 caches point 2, but worker 2 does not cache point 0");
        assert!(!compatible(&a, &Needed { point: 3, worker: 0, home: 0b111 }), "one worker twice");
    }
}
