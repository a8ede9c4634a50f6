//! The exact integer program of the UberShuffle paper's carpool reallocation model (Section 3.2),
//! solved with `microlp` (pure Rust branch and bound), for small instances.
//!
//! **The model.** Every needed point `e` (worker `w` needs it, workers `C` cache it) has a *home*
//! `H = C ∪ {w}`. It may be placed in column `w` of any table `J` with `w ∈ J ⊆ H`: every other
//! member of `J` caches it, so a row of `J` (the XOR of one point per column) decodes at every
//! member. A table costs its height, the size of its tallest column; the plan costs the sum of
//! heights. Lee et al.'s tables put every point in `J = H`; the paper's greedy and
//! `ubershuffle-opt` move points to sub-tables; this program finds the cheapest placement.
//!
//! **The program.** Points of the same worker and home are interchangeable, so the variables are
//! counts: `y[H, w, J] >= 0`, how many of worker `w`'s points of home `H` go to table `J`, and
//! `h[J] >= 0`, the height of `J`:
//!
//! ```text
//! minimise   sum_J h[J]
//! subject to sum_{J : w ∈ J ⊆ H} y[H, w, J] = c[H, w]          for every column (H, w)
//!            sum_{H ⊇ J} y[H, w, J] <= h[J]                      for every table J and w ∈ J
//!            h[J] integer
//! ```
//!
//! Only the heights need to be integers: once they are, each worker's placement is a
//! transportation problem (homes supply `c[H, w]`, tables take up to `h[J]`) with integer data,
//! whose feasible region has integer vertices, so integer counts exist whenever fractional ones
//! do. The solver's counts are rounded and repaired ([`CarpoolOptimum::plan`] places every point
//! and checks each table's height), and the plan is checked with `verify` by the caller.
//!
//! **What it bounds.** A packet that XORs points of distinct receivers, each caching every other
//! receiver's point, is a full row of the table of its receivers, so every plan made of such
//! packets (Lee et al.'s tables, both UberShuffle planners and `clique-cover`) is a solution of
//! this program: its optimum is a lower bound for all of them on the instance.

use std::collections::HashMap;
use std::time::Duration;

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOptions, TerminationReason, Variable};
use thiserror::Error;
use ubershuffle_core::{Part, Plan, ShuffleInstance};

/// The most workers the program is built for: the tables are the subsets of the homes, up to
/// `2^n` of them.
pub const MAX_WORKERS: usize = 16;

/// Why the program was not solved.
#[derive(Debug, Error)]
pub enum CarpoolMilpError {
    /// More workers than [`MAX_WORKERS`].
    #[error("the carpool integer program is built for at most {MAX_WORKERS} workers, not {0}")]
    TooManyWorkers(usize),
    /// The solver failed.
    #[error("the MILP solver failed: {0}")]
    Solver(String),
    /// The solver stopped at its limit before proving optimality.
    #[error("the MILP solver stopped at its limit ({0:?}) before proving optimality")]
    NotProven(TerminationReason),
    /// The solver's counts did not make a placement (a bug, or numerical trouble).
    #[error("the solver's counts do not place every point: {0}")]
    BadCounts(String),
}

/// One column of Lee et al.'s tables: a worker's needed points with one home.
#[derive(Clone, Debug)]
struct Column {
    home: u32,
    worker: usize,
    points: Vec<u32>,
}

/// The size of a program, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramSize {
    /// Integer variables: one height per table.
    pub tables: usize,
    /// Continuous variables: one count per (column, table).
    pub counts: usize,
    /// Constraints.
    pub constraints: usize,
}

/// The proven optimum of the carpool program on an instance, with a plan that attains it.
#[derive(Clone, Debug)]
pub struct CarpoolOptimum {
    /// The optimal number of transmissions (the sum of table heights).
    pub transmissions: usize,
    /// The objective the solver reported (the relaxation's, for [`relaxation_bound`]).
    relaxed: f64,
    /// The program's size.
    pub size: ProgramSize,
    /// Branch-and-bound nodes the solver explored.
    pub nodes: u64,
    /// The plan: every table sent row by row.
    pub plan: Plan,
}

/// Solves the carpool program of `inst` to proven optimality, giving up after `node_limit`
/// branch-and-bound nodes (deterministic, unlike a time limit) or `time_limit`.
pub fn solve(
    inst: &ShuffleInstance,
    node_limit: u64,
    time_limit: Duration,
) -> Result<CarpoolOptimum, CarpoolMilpError> {
    solve_program(inst, false, node_limit, time_limit)
}

/// The optimum of the program's linear relaxation (heights need not be integers): a lower
/// bound on the carpool optimum, found without branching.
pub fn relaxation_bound(inst: &ShuffleInstance, time_limit: Duration) -> Result<f64, CarpoolMilpError> {
    solve_program(inst, true, 1, time_limit).map(|o| o.relaxed)
}

fn solve_program(
    inst: &ShuffleInstance,
    relaxed: bool,
    node_limit: u64,
    time_limit: Duration,
) -> Result<CarpoolOptimum, CarpoolMilpError> {
    let n = inst.workers();
    if n > MAX_WORKERS {
        return Err(CarpoolMilpError::TooManyWorkers(n));
    }
    let columns = columns(inst);
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let mut heights: HashMap<u32, Variable> = HashMap::new();
    let mut table_order: Vec<u32> = Vec::new();
    // counts[c]: (table, variable) for every table column c may use.
    let mut counts: Vec<Vec<(u32, Variable)>> = Vec::with_capacity(columns.len());
    // loads[(table, worker)]: the count variables filling that column of the table.
    let mut loads: HashMap<(u32, usize), Vec<Variable>> = HashMap::new();
    let mut size = ProgramSize::default();
    for column in &columns {
        let mut mine = Vec::new();
        let others = column.home & !(1 << column.worker);
        let most = column.points.len() as f64;
        // Every subset of the other members, with the worker added.
        let mut sub = others;
        loop {
            let table = sub | 1 << column.worker;
            heights.entry(table).or_insert_with(|| {
                table_order.push(table);
                if relaxed {
                    problem.add_var(1.0, (0.0, f64::INFINITY))
                } else {
                    problem.add_integer_var(1.0, (0, i32::MAX))
                }
            });
            let y = problem.add_var(0.0, (0.0, most));
            mine.push((table, y));
            loads.entry((table, column.worker)).or_default().push(y);
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & others;
        }
        size.counts += mine.len();
        let sum: Vec<(Variable, f64)> = mine.iter().map(|&(_, y)| (y, 1.0)).collect();
        problem.add_constraint(sum.as_slice(), ComparisonOp::Eq, most);
        counts.push(mine);
    }
    let mut load_keys: Vec<(u32, usize)> = loads.keys().copied().collect();
    load_keys.sort_unstable();
    for key in &load_keys {
        let mut row: Vec<(Variable, f64)> = loads[key].iter().map(|&y| (y, 1.0)).collect();
        row.push((heights[&key.0], -1.0));
        problem.add_constraint(row.as_slice(), ComparisonOp::Le, 0.0);
    }
    size.tables = heights.len();
    size.constraints = columns.len() + load_keys.len();
    let mut options = SolveOptions::default();
    options.node_limit = Some(node_limit);
    options.time_limit = Some(time_limit);
    let outcome = problem.solve_with(options).map_err(|e| CarpoolMilpError::Solver(e.to_string()))?;
    let reason = outcome.termination_reason();
    let solution = match outcome.into_solution() {
        Ok(solution) if reason == TerminationReason::ProvenOptimal => solution,
        _ => return Err(CarpoolMilpError::NotProven(reason)),
    };
    let nodes = solution.stats().nodes_solved;
    if relaxed {
        let relaxed = solution.objective();
        return Ok(CarpoolOptimum { transmissions: 0, relaxed, size, nodes, plan: Plan::new() });
    }
    let height_of: HashMap<u32, usize> =
        heights.iter().map(|(&t, &v)| (t, solution.var_value(v).round().max(0.0) as usize)).collect();
    let optimum: usize = height_of.values().sum();
    let placed: Vec<Vec<(u32, f64)>> =
        counts.iter().map(|mine| mine.iter().map(|&(t, y)| (t, solution.var_value(y))).collect()).collect();
    let plan = place(&columns, &placed, &height_of, &table_order)?;
    Ok(CarpoolOptimum { transmissions: optimum, relaxed: optimum as f64, size, nodes, plan })
}

/// Lee et al.'s columns of `inst`: every needed point by (home, worker).
fn columns(inst: &ShuffleInstance) -> Vec<Column> {
    let mut by_key: HashMap<(u32, usize), Vec<u32>> = HashMap::new();
    for worker in 0..inst.workers() {
        for point in inst.needs(worker).iter() {
            let home = inst.cachers_of(point).iter().fold(1u32 << worker, |m, c| m | 1 << c);
            by_key.entry((home, worker)).or_default().push(point);
        }
    }
    let mut columns: Vec<Column> =
        by_key.into_iter().map(|((home, worker), points)| Column { home, worker, points }).collect();
    columns.sort_unstable_by_key(|c| (c.home, c.worker));
    columns
}

/// Places every point by the solver's (nearly integral) counts and sends every table row by row.
/// Counts are rounded down, and what rounding leaves is placed where the count's fraction was
/// largest; a table that ends up taller than its solved height is an error.
fn place(
    columns: &[Column],
    placed: &[Vec<(u32, f64)>],
    height_of: &HashMap<u32, usize>,
    table_order: &[u32],
) -> Result<Plan, CarpoolMilpError> {
    // table -> worker -> points.
    let mut tables: HashMap<u32, HashMap<usize, Vec<u32>>> = HashMap::new();
    for (column, counts) in columns.iter().zip(placed) {
        let mut whole: Vec<(u32, usize, f64)> =
            counts.iter().map(|&(t, y)| (t, y.max(0.0).floor() as usize, y - y.floor())).collect();
        let mut left = column.points.len().saturating_sub(whole.iter().map(|w| w.1).sum());
        whole.sort_by(|a, b| b.2.total_cmp(&a.2));
        for entry in whole.iter_mut() {
            if left == 0 {
                break;
            }
            if entry.2 > 1e-6 {
                entry.1 += 1;
                left -= 1;
            }
        }
        if left > 0 || whole.iter().map(|w| w.1).sum::<usize>() != column.points.len() {
            return Err(CarpoolMilpError::BadCounts(format!(
                "column (home {:b}, worker {}) of {} points",
                column.home,
                column.worker,
                column.points.len()
            )));
        }
        let mut points = column.points.iter();
        for &(table, count, _) in &whole {
            let cell = tables.entry(table).or_default().entry(column.worker).or_default();
            cell.extend(points.by_ref().take(count));
        }
    }
    let mut plan = Plan::new();
    for table in table_order {
        let Some(cells) = tables.get(table) else { continue };
        let height = cells.values().map(Vec::len).max().unwrap_or(0);
        if height > height_of.get(table).copied().unwrap_or(0) {
            return Err(CarpoolMilpError::BadCounts(format!("table {table:b} is taller than its height")));
        }
        let mut workers: Vec<&usize> = cells.keys().collect();
        workers.sort_unstable();
        for row in 0..height {
            plan.push_iter(workers.iter().filter_map(|&&w| cells[&w].get(row).map(|&p| Part::new(p, w))));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::{GeneratorParams, PlannerOptions, seeded, verify};
    use ubershuffle_planners::planner_by_name;

    #[test]
    fn the_paper_example_needs_three() {
        let inst = ShuffleInstance::paper_example();
        let optimum = solve(&inst, 10_000, Duration::from_secs(60)).unwrap();
        assert_eq!(optimum.transmissions, 3);
        assert_eq!(optimum.plan.len(), 3);
        assert!(verify(&inst, &optimum.plan).unwrap().is_valid());
    }

    #[test]
    fn the_optimum_is_attained_and_no_planner_beats_it() {
        let inst =
            GeneratorParams { workers: 6, points: 240, alpha: 0.5, seed: 2 }.check().unwrap().generate();
        let optimum = solve(&inst, 100_000, Duration::from_secs(120)).unwrap();
        assert!(verify(&inst, &optimum.plan).unwrap().is_valid());
        assert!(optimum.plan.len() <= optimum.transmissions);
        for scheme in ["coded", "ubershuffle", "ubershuffle-opt", "clique-cover"] {
            let plan = planner_by_name(scheme, &PlannerOptions::default())
                .unwrap()
                .plan(&inst, &mut seeded(1))
                .unwrap();
            assert!(
                plan.len() >= optimum.transmissions,
                "{scheme}: {} < {}",
                plan.len(),
                optimum.transmissions
            );
        }
        assert!(matches!(
            solve(
                &GeneratorParams { workers: 17, points: 100, alpha: 0.3, seed: 1 }
                    .check()
                    .unwrap()
                    .generate(),
                1,
                Duration::from_secs(1)
            ),
            Err(CarpoolMilpError::TooManyWorkers(17))
        ));
    }
}
