//! `pliable-hierarchical`: the hierarchical data-shuffling scheme of Song, Fragouli and Zhao
//! ("A pliable index coding approach to data shuffling", arXiv 1701.05540), reconstructed from
//! the paper's abstract (its text was not available to us; `docs/pliable.md` says what is the
//! paper's and what is our reading of it).

use super::BuiltinPlanner;
use crate::bits;
use crate::pliable::{Menu, PliablePlan, PliablePlanner, PliableRequest, Randomness};
use crate::pliable_assigner::Assigner;
use crate::rng::{SeededRng, shuffle};
use crate::{
    Part, Plan, PlanError, PlannerOptions, ShuffleInstance, ShufflePlanner, WORK_PER_SECOND, work_units,
};

/// Rounds of random groups per level at most; a level also ends after [`IDLE_ROUNDS`] rounds
/// in a row that serve nothing.
const MAX_ROUNDS: usize = 16;

/// Rounds in a row serving nothing that end a level.
const IDLE_ROUNDS: usize = 3;

/// Work units per (point, candidate) looked at in a round, and per group word compared.
const UNITS_PER_OFFER: u64 = 1;

/// The paper's scheme as we reconstruct it ([`crate::pliable`]).
///
/// Pliable index coding is the component: a group `G` of `g` workers is served by one XOR of
/// `g` points when each member lacks its own point and caches the other `g - 1` (so each
/// member decodes its point, any point it lacks: it is pliable). The hierarchy is over group
/// sizes:
/// 0. (Our model only, where a batch may hold cached points: every point a candidate with room
///    caches goes to it for free, as in `pliable-greedy`. The paper's workers want new points.)
/// 1. Top level: `g` = about `ns/m + 1` (the average number of workers caching a point, plus
///    one: the largest group the average point can serve, which is where the paper's
///    `O(ns/m)` gain over index coding comes from), lowered to the largest `g` at which a
///    member can expect at least one point cached by the rest of its group.
/// 2. At each level, the workers with room are split into random groups of `g`; every open
///    point is listed for each candidate member that lacks it while the rest of the member's
///    group caches it; each group then sends packets taking one listed point per member, down
///    to two members. New random groups are drawn for a few rounds, then `g` drops by one.
/// 3. Level 1: unicasts, and the completion of the assignment along augmenting paths.
///
/// Given a fixed instance (one candidate per point) the same levels run on the given owners.
/// Reach: each round looks at every open point's candidates once (`q r` pairs, `n` for
/// `--candidates all`), for at most 16 rounds a level; a request past the budget
/// is refused at once. Deterministic under the seed.
pub struct PliableHierarchicalPlanner {
    budget: u64,
}

impl BuiltinPlanner for PliableHierarchicalPlanner {
    const NAME: &'static str = "pliable-hierarchical";
    const DESCRIPTION: &'static str = "Song, Fragouli and Zhao's hierarchical pliable scheme (reconstructed, see docs/pliable.md; --candidates): cached candidates first, then random groups of workers of decreasing size, one packet serving every member with a point the rest of its group caches";

    fn build(options: &PlannerOptions) -> Self {
        PliableHierarchicalPlanner { budget: work_units(options.time_budget) }
    }
}

impl ShufflePlanner for PliableHierarchicalPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    /// A fixed instance is a request with one candidate per point.
    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let request = PliableRequest::new(inst.clone(), Randomness::FULLY_RANDOM, rng)
            .map_err(|e| PlanError::Failed { planner: Self::NAME.to_string(), reason: e.to_string() })?;
        Ok(self.plan_pliable(&request, rng)?.plan)
    }

    fn as_pliable(&self) -> Option<&dyn PliablePlanner> {
        Some(self)
    }
}

impl PliablePlanner for PliableHierarchicalPlanner {
    fn plan_pliable(&self, request: &PliableRequest, rng: &mut SeededRng) -> Result<PliablePlan, PlanError> {
        let menu = request.menu();
        let mut assigner = Assigner::new(&menu);
        assigner.place_free(rng);
        let open = assigner.open_points().len();
        let top = top_level(request, open, menu.candidates_per_point());
        let per_round = open as u64 * menu.candidates_per_point() as u64 * UNITS_PER_OFFER;
        let estimate = per_round.saturating_mul((top.saturating_sub(1) * MAX_ROUNDS) as u64);
        if estimate > self.budget {
            return Err(PlanError::OverBudget {
                planner: Self::NAME.to_string(),
                reach: format!(
                    "{open} open points with {} candidates each over up to {} levels take about {estimate} work units (about {:.0} s)",
                    menu.candidates_per_point(),
                    top.saturating_sub(1),
                    estimate as f64 / WORK_PER_SECOND
                ),
                budget: self.budget,
                suggestion: "pliable-greedy, fewer --candidates",
            });
        }
        for g in (2..=top).rev() {
            let mut idle = 0;
            for _ in 0..MAX_ROUNDS {
                let served = round(&mut assigner, &menu, request, g, rng);
                idle = if served == 0 { idle + 1 } else { 0 };
                if idle == IDLE_ROUNDS {
                    break;
                }
            }
        }
        let (batches, plan) = assigner
            .finish(rng)
            .map_err(|reason| PlanError::Failed { planner: Self::NAME.to_string(), reason })?;
        let chosen = request
            .fully_random()
            .with_assignment(batches)
            .map_err(|e| PlanError::Failed { planner: Self::NAME.to_string(), reason: e.to_string() })?;
        Ok(PliablePlan::new(chosen, plan, Self::NAME))
    }
}

/// The top group size: `floor(ns/m) + 1` (`ns/m` the average number of cachers of a point),
/// lowered to the largest `g` at which a member can expect a point cached by the other
/// `g - 1` members: `open (r/n) a^(g-1) (1 - a) >= 1` for storage ratio `a`; at least 2.
fn top_level(request: &PliableRequest, open: usize, candidates: usize) -> usize {
    let inst = request.fully_random();
    let (n, q) = (inst.workers(), inst.points().max(1));
    let cached: usize = (0..n).map(|w| inst.cache(w).len()).sum();
    let a = (cached as f64 / (n as f64 * q as f64)).clamp(1e-9, 1.0 - 1e-9);
    let paper = (n as f64 * a).floor() as usize + 1;
    let reach = open as f64 * candidates as f64 / n.max(1) as f64 * (1.0 - a);
    let expected = if reach > 1.0 { 1 + (reach.ln() / (1.0 / a).ln()).floor() as usize } else { 1 };
    paper.min(expected).min(n).max(2)
}

/// One round at level `g`: random groups of `g` among the workers with room, every open point
/// listed for each candidate member that lacks it while the rest of its group caches it, then
/// packets of one listed point per member (two members at least). Returns the points served.
fn round(
    assigner: &mut Assigner<'_>,
    menu: &Menu<'_>,
    request: &PliableRequest,
    g: usize,
    rng: &mut SeededRng,
) -> usize {
    let n = menu.workers;
    let mut live: Vec<usize> = (0..n).filter(|&w| assigner.room(w) > 0).collect();
    if live.len() < 2 {
        return 0;
    }
    shuffle(rng, &mut live);
    let words = bits::words_for(n).max(1);
    let groups: Vec<&[usize]> = live.chunks(g).filter(|c| c.len() >= 2).collect();
    let mut group_of = vec![usize::MAX; n];
    let mut masks = vec![0u64; groups.len() * words];
    for (k, members) in groups.iter().enumerate() {
        for &w in *members {
            group_of[w] = k;
            bits::set(&mut masks[k * words..(k + 1) * words], w);
        }
    }
    let mut listed: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut others = vec![0u64; words];
    let mut seen: Vec<usize> = Vec::new();
    for p in assigner.open_points() {
        seen.clear();
        for w in menu.candidates(p) {
            let k = group_of.get(w).copied().unwrap_or(usize::MAX);
            if k == usize::MAX || seen.contains(&w) || request.caches(w, p) || !menu.allows(p, w) {
                continue;
            }
            seen.push(w);
            others.copy_from_slice(&masks[k * words..(k + 1) * words]);
            bits::clear(&mut others, w);
            if bits::is_subset(&others, request.cacher_row(p)) {
                listed[w].push(p);
            }
        }
    }
    for list in &mut listed {
        shuffle(rng, list);
    }
    let mut served = 0;
    let mut parts: Vec<Part> = Vec::new();
    let mut cursor = vec![0usize; n];
    for members in groups {
        loop {
            parts.clear();
            for &w in members {
                if assigner.room(w) == 0 {
                    continue;
                }
                let list = &listed[w];
                while cursor[w] < list.len() && !assigner.is_open(list[cursor[w]]) {
                    cursor[w] += 1;
                }
                if let Some(&p) = list.get(cursor[w]) {
                    cursor[w] += 1;
                    parts.push(Part::new(p, w));
                }
            }
            // A level-g packet serves the whole group: smaller ones wait for the lower
            // levels, where groups that fit them are drawn.
            if parts.len() < members.len() {
                break;
            }
            assigner.place_packet(&parts);
            served += parts.len();
        }
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PaperSetting;
    use crate::pliable::verify_pliable;
    use crate::{GeneratorParams, seeded, verify};

    fn planner() -> PliableHierarchicalPlanner {
        PliableHierarchicalPlanner::build(&PlannerOptions::default())
    }

    #[test]
    fn paper_setting_packets_serve_groups_and_verify() {
        let setting = PaperSetting { messages: 400, workers: 20, cache: 100, seed: 2 };
        let request = setting.request().unwrap();
        let planned = planner().plan_pliable(&request, &mut seeded(1)).unwrap();
        let report = verify_pliable(&request, &planned).unwrap();
        assert!(report.is_valid());
        // Every message is new to its worker: uncoded sends all 400; groups halve that at least.
        assert_eq!(report.uncoded_transmissions, 400);
        assert!(planned.plan.len() * 2 < 400, "{}", planned.plan.len());
    }

    #[test]
    fn fixed_instances_verify() {
        let inst =
            GeneratorParams { workers: 8, points: 800, alpha: 0.4, seed: 1 }.check().unwrap().generate();
        let plan = planner().plan(&inst, &mut seeded(0)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert!(plan.len() < inst.uncoded_transmissions());
        assert_eq!(plan, planner().plan(&inst, &mut seeded(0)).unwrap());
    }
}
