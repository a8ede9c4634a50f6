//! The receiver-set packer on a seed's own small matrix.
//!
//! The bitsets over request ranges that [`super::range`] walks are mostly zero where side
//! information is sparse (at `n = 1000`, `a = 0.1` a worker that may join has about 90 options
//! among its 900 requests), and each step reads one range of a member's row per worker that may
//! join: a cache miss each. Instead the seed's candidates (the workers caching its point that
//! have options) and their options are numbered locally, and one pass over the options' cacher
//! rows fills `pair[c][v]`: the options of candidate `c` that candidate `v` caches, `kw` words
//! over `c`'s options. The trials then run on this matrix (a few hundred kilobytes, in cache)
//! with the same rule as the range bitsets.
//!
//! A matrix may be built ahead, on a builder thread, against an older open set: [`Compact::refresh`]
//! clears what closed since, so the trials see what a matrix built now would hold (candidates
//! left without options never start a trial and never pass the joining rule), and it charges
//! the build's touches from the refreshed matrix, so that the work counted, and with it the
//! plan, is the same with or without builders.

use crate::bits;
use crate::requests::{CacherRows, Requests};

use super::{ACCESS_TOUCHES, PICK_SCAN, keep_best};

/// The most words per candidate's options (4096 options) for which the matrix is built; past
/// it the range bitsets are used. At `n = 100`, `q = 1e6`, `a = 0.3` candidates have about 2000
/// options (32 words) and the matrix still packs in 0.6 of the range bitsets' time.
pub(super) const MAX_OPTION_WORDS: usize = 4;

/// The most candidates for which the matrix is built. Filling it writes, for every option,
/// a bit for each candidate caching it, which the work count does not follow: at n = 1000,
/// alpha = 0.3 (about 300 candidates, 90 of them caching each option) the matrices took five
/// times their budget; at alpha = 0.1 (about 100 candidates, 10 caching each option) the count
/// holds.
pub(super) const MAX_CANDIDATES: usize = 160;

/// Candidates a trial tries as the second-to-last member of a packet with a target: the
/// greedy's first choice often leaves no last member where another would (at n = 1000,
/// q = 1e6, alpha = 0.1 with a floor of 5, four tries send about 1 % fewer packets than one;
/// sixteen, a little fewer again).
const LAST_TWO_TRIES: usize = 16;

/// A seed's candidates, their options and the pair matrix, and one trial's state.
#[derive(Default)]
pub(super) struct Compact {
    /// Worker to local index (`u32::MAX`: not a candidate of this seed).
    local: Vec<u32>,
    /// The candidates' workers, by local index.
    workers: Vec<u32>,
    /// Candidate `c`'s options are `options[start[c]..start[c + 1]]`, request numbers.
    start: Vec<u32>,
    options: Vec<u32>,
    /// Touches of finding the candidates and their options (independent of the open set).
    scan_touches: u64,
    /// Each option's cachers among the seed's cachers (a scratch of the build).
    masked: Vec<u64>,
    /// The set bits of one masked row (a scratch of the build).
    bit_list: Vec<u32>,
    /// Words per option set.
    kw: usize,
    /// Words the most open options of a candidate take, as of the last refresh: the work is
    /// counted in these, not in `kw` (which depends on when the matrix was built).
    open_kw: usize,
    /// `pair[(c * m + v) * kw..][..kw]`: the options of `c` that `v` caches.
    pair: Vec<u64>,
    /// Every open option of each candidate (`m * kw` words).
    all: Vec<u64>,
    /// Open options per candidate (a scratch of the refresh).
    counts: Vec<u32>,
    /// The candidates with open options, most first (ties in local order): trial `t` starts
    /// from `by_options[t]`, and the others are examined in this order.
    by_options: Vec<u32>,
    /// This trial: each candidate's options cached by every member, the candidates that may
    /// still join, the members and their options cached by every other member.
    own: Vec<u64>,
    alive: Vec<u32>,
    members: Vec<u32>,
    member_options: Vec<u64>,
    /// `own`, `member_options` and `alive` before a candidate joined in [`Compact::last_two`].
    saved_own: Vec<u64>,
    saved_member_options: Vec<u64>,
    saved_alive: Vec<u32>,
}

impl Compact {
    /// Builds the matrix for `seed` against the open set read word by word through `open`;
    /// false (the matrix unusable) when some candidate has more than [`MAX_OPTION_WORDS`] words
    /// of options (found at the first such candidate) or there are more than [`MAX_CANDIDATES`]
    /// candidates. Counts no touches: [`Compact::refresh`] does.
    pub(super) fn build(
        &mut self,
        requests: &Requests,
        rows: &CacherRows,
        open: impl Fn(usize) -> u64,
        seed: usize,
    ) -> bool {
        if self.local.len() != requests.workers() {
            self.local = vec![u32::MAX; requests.workers()];
        }
        for &w in &self.workers {
            self.local[w as usize] = u32::MAX;
        }
        self.workers.clear();
        self.start.clear();
        self.options.clear();
        self.start.push(0);
        self.scan_touches = 0;
        let home = requests.cached_by(requests.receiver(seed));
        let mut most = 0;
        for u in bits::Ones::new(rows.of(seed)) {
            let range = requests.of_receiver(u);
            if range.is_empty() {
                continue;
            }
            let before = self.options.len();
            let (first, last) = (range.start / 64, (range.end - 1) / 64);
            for (k, &cached) in home.iter().enumerate().take(last + 1).skip(first) {
                let mut word = open(k) & cached;
                while word != 0 {
                    let r = k * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    if range.contains(&r) {
                        self.options.push(r as u32);
                    }
                }
            }
            self.scan_touches += ACCESS_TOUCHES + 2 * (last - first + 1) as u64;
            let count = self.options.len() - before;
            if count == 0 {
                continue;
            }
            if count > MAX_OPTION_WORDS * 64 {
                return false;
            }
            most = most.max(count);
            self.local[u] = self.workers.len() as u32;
            self.workers.push(u as u32);
            self.start.push(self.options.len() as u32);
        }
        self.kw = most.div_ceil(64).max(1);
        if self.workers.len() > MAX_CANDIDATES {
            return false;
        }
        let (m, kw) = (self.workers.len(), self.kw);
        self.pair.clear();
        self.pair.resize(m * m * kw, 0);
        self.all.clear();
        self.all.resize(m * kw, 0);
        self.fill(rows, rows.of(seed), m, kw);
        true
    }

    /// Each option's cachers among the seed's cachers, for the options `lo..hi`, into
    /// `masked`: a tight loop of independent loads, so that the rows' cache misses overlap.
    fn load_masked(&mut self, rows: &CacherRows, seed_row: &[u64], lo: usize, hi: usize) {
        self.masked.clear();
        for &r in &self.options[lo..hi] {
            let cachers = rows.of(r as usize);
            self.masked.extend(cachers.iter().zip(seed_row).map(|(&a, &b)| a & b));
        }
    }

    /// Fills `all` and `pair`, candidate by candidate, from its options' cachers.
    fn fill(&mut self, rows: &CacherRows, seed_row: &[u64], m: usize, kw: usize) {
        let words = seed_row.len();
        self.bit_list.resize(words * 64 + 1, 0);
        for c in 0..m {
            let (lo, hi) = (self.start[c] as usize, self.start[c + 1] as usize);
            self.load_masked(rows, seed_row, lo, hi);
            for j in 0..hi - lo {
                bits::set(&mut self.all[c * kw..(c + 1) * kw], j);
                let listed = list_ones(&self.masked[j * words..(j + 1) * words], &mut self.bit_list);
                let (word, bit) = (j / 64, 1u64 << (j % 64));
                for &v in &self.bit_list[..listed] {
                    let lv = self.local[v as usize];
                    if lv != u32::MAX {
                        self.pair[(c * m + lv as usize) * kw + word] |= bit;
                    }
                }
            }
        }
    }

    /// Candidates of the seed that may start a trial (some option open).
    pub(super) fn startable(&self) -> usize {
        self.by_options.len()
    }

    /// Clears the options closed since the build (`open` is the packer's current view), orders
    /// the candidates with open options by how many, most first, and returns the build's
    /// touches as a build against `open` would count them: the candidate scan, a cache miss
    /// and a row per open option, and the pairs of the candidates with open options.
    pub(super) fn refresh(&mut self, open: &[u64], rows: &CacherRows) -> u64 {
        let (m, kw) = (self.workers.len(), self.kw);
        self.counts.clear();
        let mut open_options = 0;
        for c in 0..m {
            let (lo, hi) = (self.start[c] as usize, self.start[c + 1] as usize);
            let all = &mut self.all[c * kw..(c + 1) * kw];
            for j in 0..hi - lo {
                if !bits::get(open, self.options[lo + j] as usize) {
                    bits::clear(all, j);
                }
            }
            let count = bits::count(all);
            open_options += count;
            self.counts.push(count as u32);
        }
        self.by_options.clear();
        self.by_options.extend((0..m as u32).filter(|&c| self.counts[c as usize] > 0));
        let counts = &self.counts;
        self.by_options.sort_by_key(|&c| std::cmp::Reverse(counts[c as usize]));
        let startable = self.by_options.len() as u64;
        self.open_kw =
            self.by_options.first().map_or(1, |&c| counts[c as usize].div_ceil(64).max(1) as usize);
        self.scan_touches
            + (open_options * (ACCESS_TOUCHES as usize + rows.words())) as u64
            + startable * startable * self.open_kw as u64
    }

    /// One trial from the `t`-th richest candidate, examining at most `evals` candidates a step;
    /// stops early when even every candidate left could not bring the packet (with its seed) to
    /// `target` (0: no target). Returns the members.
    pub(super) fn trial(&mut self, t: usize, evals: usize, target: usize, touches: &mut u64) -> usize {
        self.own.clone_from(&self.all);
        let first = self.by_options[t];
        self.alive.clear();
        self.alive.extend(self.by_options.iter().copied().filter(|&c| c != first));
        self.members.clear();
        self.member_options.clear();
        self.join(first as usize);
        *touches += (self.by_options.len() * self.open_kw) as u64;
        while target == 0 || self.members.len() + 1 + self.alive.len() >= target {
            if target > 0 && self.members.len() + 3 == target {
                if !self.last_two(evals, touches) {
                    break;
                }
                continue;
            }
            let Some(pos) = self.best(evals, touches) else { break };
            let c = self.alive.remove(pos) as usize;
            self.join(c);
            *touches += ((self.alive.len() + self.members.len()) * self.open_kw) as u64;
        }
        self.members.len()
    }

    /// The last two members a packet needs to reach its target: the best candidate joins, and
    /// if then no candidate may join after it, it leaves (and is not tried again: were it in
    /// a packet of the target's size with these members, the others would join after it) and
    /// the next best is tried, up to [`LAST_TWO_TRIES`] times. True when both joined.
    fn last_two(&mut self, evals: usize, touches: &mut u64) -> bool {
        for _ in 0..LAST_TWO_TRIES {
            let Some(pos) = self.best(evals, touches) else { return false };
            let c = self.alive.remove(pos) as usize;
            self.saved_own.clone_from(&self.own);
            self.saved_member_options.clone_from(&self.member_options);
            self.saved_alive.clone_from(&self.alive);
            self.join(c);
            *touches += ((self.alive.len() + self.members.len()) * self.open_kw) as u64;
            if let Some(last) = self.best(evals, touches) {
                let last = self.alive.remove(last) as usize;
                self.join(last);
                *touches += ((self.alive.len() + self.members.len()) * self.open_kw) as u64;
                return true;
            }
            std::mem::swap(&mut self.own, &mut self.saved_own);
            std::mem::swap(&mut self.member_options, &mut self.saved_member_options);
            std::mem::swap(&mut self.alive, &mut self.saved_alive);
            self.members.pop();
            *touches += ((self.alive.len() + self.members.len()) * self.open_kw) as u64;
        }
        false
    }

    /// The options of `c` that `v` caches.
    fn pair(&self, c: usize, v: usize) -> &[u64] {
        let at = (c * self.workers.len() + v) * self.kw;
        &self.pair[at..at + self.kw]
    }

    /// The position in `alive` of the candidate with the largest product of option counts (its
    /// own and every member's among what it caches), examining at most `evals`; candidates
    /// that can never join (options only shrink) are dropped on the way.
    fn best(&mut self, evals: usize, touches: &mut u64) -> Option<usize> {
        let kw = self.kw;
        let mut best: Option<(f64, usize)> = None;
        let (mut i, mut examined) = (0, 0);
        while i < self.alive.len() && examined < evals {
            let c = self.alive[i] as usize;
            let own = bits::count(&self.own[c * kw..(c + 1) * kw]);
            let mut score = (own > 0).then_some(own as f64);
            for (k, &mem) in self.members.iter().enumerate() {
                let Some(s) = score else { break };
                let count =
                    bits::and_count(&self.member_options[k * kw..(k + 1) * kw], self.pair(mem as usize, c));
                score = (count > 0).then_some(s * count as f64);
            }
            *touches += ((1 + self.members.len()) * self.open_kw) as u64;
            if keep_best(score, i, &mut best) {
                examined += 1;
                i += 1;
            } else {
                self.alive.remove(i);
            }
        }
        best.map(|(_, i)| i)
    }

    /// Candidate `c` joins: every member and every candidate left keep the options `c` caches,
    /// and `c`'s options become a member's.
    fn join(&mut self, c: usize) {
        let (m, kw) = (self.workers.len(), self.kw);
        for (k, &mem) in self.members.iter().enumerate() {
            let at = (mem as usize * m + c) * kw;
            for w in 0..kw {
                self.member_options[k * kw + w] &= self.pair[at + w];
            }
        }
        for &o in &self.alive {
            let at = (o as usize * m + c) * kw;
            for w in 0..kw {
                self.own[o as usize * kw + w] &= self.pair[at + w];
            }
        }
        self.member_options.extend_from_slice(&self.own[c * kw..(c + 1) * kw]);
        self.members.push(c as u32);
    }

    /// The members' requests: for each, among its first [`PICK_SCAN`] options, the one cached by
    /// the fewest workers (the hardest to place later). Appends them to `chosen`.
    pub(super) fn pick(&self, rows: &CacherRows, chosen: &mut Vec<usize>, touches: &mut u64) {
        let kw = self.kw;
        for (k, &mem) in self.members.iter().enumerate() {
            let lo = self.start[mem as usize] as usize;
            let mut best = (usize::MAX, usize::MAX);
            for j in bits::Ones::new(&self.member_options[k * kw..(k + 1) * kw]).take(PICK_SCAN) {
                let r = self.options[lo + j] as usize;
                let cachers = bits::count(rows.of(r));
                *touches += ACCESS_TOUCHES + rows.words() as u64;
                if cachers < best.0 {
                    best = (cachers, r);
                }
            }
            chosen.push(best.1);
        }
    }
}

/// Lists the set bits of `row` (sparse: about one bit in two words) into `list`, which must
/// have room for all of them plus one; returns how many. A branch a word would be mispredicted
/// about half the time here, so the loop runs over a mask of the non-zero words (one
/// misprediction, at its end), writes each word's first two bits blindly (the second counts
/// only if it is there) and loops only for a third.
fn list_ones(row: &[u64], list: &mut [u32]) -> usize {
    let mut listed = 0;
    for (block, chunk) in row.chunks(64).enumerate() {
        let mut nonzero = 0u64;
        for (k, &w) in chunk.iter().enumerate() {
            nonzero |= u64::from(w != 0) << k;
        }
        while nonzero != 0 {
            let k = nonzero.trailing_zeros() as usize;
            nonzero &= nonzero - 1;
            let base = ((block * 64 + k) * 64) as u32;
            let mut w = chunk[k];
            list[listed] = base + w.trailing_zeros();
            listed += 1;
            w &= w - 1;
            list[listed] = base + w.trailing_zeros();
            listed += usize::from(w != 0);
            w &= w.wrapping_sub(1);
            while w != 0 {
                list[listed] = base + w.trailing_zeros();
                listed += 1;
                w &= w - 1;
            }
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;

    /// The requests and cacher rows of an instance whose candidates have about a hundred
    /// options each (two words).
    fn requests_and_rows() -> (Requests, CacherRows) {
        let inst =
            GeneratorParams { workers: 40, points: 20_000, alpha: 0.2, seed: 2 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let rows = requests.cacher_rows();
        (requests, rows)
    }

    /// A matrix built ahead, while more options were open, refreshed, grows the same packets
    /// and counts the same work as one built now (here the richest candidate's options shrink
    /// from two words to one between the builds).
    #[test]
    fn a_matrix_built_ahead_and_refreshed_grows_and_counts_as_one_built_now() {
        let (requests, rows) = requests_and_rows();
        let all_open = vec![u64::MAX; requests.row_words()];
        let mut open = all_open.clone();
        // Closes about half the requests, in no pattern the instance knows of.
        for r in 0..requests.len() {
            if (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63 == 1 {
                bits::clear(&mut open, r);
            }
        }
        let seed = (0..requests.len()).find(|&r| bits::get(&open, r)).unwrap();
        let (mut ahead, mut now) = (Compact::default(), Compact::default());
        assert!(ahead.build(&requests, &rows, |k| all_open[k], seed));
        assert!(now.build(&requests, &rows, |k| open[k], seed));
        assert!(ahead.kw > now.kw, "the test needs option sets of different widths");
        assert_eq!(ahead.refresh(&open, &rows), now.refresh(&open, &rows));
        assert_eq!(ahead.startable(), now.startable());
        for trial in 0..now.startable().min(6) {
            for (evals, target) in [(64, 0), (3, 0), (64, 5)] {
                let (mut spent_ahead, mut spent_now) = (0, 0);
                let members = now.trial(trial, evals, target, &mut spent_now);
                assert_eq!(ahead.trial(trial, evals, target, &mut spent_ahead), members);
                assert_eq!(spent_ahead, spent_now);
                let (mut picked_ahead, mut picked_now) = (vec![seed], vec![seed]);
                now.pick(&rows, &mut picked_now, &mut spent_now);
                ahead.pick(&rows, &mut picked_ahead, &mut spent_ahead);
                assert_eq!((picked_ahead, spent_ahead), (picked_now, spent_now));
            }
        }
    }

    /// With a target, a trial reaches it whenever the plain greedy from the same first joiner
    /// does (the paths agree up to the last two members), and on some seeds where the greedy
    /// misses it ([`Compact::last_two`] tries other second-to-last members).
    #[test]
    fn a_target_is_reached_whenever_the_greedy_reaches_it_and_more_often() {
        let (requests, rows) = requests_and_rows();
        let open = vec![u64::MAX; requests.row_words()];
        let mut compact = Compact::default();
        let (mut greedy_hits, mut target_hits) = ([0; 3], [0; 3]);
        for seed in (0..requests.len()).step_by(97).take(100) {
            assert!(compact.build(&requests, &rows, |k| open[k], seed));
            compact.refresh(&open, &rows);
            for trial in 0..compact.startable().min(4) {
                let mut spent = 0;
                let greedy = compact.trial(trial, 64, 0, &mut spent) + 1;
                for (k, target) in [4, 5, 6].into_iter().enumerate() {
                    let reached = compact.trial(trial, 64, target, &mut spent) + 1 >= target;
                    assert!(reached || greedy < target, "seed {seed}, trial {trial}, target {target}");
                    greedy_hits[k] += usize::from(greedy >= target);
                    target_hits[k] += usize::from(reached);
                }
            }
        }
        assert!((0..3).any(|k| target_hits[k] > greedy_hits[k]), "{greedy_hits:?} {target_hits:?}");
    }
}
