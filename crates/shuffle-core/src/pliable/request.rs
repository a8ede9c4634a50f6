//! [`PliableRequest`]: one epoch of pliable shuffling, where the master chooses the new
//! assignment within a randomness constraint; and [`PliableError`].

use super::menu::{CacherBits, Menu};
use super::randomness::Randomness;
use crate::rng::{SeededRng, shuffle};
use crate::{InstanceError, ShuffleInstance, VerifyError};

/// The most candidate layers a request stores (`(r - 1) q` point ids): past it, `--candidates
/// all` asks for the same freedom without storing anything.
pub const MAX_LAYER_ENTRIES: usize = 1 << 27;

/// Why a pliable request, or a pliable plan, is not valid.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum PliableError {
    /// The previous owners do not name one worker per point.
    #[error("previous owners: {got} entries for {points} points")]
    PreviousLength {
        /// Entries given.
        got: usize,
        /// Points.
        points: usize,
    },
    /// A previous owner is not a worker.
    #[error("previous owners: point {point} names worker {worker}, but there are {workers} workers")]
    PreviousWorker {
        /// The point.
        point: u32,
        /// The worker named.
        worker: u32,
        /// Workers.
        workers: usize,
    },
    /// The previous batches are not a partition of the points.
    #[error("previous batches: {0}")]
    PreviousBatches(String),
    /// Fresh batches were asked for, but the fully random assignment gives a worker a point
    /// it caches.
    #[error("fresh batches: worker {worker} caches point {point} of its batch in the given assignment")]
    BaseNotFresh {
        /// The worker.
        worker: usize,
        /// The point.
        point: u32,
    },
    /// Fresh batches were asked for with fewer candidates than every worker (the candidates
    /// are drawn without looking at the caches, so they may leave no fresh assignment).
    #[error("fresh batches need --candidates all")]
    FreshNeedsAll,
    /// The candidate layers would not fit the memory the request may take.
    #[error(
        "{candidates} candidates for {points} points would store {entries} ids (at most {max}): use fewer candidates, or all"
    )]
    TooManyCandidates {
        /// Candidates asked for.
        candidates: usize,
        /// Points.
        points: usize,
        /// Ids the layers would take.
        entries: usize,
        /// [`MAX_LAYER_ENTRIES`].
        max: usize,
    },
    /// The paper's setting asked for is impossible.
    #[error("{0}")]
    Setting(String),
    /// The plan's instance does not have the request's workers, points or caches.
    #[error("the plan's instance has other workers, points or caches than the request")]
    OtherCaches,
    /// A worker's chosen batch has another size than the request's.
    #[error("worker {worker} gets {got} points, its batch has {expected}")]
    BatchSize {
        /// The worker.
        worker: usize,
        /// Points it gets.
        got: usize,
        /// Its batch size.
        expected: usize,
    },
    /// A point went to a worker that is not one of its candidates.
    #[error("point {point} went to worker {worker}, which is not one of its candidates")]
    NotACandidate {
        /// The point.
        point: u32,
        /// The worker.
        worker: usize,
    },
    /// Fresh batches: a point went to a worker that caches it.
    #[error("point {point} went to worker {worker}, which already holds it (batches must be new)")]
    NotNew {
        /// The point.
        point: u32,
        /// The worker.
        worker: usize,
    },
    /// The plan is malformed for the chosen assignment.
    #[error(transparent)]
    Plan(#[from] VerifyError),
    /// The chosen assignment is not a valid instance.
    #[error(transparent)]
    Instance(#[from] InstanceError),
}

/// One epoch of pliable shuffling: the workers' caches, their batch sizes, and for every point
/// the candidates its next owner must come from ([`Randomness`]).
///
/// Built around a [`ShuffleInstance`] whose assignment is the fully random one today's schemes
/// take as given: it is the first candidate of every point (so a valid choice always exists,
/// and one candidate is exactly today's problem), and it fixes the batch sizes. The other
/// candidates are drawn from the generator given, independently of caches and data.
///
/// ```
/// use ubershuffle_core::pliable::{PliableRequest, Randomness};
/// use ubershuffle_core::{GeneratorParams, seeded};
/// let inst = GeneratorParams { workers: 5, points: 500, alpha: 0.4, seed: 1 }.check()?.generate();
/// let request = PliableRequest::new(inst, Randomness::Candidates(2), &mut seeded(7))?;
/// assert!(request.allows(0, request.fully_random().owner(0)));
/// assert_eq!(request.candidates(0).count(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct PliableRequest {
    base: ShuffleInstance,
    /// Candidate layers after the first (the base assignment): the owner of every point.
    layers: Vec<Vec<u32>>,
    randomness: Randomness,
    fresh: bool,
    previous: Option<Vec<u32>>,
    cachers: CacherBits,
}

impl PliableRequest {
    /// The request around `base` (its caches; its assignment as the fully random one and the
    /// first candidate), with the other candidates of `randomness` drawn from `rng`: each
    /// further layer is a uniformly random balanced assignment with the same batch sizes.
    pub fn new(
        base: ShuffleInstance,
        randomness: Randomness,
        rng: &mut SeededRng,
    ) -> Result<Self, PliableError> {
        let (n, q) = (base.workers(), base.points());
        let layers = match randomness {
            Randomness::All => Vec::new(),
            Randomness::Candidates(r) => {
                let r = r.clamp(1, n.max(1));
                let entries = (r - 1).saturating_mul(q);
                if entries > MAX_LAYER_ENTRIES {
                    return Err(PliableError::TooManyCandidates {
                        candidates: r,
                        points: q,
                        entries,
                        max: MAX_LAYER_ENTRIES,
                    });
                }
                let sizes: Vec<usize> = (0..n).map(|w| base.assignment(w).len()).collect();
                (1..r).map(|_| random_layer(&sizes, q, rng)).collect()
            }
        };
        let cachers = CacherBits::of(&base);
        Ok(PliableRequest { base, layers, randomness, fresh: false, previous: None, cachers })
    }

    /// The same request, with the previous owner of every point: for the randomness
    /// statistics, and so that the planners, among candidates that cost the same, can move
    /// points rather than leave them where they were.
    pub fn with_previous(mut self, previous: Vec<u32>) -> Result<Self, PliableError> {
        let (n, q) = (self.workers(), self.points());
        if previous.len() != q {
            return Err(PliableError::PreviousLength { got: previous.len(), points: q });
        }
        if let Some((p, &w)) = previous.iter().enumerate().find(|&(_, &w)| w as usize >= n) {
            return Err(PliableError::PreviousWorker { point: p as u32, worker: w, workers: n });
        }
        self.previous = Some(previous);
        Ok(self)
    }

    /// [`PliableRequest::with_previous`] from the previous batches (`batches[w]` the points
    /// worker `w` held); a point in no batch, or in two, is refused.
    pub fn with_previous_batches(self, batches: &[Vec<u32>]) -> Result<Self, PliableError> {
        let q = self.points();
        let mut owners = vec![u32::MAX; q];
        for (w, batch) in batches.iter().enumerate() {
            for &p in batch {
                match owners.get_mut(p as usize) {
                    Some(o) if *o == u32::MAX => *o = w as u32,
                    Some(_) => {
                        return Err(PliableError::PreviousBatches(format!("point {p} is in two batches")));
                    }
                    None => {
                        return Err(PliableError::PreviousBatches(format!(
                            "point {p} is not one of the {q} points"
                        )));
                    }
                }
            }
        }
        if let Some(p) = owners.iter().position(|&o| o == u32::MAX) {
            return Err(PliableError::PreviousBatches(format!("point {p} is in no batch")));
        }
        self.with_previous(owners)
    }

    /// The same request, requiring every batch to hold only points its worker does not cache
    /// (the model of Song, Fragouli and Zhao, where a worker is satisfied by any new points).
    /// Needs `Randomness::All` and a base assignment that is itself fresh.
    pub fn fresh(mut self) -> Result<Self, PliableError> {
        if self.randomness != Randomness::All {
            return Err(PliableError::FreshNeedsAll);
        }
        for w in 0..self.workers() {
            if let Some(p) = self.base.assignment(w).iter().find(|&p| self.base.cache(w).contains(p)) {
                return Err(PliableError::BaseNotFresh { worker: w, point: p });
            }
        }
        self.fresh = true;
        Ok(self)
    }

    /// Workers `n`.
    pub fn workers(&self) -> usize {
        self.base.workers()
    }

    /// Points `q`.
    pub fn points(&self) -> usize {
        self.base.points()
    }

    /// The caches, and the fully random assignment (every point's first candidate).
    pub fn fully_random(&self) -> &ShuffleInstance {
        &self.base
    }

    /// The constraint.
    pub fn randomness(&self) -> Randomness {
        self.randomness
    }

    /// Whether batches must hold only points new to their workers.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Every point's previous owner, when known.
    pub fn previous(&self) -> Option<&[u32]> {
        self.previous.as_deref()
    }

    /// Worker `w`'s batch size.
    pub fn batch_size(&self, w: usize) -> usize {
        self.base.assignment(w).len()
    }

    /// The candidates of point `p`, first the fully random owner (repeats possible: layers are
    /// drawn independently).
    pub fn candidates(&self, p: u32) -> impl Iterator<Item = usize> + '_ {
        let all = self.layers.is_empty() && self.randomness == Randomness::All;
        let layered = (!all).then(|| {
            std::iter::once(self.base.owner(p)).chain(self.layers.iter().map(move |l| l[p as usize] as usize))
        });
        let every = all.then_some(0..self.workers());
        layered.into_iter().flatten().chain(every.into_iter().flatten())
    }

    /// Whether worker `w` may take point `p`: one of its candidates and, for fresh batches,
    /// a worker that does not cache it.
    pub fn allows(&self, p: u32, w: usize) -> bool {
        self.menu().allows(p, w)
    }

    /// Whether worker `w` caches point `p`.
    pub fn caches(&self, w: usize, p: u32) -> bool {
        self.cachers.caches(w, p)
    }

    /// The workers caching point `p`, as a bitset.
    pub fn cacher_row(&self, p: u32) -> &[u64] {
        self.cachers.row(p)
    }

    /// What the planners choose from.
    pub fn menu(&self) -> Menu<'_> {
        let layers = match self.randomness {
            Randomness::All => Vec::new(),
            Randomness::Candidates(_) => {
                std::iter::once(self.base.owners()).chain(self.layers.iter().map(Vec::as_slice)).collect()
            }
        };
        Menu {
            workers: self.workers(),
            sizes: (0..self.workers()).map(|w| self.batch_size(w)).collect(),
            cachers: &self.cachers,
            layers,
            fresh: self.fresh,
            previous: self.previous.as_deref(),
        }
    }
}

/// The owner of every point under a uniformly random assignment with batch sizes `sizes`.
fn random_layer(sizes: &[usize], points: usize, rng: &mut SeededRng) -> Vec<u32> {
    let mut order: Vec<u32> = (0..points as u32).collect();
    shuffle(rng, &mut order);
    let mut owner = vec![0u32; points];
    let mut rest = order.as_slice();
    for (w, &size) in sizes.iter().enumerate() {
        let (batch, tail) = rest.split_at(size.min(rest.len()));
        for &p in batch {
            owner[p as usize] = w as u32;
        }
        rest = tail;
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeneratorParams, rng::seeded};

    fn inst() -> ShuffleInstance {
        GeneratorParams { workers: 8, points: 800, alpha: 0.3, seed: 5 }.check().unwrap().generate()
    }

    #[test]
    fn layers_are_balanced_and_the_first_candidate_is_the_given_owner() {
        let inst = inst();
        let request = PliableRequest::new(inst.clone(), Randomness::Candidates(3), &mut seeded(1)).unwrap();
        for p in 0..800 {
            let c: Vec<usize> = request.candidates(p).collect();
            assert_eq!(c.len(), 3);
            assert_eq!(c[0], inst.owner(p));
            assert!(c.iter().all(|&w| request.allows(p, w)));
        }
        for layer in &request.layers {
            for w in 0..8 {
                assert_eq!(layer.iter().filter(|&&o| o as usize == w).count(), 100);
            }
        }
        let all = PliableRequest::new(inst.clone(), Randomness::All, &mut seeded(1)).unwrap();
        assert_eq!(all.candidates(5).count(), 8);
        let one = PliableRequest::new(inst.clone(), Randomness::FULLY_RANDOM, &mut seeded(1)).unwrap();
        assert_eq!(one.candidates(5).collect::<Vec<_>>(), vec![inst.owner(5)]);
        // More candidates than workers: capped.
        let many = PliableRequest::new(inst, Randomness::Candidates(50), &mut seeded(1)).unwrap();
        assert_eq!(many.candidates(0).count(), 8);
    }

    #[test]
    fn bad_previous_owners_and_stale_fresh_requests_are_refused() {
        let request = PliableRequest::new(inst(), Randomness::All, &mut seeded(1)).unwrap();
        let e = request.clone().with_previous(vec![0; 3]).unwrap_err();
        assert_eq!(e.to_string(), "previous owners: 3 entries for 800 points");
        let e = request.clone().with_previous(vec![9; 800]).unwrap_err();
        assert!(e.to_string().contains("names worker 9"), "{e}");
        // Generated instances give workers points they cache: not fresh.
        assert!(matches!(request.fresh(), Err(PliableError::BaseNotFresh { .. })));
        let two = PliableRequest::new(inst(), Randomness::Candidates(2), &mut seeded(1)).unwrap();
        assert_eq!(two.fresh().unwrap_err(), PliableError::FreshNeedsAll);
    }
}
