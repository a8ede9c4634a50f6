//! The receiver-set packer on bitsets over the request ranges of the workers, for candidates
//! with too many options for [`super::compact`]'s matrix (dense side information at small n).

use crate::bits;
use crate::requests::{CacherRows, Requests};

use super::{ACCESS_TOUCHES, PICK_SCAN, keep_best};

/// A member of the packet or a worker that may join, and its options: `words` words of the
/// request bitset from word `first`, kept at `offset` of its buffer.
#[derive(Clone, Copy, Debug)]
struct Entry {
    worker: u32,
    first: u32,
    words: u32,
    offset: u32,
}

/// The range-bitset packer's scratch for one seed.
#[derive(Default)]
pub(super) struct RangeGrower {
    members: Vec<Entry>,
    member_words: Vec<u64>,
    joiners: Vec<Entry>,
    joiner_words: Vec<u64>,
    chosen: Vec<usize>,
    /// The first joiners tried.
    firsts: Vec<u32>,
    /// The workers that may join the seed, and their options, before the first trial.
    start_joiners: Vec<Entry>,
    start_words: Vec<u64>,
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
        self.members.clear();
        self.member_words.clear();
        self.joiners.clear();
        self.joiner_words.clear();
        let home = view.requests.cached_by(view.requests.receiver(seed));
        // Work is summed locally and added once: adding through `touches` in these loops kept
        // them from being vectorised (measured: the whole packing ran slower).
        let mut spent = 0;
        for u in bits::Ones::new(view.rows.of(seed)) {
            let Some((first, words, head, tail)) = span(view.requests, u) else { continue };
            let offset = self.joiner_words.len();
            for k in 0..words {
                self.joiner_words.push(view.open[first + k] & home[first + k]);
            }
            self.joiner_words[offset] &= head;
            self.joiner_words[offset + words - 1] &= tail;
            spent += ACCESS_TOUCHES + 2 * words as u64;
            self.joiners.push(Entry {
                worker: u as u32,
                first: first as u32,
                words: words as u32,
                offset: offset as u32,
            });
        }
        *touches += spent;
        self.start_joiners.clone_from(&self.joiners);
        self.start_words.clone_from(&self.joiner_words);
        best.clear();
        self.firsts.clear();
        if target > 0 && self.joiners.len() + 1 < target {
            return;
        }
        for trial in 0..trials {
            if target > 0 && best.len() >= target {
                break;
            }
            if trial > 0 {
                self.joiners.clone_from(&self.start_joiners);
                self.joiner_words.clone_from(&self.start_words);
                self.members.clear();
                self.member_words.clear();
            }
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
            let own = bits::count(&self.joiner_words[j.offset as usize..(j.offset + j.words) as usize]);
            spent += ACCESS_TOUCHES + u64::from(j.words);
            let mut score = if own == 0 { None } else { Some((own as f64).ln()) };
            let row = view.requests.cached_by(j.worker as usize);
            for m in &self.members {
                let Some(s) = score else { break };
                let (first, words) = (m.first as usize, m.words as usize);
                let count = bits::and_count(
                    &self.member_words[m.offset as usize..m.offset as usize + words],
                    &row[first..first + words],
                );
                spent += ACCESS_TOUCHES + words as u64;
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
        for m in &self.members {
            let (first, offset) = (m.first as usize, m.offset as usize);
            for k in 0..m.words as usize {
                self.member_words[offset + k] &= row[first + k];
            }
            spent += ACCESS_TOUCHES + u64::from(m.words);
        }
        for o in &self.joiners {
            let (first, offset) = (o.first as usize, o.offset as usize);
            for k in 0..o.words as usize {
                self.joiner_words[offset + k] &= row[first + k];
            }
            spent += ACCESS_TOUCHES + u64::from(o.words);
        }
        *touches += spent;
        let offset = self.member_words.len();
        let (from, words) = (j.offset as usize, j.words as usize);
        self.member_words.extend_from_slice(&self.joiner_words[from..from + words]);
        self.members.push(Entry { offset: offset as u32, ..j });
    }

    /// Member `m`'s request: among its first [`PICK_SCAN`] options, the one cached by the fewest
    /// workers (the hardest to place later).
    fn pick(&self, view: &View<'_>, m: Entry, touches: &mut u64) -> usize {
        let words = &self.member_words[m.offset as usize..(m.offset + m.words) as usize];
        let mut best = (usize::MAX, usize::MAX);
        for (scanned, bit) in bits::Ones::new(words).enumerate() {
            if scanned == PICK_SCAN {
                break;
            }
            let r = m.first as usize * 64 + bit;
            let cachers = bits::count(view.rows.of(r));
            *touches += ACCESS_TOUCHES + view.rows.words() as u64;
            if cachers < best.0 {
                best = (cachers, r);
            }
        }
        best.1
    }
}
