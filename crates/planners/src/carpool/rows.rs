//! [`Rows`]: a plan as explicit rows (one XOR packet each), and the local search that empties
//! small rows into others.

use super::tables::{CarpoolTables, NIL};
use crate::{Part, Plan};

/// One entry as a row sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RowEntry {
    point: u32,
    owner: u8,
    home: u128,
}

/// Rows tried per entry for a swap when it has no free place (16 measured best for its cost:
/// 4 gained half as much, 64 twice the work for a quarter more).
const SWAP_CANDIDATES: usize = 16;

/// How to take back one change of an attempt to empty a row.
#[derive(Clone, Copy, Debug)]
enum Undo {
    /// An entry was appended to `row`, whose masks were these.
    Join { row: u32, owners: u128, allowed: u128 },
    /// `entry` was replaced at `index` of `row`, whose allowed mask was this.
    Swap { row: u32, index: u32, entry: RowEntry, allowed: u128 },
}

/// A set of rows covering every entry once. A row is valid when its entries have distinct
/// owners `W` and every home contains `W`, i.e. `W ⊆ A`, where `A` is the intersection of the
/// homes: then every owner caches the other points and decodes its own from the XOR. Rows
/// are not tied to tables: a row of table `J` whose column `v` is empty accepts any entry of
/// `v` whose home contains the row's owners, even one that no table containing `J` could take.
#[derive(Clone, Debug)]
pub(crate) struct Rows {
    workers: usize,
    owners: Vec<u128>,
    allowed: Vec<u128>,
    members: Vec<Vec<RowEntry>>,
    alive: Vec<bool>,
    len: usize,
}

impl Rows {
    /// The rows of `tables`: row `r` of a table takes the `r`-th entry of every column that
    /// has one.
    pub(crate) fn from_tables(tables: &CarpoolTables) -> Self {
        let mut rows = Rows {
            workers: tables.workers(),
            owners: Vec::with_capacity(tables.cost()),
            allowed: Vec::with_capacity(tables.cost()),
            members: Vec::with_capacity(tables.cost()),
            alive: Vec::with_capacity(tables.cost()),
            len: 0,
        };
        let mut order: Vec<u32> =
            (0..tables.table_count() as u32).filter(|&t| tables.height(t) > 0).collect();
        order.sort_unstable_by_key(|&t| tables.mask(t));
        let mut columns: Vec<u32> = Vec::new();
        for t in order {
            let mask = tables.mask(t);
            columns.clear();
            columns.extend((0..tables.workers()).filter(|&w| mask >> w & 1 == 1).map(|w| tables.first(t, w)));
            for _ in 0..tables.height(t) {
                let mut row = Vec::with_capacity(columns.len());
                for e in columns.iter_mut().filter(|e| **e != NIL) {
                    row.push(RowEntry {
                        point: tables.point(*e),
                        owner: tables.owner(*e) as u8,
                        home: tables.home(*e),
                    });
                    *e = tables.next(*e);
                }
                rows.push(row);
            }
        }
        rows
    }

    fn push(&mut self, row: Vec<RowEntry>) {
        self.owners.push(row.iter().fold(0, |m, e| m | 1u128 << e.owner));
        self.allowed.push(row.iter().fold(u128::MAX, |m, e| m & e.home));
        self.members.push(row);
        self.alive.push(true);
        self.len += 1;
    }

    /// The number of rows (packets).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Empties rows into other rows, smallest rows first: every entry of a row moves to
    /// another row with a free place for its owner (its owner in that row's `A` but not in
    /// its `W`) whose owners its home contains (first fit), or else takes the place of the
    /// entry of its own worker in a row whose owners its home contains, when that entry has
    /// a free place elsewhere (trying up to [`SWAP_CANDIDATES`] rows). The row disappears when
    /// all of its entries found a place, and nothing changes otherwise. Passes repeat while
    /// they remove rows and `work_left` (row visits) lasts. Returns the work done.
    pub(crate) fn empty_small_rows(&mut self, work_left: u64) -> u64 {
        let mut work = 0u64;
        loop {
            let before = self.len;
            work += self.empty_pass(work_left.saturating_sub(work));
            if self.len == before || work >= work_left {
                return work;
            }
        }
    }

    fn empty_pass(&mut self, work_left: u64) -> u64 {
        let n = self.workers;
        // open[v]: rows with a free place for worker v; holding[v]: rows with an entry of v.
        // Both may go stale and are checked on use.
        let mut open: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut holding: Vec<Vec<u32>> = vec![Vec::new(); n];
        for r in (0..self.owners.len()).filter(|&r| self.alive[r]) {
            let free = self.allowed[r] & !self.owners[r];
            for v in (0..n).filter(|&v| free >> v & 1 == 1) {
                open[v].push(r as u32);
            }
            for v in (0..n).filter(|&v| self.owners[r] >> v & 1 == 1) {
                holding[v].push(r as u32);
            }
        }
        let mut order: Vec<u32> = (0..self.owners.len() as u32).filter(|&r| self.alive[r as usize]).collect();
        order.sort_by_key(|&r| self.members[r as usize].len());
        let mut work = 0u64;
        let mut undo: Vec<Undo> = Vec::new();
        for r in order {
            if work >= work_left {
                break;
            }
            if !self.alive[r as usize] {
                continue;
            }
            undo.clear();
            let mut placed = true;
            for k in 0..self.members[r as usize].len() {
                let entry = self.members[r as usize][k];
                if let Some(c) = self.free_place(&open, entry, &[r as usize], &mut work) {
                    self.join(c, entry, &mut undo);
                    continue;
                }
                // Swap: take the place of the entry of the same worker in a row whose workers
                // all cache this entry's point, if that entry has a free place elsewhere.
                let v = entry.owner as usize;
                let mut tried = 0;
                let mut done = false;
                for &c in &holding[v] {
                    if tried >= SWAP_CANDIDATES {
                        break;
                    }
                    work += 1;
                    let c = c as usize;
                    if c == r as usize
                        || !self.alive[c]
                        || self.owners[c] >> v & 1 == 0
                        || self.owners[c] & !entry.home != 0
                    {
                        continue;
                    }
                    tried += 1;
                    let Some(idx) = self.members[c].iter().position(|e| e.owner as usize == v) else {
                        continue;
                    };
                    let displaced = self.members[c][idx];
                    if let Some(d) = self.free_place(&open, displaced, &[r as usize, c], &mut work) {
                        undo.push(Undo::Swap {
                            row: c as u32,
                            index: idx as u32,
                            entry: displaced,
                            allowed: self.allowed[c],
                        });
                        self.members[c][idx] = entry;
                        self.allowed[c] = self.members[c].iter().fold(u128::MAX, |m, e| m & e.home);
                        self.join(d, displaced, &mut undo);
                        done = true;
                        break;
                    }
                }
                if !done {
                    placed = false;
                    break;
                }
            }
            if placed {
                self.members[r as usize].clear();
                self.alive[r as usize] = false;
                self.len -= 1;
            } else {
                while let Some(op) = undo.pop() {
                    match op {
                        Undo::Join { row, owners, allowed } => {
                            self.members[row as usize].pop();
                            self.owners[row as usize] = owners;
                            self.allowed[row as usize] = allowed;
                        }
                        Undo::Swap { row, index, entry, allowed } => {
                            self.members[row as usize][index as usize] = entry;
                            self.allowed[row as usize] = allowed;
                        }
                    }
                }
            }
        }
        work
    }

    /// A row other than `exclude` with a free place for `entry`'s worker whose workers all
    /// cache `entry`'s point (first fit).
    fn free_place(
        &self,
        open: &[Vec<u32>],
        entry: RowEntry,
        exclude: &[usize],
        work: &mut u64,
    ) -> Option<usize> {
        let v = entry.owner as usize;
        for &c in &open[v] {
            *work += 1;
            let c = c as usize;
            if self.alive[c]
                && self.owners[c] & !entry.home == 0
                && (self.allowed[c] & !self.owners[c]) >> v & 1 == 1
                && !exclude.contains(&c)
            {
                return Some(c);
            }
        }
        None
    }

    /// Adds `entry` to row `c`, recording how to take it back.
    fn join(&mut self, c: usize, entry: RowEntry, undo: &mut Vec<Undo>) {
        undo.push(Undo::Join { row: c as u32, owners: self.owners[c], allowed: self.allowed[c] });
        self.owners[c] |= 1u128 << entry.owner;
        self.allowed[c] &= entry.home;
        self.members[c].push(entry);
    }

    /// One transmission per row.
    pub(crate) fn to_plan(&self) -> Plan {
        let parts = self.members.iter().map(Vec::len).sum();
        let mut plan = Plan::with_capacity(self.len, parts);
        for (row, _) in self.members.iter().zip(&self.alive).filter(|(_, alive)| **alive) {
            plan.push_iter(row.iter().map(|e| Part::new(e.point, e.owner as usize)));
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, verify};

    #[test]
    fn rows_of_tables_keep_the_count_and_emptying_keeps_rows_valid() {
        for seed in 0..5 {
            let inst = GeneratorParams { workers: 8, points: 400, alpha: 0.25 + 0.1 * seed as f64, seed }
                .check()
                .unwrap()
                .generate();
            let tables = CarpoolTables::build(&inst, "test").unwrap();
            let mut rows = Rows::from_tables(&tables);
            assert_eq!(rows.len(), tables.cost());
            assert_eq!(rows.to_plan().len(), tables.cost());
            rows.empty_small_rows(u64::MAX);
            assert!(rows.len() < tables.cost(), "seed {seed}");
            for r in (0..rows.owners.len()).filter(|&r| rows.alive[r]) {
                assert_eq!(rows.owners[r] & !rows.allowed[r], 0);
                assert_eq!(rows.owners[r].count_ones() as usize, rows.members[r].len());
            }
            let plan = rows.to_plan();
            assert_eq!(plan.len(), rows.len());
            assert!(verify(&inst, &plan).unwrap().is_valid());
        }
    }
}
