//! [`RoomIndex`]: the room left in every table that the carpool greedy may still move a point
//! into, by worker set, so that its subset search reads a bit per sub-table instead of the
//! tables themselves.

use super::tables::CarpoolTables;

/// The most workers for which the index is kept: `n 2^n` bits plus `2^n` words (27 MiB at
/// 22, the same reach as the dense mask index).
pub(crate) const ROOM_INDEX_MAX_WORKERS: usize = 22;

/// For each worker `w`, a bitset over all `2^n` worker sets whose bit `J` is set when `J` has
/// a table of height at least one whose column `w` is shorter than the table
/// ([`CarpoolTables::has_room`]); and for each worker set with a table, that table's empty
/// places ([`CarpoolTables::room`]).
///
/// Exact for the tables the greedy may still move points into, not for the others: the greedy
/// only fills columns of its targets (reported by [`RoomIndex::record_move_in`]) and only lowers
/// the table it works on, which is never a target again (targets are proper subsets of the
/// table worked on, and tables are visited from the largest down). A lowered table loses room
/// and never gains it, so its stale bits and counts are never read.
///
/// Worker `w`'s bitset takes `2^n / 8` bytes (128 KiB at 20 workers), so the search for one
/// worker's sub-tables probes a block that stays in the core's cache, where the tables and the
/// mask index (`4 2^n` bytes each) do not; the room counts are read only for sub-tables whose
/// bit is set.
#[derive(Clone, Debug)]
pub(crate) struct RoomIndex {
    /// Words per worker: `2^n / 64`, at least one.
    words: usize,
    bits: Vec<u64>,
    room: Vec<u32>,
}

impl RoomIndex {
    /// The index of `tables` as they are now, or `None` past [`ROOM_INDEX_MAX_WORKERS`] workers.
    pub(crate) fn of(tables: &CarpoolTables) -> Option<Self> {
        let n = tables.workers();
        if n > ROOM_INDEX_MAX_WORKERS {
            return None;
        }
        let words = (1usize << n).div_ceil(64);
        let mut index = RoomIndex { words, bits: vec![0; words * n], room: vec![0; 1 << n] };
        for t in 0..tables.table_count() as u32 {
            let mask = tables.mask(t);
            index.room[mask as usize] = tables.room(t);
            let height = tables.height(t);
            let mut members = mask;
            for &count in tables.column_counts(t) {
                let w = members.trailing_zeros() as usize;
                members &= members - 1;
                // As `CarpoolTables::has_room`.
                if count < height {
                    let i = index.bit(w, mask);
                    index.bits[i / 64] |= 1 << (i % 64);
                }
            }
        }
        Some(index)
    }

    #[inline]
    fn bit(&self, worker: usize, mask: u128) -> usize {
        worker * self.words * 64 + mask as usize
    }

    /// Whether `worker`'s column of the table of `mask` has room (see the type's doc for which
    /// tables this is exact for).
    #[inline]
    pub(crate) fn has_room(&self, worker: usize, mask: u128) -> bool {
        let i = self.bit(worker, mask);
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }

    /// The empty places of the table of `mask`.
    #[inline]
    pub(crate) fn room(&self, mask: u128) -> u32 {
        self.room[mask as usize]
    }

    /// The paper's greedy search for `worker`'s column of the table of `mask` with the default
    /// rule, read from the index alone: among the proper sub-tables `J ∋ worker`, `|J| >= 2`,
    /// with room in `worker`'s column, those of the largest size no smaller than
    /// `|mask| - max_removed`, and among them the one with the least room, ties to the first in
    /// the order [`super::for_each_combination`] lists the removed workers.
    ///
    /// Returns the chosen worker set (if any) and the number of sub-tables the paper's search
    /// visits to find it (every one of each size it tries), or `None` when that number exceeds
    /// `allowed`.
    ///
    /// Sizes are tried from the largest down, each in the enumeration's order, while that is
    /// cheap; once a size has more sets than the bitset has words covering the subsets of
    /// `mask`, the words are scanned instead (64 sets a word, every remaining size at once),
    /// which is what makes a search that finds nothing cheap.
    pub(crate) fn least_room_sub_table(
        &self,
        mask: u128,
        worker: usize,
        max_removed: usize,
        allowed: u64,
    ) -> Option<(Option<u128>, u64)> {
        // The index covers at most 22 workers: masks fit in 32 bits.
        let mask = mask as u32;
        let others = mask & !(1u32 << worker);
        let m = others.count_ones() as usize;
        let deepest = max_removed.min(m.saturating_sub(1));
        let bits = &self.bits[worker * self.words..(worker + 1) * self.words];
        let words = Words::of(mask, worker);
        let mut visits = 0u64;
        for removed in 1..=deepest {
            let sets = binomial(m, removed);
            if words.count() <= sets {
                return self.scan_words(bits, &words, mask, worker, removed, deepest, visits, allowed);
            }
            visits += sets;
            if visits > allowed {
                return None;
            }
            // (room, worker set) of the best so far: strictly less room replaces it.
            let mut best: Option<(u32, u32)> = None;
            let mut consider = |sub: u32| {
                if bits[(sub >> 6) as usize] >> (sub & 63) & 1 == 1 {
                    let room = self.room[sub as usize];
                    if best.is_none_or(|(least, _)| room < least) {
                        best = Some((room, sub));
                    }
                }
            };
            let mut position = [0u32; 32];
            let mut rest = others;
            for slot in position.iter_mut().take(m) {
                *slot = rest & rest.wrapping_neg();
                rest &= rest - 1;
            }
            let position = &position[..m];
            match removed {
                1 => position.iter().for_each(|&p| consider(mask ^ p)),
                2 => {
                    for (i, &p) in position.iter().enumerate() {
                        let one = mask ^ p;
                        position[i + 1..].iter().for_each(|&p| consider(one ^ p));
                    }
                }
                _ => for_each_removal(position, removed, |gone| consider(mask ^ gone)),
            }
            if let Some((_, sub)) = best {
                return Some((Some(u128::from(sub)), visits));
            }
        }
        Some((None, visits))
    }

    /// The rest of [`Self::least_room_sub_table`] from `removed` workers on, `visits` so far,
    /// by scanning the words of `bits` (worker's bitset) that cover the subsets of `mask`.
    #[allow(clippy::too_many_arguments)]
    fn scan_words(
        &self,
        bits: &[u64],
        words: &Words,
        mask: u32,
        worker: usize,
        removed: usize,
        deepest: usize,
        visits: u64,
        allowed: u64,
    ) -> Option<(Option<u128>, u64)> {
        let k = mask.count_ones();
        let smallest = k - deepest as u32;
        // (size, room, worker set) of the best so far: larger, then less room, then earlier
        // in the enumeration's order.
        let mut best: Option<(u32, u32, u32)> = None;
        words.for_each(|high, low| {
            let mut found = bits[high as usize] & low;
            while found != 0 {
                let sub = high << 6 | found.trailing_zeros();
                found &= found - 1;
                let size = sub.count_ones();
                if sub == mask || size < smallest {
                    continue;
                }
                debug_assert!(sub >> worker & 1 == 1 && sub & !mask == 0);
                let room = self.room[sub as usize];
                let better = match best {
                    None => true,
                    Some((best_size, best_room, best_sub)) => {
                        size > best_size
                            || (size == best_size
                                && (room < best_room || (room == best_room && listed_first(sub, best_sub))))
                    }
                };
                if better {
                    best = Some((size, room, sub));
                }
            }
        });
        let m = k as usize - 1;
        let last = best.map_or(deepest, |(size, _, _)| (k - size) as usize);
        debug_assert!(last >= removed);
        let visits = visits + (removed..=last).map(|r| binomial(m, r)).sum::<u64>();
        (visits <= allowed).then(|| (best.map(|(_, _, sub)| u128::from(sub)), visits))
    }
    /// Records that a point joined `worker`'s column of the table of `mask` without raising
    /// the table, and whether that column is now as tall as the table.
    #[inline]
    pub(crate) fn record_move_in(&mut self, worker: usize, mask: u128, column_full: bool) {
        self.room[mask as usize] -= 1;
        if column_full {
            let i = self.bit(worker, mask);
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }
}

/// Whether, of two worker sets of the same size inside one table, `a` comes before `b` in the
/// order [`super::for_each_combination`] lists the workers removed to reach them: the removed
/// sets are compared as sorted lists, so the first is the one that removes the lowest worker
/// in which they differ, the set that lacks it.
#[inline]
fn listed_first(a: u32, b: u32) -> bool {
    let differ = a ^ b;
    a & differ & differ.wrapping_neg() == 0
}

/// The words of a worker's bitset that hold the subsets of a table's worker set containing the
/// worker: one per subset of the set's workers from 6 up (the word index), each masked to the
/// subsets of its workers below 6 (the bit within the word).
struct Words {
    /// Word-index bits that every word holds (the worker's, if it is 6 or above).
    required: u32,
    /// Word-index bits that may or may not be present.
    free: u32,
    /// Within a word, the bits of the subsets of the low workers (holding the worker if below 6).
    low: u64,
}

impl Words {
    fn of(mask: u32, worker: usize) -> Self {
        let high = mask >> 6;
        let required = if worker >= 6 { 1 << (worker - 6) } else { 0 };
        let mut low = SUBSETS_OF[(mask & 63) as usize];
        if worker < 6 {
            low &= HOLDING[worker];
        }
        Words { required, free: high & !required, low }
    }

    /// How many words.
    fn count(&self) -> u64 {
        1 << self.free.count_ones()
    }

    /// Calls `f(word index, bits within the word)` for every word.
    #[inline]
    fn for_each(&self, mut f: impl FnMut(u32, u64)) {
        let mut free = self.free;
        loop {
            f(self.required | free, self.low);
            if free == 0 {
                return;
            }
            free = (free - 1) & self.free;
        }
    }
}

/// `SUBSETS_OF[m]`: the 64-bit word with bit `j` set for every `j ⊆ m` (`m < 64`).
const SUBSETS_OF: [u64; 64] = {
    let mut table = [0u64; 64];
    let mut m = 0;
    while m < 64 {
        let mut j = 0;
        while j < 64 {
            if j & !m == 0 {
                table[m] |= 1 << j;
            }
            j += 1;
        }
        m += 1;
    }
    table
};

/// `HOLDING[w]`: the 64-bit word with bit `j` set for every `j` holding bit `w` (`w < 6`).
const HOLDING: [u64; 6] = {
    let mut table = [0u64; 6];
    let mut w = 0;
    while w < 6 {
        let mut j = 0;
        while j < 64 {
            if j >> w & 1 == 1 {
                table[w] |= 1 << j;
            }
            j += 1;
        }
        w += 1;
    }
    table
};

/// `C(m, r)` for the small `m` of a worker set of at most 22 workers.
fn binomial(m: usize, r: usize) -> u64 {
    (0..r as u64).fold(1, |c, i| c * (m as u64 - i) / (i + 1))
}

/// Calls `f` with the union of every `size` of the bits `position` (one bit each, in increasing
/// order), in lexicographic order of the chosen indices, as [`super::for_each_combination`]
/// lists them.
#[inline]
fn for_each_removal(position: &[u32], size: usize, mut f: impl FnMut(u32)) {
    let m = position.len();
    let mut combo = [0u8; 32];
    let mut gone = 0u32;
    for (i, slot) in combo.iter_mut().enumerate().take(size) {
        *slot = i as u8;
        gone |= position[i];
    }
    loop {
        f(gone);
        let mut i = size;
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            if (combo[i] as usize) < m - size + i {
                break;
            }
        }
        for &c in &combo[i..size] {
            gone &= !position[c as usize];
        }
        combo[i] += 1;
        gone |= position[combo[i] as usize];
        for j in i + 1..size {
            combo[j] = combo[j - 1] + 1;
            gone |= position[combo[j] as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;

    #[test]
    fn agrees_with_the_tables_and_follows_moves_in() {
        let inst =
            GeneratorParams { workers: 7, points: 500, alpha: 0.4, seed: 2 }.check().unwrap().generate();
        let mut tables = CarpoolTables::build(&inst, "test").unwrap();
        let mut index = RoomIndex::of(&tables).unwrap();
        let agree = |tables: &CarpoolTables, index: &RoomIndex| {
            let mut with_room = 0;
            for mask in 0..1u128 << 7 {
                let table = tables.find(mask);
                if let Some(t) = table {
                    assert_eq!(index.room(mask), tables.room(t));
                }
                for w in 0..7 {
                    let truth = table.is_some_and(|t| mask >> w & 1 == 1 && tables.has_room(t, w));
                    assert_eq!(index.has_room(w, mask), truth, "mask {mask:b} worker {w}");
                    with_room += usize::from(truth);
                }
            }
            with_room
        };
        let before = agree(&tables, &index);
        assert!(before > 0);
        // Fill one column with room from a table of a superset of its worker set.
        let (target, w) = (0..tables.table_count() as u32)
            .flat_map(|t| (0..7).map(move |w| (t, w)))
            .find(|&(t, w)| tables.mask(t) >> w & 1 == 1 && tables.has_room(t, w))
            .unwrap();
        let mask = tables.mask(target);
        while tables.has_room(target, w) {
            let source = (0..tables.table_count() as u32)
                .find(|&s| {
                    s != target
                        && tables.mask(s) & mask == mask
                        && tables.first(s, w) != super::super::tables::NIL
                })
                .expect("a superset table with a point for the worker");
            tables.move_entry(tables.first(source, w), target);
            index.record_move_in(w, mask, !tables.has_room(target, w));
        }
        assert!(!index.has_room(w, mask));
        assert_eq!(index.room(mask), tables.room(target));
        let wide =
            GeneratorParams { workers: 23, points: 200, alpha: 0.2, seed: 1 }.check().unwrap().generate();
        assert!(RoomIndex::of(&CarpoolTables::build(&wide, "test").unwrap()).is_none());
    }
}
