//! `pliable-greedy`: ours. Chooses every point's owner among its candidates and the packets
//! together: cached candidates first (nothing to send), then clique-cover's packing with the
//! receiver of each point left open among its candidates, so that packets serve many workers.

use super::{AutoPlanner, BuiltinPlanner};
use crate::bits;
use crate::bounds::max_need_bound;
use crate::packing::{PacketSink, PackingParams, pack_requests_into};
use crate::pliable::{PliablePlan, PliablePlanner, PliableRequest};
use crate::pliable_assigner::Assigner;
use crate::requests::{Offers, Requests};
use crate::{
    Part, Plan, PlanError, Planned, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner, work_units,
};

/// Our pliable planner ([`ubershuffle_core::pliable`]).
///
/// 1. *Free*: every point that a candidate with room caches goes to such a candidate (the
///    points with the fewest of them first, each to the one with the most room): it costs
///    nothing to send.
/// 2. *Pliable packing*: every other point is offered to each of its candidates with room
///    (a request per pair), and `clique-cover`'s greedy clique cover grows packets over
///    them as `clique-cover` does over fixed requests: a packet XORs points for distinct
///    receivers, each caching every other point. Once a packet takes a point, the point's
///    other offers close, and a receiver whose batch is full closes its offers. With one
///    receiver fixed per point this is `clique-cover`; with `r` the packer finds a receiver
///    that fits the packet for most points, so packets grow.
/// 3. *Completion*: a point whose candidates all filled up is placed along an augmenting path
///    (see the crate's pliable assigner) and sent by unicast.
/// 4. *Recoding*: `auto` plans the chosen assignment as a fixed instance; the plan with fewer
///    transmissions is kept. So the planner never sends more than the best fixed-assignment
///    planner on the assignment it chose, and with one candidate per point (fully random
///    shuffling) it is exactly `auto`.
///
/// Reach: that of `clique-cover` over `r` times as many requests (and `auto`'s, which skips
/// what does not fit); an instance whose cheapest packing would not fit `--time-budget` is
/// refused at once. Deterministic under the seed.
///
/// ```
/// use ubershuffle_core::pliable::{PliableRequest, Randomness, verify_pliable};
/// use ubershuffle_core::{GeneratorParams, PlannerOptions, ShufflePlanner, seeded};
/// use ubershuffle_planners::planner_by_name;
///
/// let inst = GeneratorParams { workers: 10, points: 2000, alpha: 0.3, seed: 1 }.check()?.generate();
/// let request = PliableRequest::new(inst.clone(), Randomness::Candidates(3), &mut seeded(1))?;
/// let greedy = planner_by_name("pliable-greedy", &PlannerOptions::default())?;
/// let planned = greedy.as_pliable().unwrap().plan_pliable(&request, &mut seeded(2))?;
/// assert!(verify_pliable(&request, &planned)?.is_valid());
/// let fixed = planner_by_name("auto", &PlannerOptions::default())?.plan(&inst, &mut seeded(2))?;
/// assert!(2 * planned.plan.len() < fixed.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PliableGreedyPlanner {
    budget: u64,
    inner: AutoPlanner,
}

impl BuiltinPlanner for PliableGreedyPlanner {
    const NAME: &'static str = "pliable-greedy";
    const DESCRIPTION: &'static str = "ours, pliable (--candidates): picks each point's owner among its candidates, cached ones first, the rest as receivers of packets that serve many workers (clique-cover's packing), then keeps the better of that and auto on the chosen assignment";

    fn build(options: &PlannerOptions) -> Self {
        PliableGreedyPlanner { budget: work_units(options.time_budget), inner: AutoPlanner::build(options) }
    }
}

impl ShufflePlanner for PliableGreedyPlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    /// A fixed instance is a request with one candidate per point: nothing to choose, so the
    /// plan is `auto`'s.
    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        self.inner.plan(inst, rng)
    }

    fn plan_explained(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Planned, PlanError> {
        self.inner.plan_explained(inst, rng)
    }

    fn as_pliable(&self) -> Option<&dyn PliablePlanner> {
        Some(self)
    }
}

impl PliablePlanner for PliableGreedyPlanner {
    fn plan_pliable(&self, request: &PliableRequest, rng: &mut SeededRng) -> Result<PliablePlan, PlanError> {
        let base = request.fully_random();
        // `auto` draws from a copy of the caller's generator, so with one candidate per point
        // it plans exactly as it would alone with the same seed.
        let mut inner_rng = rng.clone();
        if request.randomness().candidates(request.workers()) == 1 && !request.is_fresh() {
            let planned = self.inner.plan_explained(base, &mut inner_rng)?;
            return Ok(PliablePlan::new(base.clone(), planned.plan, planned.made_by));
        }
        let menu = request.menu();
        let mut assigner = Assigner::new(&menu);
        assigner.place_free(rng);
        let offered = offers_by_receiver(&assigner, request);
        let total: usize = offered.iter().map(Vec::len).sum();
        let (n, q) = (request.workers(), request.points());
        let cache_entries: usize = (0..n).map(|w| base.cache(w).len()).sum();
        let least = PackingParams::least_work_of((n, q, base.cache_size()), cache_entries, total);
        if least > self.budget {
            return Err(PlanError::OverBudget {
                planner: Self::NAME.to_string(),
                reach: format!(
                    "even its cheapest packing of {total} offers ({} candidates per point) among {n} workers takes about {least} work units",
                    request.randomness()
                ),
                budget: self.budget,
                suggestion: "pliable-hierarchical, fewer --candidates",
            });
        }
        let (requests, offers) = Requests::of_pairs(base, &offered);
        let params = PackingParams::within_for(self.budget, n, cache_entries, total);
        let mut sink = PliableSink { assigner: &mut assigner, offers: &offers, parts: Vec::new() };
        pack_requests_into(&requests, &requests.cacher_rows(), &params, rng, &mut sink);
        let (batches, packed) = assigner
            .finish(rng)
            .map_err(|reason| PlanError::Failed { planner: Self::NAME.to_string(), reason })?;
        let chosen = base
            .with_assignment(batches)
            .map_err(|e| PlanError::Failed { planner: Self::NAME.to_string(), reason: e.to_string() })?;
        // Recoding cannot beat the largest need of a worker (one point a packet at most).
        if packed.len() <= max_need_bound(&chosen).value {
            return Ok(PliablePlan::new(chosen, packed, Self::NAME));
        }
        let recoded = self.inner.plan_explained(&chosen, &mut inner_rng)?;
        Ok(if recoded.plan.len() < packed.len() {
            let made_by = format!("{} (assignment), {} (code)", Self::NAME, recoded.made_by);
            PliablePlan::new(chosen, recoded.plan, made_by)
        } else {
            PliablePlan::new(chosen, packed, Self::NAME)
        })
    }
}

/// The open points offered to each receiver: every candidate with room that does not cache
/// the point (a cached candidate with room would have taken it for free).
fn offers_by_receiver(assigner: &Assigner<'_>, request: &PliableRequest) -> Vec<Vec<u32>> {
    let menu = assigner.menu();
    let mut offered: Vec<Vec<u32>> = vec![Vec::new(); request.workers()];
    let mut seen: Vec<usize> = Vec::new();
    for p in assigner.open_points() {
        seen.clear();
        for w in menu.candidates(p) {
            if !seen.contains(&w) && assigner.room(w) > 0 && menu.allows(p, w) && !request.caches(w, p) {
                seen.push(w);
                offered[w].push(p);
            }
        }
    }
    offered
}

/// Records each packet in the assignment and closes the offers it rules out.
struct PliableSink<'s, 'm> {
    assigner: &'s mut Assigner<'m>,
    offers: &'s Offers,
    parts: Vec<Part>,
}

impl PacketSink for PliableSink<'_, '_> {
    fn packed(&mut self, requests: &Requests, chosen: &[usize], open: &mut [u64]) -> usize {
        self.parts.clear();
        self.parts.extend(chosen.iter().map(|&r| Part::new(requests.point(r), requests.receiver(r))));
        self.assigner.place_packet(&self.parts);
        let mut closed = 0;
        let mut close = |r: usize, open: &mut [u64]| {
            if bits::get(open, r) {
                bits::clear(open, r);
                closed += 1;
            }
        };
        for part in &self.parts {
            for &r in self.offers.of(part.point) {
                close(r as usize, open);
            }
            if self.assigner.room(part.worker) == 0 {
                for r in requests.of_receiver(part.worker) {
                    close(r, open);
                }
            }
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pliable::{Randomness, verify_pliable};
    use crate::{GeneratorParams, seeded, verify};

    fn planner() -> PliableGreedyPlanner {
        PliableGreedyPlanner::build(
            &PlannerOptions::default().with_time_budget(std::time::Duration::from_secs(1)),
        )
    }

    #[test]
    fn one_candidate_is_auto_and_more_send_less() {
        let inst =
            GeneratorParams { workers: 10, points: 3000, alpha: 0.3, seed: 3 }.check().unwrap().generate();
        let auto = AutoPlanner::build(
            &PlannerOptions::default().with_time_budget(std::time::Duration::from_secs(1)),
        );
        let fixed = auto.plan(&inst, &mut seeded(5)).unwrap();
        let mut last = usize::MAX;
        for r in [1, 2, 3, 10] {
            let request =
                PliableRequest::new(inst.clone(), Randomness::Candidates(r), &mut seeded(9)).unwrap();
            let planned = planner().plan_pliable(&request, &mut seeded(5)).unwrap();
            let report = verify_pliable(&request, &planned).unwrap();
            assert!(report.is_valid(), "r = {r}");
            if r == 1 {
                assert_eq!(planned.plan, fixed);
                assert_eq!(planned.instance, inst);
            }
            assert!(planned.plan.len() <= last, "r = {r}: {} after {last}", planned.plan.len());
            last = planned.plan.len();
        }
        assert!(last * 4 < fixed.len(), "{last} vs {}", fixed.len());
    }

    #[test]
    fn fixed_instances_are_planned_by_auto_and_verify() {
        let inst = ShuffleInstance::paper_example();
        let plan = planner().plan(&inst, &mut seeded(0)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert_eq!(plan.len(), 3);
    }
}
