//! The receiver-set packer on bitsets over the request ranges of the workers, for candidates
//! with too many options for [`super::compact`]'s matrix (dense side information at small n).

use crate::bits;
use crate::requests::{CacherRows, Requests};

use super::{ACCESS_TOUCHES, PICK_SCAN, keep_best};

/// A member of the packet or a worker that may join, and its options: the `words` words of the
/// request bitset from word `first`, kept from `offset` of its [`Pool`]. While `kept == words`
/// they are all kept, in order; once fewer than a [`SPARSE_BELOW`]th are non-zero, only the
/// non-zero ones are, in order, each with its position in the range. Work is counted on the
/// whole range either way, so the plan and its count do not depend on the layout.
#[derive(Clone, Copy, Debug)]
struct Entry {
    worker: u32,
    first: u32,
    words: u32,
    offset: u32,
    kept: u32,
}

/// An entry turns sparse once fewer than one in this many of its words are non-zero. Deep in a
/// packet most options are gone (at n = 100, q = 1e6, alpha = 0.3, half the words a scan reads
/// at the fourth member are zero, and three in four at the fifth), and a sparse entry reads the
/// rows at its non-zero words only.
const SPARSE_BELOW: u32 = 4;

/// Ranges shorter than this many words stay dense: too short for their zeros to cost much (at
/// n = 1000, q = 1e5 a range is two words).
const SPARSE_FROM_WORDS: u32 = 8;

/// When entries of at least [`SPARSE_FROM_WORDS`] words turn sparse: [`Layout::Adaptive`] in
/// the packer; the tests also run the others to check that the layout changes neither the
/// packets nor the work counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Layout {
    /// Below a [`SPARSE_BELOW`]th of non-zero words.
    #[default]
    Adaptive,
    /// Never.
    #[cfg(test)]
    Dense,
    /// At the first intersection.
    #[cfg(test)]
    Sparse,
}

/// The option words of several entries: `words[offset..offset + kept]` and, for a sparse entry,
/// their positions in its range at the same indices of `at`.
#[derive(Default)]
struct Pool {
    /// The entries' words.
    words: Vec<u64>,
    /// A sparse entry's words' positions in its range (unused for a dense entry's).
    at: Vec<u32>,
}

impl Pool {
    /// Empties the pool.
    fn clear(&mut self) {
        self.words.clear();
        self.at.clear();
    }

    /// Copies the pool `from`, whose entries are all dense: their positions are not read, so
    /// `at` is only made long enough.
    fn copy_dense_from(&mut self, from: &Pool) {
        self.words.clone_from(&from.words);
        if self.at.len() < self.words.len() {
            self.at.resize(self.words.len(), 0);
        }
    }

    /// The number of options of `e`.
    #[inline]
    fn count(&self, e: &Entry) -> usize {
        bits::count(&self.words[e.offset as usize..(e.offset + e.kept) as usize])
    }

    /// The number of options of `e` that the row of bits `row` (over all requests) holds.
    #[inline]
    fn and_count(&self, e: &Entry, row: &[u64]) -> usize {
        let (first, offset, kept) = (e.first as usize, e.offset as usize, e.kept as usize);
        if e.kept == e.words {
            return bits::and_count(&self.words[offset..offset + kept], &row[first..first + kept]);
        }
        let (words, at) = (&self.words[offset..offset + kept], &self.at[offset..offset + kept]);
        words.iter().zip(at).map(|(w, &k)| (w & row[first + k as usize]).count_ones() as usize).sum()
    }

    /// Keeps the options of `e` that `row` holds, turning `e` sparse when few words are left.
    #[inline]
    fn and_assign(&mut self, e: &mut Entry, row: &[u64], layout: Layout) {
        let (first, offset, kept) = (e.first as usize, e.offset as usize, e.kept as usize);
        let (words, at) = (&mut self.words[offset..offset + kept], &mut self.at[offset..offset + kept]);
        if e.words < SPARSE_FROM_WORDS {
            for (w, r) in words.iter_mut().zip(&row[first..first + kept]) {
                *w &= r;
            }
        } else if e.kept == e.words {
            let mut non_zero = 0;
            for (w, r) in words.iter_mut().zip(&row[first..first + kept]) {
                *w &= r;
                non_zero += u32::from(*w != 0);
            }
            let sparse = match layout {
                Layout::Adaptive => non_zero * SPARSE_BELOW < e.words,
                #[cfg(test)]
                Layout::Dense => false,
                #[cfg(test)]
                Layout::Sparse => true,
            };
            if !sparse {
                return;
            }
            let mut n = 0;
            for k in 0..kept {
                let w = words[k];
                words[n] = w;
                at[n] = k as u32;
                n += usize::from(w != 0);
            }
            e.kept = n as u32;
        } else {
            let mut n = 0;
            for t in 0..kept {
                let k = at[t];
                let w = words[t] & row[first + k as usize];
                words[n] = w;
                at[n] = k;
                n += usize::from(w != 0);
            }
            e.kept = n as u32;
        }
    }

    /// Appends the options of `e` (from `from`) and returns the entry that holds them here.
    fn push(&mut self, from: &Pool, e: &Entry) -> Entry {
        let (offset, kept) = (e.offset as usize, e.kept as usize);
        let here = self.words.len();
        self.words.extend_from_slice(&from.words[offset..offset + kept]);
        self.at.extend_from_slice(&from.at[offset..offset + kept]);
        Entry { offset: here as u32, ..*e }
    }

    /// The requests among the options of `e`, in increasing order.
    fn options(&self, e: &Entry) -> impl Iterator<Item = usize> + '_ {
        let (first, offset, kept) = (e.first as usize, e.offset as usize, e.kept as usize);
        let dense = e.kept == e.words;
        let (words, at) = (&self.words[offset..offset + kept], &self.at[offset..offset + kept]);
        words.iter().zip(at).enumerate().flat_map(move |(t, (&w, &k))| {
            let base = (first + if dense { t } else { k as usize }) * 64;
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    base + bit
                })
            })
        })
    }
}

/// The range-bitset packer's scratch for one seed.
#[derive(Default)]
pub(super) struct RangeGrower {
    members: Vec<Entry>,
    member_pool: Pool,
    joiners: Vec<Entry>,
    joiner_pool: Pool,
    chosen: Vec<usize>,
    /// The first joiners tried.
    firsts: Vec<u32>,
    /// The workers that may join the seed, and their options (all dense), each trial's start.
    start_joiners: Vec<Entry>,
    start_pool: Pool,
    layout: Layout,
}

/// What one grown packet reads: the requests, their cachers and the open set.
pub(super) struct View<'a> {
    pub requests: &'a Requests,
    pub rows: &'a CacherRows,
    pub open: &'a [u64],
}

/// The words of receiver `u`'s range of requests: the first word, how many, and the masks of
/// the first and the last word.
fn span(requests: &Requests, u: usize) -> Option<(usize, usize, u64, u64)> {
    let range = requests.of_receiver(u);
    if range.is_empty() {
        return None;
    }
    let (first, last) = (range.start / 64, (range.end - 1) / 64);
    Some((first, last - first + 1, u64::MAX << (range.start % 64), u64::MAX >> (63 - (range.end - 1) % 64)))
}

impl RangeGrower {
    /// Grows a packet from `seed` into `best` (the seed and its members' requests), in at most
    /// `trials` trials examining at most `evals` workers a step; a trial stops as soon as it
    /// cannot reach `target` requests with the seed (0: no target), and the trials stop once one
    /// has. Adds the work to `touches`.
    pub(super) fn grow(
        &mut self,
        view: &View<'_>,
        seed: usize,
        (evals, trials, target): (usize, usize, usize),
        best: &mut Vec<usize>,
        touches: &mut u64,
    ) {
        self.start_joiners.clear();
        self.start_pool.clear();
        let home = view.requests.cached_by(view.requests.receiver(seed));
        // Work is summed locally and added once: adding through `touches` in these loops kept
        // them from being vectorised (measured: the whole packing ran slower).
        let mut spent = 0;
        for u in bits::Ones::new(view.rows.of(seed)) {
            let Some((first, words, head, tail)) = span(view.requests, u) else { continue };
            let pool = &mut self.start_pool.words;
            let offset = pool.len();
            for k in 0..words {
                pool.push(view.open[first + k] & home[first + k]);
            }
            pool[offset] &= head;
            pool[offset + words - 1] &= tail;
            spent += ACCESS_TOUCHES + 2 * words as u64;
            self.start_joiners.push(Entry {
                worker: u as u32,
                first: first as u32,
                words: words as u32,
                offset: offset as u32,
                kept: words as u32,
            });
        }
        *touches += spent;
        best.clear();
        self.firsts.clear();
        if target > 0 && self.start_joiners.len() + 1 < target {
            return;
        }
        for _ in 0..trials {
            if target > 0 && best.len() >= target {
                break;
            }
            self.joiners.clone_from(&self.start_joiners);
            self.joiner_pool.copy_dense_from(&self.start_pool);
            self.members.clear();
            self.member_pool.clear();
            // Each trial starts from another first joiner (the best not tried yet).
            let firsts = std::mem::take(&mut self.firsts);
            let first = self.best_joiner(view, evals, &firsts, touches);
            self.firsts = firsts;
            let Some(first) = first else { break };
            self.firsts.push(self.joiners[first].worker);
            self.join(view, first, touches);
            while target == 0 || self.members.len() + 1 + self.joiners.len() >= target {
                let Some(i) = self.best_joiner(view, evals, &[], touches) else { break };
                self.join(view, i, touches);
            }
            if self.members.len() + 1 > best.len() {
                self.chosen.clear();
                self.chosen.push(seed);
                for m in 0..self.members.len() {
                    let pick = self.pick(view, self.members[m], touches);
                    self.chosen.push(pick);
                }
                std::mem::swap(&mut self.chosen, best);
            }
        }
    }

    /// The worker that may join with the largest product of option counts (its own and every
    /// member's among what it caches), examining at most `evals` of them; workers that can
    /// never join (options run out only by shrinking) are dropped on the way.
    fn best_joiner(
        &mut self,
        view: &View<'_>,
        evals: usize,
        exclude: &[u32],
        touches: &mut u64,
    ) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        let (mut i, mut examined, mut spent) = (0, 0, 0);
        while i < self.joiners.len() && examined < evals {
            let j = self.joiners[i];
            if exclude.contains(&j.worker) {
                i += 1;
                continue;
            }
            let own = self.joiner_pool.count(&j);
            spent += ACCESS_TOUCHES + u64::from(j.words);
            let mut score = if own == 0 { None } else { Some((own as f64).ln()) };
            let row = view.requests.cached_by(j.worker as usize);
            for m in &self.members {
                let Some(s) = score else { break };
                let count = self.member_pool.and_count(m, row);
                spent += ACCESS_TOUCHES + u64::from(m.words);
                score = (count > 0).then(|| s + (count as f64).ln());
            }
            if keep_best(score, i, &mut best) {
                examined += 1;
                i += 1;
            } else {
                self.joiners.swap_remove(i);
            }
        }
        *touches += spent;
        best.map(|(_, i)| i)
    }

    /// Worker `joiners[i]` joins: every member keeps the options it caches, every other worker
    /// that may join keeps the options it caches, and the joiner's options become a member's.
    fn join(&mut self, view: &View<'_>, i: usize, touches: &mut u64) {
        let j = self.joiners.swap_remove(i);
        let row = view.requests.cached_by(j.worker as usize);
        let mut spent = 0;
        for m in &mut self.members {
            self.member_pool.and_assign(m, row, self.layout);
            spent += ACCESS_TOUCHES + u64::from(m.words);
        }
        for o in &mut self.joiners {
            self.joiner_pool.and_assign(o, row, self.layout);
            spent += ACCESS_TOUCHES + u64::from(o.words);
        }
        *touches += spent;
        let member = self.member_pool.push(&self.joiner_pool, &j);
        self.members.push(member);
    }

    /// Member `m`'s request: among its first [`PICK_SCAN`] options, the one cached by the fewest
    /// workers (the hardest to place later).
    fn pick(&self, view: &View<'_>, m: Entry, touches: &mut u64) -> usize {
        let mut best = (usize::MAX, usize::MAX);
        for r in self.member_pool.options(&m).take(PICK_SCAN) {
            let cachers = bits::count(view.rows.of(r));
            *touches += ACCESS_TOUCHES + view.rows.words() as u64;
            if cachers < best.0 {
                best = (cachers, r);
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, bits};

    #[test]
    fn the_layout_of_the_options_changes_neither_packets_nor_work() {
        let inst =
            GeneratorParams { workers: 40, points: 40_000, alpha: 0.3, seed: 7 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let rows = requests.cacher_rows();
        let mut open = vec![u64::MAX; requests.row_words()];
        let layouts = [Layout::Adaptive, Layout::Dense, Layout::Sparse];
        let mut growers: Vec<RangeGrower> =
            layouts.iter().map(|&layout| RangeGrower { layout, ..RangeGrower::default() }).collect();
        let (mut grown, mut sparse_members) = (0, 0);
        for seed in (0..requests.len()).step_by(7) {
            if !bits::get(&open, seed) {
                continue;
            }
            let view = View { requests: &requests, rows: &rows, open: &open };
            let mut results = Vec::new();
            for grower in &mut growers {
                let (mut best, mut touches) = (Vec::new(), 0);
                grower.grow(&view, seed, (16, 4, 0), &mut best, &mut touches);
                results.push((best, touches));
            }
            assert!(results.iter().all(|r| *r == results[0]), "seed {seed}: {results:?}");
            sparse_members += growers[0].members.iter().filter(|m| m.kept < m.words).count();
            for &r in &results[0].0 {
                bits::clear(&mut open, r);
            }
            grown += 1;
        }
        assert!(grown > 1000, "{grown} packets");
        assert!(sparse_members > 1000, "{sparse_members} sparse members in the adaptive layout");
    }
}
