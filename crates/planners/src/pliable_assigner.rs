//! The assignment under construction and the packets that deliver it ([`Assigner`]), which both
//! pliable planners share.
//!
//! The assigner keeps every worker's batch within its size, places points for free (to a
//! candidate that caches them), in packets, or by unicast, and completes the assignment at the
//! end: a point whose candidates are all full is placed along an augmenting path (a chain of
//! points each moved to another of its candidates, ending at a worker with room), which exists
//! whenever a balanced assignment within the candidates does, as the fully random assignment
//! always is. A moved point leaves its packet (the packet stays decodable for the others: each
//! of them cached the moved point) and travels by unicast unless its new owner caches it.

use ubershuffle_core::pliable::Menu;
use ubershuffle_core::rng::{SeededRng, shuffle, uniform_below};
use ubershuffle_core::{Part, Plan, bits};

/// Marks a point without an owner (or a packet).
const NONE: u32 = u32::MAX;

/// An assignment under construction and the packets that deliver it.
pub(crate) struct Assigner<'m> {
    menu: &'m Menu<'m>,
    capacity: Vec<usize>,
    owner: Vec<u32>,
    /// Where each placed point sits in its owner's list.
    slot: Vec<u32>,
    owned: Vec<Vec<u32>>,
    packet_of: Vec<u32>,
    packets: Vec<Vec<Part>>,
}

impl<'m> Assigner<'m> {
    /// Nothing placed yet.
    pub(crate) fn new(menu: &'m Menu<'m>) -> Self {
        let q = menu.points();
        Assigner {
            menu,
            capacity: menu.sizes.clone(),
            owner: vec![NONE; q],
            slot: vec![NONE; q],
            owned: menu.sizes.iter().map(|&s| Vec::with_capacity(s)).collect(),
            packet_of: vec![NONE; q],
            packets: Vec::new(),
        }
    }

    /// The menu.
    pub(crate) fn menu(&self) -> &'m Menu<'m> {
        self.menu
    }

    /// Whether point `p` has no owner yet.
    #[inline]
    pub(crate) fn is_open(&self, p: u32) -> bool {
        self.owner[p as usize] == NONE
    }

    /// Room left in worker `w`'s batch.
    #[inline]
    pub(crate) fn room(&self, w: usize) -> usize {
        self.capacity[w]
    }

    /// The points without an owner, in increasing order.
    pub(crate) fn open_points(&self) -> Vec<u32> {
        (0..self.owner.len() as u32).filter(|&p| self.is_open(p)).collect()
    }

    fn place(&mut self, p: u32, w: usize) {
        debug_assert!(self.is_open(p) && self.capacity[w] > 0);
        self.owner[p as usize] = w as u32;
        self.slot[p as usize] = self.owned[w].len() as u32;
        self.owned[w].push(p);
        self.capacity[w] -= 1;
    }

    /// Takes point `p` from its owner (and out of its packet).
    fn unplace(&mut self, p: u32) {
        let w = self.owner[p as usize] as usize;
        let slot = self.slot[p as usize] as usize;
        self.owned[w].swap_remove(slot);
        if let Some(&moved) = self.owned[w].get(slot) {
            self.slot[moved as usize] = slot as u32;
        }
        self.capacity[w] += 1;
        self.owner[p as usize] = NONE;
        let packet = self.packet_of[p as usize];
        if packet != NONE {
            self.packets[packet as usize].retain(|part| part.point != p);
            self.packet_of[p as usize] = NONE;
        }
    }

    /// Places `p` with `w` and sends it by unicast unless `w` caches it.
    pub(crate) fn place_unicast(&mut self, p: u32, w: usize) {
        self.place(p, w);
        if !self.menu.cachers.caches(w, p) {
            self.record(&[Part::new(p, w)]);
        }
    }

    /// Places every part's point with its worker and records them as one packet (the caller
    /// made sure every receiver caches every other part's point).
    pub(crate) fn place_packet(&mut self, parts: &[Part]) {
        for part in parts {
            self.place(part.point, part.worker);
        }
        self.record(parts);
    }

    fn record(&mut self, parts: &[Part]) {
        let index = self.packets.len() as u32;
        for part in parts {
            self.packet_of[part.point as usize] = index;
        }
        self.packets.push(parts.to_vec());
    }

    /// Gives every open point that a candidate with room caches to such a candidate, for free:
    /// the points with the fewest such candidates first (ties in a seeded random order), each
    /// to the one with the most room (ties to a random one), other than the point's previous
    /// owner when another has room (moving a point costs nothing then, and keeps data
    /// mixing). Not for fresh batches.
    pub(crate) fn place_free(&mut self, rng: &mut SeededRng) {
        if self.menu.fresh {
            return;
        }
        let mut order = self.open_points();
        shuffle(rng, &mut order);
        let menu = self.menu;
        let free_candidates = |p: u32| -> usize {
            if menu.layers.is_empty() {
                bits::count(menu.cachers.row(p))
            } else {
                menu.candidates(p).filter(|&w| menu.cachers.caches(w, p)).count()
            }
        };
        let options: Vec<u32> = order.iter().map(|&p| free_candidates(p) as u32).collect();
        let mut keyed: Vec<(u32, u32)> = options.into_iter().zip(order).filter(|&(k, _)| k > 0).collect();
        keyed.sort_by_key(|&(k, _)| k);
        let mut choices: Vec<usize> = Vec::new();
        for (_, p) in keyed {
            choices.clear();
            if menu.layers.is_empty() {
                choices.extend(bits::Ones::new(menu.cachers.row(p)).filter(|&w| w < menu.workers));
            } else {
                choices.extend(menu.candidates(p).filter(|&w| menu.cachers.caches(w, p)));
            }
            let stay =
                menu.previous.and_then(|prev| prev.get(p as usize)).map_or(usize::MAX, |&w| w as usize);
            let len = choices.len();
            choices.retain(|&w| w != stay);
            let pick = self.roomiest(&choices, rng).or_else(|| {
                (choices.len() < len && self.capacity.get(stay).is_some_and(|&c| c > 0)).then_some(stay)
            });
            if let Some(w) = pick {
                self.place(p, w);
            }
        }
    }

    /// The worker of `choices` with the most room (none without room), ties to the first after
    /// a random rotation.
    fn roomiest(&self, choices: &[usize], rng: &mut SeededRng) -> Option<usize> {
        if choices.is_empty() {
            return None;
        }
        let start = uniform_below(rng, choices.len() as u64) as usize;
        let mut best: Option<usize> = None;
        for k in 0..choices.len() {
            let w = choices[(start + k) % choices.len()];
            if self.capacity[w] > 0 && best.is_none_or(|b| self.capacity[w] > self.capacity[b]) {
                best = Some(w);
            }
        }
        best
    }

    /// Places every open point (free where a candidate with room caches it, else by unicast
    /// to the candidate with the most room, else along an augmenting path) and returns the
    /// batches and the plan, or why no balanced assignment within the candidates exists.
    pub(crate) fn finish(mut self, rng: &mut SeededRng) -> Result<(Vec<Vec<u32>>, Plan), String> {
        let mut order = self.open_points();
        shuffle(rng, &mut order);
        let menu = self.menu;
        let mut choices: Vec<usize> = Vec::new();
        for p in order {
            choices.clear();
            choices.extend(menu.candidates(p).filter(|&w| menu.allows(p, w) && self.capacity[w] > 0));
            let free: Vec<usize> = choices.iter().copied().filter(|&w| menu.cachers.caches(w, p)).collect();
            let pick = if free.is_empty() { self.roomiest(&choices, rng) } else { self.roomiest(&free, rng) };
            match pick {
                Some(w) => self.place_unicast(p, w),
                None => {
                    if !self.augment(p) {
                        return Err(format!(
                            "point {p} fits no batch: no balanced assignment within its candidates{}",
                            if menu.fresh { " gives it to a worker that does not cache it" } else { "" }
                        ));
                    }
                }
            }
        }
        let mut plan = Plan::with_capacity(self.packets.len(), self.owner.len());
        for packet in self.packets.iter().filter(|p| !p.is_empty()) {
            plan.push(packet);
        }
        let batches = self
            .owned
            .into_iter()
            .map(|mut b| {
                b.sort_unstable();
                b
            })
            .collect();
        Ok((batches, plan))
    }

    /// Places open point `p` along an augmenting path over workers: breadth-first from its
    /// candidates, a full worker passes one of its points to another candidate of that point,
    /// until a worker with room is reached. Returns whether a path was found.
    fn augment(&mut self, p: u32) -> bool {
        let menu = self.menu;
        let n = menu.workers;
        let mut visited = vec![false; n];
        // via[v] = (point moved into v, the worker it came from; NONE for p itself).
        let mut via = vec![(NONE, NONE); n];
        let mut queue = std::collections::VecDeque::new();
        let mut seen = 0usize;
        for c in menu.candidates(p) {
            if c < n && !visited[c] && menu.allows(p, c) {
                visited[c] = true;
                seen += 1;
                via[c] = (p, NONE);
                queue.push_back(c);
            }
        }
        while let Some(u) = queue.pop_front() {
            if self.capacity[u] > 0 {
                self.apply_path(u, &via);
                return true;
            }
            if seen == n {
                continue;
            }
            for &x in &self.owned[u] {
                for c in menu.candidates(x) {
                    if c < n && c != u && !visited[c] && menu.allows(x, c) {
                        visited[c] = true;
                        seen += 1;
                        via[c] = (x, u as u32);
                        queue.push_back(c);
                    }
                }
                if seen == n {
                    break;
                }
            }
        }
        false
    }

    /// Moves the points of the path ending at `end` (which has room), last move first.
    fn apply_path(&mut self, end: usize, via: &[(u32, u32)]) {
        let mut v = end;
        loop {
            let (x, from) = via[v];
            if from == NONE {
                self.place_unicast(x, v);
                return;
            }
            self.unplace(x);
            self.place_unicast(x, v);
            v = from as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_core::ShuffleInstance;
    use ubershuffle_core::pliable::CacherBits;
    use ubershuffle_core::{GeneratorParams, rng::seeded, verify};

    fn menu_of<'a>(inst: &'a ShuffleInstance, cachers: &'a CacherBits, layers: Vec<&'a [u32]>) -> Menu<'a> {
        Menu {
            workers: inst.workers(),
            sizes: (0..inst.workers()).map(|w| inst.assignment(w).len()).collect(),
            cachers,
            layers,
            fresh: false,
            previous: None,
        }
    }

    #[test]
    fn free_placement_then_unicasts_give_a_valid_balanced_assignment() {
        let inst =
            GeneratorParams { workers: 6, points: 600, alpha: 0.3, seed: 2 }.check().unwrap().generate();
        let cachers = CacherBits::of(&inst);
        for layers in [vec![inst.owners()], vec![]] {
            let menu = menu_of(&inst, &cachers, layers);
            let mut a = Assigner::new(&menu);
            a.place_free(&mut seeded(1));
            let (batches, plan) = a.finish(&mut seeded(2)).unwrap();
            let chosen = inst.with_assignment(batches).unwrap();
            assert!(verify(&chosen, &plan).unwrap().is_valid());
            assert_eq!(plan.len(), chosen.uncoded_transmissions());
            for p in 0..600 {
                assert!(menu.allows(p, chosen.owner(p)));
            }
            if menu.layers.is_empty() {
                // Any worker may take any point: every point finds a cacher with room.
                assert_eq!(plan.len(), 0);
            } else {
                assert_eq!(chosen, inst, "one candidate: the given assignment");
            }
        }
    }

    #[test]
    fn augmenting_paths_place_points_whose_candidates_are_full() {
        // Two workers, batch 1 each. Point 0 may go to either, point 1 only to worker 0.
        let inst = ShuffleInstance::new(2, 2, vec![vec![], vec![]], vec![vec![1], vec![0]]).unwrap();
        let cachers = CacherBits::of(&inst);
        let second: Vec<u32> = vec![0, 0];
        let menu = menu_of(&inst, &cachers, vec![inst.owners(), &second]);
        let mut a = Assigner::new(&menu);
        a.place_unicast(0, 0); // takes point 1's only slot
        let (batches, plan) = a.finish(&mut seeded(0)).unwrap();
        assert_eq!(batches, vec![vec![1], vec![0]]);
        let chosen = inst.with_assignment(batches).unwrap();
        assert!(verify(&chosen, &plan).unwrap().is_valid());
        assert_eq!(plan.len(), 2);
    }
}
