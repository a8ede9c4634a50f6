//! [`verify`]: symbolic peeling decoding at every worker, the check every plan must pass.
//!
//! A worker starts knowing its cache. Repeatedly, a transmission in which it knows every point
//! but one gives it that one. This covers one-step decoding of coded packets and the two-step
//! decoding of the "ignored" worker in Attia-Tandon leftover combining. The plan is valid when
//! every worker ends knowing its whole new batch.

use std::collections::VecDeque;

use crate::{Plan, ShuffleInstance};

/// Why a plan is malformed or does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum VerifyError {
    /// A transmission with no part.
    #[error("transmission {transmission} is empty")]
    EmptyTransmission {
        /// Its index in the plan.
        transmission: usize,
    },
    /// A part names a point that does not exist.
    #[error("transmission {transmission} names point {point}, but the instance has {points} points")]
    PointOutOfRange {
        /// Its index in the plan.
        transmission: usize,
        /// The point named.
        point: u32,
        /// Points in the instance.
        points: usize,
    },
    /// A part is tagged for a worker that does not exist.
    #[error("transmission {transmission} tags worker {worker}, but the instance has {workers} workers")]
    WorkerOutOfRange {
        /// Its index in the plan.
        transmission: usize,
        /// The worker named.
        worker: usize,
        /// Workers in the instance.
        workers: usize,
    },
    /// A transmission XORs a point with itself.
    #[error("transmission {transmission} names point {point} twice")]
    RepeatedPoint {
        /// Its index in the plan.
        transmission: usize,
        /// The repeated point.
        point: u32,
    },
    /// A point some worker needs is in no transmission.
    #[error(
        "worker {worker} needs point {point}, which no transmission sends ({missing} of its points missing in all)"
    )]
    NeverSent {
        /// The first worker that cannot decode.
        worker: usize,
        /// The first point it lacks.
        point: u32,
        /// How many points it lacks.
        missing: usize,
    },
    /// A point some worker needs is sent, but the worker cannot decode it.
    #[error(
        "worker {worker} cannot decode point {point} from transmission {transmission}: it never learns \
         point {lacks} of that transmission ({missing} of its points missing in all)"
    )]
    NotDecodable {
        /// The first worker that cannot decode.
        worker: usize,
        /// The first point it lacks.
        point: u32,
        /// A transmission holding the point (the one tagged for this worker, if any).
        transmission: usize,
        /// Another point of that transmission the worker never learns.
        lacks: u32,
        /// How many points it lacks.
        missing: usize,
    },
}

/// Why a worker lacks the first point of its shortfall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingCause {
    /// No transmission holds the point.
    NeverSent,
    /// `transmission` holds it (the one tagged for this worker, if any), but the worker never
    /// learns `lacks`, another point of it.
    NotDecodable {
        /// The transmission.
        transmission: usize,
        /// A point of it the worker never learns.
        lacks: u32,
    },
}

/// The points one worker lacks at the end of peeling.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerShortfall {
    /// The worker.
    pub worker: usize,
    /// The points of its new batch it could not decode, sorted.
    pub missing: Vec<u32>,
    /// Why it lacks the first of them.
    pub cause: MissingCause,
}

impl WorkerShortfall {
    /// The error naming this worker's first missing point and why it is missing.
    pub fn to_error(&self) -> VerifyError {
        let (worker, point, missing) = (self.worker, self.missing[0], self.missing.len());
        match self.cause {
            MissingCause::NeverSent => VerifyError::NeverSent { worker, point, missing },
            MissingCause::NotDecodable { transmission, lacks } => {
                VerifyError::NotDecodable { worker, point, transmission, lacks, missing }
            }
        }
    }
}

/// What peeling found at every worker.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Transmissions in the plan.
    pub transmissions: usize,
    /// Workers that cannot decode their whole batch, in worker order (empty when valid).
    pub shortfalls: Vec<WorkerShortfall>,
}

impl VerifyReport {
    /// Whether every worker decodes its whole batch.
    pub fn is_valid(&self) -> bool {
        self.shortfalls.is_empty()
    }

    /// `Ok` when valid, else the first worker that cannot decode, the first point it lacks and
    /// why: never sent, or sent in a transmission it cannot decode.
    pub fn ensure_valid(&self) -> Result<(), VerifyError> {
        match self.shortfalls.first() {
            None => Ok(()),
            Some(s) => Err(s.to_error()),
        }
    }
}

/// Decodes `plan` symbolically at every worker of `inst`.
///
/// `Err` means the plan is malformed (empty transmission, ids out of range, a point twice in
/// one transmission); otherwise the report lists every worker that cannot decode its batch.
///
/// ```
/// use ubershuffle_core::{verify, Part, Plan, ShuffleInstance};
/// let inst = ShuffleInstance::paper_example();
/// let mut plan = Plan::new();
/// plan.push(&[Part::new(4, 0), Part::new(1, 2)]); // d_5 + d_2 of the paper's Example 2
/// let report = verify(&inst, &plan)?;
/// assert!(!report.is_valid());
/// // Workers 0 and 2 decode d_5 and d_2; worker 1 still lacks 0 and 3, worker 2 lacks 5 and 6.
/// assert_eq!(report.shortfalls[0].worker, 1);
/// assert_eq!(report.shortfalls[0].missing, vec![0, 3]);
/// assert_eq!(report.shortfalls[1].missing, vec![5, 6]);
/// # Ok::<(), ubershuffle_core::VerifyError>(())
/// ```
pub fn verify(inst: &ShuffleInstance, plan: &Plan) -> Result<VerifyReport, VerifyError> {
    check_shape(inst, plan)?;
    let delivered = delivered_in_one_step(inst, plan);
    let mut containing: Option<TransmissionsByPoint> = None;
    let mut peeler: Option<Peeler> = None;
    let mut shortfalls = Vec::new();
    for worker in 0..inst.workers() {
        if inst.needs(worker).iter().all(|p| delivered[p as usize]) {
            continue;
        }
        // Some point needs more than one-step decoding from its tagged transmission (or is
        // missing): peel at this worker over the whole plan.
        let containing = containing.get_or_insert_with(|| transmissions_by_point(inst.points(), plan));
        let peeler = peeler.get_or_insert_with(|| Peeler::new(inst.points(), plan.len()));
        let known = peeler.run(plan, containing, inst.cache(worker));
        let missing: Vec<u32> = inst.needs(worker).iter().filter(|&p| !known[p as usize]).collect();
        if let Some(&first) = missing.first() {
            let cause = missing_cause(plan, containing, known, worker, first);
            shortfalls.push(WorkerShortfall { worker, missing, cause });
        }
    }
    Ok(VerifyReport { transmissions: plan.len(), shortfalls })
}

/// For every point, whether its owner decodes it in one step from a transmission that tags it
/// for the owner: the owner caches every other point of that transmission. Costs one cache
/// lookup per pair of parts in a transmission; a plan that passes it everywhere needs no
/// peeling (peeling can only learn more).
fn delivered_in_one_step(inst: &ShuffleInstance, plan: &Plan) -> Vec<bool> {
    let mut delivered = vec![false; inst.points()];
    for parts in plan.iter() {
        for part in parts {
            let worker = part.worker;
            if inst.owner(part.point) != worker || delivered[part.point as usize] {
                continue;
            }
            let cache = inst.cache(worker);
            if parts.iter().all(|other| other.point == part.point || cache.contains(other.point)) {
                delivered[part.point as usize] = true;
            }
        }
    }
    delivered
}

/// Why `worker`, having peeled to `known`, lacks `point`.
fn missing_cause(
    plan: &Plan,
    containing: &TransmissionsByPoint,
    known: &[bool],
    worker: usize,
    point: u32,
) -> MissingCause {
    let holding = containing.of(point);
    let tagged = holding.iter().copied().find(|&t| {
        plan.transmission(t as usize).iter().any(|part| part.point == point && part.worker == worker)
    });
    match tagged.or(holding.first().copied()) {
        None => MissingCause::NeverSent,
        Some(t) => {
            let parts = plan.transmission(t as usize);
            let lacks = parts
                .iter()
                .map(|part| part.point)
                .find(|&p| p != point && !known[p as usize])
                .unwrap_or(point);
            MissingCause::NotDecodable { transmission: t as usize, lacks }
        }
    }
}

/// [`verify`], with an undecodable plan turned into [`VerifyError::NeverSent`] or
/// [`VerifyError::NotDecodable`].
pub fn check_plan(inst: &ShuffleInstance, plan: &Plan) -> Result<(), VerifyError> {
    verify(inst, plan)?.ensure_valid()
}

fn check_shape(inst: &ShuffleInstance, plan: &Plan) -> Result<(), VerifyError> {
    let mut last_seen = vec![usize::MAX; inst.points()];
    for (transmission, parts) in plan.iter().enumerate() {
        if parts.is_empty() {
            return Err(VerifyError::EmptyTransmission { transmission });
        }
        for part in parts {
            if part.point as usize >= inst.points() {
                return Err(VerifyError::PointOutOfRange {
                    transmission,
                    point: part.point,
                    points: inst.points(),
                });
            }
            if part.worker >= inst.workers() {
                return Err(VerifyError::WorkerOutOfRange {
                    transmission,
                    worker: part.worker,
                    workers: inst.workers(),
                });
            }
            let seen = &mut last_seen[part.point as usize];
            if *seen == transmission {
                return Err(VerifyError::RepeatedPoint { transmission, point: part.point });
            }
            *seen = transmission;
        }
    }
    Ok(())
}

/// For every point, the transmissions that contain it (compressed rows).
struct TransmissionsByPoint {
    starts: Vec<usize>,
    transmissions: Vec<u32>,
}

impl TransmissionsByPoint {
    fn of(&self, point: u32) -> &[u32] {
        &self.transmissions[self.starts[point as usize]..self.starts[point as usize + 1]]
    }
}

fn transmissions_by_point(points: usize, plan: &Plan) -> TransmissionsByPoint {
    let mut starts = vec![0usize; points + 1];
    for parts in plan.iter() {
        for part in parts {
            starts[part.point as usize + 1] += 1;
        }
    }
    for i in 0..points {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut transmissions = vec![0u32; plan.total_parts()];
    for (t, parts) in plan.iter().enumerate() {
        for part in parts {
            let slot = &mut fill[part.point as usize];
            transmissions[*slot] = t as u32;
            *slot += 1;
        }
    }
    TransmissionsByPoint { starts, transmissions }
}

/// Reusable buffers for peeling at one worker after another.
struct Peeler {
    known: Vec<bool>,
    learned_via: Vec<u32>,
    unknown: Vec<u32>,
    ready: VecDeque<u32>,
}

/// Marks "not learned from a transmission" in [`Peeler::learned_via`].
const NOT_LEARNED: u32 = u32::MAX;

impl Peeler {
    fn new(points: usize, transmissions: usize) -> Self {
        Peeler {
            known: vec![false; points],
            learned_via: vec![NOT_LEARNED; points],
            unknown: vec![0; transmissions],
            ready: VecDeque::new(),
        }
    }

    /// Peels from `start`; returns which points the worker knows at the end.
    fn run(
        &mut self,
        plan: &Plan,
        containing: &TransmissionsByPoint,
        start: impl IntoIterator<Item = u32>,
    ) -> &[bool] {
        self.known.fill(false);
        self.learned_via.fill(NOT_LEARNED);
        for p in start {
            self.known[p as usize] = true;
        }
        self.ready.clear();
        for (t, parts) in plan.iter().enumerate() {
            let unknown = parts.iter().filter(|part| !self.known[part.point as usize]).count() as u32;
            self.unknown[t] = unknown;
            if unknown == 1 {
                self.ready.push_back(t as u32);
            }
        }
        while let Some(t) = self.ready.pop_front() {
            let Some(part) =
                plan.transmission(t as usize).iter().find(|part| !self.known[part.point as usize])
            else {
                continue; // every point of it became known another way
            };
            self.known[part.point as usize] = true;
            self.learned_via[part.point as usize] = t;
            for &other in containing.of(part.point) {
                let count = &mut self.unknown[other as usize];
                *count -= 1;
                if *count == 1 {
                    self.ready.push_back(other);
                }
            }
        }
        &self.known
    }
}

/// The outcome of peeling at one worker: what it knows and which transmission taught it each
/// point it learned. Decoders use it as their schedule.
#[derive(Clone, Debug)]
pub struct Peeling {
    known: Vec<bool>,
    learned_via: Vec<u32>,
}

impl Peeling {
    /// Whether the worker knows `point` at the end (from its start set or by decoding).
    pub fn knows(&self, point: u32) -> bool {
        self.known.get(point as usize).copied().unwrap_or(false)
    }

    /// The transmission the worker decodes `point` from, or `None` if it knew it from the
    /// start or never learns it.
    pub fn learned_from(&self, point: u32) -> Option<usize> {
        match self.learned_via.get(point as usize) {
            Some(&t) if t != NOT_LEARNED => Some(t as usize),
            _ => None,
        }
    }
}

impl Peeling {
    /// The transmissions this worker must receive to decode `wanted`, each with the point it
    /// yields here, in plan order: the wanted points' transmissions and, walking back, those of
    /// every intermediate point they are combined with (Attia-Tandon's two-step decoding).
    /// `Err` lists the wanted points the plan never delivers, sorted.
    pub fn schedule(&self, plan: &Plan, wanted: &[u32]) -> Result<Vec<(usize, u32)>, Vec<u32>> {
        let knew_from_start = |p: u32| self.knows(p) && self.learned_from(p).is_none();
        let mut undecodable: Vec<u32> = wanted.iter().copied().filter(|&p| !self.knows(p)).collect();
        if !undecodable.is_empty() {
            undecodable.sort_unstable();
            undecodable.dedup();
            return Err(undecodable);
        }
        let mut chosen: Vec<(usize, u32)> = Vec::new();
        let mut taken = std::collections::HashSet::new();
        let mut stack: Vec<u32> = wanted.iter().copied().filter(|&p| !knew_from_start(p)).collect();
        while let Some(point) = stack.pop() {
            let Some(t) = self.learned_from(point) else { continue };
            if !taken.insert(t) {
                continue;
            }
            chosen.push((t, point));
            let others = plan.transmission(t).iter().map(|p| p.point);
            stack.extend(others.filter(|&p| p != point && !knew_from_start(p)));
        }
        chosen.sort_unstable();
        Ok(chosen)
    }
}

/// Peels `plan` at a worker that starts knowing the points `start` (its cache, say), in a
/// universe of `points` points. The plan must be well formed (see [`verify`]); out-of-range ids
/// are an error.
pub fn peel(
    points: usize,
    plan: &Plan,
    start: impl IntoIterator<Item = u32>,
) -> Result<Peeling, VerifyError> {
    for (transmission, parts) in plan.iter().enumerate() {
        if let Some(part) = parts.iter().find(|p| p.point as usize >= points) {
            return Err(VerifyError::PointOutOfRange { transmission, point: part.point, points });
        }
    }
    let start: Vec<u32> = start.into_iter().collect();
    if let Some(&point) = start.iter().find(|&&p| p as usize >= points) {
        return Err(VerifyError::PointOutOfRange { transmission: usize::MAX, point, points });
    }
    let containing = transmissions_by_point(points, plan);
    let mut peeler = Peeler::new(points, plan.len());
    peeler.run(plan, &containing, start);
    Ok(Peeling { known: peeler.known, learned_via: peeler.learned_via })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Part;

    #[test]
    fn two_step_decoding_is_found() {
        // Attia-Tandon's three-worker leftover example: worker 2 (the ignored one) caches point 2
        // (x_{3,1}); it learns point 0 (x_{1,2}) from the first packet, then point 1 from the second.
        let inst =
            ShuffleInstance::new(3, 3, vec![vec![0], vec![1], vec![2]], vec![vec![2], vec![0], vec![1]])
                .unwrap();
        let mut plan = Plan::new();
        plan.push(&[Part::new(2, 0), Part::new(0, 1)]);
        plan.push(&[Part::new(0, 1), Part::new(1, 2)]);
        let report = verify(&inst, &plan).unwrap();
        // Worker 0 caches 0 and learns 2; worker 1 caches 1, learns 0 from the second packet.
        assert!(report.is_valid(), "{report:?}");
    }

    #[test]
    fn malformed_plans_are_errors() {
        let inst = ShuffleInstance::paper_example();
        let mut plan = Plan::new();
        plan.push(&[]);
        assert_eq!(verify(&inst, &plan), Err(VerifyError::EmptyTransmission { transmission: 0 }));
        let mut plan = Plan::new();
        plan.push(&[Part::new(9, 0)]);
        assert!(matches!(verify(&inst, &plan), Err(VerifyError::PointOutOfRange { point: 9, .. })));
        let mut plan = Plan::new();
        plan.push(&[Part::new(1, 3)]);
        assert!(matches!(verify(&inst, &plan), Err(VerifyError::WorkerOutOfRange { worker: 3, .. })));
        let mut plan = Plan::new();
        plan.push(&[Part::new(1, 2), Part::new(1, 0)]);
        assert!(matches!(verify(&inst, &plan), Err(VerifyError::RepeatedPoint { point: 1, .. })));
    }

    #[test]
    fn empty_plan_reports_every_missing_point() {
        let inst = ShuffleInstance::paper_example();
        let report = verify(&inst, &Plan::new()).unwrap();
        let missing: Vec<_> = report.shortfalls.iter().map(|s| (s.worker, s.missing.clone())).collect();
        assert_eq!(missing, vec![(0, vec![4]), (1, vec![0, 3]), (2, vec![1, 5, 6])]);
        assert_eq!(report.ensure_valid(), Err(VerifyError::NeverSent { worker: 0, point: 4, missing: 1 }));
    }

    #[test]
    fn a_packet_with_two_unknowns_does_not_decode() {
        let inst = ShuffleInstance::paper_example();
        let mut plan = Plan::new();
        // Worker 1 needs 0 and 3 and caches neither: their XOR alone tells it nothing.
        plan.push(&[Part::new(0, 1), Part::new(3, 1)]);
        let report = verify(&inst, &plan).unwrap();
        assert!(report.shortfalls.iter().any(|s| s.worker == 1 && s.missing == vec![0, 3]));
        // Worker 0 needs 4, which is never sent; worker 1's 0 is sent but not decodable.
        assert_eq!(report.ensure_valid(), Err(VerifyError::NeverSent { worker: 0, point: 4, missing: 1 }));
        let one = report.shortfalls.iter().find(|s| s.worker == 1).unwrap();
        let err = one.to_error();
        assert_eq!(
            err,
            VerifyError::NotDecodable { worker: 1, point: 0, transmission: 0, lacks: 3, missing: 2 }
        );
        assert!(err.to_string().contains("from transmission 0"), "{err}");
    }

    #[test]
    fn one_step_fast_path_agrees_with_peeling() {
        // Plans valid only by two-step decoding, and plans with a wrong tag, are peeled.
        let inst = crate::arbitrary_instance(6, 60, 0.5, 3);
        for seed in 0..20u64 {
            let mut plan = Plan::new();
            let mut rng = crate::seeded(seed);
            for w in 0..6 {
                for p in inst.needs(w) {
                    // Tag some parts for the wrong worker: they then decode only by peeling.
                    let tag = if crate::rng::uniform_below(&mut rng, 4) == 0 { (w + 1) % 6 } else { w };
                    plan.push(&[Part::new(p, tag)]);
                }
            }
            let report = verify(&inst, &plan).unwrap();
            assert!(report.is_valid(), "unicasts decode whatever their tags");
        }
    }
}
