//! Lee et al.'s encoding tables: the needed points grouped by the set of workers that cache them.
//!
//! The table of worker set `I` has one column per member `i`; column `i` holds the points worker
//! `i` needs that are cached by every worker of `I \ {i}` and by no worker outside `I`. A table
//! of one worker (`I = {i}`) holds the points nobody caches: they are unicasts. The master sends
//! one packet per row of every table, the XOR of that row's entries, so a table costs the
//! height of its tallest column. The UberShuffle planners start from these tables and move
//! points between them.

use crate::planner::PlanError;
use crate::worker_set::{MAX_SET_WORKERS, WorkerSet};
use crate::{Part, Plan, ShuffleInstance};

/// One column of an encoding table: points needed by `worker`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The worker that needs these points.
    pub worker: u32,
    /// The points, in increasing id order as built.
    pub points: Vec<u32>,
}

/// The encoding table of one worker set: a column for each member (possibly empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodingTable {
    /// The worker set `I` labelling the table.
    pub members: WorkerSet,
    /// One column per member, in increasing worker order.
    pub columns: Vec<Column>,
}

impl EncodingTable {
    /// An empty table for `members`.
    pub fn empty(members: WorkerSet) -> Self {
        let columns = members.iter().map(|w| Column { worker: w as u32, points: Vec::new() }).collect();
        EncodingTable { members, columns }
    }

    /// The number of packets the table costs: the height of its tallest column.
    pub fn height(&self) -> usize {
        self.columns.iter().map(|c| c.points.len()).max().unwrap_or(0)
    }

    /// The column of `worker`, if it is a member.
    pub fn column(&self, worker: usize) -> Option<&Column> {
        self.column_index(worker).map(|k| &self.columns[k])
    }

    /// The column of `worker`, mutably, if it is a member.
    pub fn column_mut(&mut self, worker: usize) -> Option<&mut Column> {
        self.column_index(worker).map(|k| &mut self.columns[k])
    }

    fn column_index(&self, worker: usize) -> Option<usize> {
        self.members
            .contains(worker)
            .then(|| (self.members.bits() & ((1u128 << worker) - 1)).count_ones() as usize)
    }

    /// Appends the table's packets to `plan`: row `r` XORs the `r`-th point of every column
    /// that has one.
    pub fn push_packets(&self, plan: &mut Plan) {
        for row in 0..self.height() {
            plan.push_iter(
                self.columns
                    .iter()
                    .filter_map(|c| c.points.get(row).map(|&p| Part { point: p, worker: c.worker })),
            );
        }
    }
}

/// Builds Lee et al.'s encoding tables of `inst`, ordered by their worker-set mask. Tables with
/// no needed point are left out. `planner` names the caller in the error for too many workers.
///
/// Grouping sorts the needed points by (cacher set, worker): `O(q log q)`, never `2^n`.
pub fn encoding_tables(inst: &ShuffleInstance, planner: &str) -> Result<Vec<EncodingTable>, PlanError> {
    let mut tables: Vec<EncodingTable> = Vec::new();
    for (bits, worker, point) in table_entries(inst, planner)? {
        let members = WorkerSet::from_bits(bits);
        if tables.last().is_none_or(|t| t.members != members) {
            tables.push(EncodingTable::empty(members));
        }
        if let Some(column) = tables.last_mut().and_then(|t| t.column_mut(worker as usize)) {
            column.points.push(point);
        }
    }
    Ok(tables)
}

/// Every needed point as `(table mask, worker, point)`, sorted: the table mask is the set of
/// workers caching the point plus the worker needing it. This is the order
/// [`encoding_tables`] lays the tables out in; planners that keep their own compact form of the
/// tables start from it. `planner` names the caller in the error for too many workers.
pub fn table_entries(inst: &ShuffleInstance, planner: &str) -> Result<Vec<(u128, u32, u32)>, PlanError> {
    let cachers = inst.cachers().ok_or_else(|| PlanError::TooManyWorkers {
        planner: planner.to_string(),
        workers: inst.workers(),
        max: MAX_SET_WORKERS,
    })?;
    let mut entries: Vec<(u128, u32, u32)> = Vec::with_capacity(inst.uncoded_transmissions());
    for worker in 0..inst.workers() {
        for p in inst.needs(worker) {
            let members = cachers[p as usize].with(worker);
            entries.push((members.bits(), worker as u32, p));
        }
    }
    drop(cachers);
    entries.sort_unstable();
    Ok(entries)
}

/// The number of packets the tables cost: the sum of their heights.
pub fn tables_cost(tables: &[EncodingTable]) -> usize {
    tables.iter().map(EncodingTable::height).sum()
}

/// The plan that sends every table row by row.
pub fn tables_to_plan(tables: &[EncodingTable]) -> Plan {
    let parts = tables.iter().map(|t| t.columns.iter().map(|c| c.points.len()).sum::<usize>()).sum();
    let mut plan = Plan::with_capacity(tables_cost(tables), parts);
    for table in tables {
        table.push_packets(&mut plan);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::ubershuffle_paper_example;

    #[test]
    fn paper_example_tables_match_fig_1b() {
        let inst = ubershuffle_paper_example();
        let tables = encoding_tables(&inst, "coded").unwrap();
        let shape: Vec<(String, Vec<Vec<u32>>)> = tables
            .iter()
            .map(|t| (t.members.to_string(), t.columns.iter().map(|c| c.points.clone()).collect()))
            .collect();
        // 0-based: table {0,2} holds d_5 (4) for worker 0 and d_2 (1) for worker 2; table
        // {1,2} holds d_1 (0) for worker 1 and d_6, d_7 (5, 6) for worker 2; table {0,1,2}
        // holds d_4 (3) for worker 1.
        assert_eq!(
            shape,
            vec![
                ("{0,2}".to_string(), vec![vec![4], vec![1]]),
                ("{1,2}".to_string(), vec![vec![0], vec![5, 6]]),
                ("{0,1,2}".to_string(), vec![vec![], vec![3], vec![]]),
            ]
        );
        assert_eq!(tables_cost(&tables), 4);
        let t = &tables[2];
        assert_eq!(t.column(1).unwrap().points, vec![3]);
        assert!(t.column(5).is_none());
    }
}
