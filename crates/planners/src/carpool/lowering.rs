//! Lowering tables by augmenting paths: a local search over the carpool model that takes a
//! plan made of table rows and removes whole rows while every point still fits somewhere.

use std::collections::HashMap;

use super::needed::Needed;
use crate::{Plan, ShuffleInstance};

/// One column (table, worker) of the placement.
#[derive(Clone, Debug)]
struct Column {
    table: u32,
    worker: usize,
    entries: Vec<u32>,
}

/// A placement of every needed point in a column of a table (the carpool model): table `J`
/// of height `h` sends `h` rows, the `r`-th XORing the `r`-th point of each of its columns.
#[derive(Clone)]
struct Placement {
    entries: Vec<Needed>,
    masks: Vec<u128>,
    heights: Vec<u32>,
    columns: Vec<Column>,
    /// For each entry, its column.
    column_of_entry: Vec<u32>,
    /// For each table, its columns.
    table_columns: Vec<Vec<u32>>,
    /// For each worker, its columns.
    worker_columns: Vec<Vec<u32>>,
    column_of: HashMap<(u32, usize), u32>,
    /// The table of each worker set.
    table_of: HashMap<u128, u32>,
    /// Scratch space of the breadth-first search, kept between searches.
    search: PathSearch,
}

/// The state of one breadth-first search for an augmenting path: which columns it reached and
/// from where, stamped with the search's number so that starting a search clears nothing.
#[derive(Clone, Default)]
struct PathSearch {
    /// For each column, the previous column and the entry moved from it into this one.
    parent: Vec<(u32, u32)>,
    /// For each column, the number of the search that reached it last.
    reached_in: Vec<u32>,
    /// The number of the current search.
    number: u32,
    queue: std::collections::VecDeque<u32>,
}

impl PathSearch {
    /// Starts a new search from column `from` among `columns` columns.
    fn start(&mut self, columns: usize, from: u32) {
        self.number = self.number.wrapping_add(1);
        if self.number == 0 {
            self.reached_in.iter_mut().for_each(|r| *r = 0);
            self.number = 1;
        }
        self.parent.resize(columns, (u32::MAX, u32::MAX));
        self.reached_in.resize(columns, 0);
        self.queue.clear();
        self.queue.push_back(from);
        self.reached_in[from as usize] = self.number;
    }

    fn reached(&self, column: u32) -> bool {
        self.reached_in[column as usize] == self.number
    }

    fn reach(&mut self, column: u32, from: u32, entry: u32) {
        self.reached_in[column as usize] = self.number;
        self.parent[column as usize] = (from, entry);
    }
}

impl Placement {
    /// The placement a plan of carpool rows describes: each transmission is a row of the table
    /// of its receivers. `None` if a transmission is not such a row (two parts for one worker,
    /// or a part whose point some other receiver does not cache), or past 128 workers.
    fn of(inst: &ShuffleInstance, plan: &Plan) -> Option<Self> {
        if inst.workers() > 128 {
            return None;
        }
        let mut placement = Placement {
            entries: Vec::new(),
            masks: Vec::new(),
            heights: Vec::new(),
            columns: Vec::new(),
            column_of_entry: Vec::new(),
            table_columns: Vec::new(),
            worker_columns: vec![Vec::new(); inst.workers()],
            column_of: HashMap::new(),
            table_of: HashMap::new(),
            search: PathSearch::default(),
        };
        for transmission in plan.iter() {
            let mut receivers = 0u128;
            for part in transmission {
                if receivers >> part.worker & 1 == 1 {
                    return None;
                }
                receivers |= 1 << part.worker;
            }
            let table = placement.table(receivers);
            placement.heights[table as usize] += 1;
            for part in transmission {
                let entry = Needed::of(inst, part);
                if receivers & !entry.home != 0 {
                    return None;
                }
                let e = placement.entries.len() as u32;
                placement.entries.push(entry);
                let c = placement.column(table, part.worker);
                placement.columns[c as usize].entries.push(e);
                placement.column_of_entry.push(c);
            }
        }
        Some(placement)
    }

    /// The table of `mask`, added empty (height 0) if there is none.
    fn table(&mut self, mask: u128) -> u32 {
        if let Some(&t) = self.table_of.get(&mask) {
            return t;
        }
        self.masks.push(mask);
        self.heights.push(0);
        self.table_columns.push(Vec::new());
        let t = self.masks.len() as u32 - 1;
        self.table_of.insert(mask, t);
        t
    }

    /// Raises the table of `mask` by one row (its columns gain room), then lowers other tables
    /// while it can; keeps the result if at least two rows went (one packet saved), else
    /// changes nothing. Whether it kept it.
    fn raise_to_lower(&mut self, mask: u128, need: usize, work: &mut u64, budget: u64) -> bool {
        let before = self.clone();
        *work += self.entries.len() as u64 / 8 + self.columns.len() as u64;
        let raised = self.table(mask);
        self.heights[raised as usize] += 1;
        let mut members = mask;
        while members != 0 {
            let w = members.trailing_zeros() as usize;
            members &= members - 1;
            self.column(raised, w);
        }
        let mut lowered = 0;
        for table in 0..self.masks.len() as u32 {
            // Stuck before the raise, a table none of whose workers gained room stays stuck.
            if table == raised || self.masks[table as usize] & mask == 0 {
                continue;
            }
            while *work <= budget && self.lower(table, work) {
                lowered += 1;
            }
        }
        if lowered >= need {
            // A raised row left partly empty sheds its empty places too.
            while self.lower(raised, work) {}
            true
        } else {
            *self = before;
            false
        }
    }

    /// The column of `worker` in `table`, added empty if there is none.
    fn column(&mut self, table: u32, worker: usize) -> u32 {
        if let Some(&c) = self.column_of.get(&(table, worker)) {
            return c;
        }
        let c = self.columns.len() as u32;
        self.columns.push(Column { table, worker, entries: Vec::new() });
        self.table_columns[table as usize].push(c);
        self.worker_columns[worker].push(c);
        self.column_of.insert((table, worker), c);
        c
    }

    fn slack(&self, c: u32) -> bool {
        let column = &self.columns[c as usize];
        (column.entries.len() as u32) < self.heights[column.table as usize]
    }

    /// A way to take one entry out of column `from` (whose table is about to lose a row): a
    /// chain of moves, each entry into a column of its worker in a table inside its home, that
    /// ends in a column with room. Breadth first over the worker's columns (the augmenting
    /// paths of its transportation problem); `None` if there is none, which proves that the
    /// worker's points do not fit the lowered tables. Adds the columns it examines to `work`.
    fn augmenting_path(&self, from: u32, work: &mut u64, search: &mut PathSearch) -> Option<Vec<(u32, u32)>> {
        let worker = self.columns[from as usize].worker;
        let candidates = &self.worker_columns[worker];
        search.start(self.columns.len(), from);
        let mut homes_seen: Vec<u128> = Vec::new();
        while let Some(x) = search.queue.pop_front() {
            homes_seen.clear();
            for &e in &self.columns[x as usize].entries {
                let home = self.entries[e as usize].home;
                if homes_seen.contains(&home) {
                    continue;
                }
                homes_seen.push(home);
                for &y in candidates {
                    *work += 1;
                    let table = self.columns[y as usize].table as usize;
                    if search.reached(y) || self.heights[table] == 0 || self.masks[table] & !home != 0 {
                        continue;
                    }
                    search.reach(y, x, e);
                    if self.slack(y) {
                        let mut path = Vec::new();
                        let mut at = y;
                        while at != from {
                            let (prev, moved) = search.parent[at as usize];
                            path.push((moved, at));
                            at = prev;
                        }
                        return Some(path);
                    }
                    search.queue.push_back(y);
                }
            }
        }
        None
    }

    /// Applies a path: each entry moves into its column.
    fn apply(&mut self, path: &[(u32, u32)]) {
        // The path runs from the end with room back to the start; moving in that order keeps
        // every column within its height.
        for &(e, to) in path {
            let from = &mut self.columns[self.column_of_entry[e as usize] as usize].entries;
            if let Some(i) = from.iter().position(|&x| x == e) {
                from.swap_remove(i);
            }
            self.columns[to as usize].entries.push(e);
            self.column_of_entry[e as usize] = to;
        }
    }

    /// Tries to remove one row of `table`: every column as tall as the table sheds an entry
    /// along an augmenting path. Applies it and returns true, or changes nothing.
    fn lower(&mut self, table: u32, work: &mut u64) -> bool {
        let height = self.heights[table as usize];
        if height == 0 {
            return false;
        }
        let full: Vec<u32> = self.table_columns[table as usize]
            .iter()
            .copied()
            .filter(|&c| self.columns[c as usize].entries.len() as u32 == height)
            .collect();
        // The workers' problems are independent: find every path before moving anything. The
        // table's own columns must not take entries: its height is taken down first.
        self.heights[table as usize] -= 1;
        let mut paths = Vec::with_capacity(full.len());
        let mut search = std::mem::take(&mut self.search);
        for &c in &full {
            match self.augmenting_path(c, work, &mut search) {
                Some(path) => paths.push(path),
                None => {
                    self.search = search;
                    self.heights[table as usize] += 1;
                    return false;
                }
            }
        }
        self.search = search;
        for path in &paths {
            self.apply(path);
        }
        true
    }

    /// The plan: every table row by row.
    fn to_plan(&self) -> Plan {
        let mut plan = Plan::new();
        for (table, columns) in self.table_columns.iter().enumerate() {
            for row in 0..self.heights[table] as usize {
                plan.push_iter(columns.iter().filter_map(|&c| {
                    let column = &self.columns[c as usize];
                    column.entries.get(row).map(|&e| self.entries[e as usize].part())
                }));
            }
        }
        plan
    }
}

/// Lowers the tables of `plan` (a plan of carpool rows) by augmenting paths until no table can
/// lose a row or `work` (added to what it holds) reaches `budget`. Returns the improved plan, or `None` when the
/// plan is not made of carpool rows or nothing could be removed.
pub(crate) fn lower_tables(inst: &ShuffleInstance, plan: &Plan, work: &mut u64, budget: u64) -> Option<Plan> {
    let mut placement = Placement::of(inst, plan)?;
    let start = placement.heights.iter().sum::<u32>();
    let mut neutral = 0;
    let mut tried_sideways: Vec<u128> = Vec::new();
    loop {
        let mut lowered = false;
        for table in 0..placement.masks.len() as u32 {
            while *work <= budget && placement.lower(table, work) {
                lowered = true;
            }
        }
        if *work > budget {
            break;
        }
        if !lowered {
            // Stuck: try raising one row of some worker set (a new table too) to free two.
            let candidates = raise_candidates(&placement, inst.workers());
            let raised = candidates
                .iter()
                .any(|&mask| *work <= budget && placement.raise_to_lower(mask, 2, work, budget));
            if !raised {
                // A sideways move (one row raised, one lowered) to a placement not seen
                // before, then lowering again.
                let moved = neutral < MAX_SIDEWAYS
                    && candidates.iter().any(|&mask| {
                        !tried_sideways.contains(&mask)
                            && *work <= budget
                            && placement.raise_to_lower(mask, 1, work, budget)
                            && {
                                tried_sideways.push(mask);
                                true
                            }
                    });
                if !moved {
                    break;
                }
                neutral += 1;
            }
        }
    }
    (placement.heights.iter().sum::<u32>() < start).then(|| placement.to_plan())
}

/// The most sideways moves [`lower_tables`] makes.
const MAX_SIDEWAYS: usize = 64;

/// The most workers for which [`lower_tables`] tries raising every worker set.
const RAISE_MAX_WORKERS: usize = 14;

/// The worker sets worth raising, largest first: every set of at least two workers each of
/// which has a point cached by all the others (up to [`RAISE_MAX_WORKERS`] workers).
fn raise_candidates(placement: &Placement, workers: usize) -> Vec<u128> {
    if workers > RAISE_MAX_WORKERS {
        return Vec::new();
    }
    // Each worker's distinct homes.
    let mut homes: Vec<Vec<u128>> = vec![Vec::new(); workers];
    for entry in &placement.entries {
        let list = &mut homes[entry.worker];
        if !list.contains(&entry.home) {
            list.push(entry.home);
        }
    }
    let mut sets: Vec<u128> = (0..1u128 << workers)
        .filter(|&mask| mask.count_ones() >= 2)
        .filter(|&mask| {
            (0..workers)
                .filter(|&w| mask >> w & 1 == 1)
                .all(|w| homes[w].iter().any(|&home| mask & !home == 0))
        })
        .collect();
    sets.sort_by_key(|&mask| (std::cmp::Reverse(mask.count_ones()), mask));
    sets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::{UberShuffleOptPlanner, UberShufflePlanner};
    use crate::{GeneratorParams, ShufflePlanner, seeded, verify};

    #[test]
    fn lowers_the_greedy_and_keeps_every_plan_valid() {
        for seed in 1..=2 {
            let inst =
                GeneratorParams { workers: 8, points: 300, alpha: 0.5, seed }.check().unwrap().generate();
            let greedy = UberShufflePlanner::default().plan(&inst, &mut seeded(1)).unwrap();
            let lowered =
                lower_tables(&inst, &greedy, &mut 0, 300_000).expect("the greedy leaves rows to remove");
            assert!(verify(&inst, &lowered).unwrap().is_valid());
            assert!(lowered.len() < greedy.len());
            assert_eq!(lower_tables(&inst, &greedy, &mut 0, 300_000), Some(lowered.clone()), "deterministic");
            // On ubershuffle-opt's plan too: never more, always valid.
            let opt = UberShuffleOptPlanner::with_work_budget(2_000_000).plan(&inst, &mut seeded(1)).unwrap();
            if let Some(better) = lower_tables(&inst, &opt, &mut 0, 300_000) {
                assert!(verify(&inst, &better).unwrap().is_valid());
                assert!(better.len() < opt.len());
            }
        }
        // A plan that is not made of carpool rows is left alone.
        let inst = ShuffleInstance::paper_example();
        let mut two_parts_one_worker = Plan::new();
        two_parts_one_worker.push_iter([crate::Part::new(0, 0), crate::Part::new(1, 0)]);
        assert_eq!(lower_tables(&inst, &two_parts_one_worker, &mut 0, 1000), None);
    }
}
