//! Lee et al.'s encoding tables: the needed points grouped by the set of workers that cache them.
//!
//! The table of worker set `I` has one column per member `i`; column `i` holds the points worker
//! `i` needs that are cached by every worker of `I \ {i}` and by no worker outside `I`. A table
//! of one worker (`I = {i}`) holds the points nobody caches: they are unicasts. The master sends
//! one packet per row of every table, the XOR of that row's entries, so a table costs the
//! height of its tallest column. The UberShuffle planners start from these tables and move
//! points between them.

#[cfg(test)]
use crate::WorkerSet;
use crate::planners::{BuiltinPlanner, CliqueCoverPlanner};
use crate::requests::Requests;
use crate::{Part, Plan, PlanError, ShuffleInstance, bits};

/// The most workers of the planners that keep table labels as 128-bit masks (`ubershuffle`,
/// `ubershuffle-opt`): their subset searches are out of reach long before that anyway.
pub(crate) const CARPOOL_MAX_WORKERS: usize = 128;

/// Lee et al.'s tables of an instance with any number of workers, stored flat: the needed
/// points sorted by table (its worker set read as a number), then worker, then point.
///
/// At `n = 1000` almost every table holds one point, so nothing per member is stored.
#[cfg_attr(not(test), allow(dead_code))] // `sets` and `words`: the tests read the tables' labels
pub(crate) struct EncodingTables {
    /// `(point, worker)` of every entry, in table order.
    entries: Vec<(u32, u32)>,
    /// Where each table's entries start (and the total at the end).
    starts: Vec<usize>,
    /// Each table's worker set, `words` words each.
    sets: Vec<u64>,
    words: usize,
}

impl EncodingTables {
    /// The tables of `inst`: `O(U log U)` comparisons of `n / 64` words, never `2^n`.
    pub(crate) fn of(inst: &ShuffleInstance) -> Self {
        let requests = Requests::of(inst);
        let rows = requests.cacher_rows();
        // A request's table is its cachers plus its receiver.
        let words = rows.words();
        let mut homes = Vec::with_capacity(requests.len() * words);
        for r in 0..requests.len() {
            let start = homes.len();
            homes.extend_from_slice(rows.of(r));
            bits::set(&mut homes[start..], requests.receiver(r));
        }
        drop(rows);
        let home = |r: u32| &homes[r as usize * words..(r as usize + 1) * words];
        let mut order: Vec<u32> = (0..requests.len() as u32).collect();
        // Request order is (receiver, point), the order inside a table.
        order.sort_unstable_by(|&a, &b| home(a).iter().rev().cmp(home(b).iter().rev()).then(a.cmp(&b)));
        let mut tables = EncodingTables {
            entries: Vec::with_capacity(order.len()),
            starts: Vec::new(),
            sets: Vec::new(),
            words,
        };
        let mut last: Option<&[u64]> = None;
        for r in order {
            let set = home(r);
            if last != Some(set) {
                tables.starts.push(tables.entries.len());
                tables.sets.extend_from_slice(set);
                last = Some(set);
            }
            tables.entries.push((requests.point(r as usize), requests.receiver(r as usize) as u32));
        }
        tables.starts.push(tables.entries.len());
        tables
    }

    /// Number of tables holding at least one point.
    pub(crate) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// The worker set of table `t`.
    #[cfg(test)]
    pub(crate) fn members(&self, t: usize) -> WorkerSet {
        WorkerSet::from_words(&self.sets[t * self.words..(t + 1) * self.words])
    }

    /// The `(point, worker)` entries of table `t`, by worker then point.
    pub(crate) fn entries(&self, t: usize) -> &[(u32, u32)] {
        &self.entries[self.starts[t]..self.starts[t + 1]]
    }

    /// The packets of table `t`: the height of its tallest column.
    pub(crate) fn height(&self, t: usize) -> usize {
        self.entries(t).chunk_by(|a, b| a.1 == b.1).map(<[_]>::len).max().unwrap_or(0)
    }

    /// The packets of all tables: the sum of heights.
    pub(crate) fn cost(&self) -> usize {
        (0..self.len()).map(|t| self.height(t)).sum()
    }

    /// The plan that sends every table row by row: row `r` XORs the `r`-th point of every
    /// column that has one.
    pub(crate) fn to_plan(&self) -> Plan {
        let mut plan = Plan::with_capacity(self.cost(), self.entries.len());
        let mut columns: Vec<&[(u32, u32)]> = Vec::new();
        for t in 0..self.len() {
            columns.clear();
            columns.extend(self.entries(t).chunk_by(|a, b| a.1 == b.1));
            for row in 0..self.height(t) {
                plan.push_iter(
                    columns.iter().filter_map(|c| c.get(row).map(|&(p, w)| Part::new(p, w as usize))),
                );
            }
        }
        plan
    }
}

/// Every needed point as `(table mask, worker, point)`, sorted: the table mask is the set of
/// workers caching the point plus the worker needing it, as a 128-bit mask. This is the order
/// of [`EncodingTables`]; the carpool planners keep their own compact, mutable form of the
/// tables and start from it. More than [`CARPOOL_MAX_WORKERS`] workers is an error naming
/// `planner`.
pub(crate) fn table_entries(
    inst: &ShuffleInstance,
    planner: &str,
) -> Result<Vec<(u128, u32, u32)>, PlanError> {
    if inst.workers() > CARPOOL_MAX_WORKERS {
        return Err(PlanError::TooManyWorkers {
            planner: planner.to_string(),
            workers: inst.workers(),
            max: CARPOOL_MAX_WORKERS,
            suggestion: CliqueCoverPlanner::NAME,
        });
    }
    let requests = Requests::of(inst);
    let rows = requests.cacher_rows();
    let mut entries: Vec<(u128, u32, u32)> = (0..requests.len())
        .map(|r| {
            let words = rows.of(r);
            let low = u128::from(words.first().copied().unwrap_or(0));
            let high = u128::from(words.get(1).copied().unwrap_or(0));
            let mask = low | high << 64 | 1u128 << requests.receiver(r);
            (mask, requests.receiver(r) as u32, requests.point(r))
        })
        .collect();
    entries.sort_unstable();
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;

    #[test]
    fn paper_example_tables_match_fig_1b() {
        let inst = ShuffleInstance::paper_example();
        let tables = EncodingTables::of(&inst);
        let shape: Vec<(String, Vec<(u32, u32)>)> =
            (0..tables.len()).map(|t| (tables.members(t).to_string(), tables.entries(t).to_vec())).collect();
        // 0-based: table {0,2} holds d_5 (4) for worker 0 and d_2 (1) for worker 2; table
        // {1,2} holds d_1 (0) for worker 1 and d_6, d_7 (5, 6) for worker 2; table {0,1,2}
        // holds d_4 (3) for worker 1.
        assert_eq!(
            shape,
            vec![
                ("{0,2}".to_string(), vec![(4, 0), (1, 2)]),
                ("{1,2}".to_string(), vec![(0, 1), (5, 2), (6, 2)]),
                ("{0,1,2}".to_string(), vec![(3, 1)]),
            ]
        );
        assert_eq!(tables.cost(), 4);
        assert_eq!(tables.to_plan().len(), 4);
    }

    #[test]
    fn tables_match_the_128_bit_entries_and_beyond_128_workers_plan() {
        let inst =
            GeneratorParams { workers: 8, points: 2000, alpha: 0.3, seed: 5 }.check().unwrap().generate();
        let tables = EncodingTables::of(&inst);
        let flat: Vec<(u128, u32, u32)> = (0..tables.len())
            .flat_map(|t| {
                let mask = tables.members(t).iter().fold(0u128, |m, w| m | 1 << w);
                tables.entries(t).iter().map(move |&(p, w)| (mask, w, p))
            })
            .collect();
        assert_eq!(flat, table_entries(&inst, "test").unwrap());
        assert!(tables.cost() < inst.uncoded_transmissions());
        let wide =
            GeneratorParams { workers: 200, points: 4000, alpha: 0.05, seed: 1 }.check().unwrap().generate();
        let plan = EncodingTables::of(&wide).to_plan();
        assert!(crate::verify(&wide, &plan).unwrap().is_valid());
        assert!(table_entries(&wide, "test").unwrap_err().to_string().contains("at most 128 workers"));
    }
}
