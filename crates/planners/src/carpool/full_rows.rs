//! Greedy packing of full rows, layer by layer from the largest worker sets down: the core of
//! `ubershuffle-opt`.

use super::combinations::for_each_combination;
use super::layer_counts::LayerCounts;
use super::tables::CarpoolTables;
use crate::SeededRng;
use crate::rng::uniform_below;

/// The most workers [`pack_full_rows`] handles: its per-layer counters take `C(n, k) k` words
/// (31 MB at 22 workers).
pub(crate) const PACK_MAX_WORKERS: usize = 22;

/// The unplaced entries of one column of a home table: ids `start..start + left` (entries of
/// a column have consecutive ids because the tables are built from sorted entries).
#[derive(Clone, Copy, Debug)]
struct PoolColumn {
    start: u32,
    left: u32,
    home: u32,
    worker: u8,
}

/// How the masks of a layer are ordered before rows are taken from them: always those
/// offering the most full rows first; this says how ties are broken.
#[derive(Debug)]
pub(crate) enum PackOrder<'a> {
    /// Ties in colex order.
    MostRowsFirst,
    /// Ties in an order drawn from the generator: a restart of the search.
    ShuffledTies(&'a mut SeededRng),
}

/// Packs every entry of `tables`, which must be Lee et al.'s tables as
/// [`CarpoolTables::build`] made them, into full rows, and moves each entry into the table of
/// its row, so the cost becomes the number of rows.
///
/// A *full row* of a worker set `J` takes one entry of every member `w` whose home contains
/// `J`: its XOR decodes at every member. For `k` from the largest home down to 1, for each
/// `J` of `k` workers (in `order`), it takes as many full rows of `J` as every member has
/// unplaced entries for, choosing the entries with the smallest homes (they fit the fewest
/// other rows). Covering the needed points with few large cliques of the side-information
/// graph, largest first; where the paper's greedy only moves points into tables that already
/// have room, this builds the tables it wants.
///
/// Returns the work done (counter updates and probes), for budgets counted in work rather
/// than time, or `None` (leaving `tables` half packed, to be thrown away) as soon as the work
/// exceeds `limit`. Needs at most [`PACK_MAX_WORKERS`] workers.
pub(crate) fn pack_full_rows(
    tables: &mut CarpoolTables,
    mut order: PackOrder<'_>,
    limit: u64,
) -> Option<u64> {
    let n = tables.workers();
    assert!(n <= PACK_MAX_WORKERS, "pack_full_rows handles at most {PACK_MAX_WORKERS} workers");
    let mut pool = Pool::new(tables);
    let max_k = pool.columns.iter().map(|c| c.home.count_ones() as usize).max().unwrap_or(0);
    let mut counts = LayerCounts::new(n);
    let mut work = 0u64;
    let mut candidates: Vec<(u64, u32, u32)> = Vec::new();
    let mut chosen: Vec<(u32, u32, u32)> = Vec::new();
    for k in (1..=max_k).rev() {
        pool.forget_empty_columns();
        counts.start_layer(k);
        for column in pool.columns.iter().filter(|c| c.left > 0 && c.home.count_ones() as usize >= k) {
            let (w, left) = (column.worker as usize, column.left);
            work += for_each_combination(u128::from(column.home & !(1 << w)), k - 1, |sub| {
                counts.add(sub as u32 | 1 << w, w, left);
                true
            });
        }
        if work > limit {
            return None;
        }
        // The masks offering at least one full row, most rows first.
        candidates.clear();
        counts.for_each_mask(|mask, rank, rows| {
            if rows > 0 {
                let tie = match &mut order {
                    PackOrder::MostRowsFirst => u64::from(rank),
                    PackOrder::ShuffledTies(rng) => uniform_below(rng, 1 << 32),
                };
                candidates.push((u64::from(u32::MAX - rows) << 32 | tie, rank, mask));
            }
        });
        candidates.sort_unstable();
        for &(_, rank, j) in &candidates {
            let rows = counts.min_at(rank);
            if rows == 0 {
                continue;
            }
            let target = tables.find_or_add(u128::from(j));
            for w in (0..n).filter(|&w| j >> w & 1 == 1) {
                work += pool.choose(tables, j, w, rows, &mut chosen);
                let mut need = rows;
                for &(_, _, c) in chosen.iter() {
                    if need == 0 {
                        break;
                    }
                    let column = &mut pool.columns[c as usize];
                    let take = column.left.min(need);
                    for _ in 0..take {
                        column.left -= 1;
                        tables.move_entry(column.start + column.left, target);
                    }
                    need -= take;
                    let home = column.home;
                    work += for_each_combination(u128::from(home & !(1 << w)), k - 1, |sub| {
                        counts.sub(sub as u32 | 1 << w, w, take);
                        true
                    });
                }
                debug_assert_eq!(need, 0, "the counters promised {rows} entries");
            }
            if work > limit {
                return None;
            }
        }
    }
    Some(work)
}

/// The entries not yet placed, by the column of the home table they started in.
struct Pool {
    /// The columns of the home tables that hold entries.
    columns: Vec<PoolColumn>,
    /// For each home table, the index of its first column (plus one past the end).
    first_column: Vec<u32>,
    /// For each worker, its columns that may still hold entries.
    live: Vec<Vec<u32>>,
    /// The workers' full mask.
    full: u32,
}

impl Pool {
    fn new(tables: &CarpoolTables) -> Self {
        let n = tables.workers();
        let homes = tables.table_count() as u32;
        let mut columns = Vec::new();
        let mut first_column = Vec::with_capacity(homes as usize + 1);
        let mut e = 0u32;
        for t in 0..homes {
            first_column.push(columns.len() as u32);
            let mask = tables.mask(t);
            for w in (0..n).filter(|&w| mask >> w & 1 == 1) {
                let left = tables.count(t, w);
                if left > 0 {
                    debug_assert!(tables.owner(e) == w && tables.home(e) == mask && tables.table_of(e) == t);
                    columns.push(PoolColumn { start: e, left, home: mask as u32, worker: w as u8 });
                    e += left;
                }
            }
        }
        first_column.push(columns.len() as u32);
        let mut live: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (c, column) in columns.iter().enumerate() {
            live[column.worker as usize].push(c as u32);
        }
        Pool { columns, first_column, live, full: (1u32 << n) - 1 }
    }

    /// The number of home tables (tables added later have larger ids).
    fn homes(&self) -> u32 {
        self.first_column.len() as u32 - 1
    }

    /// The column of worker `w` in home table `t`, if it holds entries.
    fn column_at(&self, t: u32, w: usize) -> Option<usize> {
        (self.first_column[t as usize] as usize..self.first_column[t as usize + 1] as usize)
            .find(|&c| self.columns[c].worker as usize == w)
    }

    fn forget_empty_columns(&mut self) {
        for list in &mut self.live {
            list.retain(|&c| self.columns[c as usize].left > 0);
        }
    }

    /// Collects into `chosen`, as `(home size, home, column)`, columns of worker `w` with
    /// unplaced entries whose home contains `j`, smallest homes first, until they hold `rows`
    /// entries. Probes the home tables of `j`'s supersets in order of size while that is
    /// cheaper than scanning `w`'s live columns, then scans. Returns the work done.
    fn choose(
        &self,
        tables: &CarpoolTables,
        j: u32,
        w: usize,
        rows: u32,
        chosen: &mut Vec<(u32, u32, u32)>,
    ) -> u64 {
        chosen.clear();
        let live = &self.live[w];
        let budget = live.len() as u64;
        let complement = self.full & !j;
        let mut found = 0u32;
        let mut probes = 0u64;
        for extra in 0..=complement.count_ones() as usize {
            for_each_combination(u128::from(complement), extra, |add| {
                probes += 1;
                if let Some(t) = tables.find(u128::from(j) | add).filter(|&t| t < self.homes())
                    && let Some(c) = self.column_at(t, w)
                    && self.columns[c].left > 0
                {
                    chosen.push((0, 0, c as u32));
                    found += self.columns[c].left;
                }
                found < rows && probes <= budget
            });
            if found >= rows {
                return probes;
            }
            if probes > budget {
                break;
            }
        }
        chosen.clear();
        for &c in live {
            let column = &self.columns[c as usize];
            if column.left > 0 && column.home & j == j {
                chosen.push((column.home.count_ones(), column.home, c));
            }
        }
        chosen.sort_unstable();
        probes + live.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, seeded, verify};

    #[test]
    fn paper_example_packs_into_three_rows() {
        let inst = crate::ShuffleInstance::paper_example();
        let mut tables = CarpoolTables::build(&inst, "test").unwrap();
        assert!(pack_full_rows(&mut tables, PackOrder::MostRowsFirst, u64::MAX).is_some());
        assert_eq!(tables.cost(), 3);
        let mut tables = CarpoolTables::build(&inst, "test").unwrap();
        assert_eq!(pack_full_rows(&mut tables, PackOrder::MostRowsFirst, 1), None);
        assert!(verify(&inst, &tables.to_plan()).unwrap().is_valid());
    }

    #[test]
    fn every_table_is_full_and_the_plan_decodes() {
        for seed in 0..6 {
            let inst = GeneratorParams { workers: 7, points: 700, alpha: 0.3 + 0.1 * seed as f64, seed }
                .check()
                .unwrap()
                .generate();
            let mut tables = CarpoolTables::build(&inst, "test").unwrap();
            let coded = tables.cost();
            let mut rng = seeded(seed);
            let order =
                if seed % 2 == 0 { PackOrder::MostRowsFirst } else { PackOrder::ShuffledTies(&mut rng) };
            pack_full_rows(&mut tables, order, u64::MAX).unwrap();
            for t in 0..tables.table_count() as u32 {
                assert_eq!(tables.room(t), 0, "table {t} has a partial row");
            }
            assert!(tables.cost() < coded);
            assert!(verify(&inst, &tables.to_plan()).unwrap().is_valid());
        }
    }
}
