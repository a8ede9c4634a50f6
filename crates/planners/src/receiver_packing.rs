//! Packing by receiver sets: the construction of [`crate::planners::CliqueCoverPlanner`].
//!
//! A packet is a set `W` of receivers and, for each `w` of `W`, one open request of `w` whose
//! point every other receiver of `W` caches. So the packet can be grown receiver by receiver,
//! leaving the choice of each receiver's request to the end: for every member `w` keep its
//! *options* `C_w`, its open requests cached by every other member (a bitset over `w`'s range of
//! requests), and for every worker `u` that may still join its options `D_u`, its open requests
//! cached by every member. A worker `u` may join while `D_u` and every `C_w ∧ cached_by(u)` are
//! non-empty; the packet grows by the `u` that keeps the most combinations (the largest product
//! of those counts), and when no worker may join, each member sends its option cached by the
//! fewest workers (the hardest to place later).
//!
//! Committing to one request per receiver as it joins (what [`crate::packing`] does) asks every
//! later receiver to cache that very point; deferring the choice asks it to cache one of the
//! member's options, so packets grow about one receiver larger. The packet starts from the open
//! request with the fewest cachers (ties in a seeded random order); that request is fixed, so
//! only its cachers may join.
//!
//! Work is counted in touches: a bitset range read or written costs [`ACCESS_TOUCHES`] (its
//! cache miss) plus one a word; [`TOUCHES_PER_UNIT`] make a work unit.

use crate::bits;
use crate::packing::seed_order;
use crate::requests::{CacherRows, Requests};
use crate::{Part, Plan, SeededRng};

/// Touches per work unit, so that a unit takes about as long as one of the carpool planners
/// ([`crate::WORK_PER_SECOND`]; measured at n = 100, q = 1e6, a = 0.3, where ranges are 110
/// words, and at n = 1000, q = 1e6, a = 0.1, where they are 15 and the misses dominate).
const TOUCHES_PER_UNIT: u64 = 64;

/// Touches of the cache miss of reaching a range of a row.
const ACCESS_TOUCHES: u64 = 64;

/// The most trials per packet (see [`ReceiverPacking::trials`]): past this many first joiners
/// the packets hardly grow (measured at n = 200, q = 1e5, a = 0.3: 1, 4, 16 and 64 trials send
/// 0.174, 0.167, 0.161 and 0.158 of uncoded).
pub(crate) const MAX_TRIALS: usize = 64;

/// Workers examined a step below which the packing counts as starved by its budget (at the
/// scale run's 10 s: n = 1000, q = 1e6 came down to 1, n = 100, q = 1e6, alpha = 0.3 to 16).
pub(crate) const STARVED_EVALS: usize = 8;

/// Options examined to pick each member's request at the end (the fewest cachers wins).
const PICK_SCAN: usize = 32;

/// How the receiver-set packer searches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReceiverPacking {
    /// The most workers examined per step of a packet.
    pub evals_per_step: usize,
    /// The most trials per packet: each grows the packet again from another first joiner (the
    /// best not tried yet) and the largest packet is kept.
    pub trials: usize,
    /// Work units for the packing.
    pub budget: u64,
}

/// A member of the packet or a worker that may join, and its options: `words` words of the
/// request bitset from word `first`, kept at `offset` of its buffer.
#[derive(Clone, Copy, Debug)]
struct Entry {
    worker: u32,
    first: u32,
    words: u32,
    offset: u32,
}

/// The packer's state.
struct Grower<'a> {
    requests: &'a Requests,
    rows: CacherRows,
    open: Vec<u64>,
    members: Vec<Entry>,
    member_words: Vec<u64>,
    joiners: Vec<Entry>,
    joiner_words: Vec<u64>,
    chosen: Vec<usize>,
    /// The largest packet of the trials so far, and the first joiners tried.
    best_chosen: Vec<usize>,
    firsts: Vec<u32>,
    /// The workers that may join the seed, and their options, before the first trial.
    start_joiners: Vec<Entry>,
    start_words: Vec<u64>,
    touches: u64,
}

/// Packs every request of `requests` into packets (see the module documentation); the plan
/// serves each request exactly once, tagged with its receiver, and decodes in one step at every
/// receiver. The workers examined per step start at `params.evals_per_step` and shrink (down
/// to one) while the work spent so far, projected over the requests left, would overrun the
/// budget. Also returns whether the budget was so tight that some packet examined fewer than
/// [`STARVED_EVALS`] workers a step.
pub(crate) fn pack_by_receivers(
    requests: &Requests,
    params: &ReceiverPacking,
    rng: &mut SeededRng,
) -> (Plan, bool) {
    let rows = requests.cacher_rows();
    let order = seed_order(requests, &rows, rng);
    let mut grower = Grower {
        requests,
        rows,
        open: vec![u64::MAX; requests.row_words()],
        members: Vec::new(),
        member_words: Vec::new(),
        joiners: Vec::new(),
        joiner_words: Vec::new(),
        chosen: Vec::new(),
        best_chosen: Vec::new(),
        firsts: Vec::new(),
        start_joiners: Vec::new(),
        start_words: Vec::new(),
        touches: 0,
    };
    let mut plan = Plan::with_capacity(requests.len() / 4, requests.len());
    let budget = params.budget.saturating_mul(TOUCHES_PER_UNIT);
    let most = params.evals_per_step.max(1);
    // The effort per packet: trials times workers examined a step, shrunk (trials first) while
    // the work so far, projected over the requests left, would overrun the budget, and grown
    // back (evals first) while it would not.
    let (mut evals, mut trials) = (most, params.trials.max(1));
    let mut served = 0usize;
    let mut starved = false;
    for &seed in &order {
        let seed = seed as usize;
        if !bits::get(&grower.open, seed) {
            continue;
        }
        if served > 0 {
            let projected = grower.touches as f64 / served as f64 * (requests.len() - served) as f64;
            let left = budget.saturating_sub(grower.touches) as f64;
            if projected > left {
                let share = left / projected;
                if trials > 1 {
                    trials = ((trials as f64 * share) as usize).max(1);
                } else {
                    evals = ((evals as f64 * share) as usize).max(1);
                    starved |= evals < STARVED_EVALS;
                }
            } else if evals < most {
                evals = (evals * 2).min(most);
            } else if projected * 1.5 < left {
                trials = (trials + 1).min(params.trials.max(1));
            }
        }
        grower.grow(seed, evals, trials);
        served += grower.chosen.len();
        plan.push_iter(grower.chosen.iter().map(|&r| Part::new(requests.point(r), requests.receiver(r))));
    }
    (plan, starved)
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

impl Grower<'_> {
    /// Grows one packet from `seed` into `self.chosen`, examining at most `evals` workers a
    /// step, and closes its requests.
    fn grow(&mut self, seed: usize, evals: usize, trials: usize) {
        self.members.clear();
        self.member_words.clear();
        self.joiners.clear();
        self.joiner_words.clear();
        let w0 = self.requests.receiver(seed);
        let home = self.requests.cached_by(w0);
        for u in bits::Ones::new(self.rows.of(seed)) {
            let Some((first, words, head, tail)) = span(self.requests, u) else { continue };
            let offset = self.joiner_words.len();
            for k in 0..words {
                self.joiner_words.push(self.open[first + k] & home[first + k]);
            }
            self.joiner_words[offset] &= head;
            self.joiner_words[offset + words - 1] &= tail;
            self.touches += ACCESS_TOUCHES + 2 * words as u64;
            self.joiners.push(Entry {
                worker: u as u32,
                first: first as u32,
                words: words as u32,
                offset: offset as u32,
            });
        }
        self.start_joiners.clone_from(&self.joiners);
        self.start_words.clone_from(&self.joiner_words);
        self.best_chosen.clear();
        self.firsts.clear();
        for trial in 0..trials {
            if trial > 0 {
                self.joiners.clone_from(&self.start_joiners);
                self.joiner_words.clone_from(&self.start_words);
                self.members.clear();
                self.member_words.clear();
            }
            // Each trial starts from another first joiner (the best not tried yet).
            let Some(first) = self.best_joiner(evals, &self.firsts.clone()) else { break };
            self.firsts.push(self.joiners[first].worker);
            self.join(first);
            while let Some(i) = self.best_joiner(evals, &[]) {
                self.join(i);
            }
            if self.members.len() + 1 > self.best_chosen.len() {
                self.chosen.clear();
                self.chosen.push(seed);
                for m in 0..self.members.len() {
                    let pick = self.pick(self.members[m]);
                    self.chosen.push(pick);
                }
                std::mem::swap(&mut self.chosen, &mut self.best_chosen);
            }
        }
        std::mem::swap(&mut self.chosen, &mut self.best_chosen);
        if self.chosen.is_empty() {
            self.chosen.push(seed);
        }
        for &r in &self.chosen {
            bits::clear(&mut self.open, r);
        }
    }

    /// The worker that may join with the largest product of option counts (its own and every
    /// member's among what it caches), examining at most `evals` of them; workers that can
    /// never join (options run out only by shrinking) are dropped on the way.
    fn best_joiner(&mut self, evals: usize, exclude: &[u32]) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        let (mut i, mut examined) = (0, 0);
        while i < self.joiners.len() && examined < evals {
            let j = self.joiners[i];
            if exclude.contains(&j.worker) {
                i += 1;
                continue;
            }
            let own = bits::count(self.joiner_slice(j));
            self.touches += ACCESS_TOUCHES + u64::from(j.words);
            let mut score = if own == 0 { None } else { Some((own as f64).ln()) };
            let row = self.requests.cached_by(j.worker as usize);
            for m in &self.members {
                let Some(s) = score else { break };
                let (first, words) = (m.first as usize, m.words as usize);
                let count = bits::and_count(
                    &self.member_words[m.offset as usize..m.offset as usize + words],
                    &row[first..first + words],
                );
                self.touches += ACCESS_TOUCHES + words as u64;
                score = (count > 0).then(|| s + (count as f64).ln());
            }
            match score {
                None => {
                    self.joiners.swap_remove(i);
                }
                Some(s) => {
                    if best.is_none_or(|(b, _)| s > b) {
                        best = Some((s, i));
                    }
                    examined += 1;
                    i += 1;
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// Worker `joiners[i]` joins: every member keeps the options it caches, every other worker
    /// that may join keeps the options it caches, and the joiner's options become a member's.
    fn join(&mut self, i: usize) {
        let j = self.joiners.swap_remove(i);
        let row = self.requests.cached_by(j.worker as usize);
        for m in &self.members {
            let (first, offset) = (m.first as usize, m.offset as usize);
            for k in 0..m.words as usize {
                self.member_words[offset + k] &= row[first + k];
            }
            self.touches += ACCESS_TOUCHES + u64::from(m.words);
        }
        for o in &self.joiners {
            let (first, offset) = (o.first as usize, o.offset as usize);
            for k in 0..o.words as usize {
                self.joiner_words[offset + k] &= row[first + k];
            }
            self.touches += ACCESS_TOUCHES + u64::from(o.words);
        }
        let offset = self.member_words.len();
        let (from, words) = (j.offset as usize, j.words as usize);
        self.member_words.extend_from_slice(&self.joiner_words[from..from + words]);
        self.members.push(Entry { offset: offset as u32, ..j });
    }

    /// The options of joiner `j`.
    fn joiner_slice(&self, j: Entry) -> &[u64] {
        &self.joiner_words[j.offset as usize..(j.offset + j.words) as usize]
    }

    /// Member `m`'s request: among its first [`PICK_SCAN`] options, the one cached by the fewest
    /// workers (the hardest to place later).
    fn pick(&mut self, m: Entry) -> usize {
        let words = &self.member_words[m.offset as usize..(m.offset + m.words) as usize];
        let mut best = (usize::MAX, usize::MAX);
        for (scanned, bit) in bits::Ones::new(words).enumerate() {
            if scanned == PICK_SCAN {
                break;
            }
            let r = m.first as usize * 64 + bit;
            let cachers = bits::count(self.rows.of(r));
            self.touches += ACCESS_TOUCHES + self.rows.words() as u64;
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
    use crate::packing::MAX_EVALS_PER_STEP;
    use crate::{GeneratorParams, ShuffleInstance, arbitrary_instance, seeded, verify};

    fn pack(inst: &ShuffleInstance, seed: u64) -> Plan {
        let requests = Requests::of(inst);
        let params = ReceiverPacking { evals_per_step: 128, trials: 4, budget: u64::MAX };
        pack_by_receivers(&requests, &params, &mut seeded(seed)).0
    }

    #[test]
    fn plans_verify_and_serve_every_request_once() {
        for inst in [
            ShuffleInstance::paper_example(),
            GeneratorParams { workers: 60, points: 3000, alpha: 0.3, seed: 5 }.check().unwrap().generate(),
            arbitrary_instance(7, 300, 0.4, 2),
        ] {
            let plan = pack(&inst, 1);
            assert!(verify(&inst, &plan).unwrap().is_valid());
            assert_eq!(plan.total_parts(), inst.uncoded_transmissions());
            assert_eq!(plan, pack(&inst, 1));
        }
    }

    /// Transmissions over uncoded, and packets by size (15 and more in the last).
    fn ratio_and_sizes(inst: &ShuffleInstance, plan: &Plan) -> (f64, [usize; 16]) {
        let mut sizes = [0usize; 16];
        for packet in plan.iter() {
            sizes[packet.len().min(15)] += 1;
        }
        (plan.len() as f64 / inst.uncoded_transmissions() as f64, sizes)
    }

    /// The comparison behind [`MAX_TRIALS`]: transmissions / uncoded and packet sizes for 1 to
    /// 64 trials, with an unbounded budget
    /// (`cargo test --release -p ubershuffle-core --lib trials_comparison -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement (n = 200, q = 1e5), not a check"]
    fn trials_comparison() {
        let inst = GeneratorParams { workers: 200, points: 100_000, alpha: 0.3, seed: 1 }
            .check()
            .unwrap()
            .generate();
        let requests = Requests::of(&inst);
        for trials in [1, 4, 16, 64] {
            let params = ReceiverPacking { evals_per_step: 128, trials, budget: u64::MAX };
            let (plan, _) = pack_by_receivers(&requests, &params, &mut seeded(1));
            assert!(verify(&inst, &plan).unwrap().is_valid());
            let (ratio, sizes) = ratio_and_sizes(&inst, &plan);
            println!("{trials} trials: {ratio:.4} x uncoded, packets by size {sizes:?}");
        }
    }

    /// Packet sizes by build order at a scale point, unbounded budget: where the packing loses
    /// (`UBS_N=100 UBS_Q=1000000 UBS_A=0.3 cargo test --release -p ubershuffle-planners --lib
    /// size_profile -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn size_profile() {
        let var = |k: &str, d: f64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        let (n, q, a) = (var("UBS_N", 100.0) as usize, var("UBS_Q", 100_000.0) as usize, var("UBS_A", 0.3));
        let inst = GeneratorParams { workers: n, points: q, alpha: a, seed: 1 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let params =
            ReceiverPacking { evals_per_step: MAX_EVALS_PER_STEP, trials: MAX_TRIALS, budget: u64::MAX };
        let (plan, _) = pack_by_receivers(&requests, &params, &mut seeded(1));
        assert!(verify(&inst, &plan).unwrap().is_valid());
        let (ratio, sizes) = ratio_and_sizes(&inst, &plan);
        println!("{ratio:.4} x uncoded; packets by size {sizes:?}");
        let packets: Vec<usize> = plan.iter().map(<[_]>::len).collect();
        let deciles: Vec<String> = packets
            .chunks(packets.len().div_ceil(10))
            .map(|c| format!("{:.2}", c.iter().sum::<usize>() as f64 / c.len() as f64))
            .collect();
        println!("mean packet size by tenth of the build order: {}", deciles.join(" "));
    }

    #[test]
    fn a_budget_of_nothing_still_serves_everything() {
        let inst =
            GeneratorParams { workers: 40, points: 2000, alpha: 0.3, seed: 1 }.check().unwrap().generate();
        let requests = Requests::of(&inst);
        let params = ReceiverPacking { evals_per_step: 128, trials: 4, budget: 0 };
        let (plan, starved) = pack_by_receivers(&requests, &params, &mut seeded(1));
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert!(plan.len() < inst.uncoded_transmissions());
        assert!(starved);
    }
}
