//! The largest clique through every request, by exhaustive search: what makes the clique
//! family's bound ([`super::clique_family`]) strong where the search fits its budget.
//!
//! A clique of the request graph (module `clique_family`) is a set `S` of distinct receivers
//! and, for each `u` of `S`, one request of `u` whose point every other receiver of `S` caches.
//! Each clique is found once, from its *anchor*: the request of its lowest-numbered receiver
//! `w`. From an anchor of point `p` the other receivers are among its *candidates*, the
//! workers numbered above `w` that cache `p`; each candidate `u` brings its *options*, its
//! requests whose point `w` caches, each as a mask of the candidates caching its point. A set
//! `T` of candidates completes a clique with the anchor exactly when every `u` of `T` has an
//! option whose mask holds `T \ {u}`; then every such option of every member lies in a clique
//! of `|T| + 1`. The anchors of one receiver with the same candidates share one search, and the
//! options of a candidate with the same mask one entry.
//!
//! The search is a branch and bound over `T`, keeping each member's options that hold the rest
//! of `T` and each candidate's options that hold all of `T` (a candidate stays while it has one
//! and some option of every member holds it). A node is cut when its growth cannot reach the
//! threshold (or, past it, a larger clique than its own):
//! - a member `u` of a clique `T'` grown from it has an option holding `T' \ {u}`, so `|T'|` is
//!   at most one more than the most of `T` and the candidates that one option of `u` holds (and
//!   a candidate that cannot reach it so is dropped);
//! - the candidates that join are pairwise joined in the *pair graph* (two candidates are
//!   joined when some option of every member holds both and each has an option holding the
//!   other), so there are no more of them than the colours of a greedy colouring; the node
//!   branches on its candidates by colour, highest first, and stops where the colours left
//!   cannot reach the goal, as in Tomita's MCQ for maximum cliques.
//!
//! Run at a threshold `k`, the search finds every clique of `k` requests or more, and with it
//! the largest clique through every request that lies in one; every other request lies in no
//! clique larger than `k - 1`. Work is counted in mask tests (and one a word of an option's
//! cachers when it is built), never read from a clock, so whether a search fits its budget
//! depends only on the instance and the threshold. `search_cost` (an ignored test) prints the
//! work, seconds and bound of each threshold for one instance:
//! `UBS_POINT=100,100000,0.3 UBS_TOP=10 UBS_BOTTOM=9 cargo test --release -p ubershuffle-planners
//! --lib search_cost -- --ignored --nocapture`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::bits;
use crate::requests::{CacherRows, Requests};

/// The most candidate receivers an anchor may have (the bits of a [`Mask`]).
pub(crate) const MAX_CANDIDATES: usize = 128;

/// A set of an anchor's candidate receivers.
type Mask = u128;

/// Members from which a node also bounds its growth by the pair graph of its candidates (with
/// fewer, almost every pair may join together and the graph costs more than it cuts).
const PAIRS_FROM_MEMBERS: usize = 2;

/// The members of a mask.
fn ones(mut mask: Mask) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let bit = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            bit
        })
    })
}

/// Why a search gave no sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SearchStop {
    /// Its work passed the budget.
    OverBudget,
    /// An anchor had more than [`MAX_CANDIDATES`] candidate receivers.
    TooWide,
}

/// The sizes a search at a threshold found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CliqueSizes {
    /// The threshold `k`: every clique of at least `k` requests was found.
    pub threshold: usize,
    /// For every request, the size of the largest clique through it if that is at least the
    /// threshold, else 0.
    pub sizes: Vec<u16>,
    /// The work the search counted.
    pub work: u64,
}

impl CliqueSizes {
    /// The largest clique through request `r` can have at most this many requests.
    pub(crate) fn at_most(&self, r: usize) -> usize {
        match self.sizes[r] {
            0 => self.threshold - 1,
            s => s as usize,
        }
    }
}

/// Finds every clique of at least `threshold` requests (at least 2) within `budget` work, on
/// `threads` threads (the anchors' receivers dealt out in turn; the sizes and the work do not
/// depend on the threads).
pub(crate) fn largest_cliques(
    requests: &Requests,
    rows: &CacherRows,
    threshold: usize,
    budget: u64,
    threads: usize,
) -> Result<CliqueSizes, SearchStop> {
    let (sizes, work) = search(requests, rows, threshold, budget, threads, (0, 1))?;
    Ok(CliqueSizes { threshold: threshold.max(2), sizes, work })
}

/// The work of the search at `threshold` from the anchors of one receiver in `every` only, the
/// middle one of each run of `every` (`every / 2`, `every / 2 + every`, ...: as many as
/// [`probed_receivers`] says), within `budget`: a probe of what the whole search costs (its
/// sizes would be no bound).
pub(crate) fn probe_work(
    requests: &Requests,
    rows: &CacherRows,
    threshold: usize,
    budget: u64,
    threads: usize,
    every: usize,
) -> Result<u64, SearchStop> {
    let every = every.max(1);
    search(requests, rows, threshold, budget, threads, (every / 2, every)).map(|(_, work)| work)
}

/// Whether some request has more than [`MAX_CANDIDATES`] cachers numbered above its receiver:
/// then a search might meet an anchor with more candidates than a mask holds, and none runs.
pub(crate) fn too_wide(requests: &Requests, rows: &CacherRows) -> bool {
    (0..requests.workers())
        .any(|w| requests.of_receiver(w).any(|r| cachers_above(rows.of(r), w) > MAX_CANDIDATES))
}

/// How many of the workers in `cachers` (a row of [`CacherRows`]) are numbered above `w`.
fn cachers_above(cachers: &[u64], w: usize) -> usize {
    bits::count_range(cachers, w + 1..cachers.len() * 64)
}

/// The receivers [`probe_work`] searches from, of `workers`.
pub(crate) fn probed_receivers(workers: usize, every: usize) -> usize {
    let every = every.max(1);
    workers.saturating_sub(every / 2).div_ceil(every)
}

/// The search from the anchors of receivers `first, first + every, ...` (`(first, every)`):
/// the sizes and the work.
fn search(
    requests: &Requests,
    rows: &CacherRows,
    threshold: usize,
    budget: u64,
    threads: usize,
    (first, every): (usize, usize),
) -> Result<(Vec<u16>, u64), SearchStop> {
    let threads = threads.clamp(1, requests.workers().max(1));
    let spent = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let shared = Shared { requests, rows, need: threshold.max(2) - 1, budget, spent: &spent, stop: &stop };
    let searched: Vec<Result<Vec<u16>, SearchStop>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..threads)
            .map(|t| {
                let shared = &shared;
                scope.spawn(move || shared.search_from(first + t * every, threads * every))
            })
            .collect();
        let mut out = vec![shared.search_from(first, threads * every)];
        out.extend(handles.into_iter().map(|h| h.join().unwrap_or(Err(SearchStop::OverBudget))));
        out
    });
    let mut sizes: Option<Vec<u16>> = None;
    for part in searched {
        let part = part?;
        match &mut sizes {
            None => sizes = Some(part),
            Some(all) => all.iter_mut().zip(part).for_each(|(a, b)| *a = (*a).max(b)),
        }
    }
    let work = spent.load(Ordering::Relaxed);
    if work > budget {
        return Err(SearchStop::OverBudget);
    }
    Ok((sizes.unwrap_or_default(), work))
}

/// Work a thread counts before it adds it to the shared count.
const WORK_CHUNK: u64 = 1 << 20;

/// What every thread of a search reads.
struct Shared<'a> {
    requests: &'a Requests,
    rows: &'a CacherRows,
    need: usize,
    budget: u64,
    spent: &'a AtomicU64,
    stop: &'a AtomicBool,
}

impl Shared<'_> {
    /// Searches from the anchors of receivers `first`, `first + step`, ...; the sizes found.
    fn search_from(&self, first: usize, step: usize) -> Result<Vec<u16>, SearchStop> {
        let mut search = Search::new(self);
        let searched = (first..self.requests.workers()).step_by(step).try_for_each(|w| search.anchors_of(w));
        search.flush();
        searched.map(|()| search.sizes)
    }
}

/// The options of the workers numbered above an anchor's receiver: their requests whose point
/// that receiver caches.
struct Options {
    ids: Vec<u32>,
    /// Worker `u`'s options are `ids[start[u]..start[u + 1]]`.
    start: Vec<usize>,
}

impl Options {
    /// Gathers the options for anchors of receiver `w` that may hold `need - 1` other members
    /// (cachers numbered above `w`); returns the words read.
    fn gather(&mut self, requests: &Requests, rows: &CacherRows, w: usize, need: usize) -> u64 {
        let n = requests.workers();
        let cached = requests.cached_by(w);
        let from = requests.of_receiver(w).end;
        self.ids.clear();
        let mut read = (cached.len() - from / 64) as u64;
        for (k, &word) in cached.iter().enumerate().skip(from / 64) {
            let mut left = if k == from / 64 { word & (u64::MAX << (from % 64)) } else { word };
            while left != 0 {
                let o = k * 64 + left.trailing_zeros() as usize;
                left &= left - 1;
                let cachers = rows.of(o);
                read += cachers.len() as u64;
                if cachers_above(cachers, w) + 1 >= need {
                    self.ids.push(o as u32);
                }
            }
        }
        let mut next = 0;
        for u in 0..=n {
            let end = if u < n { requests.of_receiver(u).start } else { requests.len() };
            while next < self.ids.len() && (self.ids[next] as usize) < end.max(from) {
                next += 1;
            }
            self.start[u] = next;
        }
        read
    }

    /// The options of worker `u`.
    fn of(&self, u: usize) -> &[u32] {
        &self.ids[self.start[u]..self.start[u + 1]]
    }
}

/// A worker at a node of the search: its index among the anchor's candidates and its options
/// still open, `masks[start..start + len]`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    worker: u8,
    start: u32,
    len: u32,
}

/// A candidate in branching order: its index among the node's candidates, its colour (no more
/// than this many of the candidates up to it may join together) and the candidates that may
/// join with it.
type Ranked = (usize, usize, Mask);

/// The buffers of one depth of the search.
#[derive(Default)]
struct Level {
    grown: Vec<Entry>,
    next: Vec<Entry>,
    order: Vec<Ranked>,
}

/// One thread's search.
struct Search<'a> {
    shared: &'a Shared<'a>,
    sizes: Vec<u16>,
    /// The anchors searched from, all with the same candidates.
    anchors: Vec<u32>,
    /// Options of the nodes on the current path, as distinct masks of a worker and their
    /// classes: class `c` holds the requests `class_ids[classes[c]..classes[c + 1]]`.
    masks: Vec<Mask>,
    ids: Vec<u32>,
    classes: Vec<u32>,
    class_ids: Vec<u32>,
    /// The largest clique recorded through each class so far.
    class_size: Vec<u16>,
    /// Members besides the anchor of a clique at the threshold.
    need: usize,
    /// Work counted and not yet added to the shared count.
    work: u64,
    levels: Vec<Level>,
    options: Options,
    index_of: Vec<u8>,
    candidates: Vec<u64>,
    /// The pair graph of a node's candidates, by candidate ([`Search::pairs`]).
    pair: Box<[Mask; MAX_CANDIDATES]>,
    /// Scratch for [`Search::pairs`].
    held: Box<[Mask; MAX_CANDIDATES]>,
}

impl<'a> Search<'a> {
    fn new(shared: &'a Shared<'a>) -> Self {
        let n = shared.requests.workers();
        Search {
            shared,
            sizes: vec![0; shared.requests.len()],
            anchors: Vec::new(),
            masks: Vec::new(),
            ids: Vec::new(),
            classes: Vec::new(),
            class_ids: Vec::new(),
            class_size: Vec::new(),
            need: shared.need,
            work: 0,
            levels: Vec::new(),
            options: Options { ids: Vec::new(), start: vec![0; n + 1] },
            index_of: vec![0; n],
            candidates: vec![0; shared.rows.words()],
            pair: Box::new([0; MAX_CANDIDATES]),
            held: Box::new([0; MAX_CANDIDATES]),
        }
    }

    /// Counts `units` of work; once the shared count passes the budget the search stops.
    #[inline]
    fn charge(&mut self, units: u64) -> Result<(), SearchStop> {
        self.work += units;
        if self.work >= WORK_CHUNK {
            self.flush();
            let shared = self.shared;
            if shared.stop.load(Ordering::Relaxed) || shared.spent.load(Ordering::Relaxed) > shared.budget {
                shared.stop.store(true, Ordering::Relaxed);
                return Err(SearchStop::OverBudget);
            }
        }
        Ok(())
    }

    /// Adds the work counted to the shared count.
    fn flush(&mut self) {
        self.shared.spent.fetch_add(std::mem::take(&mut self.work), Ordering::Relaxed);
    }

    /// Searches from every request of receiver `w`, once for all the anchors with the same
    /// candidates.
    fn anchors_of(&mut self, w: usize) -> Result<(), SearchStop> {
        let (requests, rows) = (self.shared.requests, self.shared.rows);
        let anchors = requests.of_receiver(w);
        if anchors.is_empty() {
            return Ok(());
        }
        let read = self.options.gather(requests, rows, w, self.need);
        self.charge(read)?;
        let words = rows.words();
        // The candidates of each anchor: later workers caching its point that have options.
        let mut keyed: Vec<u64> = Vec::with_capacity(anchors.len() * words);
        let mut order: Vec<u32> = Vec::with_capacity(anchors.len());
        for (i, a) in anchors.clone().enumerate() {
            let mut count = 0;
            for (k, &c) in rows.of(a).iter().enumerate() {
                let mut kept = 0;
                let mut left = c;
                while left != 0 {
                    let u = k * 64 + left.trailing_zeros() as usize;
                    if u > w && !self.options.of(u).is_empty() {
                        kept |= left & left.wrapping_neg();
                    }
                    left &= left - 1;
                }
                keyed.push(kept);
                count += kept.count_ones() as usize;
            }
            if count >= self.need {
                if count > MAX_CANDIDATES {
                    return Err(SearchStop::TooWide);
                }
                order.push(i as u32);
            }
        }
        self.charge((anchors.len() * words) as u64)?;
        let key = |i: u32| &keyed[i as usize * words..(i as usize + 1) * words];
        order.sort_unstable_by(|&x, &y| key(x).cmp(key(y)));
        let mut roots: Vec<Entry> = Vec::new();
        for group in order.chunk_by(|&x, &y| key(x) == key(y)) {
            self.anchors.clear();
            self.anchors.extend(group.iter().map(|&i| (anchors.start + i as usize) as u32));
            self.candidates.copy_from_slice(key(group[0]));
            self.roots(&mut roots)?;
            if roots.len() >= self.need {
                self.grow(0, &mut roots)?;
            }
        }
        Ok(())
    }

    /// Builds the root of a search from the anchors' candidates: each candidate's options, as
    /// masks of the candidates caching their point (bit `i` for the `i`-th candidate), one
    /// class per distinct mask of a worker.
    fn roots(&mut self, roots: &mut Vec<Entry>) -> Result<(), SearchStop> {
        let rows = self.shared.rows;
        let words = rows.words();
        for (i, u) in bits::Ones::new(&self.candidates).enumerate() {
            self.index_of[u] = i as u8;
        }
        self.masks.clear();
        self.ids.clear();
        self.classes.clear();
        self.class_ids.clear();
        roots.clear();
        let mut built = 0u64;
        let mut options: Vec<(Mask, u32)> = Vec::new();
        for (i, u) in bits::Ones::new(&self.candidates).enumerate() {
            options.clear();
            for &o in self.options.of(u) {
                let cachers = rows.of(o as usize);
                built += 1 + words as u64;
                // An option of a member holds the other members: at least `need - 1`.
                if bits::and_count(cachers, &self.candidates) + 1 < self.need {
                    continue;
                }
                let mut mask: Mask = 0;
                for (k, (&c, &m)) in cachers.iter().zip(&self.candidates).enumerate() {
                    let mut both = c & m;
                    while both != 0 {
                        mask |= 1 << self.index_of[k * 64 + both.trailing_zeros() as usize];
                        both &= both - 1;
                    }
                }
                built += u64::from(mask.count_ones());
                options.push((mask, o));
            }
            options.sort_unstable();
            // A sort's comparisons.
            built += options.len() as u64 * u64::from(usize::BITS - options.len().leading_zeros());
            let start = self.masks.len();
            for same in options.chunk_by(|x, y| x.0 == y.0) {
                self.masks.push(same[0].0);
                self.ids.push(self.classes.len() as u32);
                self.classes.push(self.class_ids.len() as u32);
                self.class_ids.extend(same.iter().map(|&(_, o)| o));
            }
            let len = self.masks.len() - start;
            if len > 0 {
                roots.push(Entry { worker: i as u8, start: start as u32, len: len as u32 });
            }
        }
        self.classes.push(self.class_ids.len() as u32);
        self.class_size.clear();
        self.class_size.resize(self.classes.len(), 0);
        self.charge(built)
    }

    /// The options of `e` holding `bit`, appended to the path.
    fn filter(&mut self, e: Entry, bit: Mask) -> Entry {
        let (from, len) = (e.start as usize, e.len as usize);
        let start = self.masks.len();
        self.masks.extend_from_within(from..from + len);
        self.ids.extend_from_within(from..from + len);
        let (masks, ids) = (&mut self.masks[start..], &mut self.ids[start..]);
        let mut kept = 0;
        for k in 0..len {
            let (m, id) = (masks[k], ids[k]);
            masks[kept] = m;
            ids[kept] = id;
            kept += usize::from(m & bit != 0);
        }
        self.masks.truncate(start + kept);
        self.ids.truncate(start + kept);
        Entry { worker: e.worker, start: start as u32, len: kept as u32 }
    }

    /// The union of `e`'s options.
    fn union(&self, e: Entry) -> Mask {
        self.masks[e.start as usize..(e.start + e.len) as usize].iter().fold(0, |acc, m| acc | m)
    }

    /// The most of `within` one option of `e` holds.
    fn most_held(&self, e: Entry, within: Mask) -> usize {
        self.masks[e.start as usize..(e.start + e.len) as usize]
            .iter()
            .map(|m| (m & within).count_ones() as usize)
            .max()
            .unwrap_or(0)
    }

    /// Grows the anchor's member set (`levels[depth - 1].grown`, none at depth 0) by each of
    /// `candidates` (whose options all hold every member) in turn, each later one only without
    /// the earlier, recording the cliques at or above the threshold.
    fn grow(&mut self, depth: usize, candidates: &mut Vec<Entry>) -> Result<(), SearchStop> {
        if self.levels.len() <= depth {
            self.levels.resize_with(depth + 1, Level::default);
        }
        let members = match depth {
            0 => Vec::new(),
            _ => std::mem::take(&mut self.levels[depth - 1].grown),
        };
        let mut level = std::mem::take(&mut self.levels[depth]);
        let grown = self.branch(depth, &members, candidates, &mut level);
        self.levels[depth] = level;
        if depth > 0 {
            self.levels[depth - 1].grown = members;
        }
        grown
    }

    /// [`Search::grow`] with its buffers taken out.
    fn branch(
        &mut self,
        depth: usize,
        members: &[Entry],
        candidates: &mut Vec<Entry>,
        level: &mut Level,
    ) -> Result<(), SearchStop> {
        // Grow only toward a clique at the threshold and larger than this one.
        let goal = self.need.max(members.len() + 1);
        let inside: Mask = members.iter().fold(0, |acc, m| acc | 1 << m.worker);
        level.order.clear();
        if !self.order(members, candidates, goal, &mut level.order)? {
            return Ok(());
        }
        for at in (0..level.order.len()).rev() {
            let (k, colour, together) = level.order[at];
            // At most `colour` of the candidates up to this one may join together.
            if members.len() + colour < goal {
                break;
            }
            let joiner = candidates[k];
            let bit: Mask = 1 << joiner.worker;
            let earlier =
                level.order[..at].iter().fold(0 as Mask, |acc, &(j, _, _)| acc | 1 << candidates[j].worker);
            // Every member set grown from the child lies within these, and needs `child_goal`.
            let within = inside | bit | (earlier & together);
            let child_goal = self.need.max(members.len() + 2);
            let mark = self.masks.len();
            level.grown.clear();
            let mut tested = u64::from(joiner.len);
            // A member of a clique of `child_goal` holds `child_goal - 1` of the others.
            let mut short = self.most_held(joiner, within) + 1 < child_goal;
            for &m in members {
                tested += u64::from(m.len);
                let kept = self.filter(m, bit);
                short |= self.most_held(kept, within) + 1 < child_goal;
                level.grown.push(kept);
            }
            level.grown.push(joiner);
            if level.grown.len() >= self.need {
                self.record(&level.grown, level.grown.len() + 1)?;
            }
            level.next.clear();
            if !short {
                let held_by_all = level.grown.iter().fold(together, |acc, &m| acc & self.union(m));
                tested += level.grown.iter().map(|m| u64::from(m.len)).sum::<u64>();
                for &(j, _, _) in &level.order[..at] {
                    let c = candidates[j];
                    if held_by_all & (1 << c.worker) != 0 {
                        tested += u64::from(c.len);
                        let kept = self.filter(c, bit);
                        if kept.len > 0 {
                            level.next.push(kept);
                        }
                    }
                }
            }
            self.charge(tested)?;
            if !level.next.is_empty() {
                let mut next = std::mem::take(&mut level.next);
                self.levels[depth].grown = std::mem::take(&mut level.grown);
                let grown = self.grow(depth + 1, &mut next);
                level.grown = std::mem::take(&mut self.levels[depth].grown);
                level.next = next;
                grown?;
            }
            self.masks.truncate(mark);
            self.ids.truncate(mark);
        }
        Ok(())
    }

    /// Orders the candidates of `members` for branching, as `(index, colour, together)` of
    /// non-decreasing colour where no more than `colour` of the candidates up to one may join
    /// together, and `together` holds the candidates that may join with it; drops the
    /// candidates that cannot be among `goal` members, and returns false when no growth reaches
    /// `goal`.
    fn order(
        &mut self,
        members: &[Entry],
        candidates: &mut Vec<Entry>,
        goal: usize,
        order: &mut Vec<Ranked>,
    ) -> Result<bool, SearchStop> {
        let inside: Mask = members.iter().fold(0, |acc, m| acc | 1 << m.worker);
        loop {
            if members.len() + candidates.len() < goal || candidates.is_empty() {
                return Ok(false);
            }
            let within = candidates.iter().fold(inside, |acc, c| acc | 1 << c.worker);
            let tested: u64 = members.iter().chain(candidates.iter()).map(|e| e.len as u64).sum();
            self.charge(tested)?;
            // A member of a clique of `goal` holds `goal - 1` of the others in one option.
            if members.iter().any(|&m| self.most_held(m, within) + 1 < goal) {
                return Ok(false);
            }
            let before = candidates.len();
            candidates.retain(|&c| self.most_held(c, within) + 1 >= goal);
            if candidates.len() == before {
                break;
            }
        }
        let wanted = goal - members.len();
        if members.len() < PAIRS_FROM_MEMBERS || wanted < 2 {
            order.extend((0..candidates.len()).map(|k| (k, k + 1, Mask::MAX)));
            return Ok(true);
        }
        self.pairs(members, candidates)?;
        // The candidates that join form a clique of the pair graph: of `wanted` or more.
        let mut left: Mask = candidates.iter().fold(0, |acc, c| acc | 1 << c.worker);
        loop {
            let peeled = ones(left)
                .filter(|&c| ((self.pair[c] & left).count_ones() as usize) + 1 < wanted)
                .fold(0 as Mask, |acc, c| acc | 1 << c);
            if peeled == 0 {
                break;
            }
            left &= !peeled;
        }
        if (left.count_ones() as usize) < wanted {
            return Ok(false);
        }
        candidates.retain(|c| left & 1 << c.worker != 0);
        let mut index_of = [0u8; MAX_CANDIDATES];
        for (k, c) in candidates.iter().enumerate() {
            index_of[c.worker as usize] = k as u8;
        }
        // Colour classes are independent sets: a clique has one member in each at most.
        let (mut uncoloured, mut colour) = (left, 0);
        while uncoloured != 0 {
            colour += 1;
            let mut open = uncoloured;
            while open != 0 {
                let v = open.trailing_zeros() as usize;
                uncoloured &= !(1 << v);
                open &= !(1 << v) & !self.pair[v];
                order.push((index_of[v] as usize, colour, self.pair[v]));
            }
        }
        Ok(true)
    }

    /// Fills [`Search::pair`] for `candidates`: `c` and `d` are joined when both may join
    /// together, that is, some option of every member holds both, some option of `c` holds `d`
    /// and some option of `d` holds `c`.
    fn pairs(&mut self, grown: &[Entry], candidates: &[Entry]) -> Result<(), SearchStop> {
        let all: Mask = candidates.iter().fold(0, |acc, c| acc | 1 << c.worker);
        for c in candidates {
            self.pair[c.worker as usize] = self.union(*c) & all;
        }
        let mut tested = 0u64;
        for m in grown {
            for c in ones(all) {
                self.held[c] = 0;
            }
            for k in m.start as usize..(m.start + m.len) as usize {
                let held = self.masks[k] & all;
                tested += 1 + held.count_ones() as u64;
                for c in ones(held) {
                    self.held[c] |= held;
                }
            }
            for c in ones(all) {
                self.pair[c] &= self.held[c];
            }
        }
        for c in ones(all) {
            let mut joined = self.pair[c] & !(1 << c);
            for d in ones(joined) {
                if self.pair[d] & 1 << c == 0 {
                    joined &= !(1 << d);
                }
            }
            tested += 1 + joined.count_ones() as u64;
            self.pair[c] = joined;
        }
        self.charge(tested)
    }

    /// Records a clique of `size` through the anchors and every open option of `grown`.
    fn record(&mut self, grown: &[Entry], size: usize) -> Result<(), SearchStop> {
        let size = size as u16;
        let mut marked = self.anchors.len() as u64;
        for &a in &self.anchors {
            let slot = &mut self.sizes[a as usize];
            *slot = (*slot).max(size);
        }
        for m in grown {
            marked += u64::from(m.len);
            for k in m.start as usize..(m.start + m.len) as usize {
                let class = self.ids[k] as usize;
                if self.class_size[class] >= size {
                    continue;
                }
                self.class_size[class] = size;
                let requests =
                    &self.class_ids[self.classes[class] as usize..self.classes[class + 1] as usize];
                marked += requests.len() as u64;
                for &r in requests {
                    let slot = &mut self.sizes[r as usize];
                    *slot = (*slot).max(size);
                }
            }
        }
        self.charge(marked)
    }
}

/// The largest clique through every request of `inst`, by brute force over the request graph
/// (for tests, on small instances).
#[cfg(test)]
pub(crate) fn brute_force(inst: &crate::ShuffleInstance) -> Vec<usize> {
    let requests = Requests::of(inst);
    let len = requests.len();
    let joined = |r: usize, s: usize| {
        let (wr, ws) = (requests.receiver(r), requests.receiver(s));
        wr != ws && bits::get(requests.cached_by(wr), s) && bits::get(requests.cached_by(ws), r)
    };
    fn extend(
        clique: &mut Vec<usize>,
        from: usize,
        len: usize,
        joined: &dyn Fn(usize, usize) -> bool,
        best: &mut [usize],
    ) {
        for r in &*clique {
            best[*r] = best[*r].max(clique.len());
        }
        for s in from..len {
            if clique.iter().all(|&r| joined(r, s)) {
                clique.push(s);
                extend(clique, s + 1, len, joined, best);
                clique.pop();
            }
        }
    }
    let mut best = vec![1; len];
    extend(&mut Vec::new(), 0, len, &joined, &mut best);
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, ShuffleInstance, arbitrary_instance};

    fn small_instances() -> Vec<ShuffleInstance> {
        let mut out = Vec::new();
        for seed in 0..4 {
            for (n, q, alpha) in [(6, 36, 0.5), (8, 400, 0.6), (10, 300, 0.5), (12, 240, 0.6), (16, 160, 0.5)]
            {
                out.push(GeneratorParams { workers: n, points: q, alpha, seed }.check().unwrap().generate());
            }
            out.push(arbitrary_instance(7, 140, 0.6, seed));
        }
        // More than 128 workers (masks are over an anchor's candidates, at most 128).
        out.push(
            GeneratorParams { workers: 150, points: 450, alpha: 0.6, seed: 2 }.check().unwrap().generate(),
        );
        // Cliques of up to 9.
        out.push(
            GeneratorParams { workers: 14, points: 420, alpha: 0.7, seed: 1 }.check().unwrap().generate(),
        );
        out
    }

    #[test]
    fn the_search_finds_the_largest_clique_through_every_request_at_or_above_its_threshold() {
        for inst in small_instances() {
            let requests = Requests::of(&inst);
            let rows = requests.cacher_rows();
            let truth = super::brute_force(&inst);
            let largest = truth.iter().copied().max().unwrap_or(1);
            for threshold in 2..=largest + 1 {
                let found = largest_cliques(&requests, &rows, threshold, u64::MAX, 2).unwrap();
                for (r, &omega) in truth.iter().enumerate() {
                    let expected = if omega >= threshold { omega } else { 0 };
                    assert_eq!(found.sizes[r] as usize, expected, "request {r}, threshold {threshold}");
                    assert!(found.at_most(r) >= omega);
                }
            }
        }
    }

    #[test]
    fn an_instance_with_more_cachers_above_a_receiver_than_a_mask_holds_is_too_wide() {
        let narrow =
            GeneratorParams { workers: 150, points: 450, alpha: 0.6, seed: 2 }.check().unwrap().generate();
        let wide =
            GeneratorParams { workers: 200, points: 400, alpha: 0.85, seed: 1 }.check().unwrap().generate();
        for (inst, expected) in [(narrow, false), (wide, true)] {
            let requests = Requests::of(&inst);
            let rows = requests.cacher_rows();
            let most_above = (0..requests.len())
                .map(|r| bits::Ones::new(rows.of(r)).filter(|&u| u > requests.receiver(r)).count())
                .max()
                .unwrap();
            assert_eq!(most_above > MAX_CANDIDATES, expected, "{most_above}");
            assert_eq!(too_wide(&requests, &rows), expected);
        }
    }

    #[test]
    fn a_search_past_its_budget_stops() {
        let inst =
            GeneratorParams { workers: 10, points: 400, alpha: 0.4, seed: 1 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let rows = requests.cacher_rows();
        let full = largest_cliques(&requests, &rows, 3, u64::MAX, 1).unwrap();
        assert!(full.work > 1);
        assert_eq!(largest_cliques(&requests, &rows, 3, full.work, 2), Ok(full.clone()));
        assert_eq!(largest_cliques(&requests, &rows, 3, full.work - 1, 2), Err(SearchStop::OverBudget));
        // A probe of every receiver costs the search; of fewer, less.
        assert_eq!(probe_work(&requests, &rows, 3, u64::MAX, 2, 1), Ok(full.work));
        let probed = probe_work(&requests, &rows, 3, u64::MAX, 1, 4).unwrap();
        assert_eq!(probed_receivers(10, 4), 2, "receivers 2 and 6");
        assert!(probed > 0 && probed < full.work);
    }

    #[test]
    #[ignore = "a measurement: cargo test --release -p ubershuffle-planners --lib search_cost -- --ignored --nocapture"]
    fn search_cost() {
        let spec = std::env::var("UBS_POINT").unwrap_or("100,100000,0.3".into());
        let v: Vec<&str> = spec.split(',').collect();
        let inst = GeneratorParams {
            workers: v[0].parse().unwrap(),
            points: v[1].parse().unwrap(),
            alpha: v[2].parse().unwrap(),
            seed: 1,
        }
        .check()
        .unwrap()
        .generate();
        let requests = Requests::of(&inst);
        let rows = requests.cacher_rows();
        let top: usize = std::env::var("UBS_TOP").map_or(12, |v| v.parse().unwrap());
        let cap: u64 = std::env::var("UBS_CAP").map_or(50_000_000_000, |v| v.parse().unwrap());
        let bottom: usize = std::env::var("UBS_BOTTOM").map_or(2, |v| v.parse().unwrap());
        for k in (bottom..=top).rev() {
            let t = std::time::Instant::now();
            let Ok(r) = largest_cliques(&requests, &rows, k, cap, 2) else {
                eprintln!("k={k} over {cap} after {:.1} s", t.elapsed().as_secs_f64());
                break;
            };
            let mut hist = std::collections::BTreeMap::new();
            for r2 in 0..requests.len() {
                *hist.entry(r.at_most(r2)).or_insert(0) += 1;
            }
            let bound: f64 = hist.iter().map(|(&s, &c)| c as f64 / s as f64).sum();
            eprintln!(
                "{spec} k={k} work={} secs={:.2} hist={hist:?} bound/U={:.4}",
                r.work,
                t.elapsed().as_secs_f64(),
                bound / requests.len() as f64
            );
        }
    }
}
