//! Greedy packing of requests into XOR packets (cliques of the side-information graph), the
//! engine of [`crate::planners::CliqueCoverPlanner`].
//!
//! State, all bitsets: the open requests (`U` bits), and while a packet grows, `A` (the workers
//! caching every point chosen so far, `n` bits) and for every worker of `A` its candidates: its
//! open requests cached by every receiver chosen so far. Candidates are harvested lazily, a
//! word of the worker's range at a time (the AND of the open bits and of the chosen receivers'
//! rows of [`Requests::cached_by`]), only as far as the search looks; adding a request of
//! receiver `u` narrows `A` by one AND with the request's cachers and filters what each worker
//! has harvested by `u`'s row.
//!
//! Work is counted in *touches* (a candidate's cachers examined, a harvested word per row
//! ANDed, a cache line of candidates filtered), which track the memory traffic that dominates
//! the time; [`TOUCHES_PER_UNIT`] of them make a work unit.

use crate::bits;
use crate::requests::{CacherRows, Requests};
use crate::rng::shuffle;
use crate::{Part, Plan, SeededRng, ShuffleInstance};

/// Touches per work unit, chosen so that a unit of `clique-cover` takes about as long as a
/// unit of the carpool planners (calibrated at n = 100 to 1000, q = 3e5; see
/// [`crate::WORK_PER_SECOND`] for how a unit is measured). A candidate examined counts
/// `2 + n / 64` touches (its cachers are a cache miss of `n / 8` bytes).
const TOUCHES_PER_UNIT: u64 = 4;

/// The most candidates examined per step of a packet (over all workers of `A`). More finds
/// slightly larger packets at twice the work each time; the ignored test
/// `evals_per_step_comparison` in this file prints the trade-off at n = 100, q = 3e5, a = 0.3
/// (`cargo test --release -p ubershuffle-core --lib evals_per_step -- --ignored --nocapture`).
pub(crate) const MAX_EVALS_PER_STEP: usize = 128;

/// How the packer searches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackingParams {
    /// The most candidates examined per step.
    pub evals_per_step: usize,
    /// Work units for the packing after the side information is built.
    pub budget: u64,
}

impl PackingParams {
    /// Work units to build the side information of `inst` ([`Requests::of`] and its
    /// transpose): one pass over every cache and the `n x U` bit matrix twice.
    pub(crate) fn build_work(inst: &ShuffleInstance) -> u64 {
        let cache_entries: usize = (0..inst.workers()).map(|w| inst.cache(w).len()).sum();
        Self::build_work_of(inst.workers(), cache_entries, inst.uncoded_transmissions())
    }

    /// [`PackingParams::build_work`] from the counts: `workers` workers caching
    /// `cache_entries` points in all, and `requests` requests.
    pub(crate) fn build_work_of(workers: usize, cache_entries: usize, requests: usize) -> u64 {
        let matrix_words = workers as u64 * bits::words_for(requests) as u64;
        (cache_entries as u64 / 16 + matrix_words / 4) / TOUCHES_PER_UNIT
    }

    /// The least work a packing of `inst` takes, one candidate examined per step: building,
    /// plus for each request about one harvested word per worker that may join its packet
    /// (`n a` of them, `a` the share of points a worker caches).
    pub(crate) fn least_work(inst: &ShuffleInstance) -> u64 {
        let cache_entries: usize = (0..inst.workers()).map(|w| inst.cache(w).len()).sum();
        let shape = (inst.workers(), inst.points(), inst.cache_size());
        Self::least_work_of(shape, cache_entries, inst.uncoded_transmissions())
    }

    /// [`PackingParams::least_work`] from the counts: `(workers, points, largest cache)`,
    /// `cache_entries` cached points over all workers, and `requests` requests.
    pub(crate) fn least_work_of(shape: (usize, usize, usize), cache_entries: usize, requests: usize) -> u64 {
        let (workers, points, cache_size) = shape;
        let cached = cache_size as u64 * workers as u64 / points.max(1) as u64;
        Self::build_work_of(workers, cache_entries, requests)
            + requests as u64 * (cached + 1) / TOUCHES_PER_UNIT
    }

    /// The parameters for a budget of `budget` work units in all, of which building the side
    /// information of `requests` requests took its share ([`PackingParams::build_work_of`]).
    pub(crate) fn within_for(budget: u64, workers: usize, cache_entries: usize, requests: usize) -> Self {
        PackingParams {
            evals_per_step: MAX_EVALS_PER_STEP,
            budget: budget.saturating_sub(Self::build_work_of(workers, cache_entries, requests)),
        }
    }

    /// The parameters for a budget of `budget` work units in all.
    pub(crate) fn within(budget: u64, inst: &ShuffleInstance) -> Self {
        PackingParams {
            evals_per_step: MAX_EVALS_PER_STEP,
            budget: budget.saturating_sub(Self::build_work(inst)),
        }
    }
}

/// One worker that may still join the packet being grown, and its candidates: the open
/// requests of its range cached by every receiver chosen so far. Words of the range are
/// harvested lazily, in order, only as far as the search needs.
#[derive(Clone, Copy, Debug)]
struct Slot {
    worker: u32,
    /// The next word of its range not harvested yet, and the last word.
    next_word: u32,
    last_word: u32,
    /// Its range of requests.
    start: u32,
    end: u32,
    /// Its harvested candidates: `found[offset..offset + len]`.
    offset: u32,
    len: u32,
}

/// The packer's state.
struct Packer<'a> {
    requests: &'a Requests,
    rows: &'a CacherRows,
    open: Vec<u64>,
    allowed: Vec<u64>,
    slots: Vec<Slot>,
    /// Harvested candidates of every slot, `capacity` places each.
    found: Vec<u32>,
    capacity: usize,
    chosen: Vec<usize>,
    receivers: Vec<usize>,
    gathered: Vec<u64>,
    touches: u64,
}

/// What the packer tells about each packet it closes: a pliable planner records the
/// assignment the packet implies and closes the requests it rules out.
pub(crate) trait PacketSink {
    /// Called after each packet, whose requests `chosen` are already closed in `open`; may close
    /// more requests there (clear their bits) and returns how many it closed.
    fn packed(&mut self, requests: &Requests, chosen: &[usize], open: &mut [u64]) -> usize;
}

/// The sink of a fixed assignment: nothing more to close.
pub(crate) struct NoSink;

impl PacketSink for NoSink {
    fn packed(&mut self, _: &Requests, _: &[usize], _: &mut [u64]) -> usize {
        0
    }
}

/// Packs every request of `requests` into packets; the plan serves each request exactly once,
/// tagged with its receiver, and decodes in one step at every receiver.
///
/// The candidates examined per step start at `params.evals_per_step` and shrink (down to one a
/// worker) while the work spent so far, projected over the requests left, would overrun the
/// budget, so the packing ends near its budget at the latest.
/// `rows` are the requests' cachers ([`Requests::cacher_rows`]).
pub(crate) fn pack_requests(
    requests: &Requests,
    rows: &CacherRows,
    params: &PackingParams,
    rng: &mut SeededRng,
) -> Plan {
    pack_requests_into(requests, rows, params, rng, &mut NoSink)
}

/// [`pack_requests`], telling `sink` about every packet as it closes, so that it may close
/// further requests (a pliable planner closes the other receivers offered the same point, and
/// every request of a receiver whose batch is full). The plan serves each request at most once;
/// the requests the sink closed are not served.
pub(crate) fn pack_requests_into(
    requests: &Requests,
    rows: &CacherRows,
    params: &PackingParams,
    rng: &mut SeededRng,
    sink: &mut dyn PacketSink,
) -> Plan {
    let order = seed_order(requests, rows, rng);
    let mut packer = Packer {
        requests,
        open: vec![u64::MAX; requests.row_words()],
        allowed: vec![0; rows.words()],
        rows,
        slots: Vec::new(),
        found: Vec::new(),
        capacity: 0,
        chosen: Vec::new(),
        receivers: Vec::new(),
        gathered: Vec::new(),
        touches: 0,
    };
    let mut plan = Plan::with_capacity(requests.len() / 2, requests.len());
    let budget = params.budget.saturating_mul(TOUCHES_PER_UNIT);
    let mut evals = params.evals_per_step.max(1);
    let mut served = 0usize;
    for &seed in &order {
        let seed = seed as usize;
        if !bits::get(&packer.open, seed) {
            continue;
        }
        if served > 0 {
            let projected =
                packer.touches as f64 / served as f64 * requests.len().saturating_sub(served) as f64;
            let left = budget.saturating_sub(packer.touches) as f64;
            evals = if projected > left {
                ((evals as f64 * left / projected) as usize).max(1)
            } else {
                (evals * 2).min(params.evals_per_step.max(1))
            };
        }
        packer.grow(seed, evals);
        served += packer.chosen.len() + sink.packed(requests, &packer.chosen, &mut packer.open);
        plan.push_iter(packer.chosen.iter().map(|&r| Part::new(requests.point(r), requests.receiver(r))));
    }
    plan
}

/// Requests by increasing number of cachers, ties in a seeded random order.
pub(crate) fn seed_order(requests: &Requests, rows: &CacherRows, rng: &mut SeededRng) -> Vec<u32> {
    let mut order: Vec<u32> = (0..requests.len() as u32).collect();
    shuffle(rng, &mut order);
    let cachers: Vec<u32> = (0..requests.len()).map(|r| bits::count(rows.of(r)) as u32).collect();
    order.sort_by_key(|&r| cachers[r as usize]);
    order
}

impl Packer<'_> {
    /// Grows one packet from `seed` into `self.chosen`, examining at most `evals` candidates a
    /// step, and closes its requests.
    fn grow(&mut self, seed: usize, evals: usize) {
        self.chosen.clear();
        self.chosen.push(seed);
        self.receivers.clear();
        self.receivers.push(self.requests.receiver(seed));
        self.allowed.copy_from_slice(self.rows.of(seed));
        self.open_slots(evals);
        while let Some(r) = self.best_candidate(evals) {
            self.chosen.push(r);
            self.narrow(r);
        }
        for &r in &self.chosen {
            bits::clear(&mut self.open, r);
        }
    }

    /// An empty slot for every worker of `allowed` that needs something.
    fn open_slots(&mut self, evals: usize) {
        self.slots.clear();
        self.capacity = evals + 64;
        for u in bits::Ones::new(&self.allowed) {
            let range = self.requests.of_receiver(u);
            if range.is_empty() {
                continue;
            }
            let offset = (self.slots.len() * self.capacity) as u32;
            self.slots.push(Slot {
                worker: u as u32,
                next_word: (range.start / 64) as u32,
                last_word: ((range.end - 1) / 64) as u32,
                start: range.start as u32,
                end: range.end as u32,
                offset,
                len: 0,
            });
        }
        let needed = self.slots.len() * self.capacity;
        if self.found.len() < needed {
            self.found.resize(needed, 0);
        }
        self.touches += self.allowed.len() as u64;
    }

    /// The open candidate whose point the most workers of `allowed` cache, ties to the one
    /// cached by the fewest workers in all (the hardest to place later). Examines about
    /// `evals` candidates, shared evenly among the workers of `A` (at least one each).
    fn best_candidate(&mut self, evals: usize) -> Option<usize> {
        let mut best: (usize, usize) = (0, usize::MAX);
        let words = self.allowed.len();
        let scan = (evals / self.slots.len().max(1)).max(1);
        for k in 0..self.slots.len() {
            self.harvest(k, scan);
            let slot = self.slots[k];
            let list = &self.found[slot.offset as usize..(slot.offset + slot.len.min(scan as u32)) as usize];
            // Gather the candidates' cachers first, so that their cache misses overlap.
            self.gathered.clear();
            for &r in list {
                self.gathered.extend_from_slice(self.rows.of(r as usize));
            }
            for (row, &r) in self.gathered.chunks_exact(words).zip(list) {
                let inside = bits::and_count(row, &self.allowed);
                let score = inside * 4096 + 4095 - bits::count(row).min(4095);
                if best.1 == usize::MAX || score > best.0 {
                    best = (score, r as usize);
                }
            }
            self.touches += (list.len() * (2 + words)) as u64;
        }
        (best.1 != usize::MAX).then_some(best.1)
    }

    /// Harvests words of slot `k` until it holds `scan` candidates or its range is done.
    fn harvest(&mut self, k: usize, scan: usize) {
        let mut slot = self.slots[k];
        while (slot.len as usize) < scan && slot.next_word <= slot.last_word {
            let w = slot.next_word as usize;
            let mut word = self.open[w];
            for &receiver in &self.receivers {
                word &= self.requests.cached_by(receiver)[w];
            }
            if w == slot.start as usize / 64 {
                word &= u64::MAX << (slot.start % 64);
            }
            if w == slot.last_word as usize {
                word &= u64::MAX >> (63 - (slot.end - 1) % 64);
            }
            self.touches += self.receivers.len() as u64 + 1;
            while word != 0 {
                let r = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                self.found[(slot.offset + slot.len) as usize] = r as u32;
                slot.len += 1;
            }
            slot.next_word += 1;
        }
        self.slots[k] = slot;
    }

    /// Adds request `r` to the packet: `A` keeps the workers caching its point, and every
    /// remaining worker's harvested candidates the ones its receiver caches.
    fn narrow(&mut self, r: usize) {
        for (a, c) in self.allowed.iter_mut().zip(self.rows.of(r)) {
            *a &= c;
        }
        let receiver = self.requests.receiver(r);
        self.receivers.push(receiver);
        let allowed = &self.allowed;
        self.slots.retain(|s| bits::get(allowed, s.worker as usize));
        let cached = self.requests.cached_by(receiver);
        for slot in &mut self.slots {
            let list = &mut self.found[slot.offset as usize..(slot.offset + slot.len) as usize];
            let mut kept = 0;
            for i in 0..list.len() {
                let c = list[i];
                if bits::get(cached, c as usize) {
                    list[kept] = c;
                    kept += 1;
                }
            }
            self.touches += list.len() as u64 / 8 + 1;
            slot.len = kept as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, seeded, verify};

    /// The comparison behind [`MAX_EVALS_PER_STEP`]: transmissions / uncoded for 32 to 256
    /// candidates a step, with an unbounded budget.
    #[test]
    #[ignore = "a measurement (n = 100, q = 3e5), not a check"]
    fn evals_per_step_comparison() {
        let inst = GeneratorParams { workers: 100, points: 300_000, alpha: 0.3, seed: 1 }
            .check()
            .unwrap()
            .generate();
        let requests = Requests::of(&inst);
        for evals_per_step in [32, 64, 128, 256] {
            let params = PackingParams { evals_per_step, budget: u64::MAX };
            let plan = pack_requests(&requests, &requests.cacher_rows(), &params, &mut seeded(1));
            assert!(verify(&inst, &plan).unwrap().is_valid());
            let ratio = plan.len() as f64 / inst.uncoded_transmissions() as f64;
            println!("{evals_per_step} candidates a step: {ratio:.4} x uncoded");
        }
    }
}
