//! UberShuffle: Lee et al.'s encoding tables with the paper's greedy carpool reallocation.

use super::{BuiltinPlanner, CliqueCoverPlanner};
use crate::carpool::{CarpoolTables, RoomIndex, for_each_combination};
use crate::rng::uniform_below;
use crate::{Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner, work_units};

/// The UberShuffle paper's planner (Section 3.2, Example 3): Lee et al.'s encoding tables,
/// then the greedy carpool reallocation over the DAG of table columns.
///
/// A point in column `i` of table `I` may move to column `i` of a table `J` with `i ∈ J`,
/// `J ⊊ I`, `|J| >= 2`: every worker of `J \ {i}` is in `I \ {i}`, so caches it, and the rows
/// of `J` still decode. Tables are visited from the largest worker set down; a table is
/// lowered by one row whenever every one of its tallest columns can hand a point to such a
/// sub-table whose column is shorter than the sub-table (so the sub-table does not grow), and
/// this repeats until it cannot be lowered. Points that moved down may move again when their
/// new table's turn comes.
///
/// Where the paper is open, we chose (measured on n = 20, q = 1e4..1e6, alpha = 0.1..0.7,
/// seed 1; the ignored test `greedy_variants` in this file prints the comparison):
/// - *Targets*: any proper sub-table, the largest first (the next layer of the DAG, then the
///   one below, ...). Searching only the next layer sent up to 2.8x more (q = 1e5,
///   alpha = 0.55: 29 593 against 10 526), two layers up to 1.8x, three up to 1.3x.
/// - *Which target* when several of the largest size have room: the one with the fewest
///   empty places (best fit), which keeps roomy tables for later points. First found sent up
///   to 9.5 % more (q = 1e6, alpha = 0.4: 114 319 against 104 383), most room up to 6.3 %;
///   a random target ranged from 1.6 % fewer to 4.9 % more.
/// - *Table order* within a layer: tallest first (ties by mask), since a tall table has the
///   most rows to shed. Mask order sent up to 3.2 % more; a random order ranged from 2.8 %
///   fewer (q = 1e6, alpha = 0.4) to 2.8 % more (q = 1e5, alpha = 0.2), and tallest first
///   needs no seed.
/// - *Empty tables are not targets*: a point may only join a table that already sends at least
///   one row. An empty table has height 0, and joining it raises it, which the rule forbids;
///   tables emptied by earlier moves drop out the same way. (`ubershuffle-opt` builds new
///   tables.)
///
/// The plan is deterministic (it draws nothing from the generator). Its time at n = 20,
/// q = 1e6 is the `plan ubershuffle` row of `results/full/speed.csv`
/// (`cargo xtask experiments speed`; also `cargo bench -p ubershuffle-core --bench planners`).
///
/// Reach: the search for a sub-table enumerates subsets of a table's workers, up to `2^(k-1)`
/// for a table of `k` workers, and where cachers are unique (from about 30 workers) almost
/// every search comes up empty, so the work doubles with every worker a point's cachers gain.
/// Before planning, the search's work is estimated from a sample of tables (the first search
/// of every table, `GREEDY_SAMPLES` (256) of them); an instance whose estimate exceeds the budget
/// (`--time-budget`, in work units) is refused at once with [`PlanError::OverBudget`], naming
/// `clique-cover`; should the search still run past its budget, it stops there with the same
/// error. Table labels are 128-bit masks: at most 128 workers ([`PlanError::TooManyWorkers`]).
#[derive(Clone, Copy, Debug)]
pub struct UberShufflePlanner {
    budget: u64,
}

impl Default for UberShufflePlanner {
    fn default() -> Self {
        UberShufflePlanner::build(&PlannerOptions::default())
    }
}

impl UberShufflePlanner {
    /// The planner with a budget in work units.
    pub fn with_work_budget(budget: u64) -> Self {
        UberShufflePlanner { budget }
    }
}

/// Tables sampled to estimate the greedy's work before it starts.
pub const GREEDY_SAMPLES: usize = 256;

impl BuiltinPlanner for UberShufflePlanner {
    const NAME: &'static str = "ubershuffle";
    const DESCRIPTION: &'static str = "the UberShuffle paper: Lee et al.'s tables, then greedy carpool reallocation from the largest tables down";

    fn build(options: &PlannerOptions) -> Self {
        UberShufflePlanner { budget: work_units(options.time_budget) }
    }
}

impl ShufflePlanner for UberShufflePlanner {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn fits(&self, inst: &ShuffleInstance) -> Result<(), PlanError> {
        let tables = CarpoolTables::build(inst, Self::NAME)?;
        check_greedy_reach(&tables, self.budget, Self::NAME)
    }

    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let mut tables = CarpoolTables::build(inst, Self::NAME)?;
        check_greedy_reach(&tables, self.budget, Self::NAME)?;
        carpool_greedy(&mut tables, &GreedyRule::default(), rng, self.budget)
            .map_err(|e| e.to_plan_error(self.budget, Self::NAME))?;
        Ok(tables.to_plan())
    }
}

/// Which of several sub-tables of the same size with room takes a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))] // the alternatives `greedy_variants` measures
pub(crate) enum TargetChoice {
    /// The first found.
    First,
    /// The one with the fewest empty places (best fit): the default.
    LeastRoom,
    /// The one with the most empty places (worst fit).
    MostRoom,
    /// A uniformly random one.
    Random,
}

/// The order of the tables of one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))] // the alternatives `greedy_variants` measures
pub(crate) enum LayerOrder {
    /// Increasing mask.
    Mask,
    /// Tallest first, ties by mask: the default.
    TallestFirst,
    /// A random order.
    Random,
}

/// The choices the paper leaves open; [`GreedyRule::default`] is what `ubershuffle` does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GreedyRule {
    /// How many layers below a table its points may move in one step.
    pub max_removed: usize,
    /// Among targets of the same size with room, which one.
    pub choice: TargetChoice,
    /// The order of the tables of one size.
    pub order: LayerOrder,
}

impl Default for GreedyRule {
    fn default() -> Self {
        GreedyRule {
            max_removed: usize::MAX,
            choice: TargetChoice::LeastRoom,
            order: LayerOrder::TallestFirst,
        }
    }
}

/// The paper's greedy over the table DAG: tables from the largest worker set down; a table is
/// lowered by one row whenever every one of its tallest columns can hand a point to a proper
/// sub-table (of at least two workers, holding that column's worker) whose column is shorter
/// than the sub-table, so the sub-table does not grow. Repeats on a table until it cannot be
/// lowered, then moves on. Returns the work done (sub-tables probed), or stops once it passes
/// `limit`.
pub(crate) fn carpool_greedy(
    tables: &mut CarpoolTables,
    rule: &GreedyRule,
    rng: &mut SeededRng,
    limit: u64,
) -> Result<u64, GreedyOverBudget> {
    let mut work = 0u64;
    let table_count = tables.table_count();
    // Largest worker sets first; within a size, the rule's order (ties by mask for the
    // tallest first). Sorted as (key, table) pairs, every pair distinct.
    let fewer_members = |t: u32| u64::from(128 - tables.mask(t).count_ones()) << 32;
    let mut keyed: Vec<(u64, u32)> = match rule.order {
        LayerOrder::Mask => (0..table_count as u32).map(|t| (fewer_members(t), t)).collect(),
        LayerOrder::TallestFirst => (0..table_count as u32)
            .map(|t| (fewer_members(t) | u64::from(u32::MAX - tables.height(t)), t))
            .collect(),
        LayerOrder::Random => {
            let mut shuffled: Vec<u32> = (0..table_count as u32).collect();
            crate::rng::shuffle(rng, &mut shuffled);
            shuffled.iter().enumerate().map(|(i, &t)| (fewer_members(t) | i as u64, t)).collect()
        }
    };
    keyed.sort_unstable();
    let order: Vec<u32> = keyed.into_iter().map(|(_, t)| t).collect();
    let mut moves: Vec<(usize, u32)> = Vec::new();
    let mut room = RoomIndex::of(tables);
    for (done, t) in order.into_iter().enumerate() {
        let mask = tables.mask(t);
        'lower: loop {
            let height = tables.height(t);
            if height == 0 {
                break;
            }
            moves.clear();
            let mut members = mask;
            while members != 0 {
                let worker = members.trailing_zeros() as usize;
                members &= members - 1;
                if tables.count(t, worker) == height {
                    match find_target(tables, room.as_ref(), mask, worker, rule, rng, &mut work, limit) {
                        Ok(Some(target)) => moves.push((worker, target)),
                        Ok(None) => break 'lower,
                        Err(()) => return Err(GreedyOverBudget { tables_done: done, tables: table_count }),
                    }
                }
            }
            for &(worker, target) in &moves {
                let e = tables.first(t, worker);
                tables.move_entry(e, target);
                if let Some(room) = &mut room {
                    room.record_move_in(worker, tables.mask(target), !tables.has_room(target, worker));
                }
            }
        }
    }
    Ok(work)
}

/// The greedy passed its work limit after `tables_done` of `tables` tables.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GreedyOverBudget {
    tables_done: usize,
    tables: usize,
}

impl GreedyOverBudget {
    /// The planner error for `planner` with budget `budget`.
    pub(crate) fn to_plan_error(self, budget: u64, planner: &str) -> PlanError {
        PlanError::OverBudget {
            planner: planner.to_string(),
            reach: format!(
                "its carpool search stopped when its budget ran out, {} of {} tables done",
                self.tables_done, self.tables
            ),
            budget,
            suggestion: CliqueCoverPlanner::NAME,
        }
    }
}

/// Refuses at once an instance whose greedy search would exceed `budget`: the first search of
/// [`GREEDY_SAMPLES`] tables spread evenly over the DAG, scaled to every table. (The first
/// search of a table is its cheapest when targets exist and its only one when none does, the
/// case that grows as `2^k`.) Each sampled search stops at four times the average the budget
/// allows a table, so the estimate itself stays cheap.
pub(crate) fn check_greedy_reach(
    tables: &CarpoolTables,
    budget: u64,
    planner: &str,
) -> Result<(), PlanError> {
    let count = tables.table_count();
    if count == 0 {
        return Ok(());
    }
    let samples = GREEDY_SAMPLES.min(count);
    let cap = (budget / count as u64).saturating_mul(4).max(64);
    let mut probed = 0u64;
    let rule = GreedyRule::default();
    let mut rng = crate::seeded(0);
    for k in 0..samples {
        let t = (k * count / samples) as u32;
        let mask = tables.mask(t);
        let Some(worker) = (0..tables.workers()).find(|&w| mask >> w & 1 == 1 && tables.count(t, w) > 0)
        else {
            continue;
        };
        let mut work = 0;
        let _ = find_target(tables, None, mask, worker, &rule, &mut rng, &mut work, cap);
        probed += work.min(cap);
    }
    let estimate = probed.saturating_mul(count as u64) / samples as u64;
    if estimate > budget {
        let mean_workers =
            (0..samples).map(|k| tables.mask((k * count / samples) as u32).count_ones() as u64).sum::<u64>()
                / samples as u64;
        return Err(PlanError::OverBudget {
            planner: planner.to_string(),
            reach: format!(
                "its carpool search would probe about {estimate} sub-tables ({count} tables of about {mean_workers} workers; the work doubles with every worker a table gains)"
            ),
            budget,
            suggestion: CliqueCoverPlanner::NAME,
        });
    }
    Ok(())
}

/// A proper sub-table of `mask` holding `worker` whose column of `worker` has room, searched
/// layer by layer from the largest (the edges of the paper's DAG out of this column: every
/// worker of a sub-table other than `worker` is in `mask`, so caches the point); `None` when
/// there is none within `rule.max_removed` layers; `Err` once `work` would pass `limit`.
///
/// With `room` (the greedy's [`RoomIndex`], exact for every sub-table of the table being
/// lowered), a sub-table is judged from a bit and its room from one word; without it (the
/// reach check, or more than `ROOM_INDEX_MAX_WORKERS` workers), from the
/// tables. Both visit the same sub-tables in the same order and count the same work.
#[allow(clippy::too_many_arguments)]
fn find_target(
    tables: &CarpoolTables,
    room: Option<&RoomIndex>,
    mask: u128,
    worker: usize,
    rule: &GreedyRule,
    rng: &mut SeededRng,
    work: &mut u64,
    limit: u64,
) -> Result<Option<u32>, ()> {
    if let Some(index) = room
        && rule.choice == TargetChoice::LeastRoom
    {
        let start = *work;
        let found = index.least_room_sub_table(mask, worker, rule.max_removed, limit.saturating_sub(start));
        #[cfg(debug_assertions)]
        {
            let (mut slow_work, mut slow_rng) = (start, rng.clone());
            let slow = find_target(tables, None, mask, worker, rule, &mut slow_rng, &mut slow_work, limit);
            match found {
                Some((sub, visits)) => {
                    assert_eq!(slow, Ok(sub.and_then(|s| tables.find(s))));
                    assert_eq!(slow_work, start + visits);
                }
                None => assert_eq!(slow, Err(())),
            }
        }
        return match found {
            Some((sub, visits)) => {
                *work = start + visits;
                Ok(sub.and_then(|s| tables.find(s)))
            }
            // Where the enumeration would have stopped, one past the limit.
            None => {
                *work = start.max(limit) + 1;
                Err(())
            }
        };
    }
    // The room of sub-table `sub` if `worker`'s column in it has room.
    let room_of = |sub: u128| -> Option<u32> {
        match room {
            Some(index) => {
                let found = index.has_room(worker, sub).then(|| index.room(sub));
                debug_assert_eq!(
                    found,
                    tables.find(sub).filter(|&u| tables.has_room(u, worker)).map(|u| tables.room(u))
                );
                found
            }
            None => tables.find(sub).filter(|&u| tables.has_room(u, worker)).map(|u| tables.room(u)),
        }
    };
    let others = mask & !(1u128 << worker);
    // |J| >= 2 leaves at least one other member.
    let deepest = rule.max_removed.min((others.count_ones() as usize).saturating_sub(1));
    let mut best: Option<(u128, u32)> = None;
    let mut seen = 0u64;
    let start = *work;
    let mut over = false;
    for removed in 1..=deepest {
        let mut visited = *work - start;
        *work += for_each_combination(others, removed, |gone| {
            visited += 1;
            if start + visited > limit {
                over = true;
                return false;
            }
            let sub = mask & !gone;
            let Some(room) = room_of(sub) else { return true };
            let score = match rule.choice {
                TargetChoice::First => 0,
                TargetChoice::LeastRoom => room,
                TargetChoice::MostRoom => u32::MAX - room,
                TargetChoice::Random => {
                    seen += 1;
                    // Reservoir sampling: the k-th candidate replaces the choice with chance 1/k.
                    if uniform_below(rng, seen) == 0 { 0 } else { u32::MAX }
                }
            };
            if best.is_none_or(|(_, s)| score < s) || (rule.choice == TargetChoice::Random && score == 0) {
                best = Some((sub, score));
            }
            rule.choice != TargetChoice::First
        });
        if over {
            return Err(());
        }
        if best.is_some() {
            break;
        }
    }
    Ok(best.and_then(|(sub, _)| tables.find(sub)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, seeded, verify};

    #[test]
    fn paper_example_3_sends_three() {
        let inst = ShuffleInstance::paper_example();
        let plan = UberShufflePlanner::default().plan(&inst, &mut seeded(0)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert_eq!(plan.len(), 3);
    }

    /// The greedy's work count and the reach check's estimate, recorded before the search was
    /// made faster: budgets are counted in these units (`ubershuffle-opt` adds the greedy's
    /// work to its own), so a faster search must count exactly the same work.
    #[test]
    fn counts_the_work_it_always_counted() {
        let cases = [
            ((10, 5_000, 0.3, 2), 9487, "about 2942 sub-tables (793 tables"),
            ((16, 20_000, 0.4, 4), 293_678, "about 130286 sub-tables (10697 tables"),
            ((20, 30_000, 0.55, 1), 4_511_630, "about 768159 sub-tables (13447 tables"),
        ];
        for ((workers, points, alpha, seed), expected_work, expected_estimate) in cases {
            let inst = GeneratorParams { workers, points, alpha, seed }.check().unwrap().generate();
            let mut tables = CarpoolTables::build(&inst, "test").unwrap();
            let refusal = check_greedy_reach(&tables, 1000, "test").unwrap_err().to_string();
            assert!(refusal.contains(expected_estimate), "{refusal}");
            let work = carpool_greedy(&mut tables, &GreedyRule::default(), &mut seeded(0), u64::MAX).unwrap();
            assert_eq!(work, expected_work, "{workers} workers");
        }
    }

    /// The comparison behind the choices documented on [`UberShufflePlanner`]. Run:
    /// `cargo test --release -p ubershuffle-core --lib greedy_variants -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement (about a minute in release), not a check"]
    fn greedy_variants() {
        let default = GreedyRule::default();
        let rules = [
            ("default", default),
            ("1 layer", GreedyRule { max_removed: 1, ..default }),
            ("2 layers", GreedyRule { max_removed: 2, ..default }),
            ("3 layers", GreedyRule { max_removed: 3, ..default }),
            ("first found", GreedyRule { choice: TargetChoice::First, ..default }),
            ("most room", GreedyRule { choice: TargetChoice::MostRoom, ..default }),
            ("random target", GreedyRule { choice: TargetChoice::Random, ..default }),
            ("mask order", GreedyRule { order: LayerOrder::Mask, ..default }),
            ("random order", GreedyRule { order: LayerOrder::Random, ..default }),
        ];
        for q in [10_000usize, 100_000, 1_000_000] {
            for alpha in [0.1, 0.2, 0.325, 0.4, 0.55, 0.7] {
                let inst =
                    GeneratorParams { workers: 20, points: q, alpha, seed: 1 }.check().unwrap().generate();
                let base = CarpoolTables::build(&inst, "test").unwrap();
                let mut line = format!("q={q} alpha={alpha} coded={}", base.cost());
                for (name, rule) in &rules {
                    let mut tables = base.clone();
                    carpool_greedy(&mut tables, rule, &mut seeded(3), u64::MAX).unwrap();
                    assert!(verify(&inst, &tables.to_plan()).unwrap().is_valid());
                    line += &format!(" | {name} {}", tables.cost());
                }
                println!("{line}");
            }
        }
    }
}
