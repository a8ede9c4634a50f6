//! `ubershuffle-opt`: a planner that beats the paper's greedy carpool reallocation.

use std::time::Duration;

use super::BuiltinPlanner;
use super::ubershuffle::{GreedyRule, carpool_greedy, check_greedy_reach};
use crate::bounds::best_lower_bound;
use crate::carpool::{CarpoolTables, PACK_MAX_WORKERS, PackOrder, Rows, pack_full_rows};
use crate::{Plan, PlanError, PlannerOptions, SeededRng, ShuffleInstance, ShufflePlanner, work_units};

/// Work charged per needed point for what is not counted as it goes: building the tables,
/// the lower bound and the plan.
const WORK_PER_ENTRY: u64 = 30;

/// Work charged per needed point for each packing's copies of the tables and rows.
const WORK_PER_ENTRY_AND_PACKING: u64 = 8;

/// Row visits per work unit (a row visit is a few register operations on data read in order).
const ROW_VISITS_PER_UNIT: u64 = 40;

/// The share of the budget (one part in this many) kept for improving the greedy's rows.
const RESERVE_FRACTION: u64 = 10;

/// Restarts in a row that may fail to improve before the search stops early.
const PATIENCE: usize = 8;

/// Our planner: carpool reallocation searched harder than the paper's greedy.
///
/// 1. Full-row packing (for at most 22 workers): instead of pushing points down into tables
///    that already have room, build the tables: for each layer of worker sets from the
///    largest down, take as many full rows of each set as its members' unplaced points allow,
///    sets offering the most rows first, points with the smallest homes first
///    (`carpool::pack_full_rows`).
/// 2. Row emptying on the result: a small row disappears when each of its points can join
///    another row whose workers all cache it and which lacks its worker (any row, not only
///    rows of sub-tables), or take the place of that row's point of the same worker, which
///    then has such a place.
/// 3. While the budget lasts, seeded restarts of the packing with ties between worker sets
///    broken in random order, keeping the best; the search stops early after `PATIENCE`
///    restarts without improvement, or when it meets the best lower bound of
///    [`crate::bounds`] (so small instances finish at once).
/// 4. The paper's greedy ([`super::UberShufflePlanner`]), its rows emptied with what is left
///    of the budget (a tenth is kept for it): the fallback, so the result is never worse than
///    `ubershuffle`.
///
/// How much less it sends than the greedy on the paper's Fig. 3 setting (n = 20, seeds 1-3):
/// `results/full/fig3.csv` (`cargo xtask experiments fig3`); against the carpool model's
/// optimum on small instances: `results/carpool-optimum.csv`.
///
/// The budget (`PlannerOptions::time_budget`) is counted in work units,
/// [`crate::WORK_PER_SECOND`] to a second, not read from a clock: the plan depends only on the instance, the seed and
/// the budget, never on the machine's load, and the time it takes is about the budget on
/// the reference machine (more on a slower or busier one). A packing that would exceed the
/// budget is abandoned (the greedy's plan stands), and a restart is only begun when the
/// previous packing's work still fits. (At n = 20, q = 1e6 a packing is a large share of the
/// default budget; `results/full/fig3.csv` has the plans, `cargo xtask experiments fig3`.)
///
/// Reach: that of [`super::UberShufflePlanner`], whose greedy it runs first (refused at once
/// with [`PlanError::OverBudget`] where that search would pass the budget, at most 128
/// workers); the packing itself runs up to 22 workers.
#[derive(Clone, Copy, Debug)]
pub struct UberShuffleOptPlanner {
    /// The budget in work units.
    budget: u64,
}

impl UberShuffleOptPlanner {
    /// The planner with a search budget (converted to work units, [`crate::WORK_PER_SECOND`]
    /// to a second).
    pub fn new(budget: Duration) -> Self {
        UberShuffleOptPlanner { budget: work_units(budget) }
    }

    /// The planner with a budget in work units.
    pub fn with_work_budget(budget: u64) -> Self {
        UberShuffleOptPlanner { budget }
    }
}

impl BuiltinPlanner for UberShuffleOptPlanner {
    const NAME: &'static str = "ubershuffle-opt";
    const DESCRIPTION: &'static str = "ours: full-row packing of the carpool tables, row emptying, seeded restarts within --time-budget; never worse than ubershuffle";

    fn build(options: &PlannerOptions) -> Self {
        Self::new(options.time_budget)
    }
}

impl ShufflePlanner for UberShuffleOptPlanner {
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
        self.plan_counting(inst, rng).map(|(plan, _)| plan)
    }
}

impl UberShuffleOptPlanner {
    /// The plan and the work units it counted.
    fn plan_counting(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<(Plan, u64), PlanError> {
        let base = CarpoolTables::build(inst, Self::NAME)?;
        let budget = self.budget;
        check_greedy_reach(&base, budget, Self::NAME)?;
        let bound = best_lower_bound(inst).value;
        let mut work = base.entry_count() as u64 * WORK_PER_ENTRY;
        let mut greedy = base.clone();
        // The greedy is the fallback: it runs whatever the budget left (its reach was checked).
        work += carpool_greedy(&mut greedy, &GreedyRule::default(), rng, budget)
            .map_err(|e| e.to_plan_error(budget, Self::NAME))?;
        let mut greedy_rows = Rows::from_tables(&greedy);
        drop(greedy);
        let mut best = greedy_rows.clone();
        let improve = |rows: &mut Rows, work: &mut u64, reserve: u64| {
            if rows.len() > bound {
                let left = budget.saturating_sub(*work + reserve);
                *work += rows.empty_small_rows(left * ROW_VISITS_PER_UNIT) / ROW_VISITS_PER_UNIT;
            }
        };
        // Packings first, keeping a share of the budget to improve the greedy's rows should
        // the first packing not fit.
        let reserve = budget / RESERVE_FRACTION;
        let mut stale = 0;
        let mut first = true;
        let mut last_packing = 0;
        while base.workers() <= PACK_MAX_WORKERS
            && best.len() > bound
            && stale < PATIENCE
            && work + last_packing + reserve <= budget
        {
            let mut tables = base.clone();
            let order = if first { PackOrder::MostRowsFirst } else { PackOrder::ShuffledTies(rng) };
            first = false;
            let Some(packing) = pack_full_rows(&mut tables, order, budget.saturating_sub(work + reserve))
            else {
                work = budget.saturating_sub(reserve);
                break;
            };
            let packing = packing + base.entry_count() as u64 * WORK_PER_ENTRY_AND_PACKING;
            work += packing;
            last_packing = packing;
            let mut rows = Rows::from_tables(&tables);
            drop(tables);
            improve(&mut rows, &mut work, reserve);
            if rows.len() < best.len() {
                best = rows;
                stale = 0;
            } else {
                stale += 1;
            }
        }
        // Then the greedy's rows, improved with what is left.
        improve(&mut greedy_rows, &mut work, 0);
        if greedy_rows.len() < best.len() {
            best = greedy_rows;
        }
        Ok((best.to_plan(), work))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::UberShufflePlanner;
    use crate::{GeneratorParams, seeded, verify};

    #[test]
    fn paper_example_sends_three() {
        let inst = ShuffleInstance::paper_example();
        let plan = UberShuffleOptPlanner::new(Duration::from_secs(10)).plan(&inst, &mut seeded(0)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert_eq!(plan.len(), 3);
    }

    #[test]
    fn same_seed_same_plan_when_the_budget_binds() {
        let inst =
            GeneratorParams { workers: 10, points: 2000, alpha: 0.6, seed: 5 }.check().unwrap().generate();
        for budget in [Duration::from_millis(1), Duration::from_millis(20), Duration::from_millis(200)] {
            let planner = UberShuffleOptPlanner::new(budget);
            let a = planner.plan(&inst, &mut seeded(7)).unwrap();
            assert_eq!(a, planner.plan(&inst, &mut seeded(7)).unwrap());
            assert!(verify(&inst, &a).unwrap().is_valid());
            // Whatever the budget, never worse than the greedy.
            assert!(a.len() <= UberShufflePlanner::default().plan(&inst, &mut seeded(7)).unwrap().len());
        }
    }

    #[test]
    fn beats_the_greedy_where_tables_are_sparse() {
        let inst =
            GeneratorParams { workers: 12, points: 3000, alpha: 0.5, seed: 3 }.check().unwrap().generate();
        let opt = UberShuffleOptPlanner::new(Duration::from_secs(1)).plan(&inst, &mut seeded(1)).unwrap();
        let greedy = UberShufflePlanner::default().plan(&inst, &mut seeded(1)).unwrap();
        assert!(verify(&inst, &opt).unwrap().is_valid());
        assert!(opt.len() * 10 < greedy.len() * 9, "opt {} vs greedy {}", opt.len(), greedy.len());
    }

    /// This thread's CPU seconds (Linux), so that the calibration does not count the time
    /// other processes take the cores.
    fn thread_cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / 100.0
    }

    /// The calibration of [`crate::WORK_PER_SECOND`]: work units `ubershuffle-opt` counts per
    /// CPU second of its thread, on the Fig. 3 instances where its default budget binds or
    /// nearly does. Run: `cargo test --release -p ubershuffle-core --lib calibrate_work_per_second
    /// -- --ignored --nocapture` (about a minute of CPU).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn calibrate_work_per_second() {
        let planner = UberShuffleOptPlanner::build(&PlannerOptions::default());
        let mut rates = Vec::new();
        for (points, alpha) in [(1_000_000, 0.55), (1_000_000, 0.325), (300_000, 0.55), (300_000, 0.4)] {
            let inst = GeneratorParams { workers: 20, points, alpha, seed: 1 }.check().unwrap().generate();
            let started = thread_cpu_seconds();
            let (plan, work) = planner.plan_counting(&inst, &mut seeded(1)).unwrap();
            let cpu = thread_cpu_seconds() - started;
            assert!(verify(&inst, &plan).unwrap().is_valid());
            println!(
                "q = {points}, alpha = {alpha}: {work} units in {cpu:.2} CPU s: {:.3e} units/s",
                work as f64 / cpu
            );
            rates.push(work as f64 / cpu);
        }
        rates.sort_by(f64::total_cmp);
        println!("median {:.3e} units per CPU second", (rates[1] + rates[2]) / 2.0);
    }
}
