//! [`CarpoolTables`]: Lee et al.'s encoding tables in a compact, mutable form, for planners that
//! move points between tables.

use super::mask_index::MaskIndex;
use crate::tables::table_entries;
use crate::{Part, Plan, PlanError, ShuffleInstance};

/// The end of a column's list of entries.
pub(crate) const NIL: u32 = u32::MAX;

/// A table's bookkeeping.
#[derive(Clone, Copy, Debug)]
struct TableMeta {
    /// Its first slot (one per member, in worker order).
    slot_start: u32,
    /// The tallest column's count.
    height: u32,
    /// Entries in all its columns.
    size: u32,
    /// Columns as tall as the table, so that lowering a column rescans the table only when it
    /// was the last at that height.
    tallest: u32,
}

/// An entry's place: the links of its column's list, its table and its worker.
#[derive(Clone, Copy, Debug)]
struct Link {
    next: u32,
    prev: u32,
    table: u32,
    owner: u32,
}

/// Encoding tables whose points can move from table to table.
///
/// An *entry* is one needed point: the point, the worker needing it, and its *home*, the mask
/// of the table Lee et al. put it in (its cachers plus its worker). An entry may sit in column
/// `w` of any table `J` with `w ∈ J ⊆ home`: every other worker of `J` caches it, so a row of
/// `J` (the XOR of one entry per column) decodes at every worker of `J`.
///
/// Storage is flat so that a million points cost a few tens of MB: tables own consecutive
/// *slots* (one per member, in worker order); each slot keeps a count and a doubly linked list
/// of its entries. Heights are kept equal to the tallest column at all times.
#[derive(Clone, Debug)]
pub(crate) struct CarpoolTables {
    workers: usize,
    masks: Vec<u128>,
    /// Per table: where its slots start, its height, size and tallest columns (one record,
    /// so that a move reads one cache line of each table it touches).
    meta: Vec<TableMeta>,
    count: Vec<u32>,
    head: Vec<u32>,
    /// Per entry: its column's list links, its table and its worker (one record).
    links: Vec<Link>,
    point: Vec<u32>,
    home: Vec<u128>,
    index: MaskIndex,
    cost: usize,
}

impl CarpoolTables {
    /// Lee et al.'s tables of `inst` (the same tables as [`crate::tables::encoding_tables`]),
    /// in increasing mask order. `planner` names the caller in errors.
    pub(crate) fn build(inst: &ShuffleInstance, planner: &str) -> Result<Self, PlanError> {
        let entries = table_entries(inst, planner)?;
        let n = entries.len();
        let mut tables = CarpoolTables {
            workers: inst.workers(),
            masks: Vec::new(),
            meta: Vec::new(),
            count: Vec::new(),
            head: Vec::new(),
            links: Vec::with_capacity(n),
            point: Vec::with_capacity(n),
            home: Vec::with_capacity(n),
            index: MaskIndex::new(inst.workers()),
            cost: 0,
        };
        for (mask, worker, point) in entries {
            if tables.masks.last() != Some(&mask) {
                tables.add_table(mask);
            }
            let table = tables.masks.len() as u32 - 1;
            let entry = tables.point.len() as u32;
            tables.point.push(point);
            tables.home.push(mask);
            tables.links.push(Link { next: NIL, prev: NIL, table: NIL, owner: worker });
            tables.link(entry, table);
        }
        Ok(tables)
    }

    /// Number of workers of the instance.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Number of tables (empty ones included).
    pub(crate) fn table_count(&self) -> usize {
        self.masks.len()
    }

    /// Number of entries (needed points).
    pub(crate) fn entry_count(&self) -> usize {
        self.point.len()
    }

    /// The worker set of table `t`.
    #[inline]
    pub(crate) fn mask(&self, t: u32) -> u128 {
        self.masks[t as usize]
    }

    /// The height (packets) of table `t`.
    #[inline]
    pub(crate) fn height(&self, t: u32) -> u32 {
        self.meta[t as usize].height
    }

    /// The number of entries in table `t`.
    #[inline]
    pub(crate) fn size(&self, t: u32) -> u32 {
        self.meta[t as usize].size
    }

    /// The empty places of table `t`: `|J| * height - size`.
    #[inline]
    pub(crate) fn room(&self, t: u32) -> u32 {
        self.mask(t).count_ones() * self.height(t) - self.size(t)
    }

    /// The packets of all tables: the sum of heights.
    pub(crate) fn cost(&self) -> usize {
        self.cost
    }

    /// The table of worker set `mask`, if there is one.
    #[inline]
    pub(crate) fn find(&self, mask: u128) -> Option<u32> {
        self.index.get(mask)
    }

    /// The slot of `worker`'s column in table `t` (`worker` must be a member).
    #[inline]
    fn slot(&self, t: u32, worker: usize) -> usize {
        debug_assert!(self.masks[t as usize] >> worker & 1 == 1);
        let below = self.masks[t as usize] & ((1u128 << worker) - 1);
        self.meta[t as usize].slot_start as usize + below.count_ones() as usize
    }

    /// The number of entries in `worker`'s column of table `t`.
    #[inline]
    pub(crate) fn count(&self, t: u32, worker: usize) -> u32 {
        self.count[self.slot(t, worker)]
    }

    /// The number of entries in each column of table `t`, its members in increasing order.
    #[inline]
    pub(crate) fn column_counts(&self, t: u32) -> &[u32] {
        let start = self.meta[t as usize].slot_start as usize;
        &self.count[start..start + self.masks[t as usize].count_ones() as usize]
    }

    /// Whether `worker`'s column of table `t` is shorter than the table, so that an entry can
    /// join it without raising the table.
    #[inline]
    pub(crate) fn has_room(&self, t: u32, worker: usize) -> bool {
        self.count(t, worker) < self.height(t)
    }

    /// The worker needing entry `e`.
    #[inline]
    pub(crate) fn owner(&self, e: u32) -> usize {
        self.links[e as usize].owner as usize
    }

    /// The point of entry `e`.
    #[inline]
    pub(crate) fn point(&self, e: u32) -> u32 {
        self.point[e as usize]
    }

    /// The home mask of entry `e` (its cachers plus its worker).
    #[inline]
    pub(crate) fn home(&self, e: u32) -> u128 {
        self.home[e as usize]
    }

    /// The table entry `e` sits in.
    #[inline]
    pub(crate) fn table_of(&self, e: u32) -> u32 {
        self.links[e as usize].table
    }

    /// The first entry of `worker`'s column of table `t` ([`NIL`] when empty).
    #[inline]
    pub(crate) fn first(&self, t: u32, worker: usize) -> u32 {
        self.head[self.slot(t, worker)]
    }

    /// The entry after `e` in its column ([`NIL`] at the end).
    #[inline]
    pub(crate) fn next(&self, e: u32) -> u32 {
        self.links[e as usize].next
    }

    /// Adds an empty table for `mask` (which must have none yet) and returns its id.
    pub(crate) fn add_table(&mut self, mask: u128) -> u32 {
        debug_assert!(self.find(mask).is_none());
        let id = self.masks.len() as u32;
        self.masks.push(mask);
        let members = mask.count_ones() as usize;
        self.meta.push(TableMeta {
            slot_start: self.count.len() as u32,
            height: 0,
            size: 0,
            tallest: members as u32,
        });
        self.count.extend(std::iter::repeat_n(0, members));
        self.head.extend(std::iter::repeat_n(NIL, members));
        self.index.insert(mask, id);
        id
    }

    /// The table for `mask`, added empty if there is none yet.
    pub(crate) fn find_or_add(&mut self, mask: u128) -> u32 {
        match self.find(mask) {
            Some(t) => t,
            None => self.add_table(mask),
        }
    }

    /// Moves entry `e` into its worker's column of table `to` (which must lie inside its home
    /// and contain its worker), keeping heights and the cost up to date.
    pub(crate) fn move_entry(&mut self, e: u32, to: u32) {
        self.detach(e);
        self.attach(e, to);
    }

    /// Takes entry `e` out of its table, leaving it in none (until [`Self::attach`]).
    pub(crate) fn detach(&mut self, e: u32) {
        if self.links[e as usize].table != NIL {
            self.unlink(e);
            self.links[e as usize].table = NIL;
        }
    }

    /// Puts a detached entry `e` into its worker's column of table `to`, which must lie inside
    /// its home and contain its worker.
    pub(crate) fn attach(&mut self, e: u32, to: u32) {
        debug_assert!(self.links[e as usize].table == NIL);
        debug_assert!(self.masks[to as usize] & !self.home(e) == 0);
        debug_assert!(self.masks[to as usize] >> self.owner(e) & 1 == 1);
        self.link(e, to);
    }

    fn link(&mut self, e: u32, t: u32) {
        let slot = self.slot(t, self.owner(e));
        let old = self.head[slot];
        self.links[e as usize].next = old;
        self.links[e as usize].prev = NIL;
        if old != NIL {
            self.links[old as usize].prev = e;
        }
        self.head[slot] = e;
        self.links[e as usize].table = t;
        self.count[slot] += 1;
        self.meta[t as usize].size += 1;
        if self.count[slot] > self.meta[t as usize].height {
            self.meta[t as usize].height = self.count[slot];
            self.meta[t as usize].tallest = 1;
            self.cost += 1;
        } else if self.count[slot] == self.meta[t as usize].height {
            self.meta[t as usize].tallest += 1;
        }
    }

    fn unlink(&mut self, e: u32) {
        let t = self.table_of(e);
        let slot = self.slot(t, self.owner(e));
        let (p, n) = (self.links[e as usize].prev, self.links[e as usize].next);
        if p == NIL {
            self.head[slot] = n;
        } else {
            self.links[p as usize].next = n;
        }
        if n != NIL {
            self.links[n as usize].prev = p;
        }
        self.count[slot] -= 1;
        self.meta[t as usize].size -= 1;
        if self.count[slot] + 1 == self.meta[t as usize].height {
            self.meta[t as usize].tallest -= 1;
            if self.meta[t as usize].tallest == 0 {
                let start = self.meta[t as usize].slot_start as usize;
                let members = self.masks[t as usize].count_ones() as usize;
                let columns = &self.count[start..start + members];
                let height = columns.iter().copied().max().unwrap_or(0);
                self.meta[t as usize].tallest = columns.iter().filter(|&&c| c == height).count() as u32;
                self.cost -= (self.meta[t as usize].height - height) as usize;
                self.meta[t as usize].height = height;
            }
        }
    }

    /// The plan that sends every table row by row, tables in increasing mask order.
    pub(crate) fn to_plan(&self) -> Plan {
        let mut order: Vec<u32> = (0..self.masks.len() as u32).filter(|&t| self.height(t) > 0).collect();
        order.sort_unstable_by_key(|&t| self.mask(t));
        let mut plan = Plan::with_capacity(self.cost, self.point.len());
        let mut columns: Vec<Vec<u32>> = Vec::new();
        for t in order {
            let mask = self.mask(t);
            columns.clear();
            for worker in (0..self.workers).filter(|&w| mask >> w & 1 == 1) {
                let mut column = Vec::new();
                let mut e = self.first(t, worker);
                while e != NIL {
                    column.push(e);
                    e = self.next(e);
                }
                columns.push(column);
            }
            for row in 0..self.height(t) as usize {
                plan.push_iter(
                    columns.iter().filter_map(|c| {
                        c.get(row).map(|&e| Part::new(self.point[e as usize], self.owner(e)))
                    }),
                );
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;
    use crate::tables::EncodingTables;

    #[test]
    fn starts_as_lee_et_al_tables_and_moves_keep_heights() {
        let inst =
            GeneratorParams { workers: 6, points: 300, alpha: 0.5, seed: 4 }.check().unwrap().generate();
        let lee = EncodingTables::of(&inst);
        let mut tables = CarpoolTables::build(&inst, "test").unwrap();
        assert_eq!(tables.table_count(), lee.len());
        assert_eq!(tables.cost(), lee.cost());
        for t in 0..lee.len() {
            let mask = lee.members(t).iter().fold(0u128, |m, w| m | 1 << w);
            assert_eq!(tables.mask(t as u32), mask);
            assert_eq!(tables.height(t as u32) as usize, lee.height(t));
            for column in lee.entries(t).chunk_by(|a, b| a.1 == b.1) {
                assert_eq!(tables.count(t as u32, column[0].1 as usize) as usize, column.len());
            }
        }
        assert_eq!(tables.to_plan().len(), tables.cost());
        // Move every entry of the largest table to the table of its worker and one cacher.
        let t = (0..tables.table_count() as u32).max_by_key(|&t| tables.mask(t).count_ones()).unwrap();
        let mask = tables.mask(t);
        for worker in (0..6).filter(|&w| mask >> w & 1 == 1) {
            while tables.first(t, worker) != NIL {
                let e = tables.first(t, worker);
                let other = (mask & !(1 << worker)).trailing_zeros() as usize;
                let to = tables.find_or_add((1 << worker) | (1 << other));
                tables.move_entry(e, to);
                assert_eq!(tables.table_of(e), to);
            }
        }
        assert_eq!(tables.height(t), 0);
        let recomputed: u32 = (0..tables.table_count() as u32)
            .map(|t| {
                let m = tables.mask(t);
                (0..6).filter(|&w| m >> w & 1 == 1).map(|w| tables.count(t, w)).max().unwrap_or(0)
            })
            .sum();
        assert_eq!(recomputed as usize, tables.cost());
        let plan = tables.to_plan();
        assert_eq!(plan.len(), tables.cost());
        assert!(crate::verify(&inst, &plan).unwrap().is_valid());
    }
}
