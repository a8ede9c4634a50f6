//! [`verify_pliable`]: the check every pliable plan must pass: the assignment keeps the
//! constraint, every batch is full (and new, where asked), and every worker decodes it.

use serde::Serialize;

use super::PliablePlan;
use super::randomness::RandomnessStats;
use super::request::{PliableError, PliableRequest};
use crate::{Plan, ShuffleInstance, VerifyReport, verify};

/// What [`verify_pliable`] found: decoding at every worker, and how random the chosen
/// assignment is next to the fully random one.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PliableReport {
    /// Peeling at every worker, for the chosen assignment.
    pub decoding: VerifyReport,
    /// The chosen assignment's randomness.
    pub chosen: RandomnessStats,
    /// The fully random assignment's, measured the same way (the reference).
    pub fully_random: RandomnessStats,
    /// What uncoded shuffling sends for the chosen assignment.
    pub uncoded_transmissions: usize,
    /// What uncoded shuffling sends for the fully random assignment.
    pub fully_random_uncoded_transmissions: usize,
    /// The min-entropy in bits that every point's next owner keeps under the constraint.
    pub guaranteed_min_entropy_bits: f64,
}

impl PliableReport {
    /// Whether every worker decodes its whole chosen batch.
    pub fn is_valid(&self) -> bool {
        self.decoding.is_valid()
    }

    /// `Ok` when valid, else the first worker that cannot decode and why.
    pub fn ensure_valid(&self) -> Result<(), PliableError> {
        Ok(self.decoding.ensure_valid()?)
    }
}

/// The randomness fields of a report, for JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct RandomnessJson {
    /// Candidates per point (`"all"` or a number).
    pub candidates: String,
    /// [`PliableReport::guaranteed_min_entropy_bits`].
    pub guaranteed_min_entropy_bits: f64,
    /// The largest share of any data-defined set of points a batch holds, relative to fair.
    pub density_bound: usize,
    /// The chosen assignment's statistics.
    pub chosen: RandomnessStats,
    /// The fully random assignment's.
    pub fully_random: RandomnessStats,
}

impl PliableReport {
    /// The randomness part, laid out for JSON.
    pub fn randomness_json(&self, request: &PliableRequest) -> RandomnessJson {
        RandomnessJson {
            candidates: request.randomness().to_string(),
            guaranteed_min_entropy_bits: self.guaranteed_min_entropy_bits,
            density_bound: request.randomness().density_bound(request.workers()),
            chosen: self.chosen,
            fully_random: self.fully_random,
        }
    }
}

/// Checks a pliable plan against its request: the plan's instance has the request's caches;
/// every batch has its size; every point went to one of its candidates (and, for fresh
/// batches, to a worker that does not cache it); and peeling at every worker decodes every
/// point of its batch it did not hold. Constraint violations are errors naming the first
/// offending worker or point; decoding is the report's [`PliableReport::decoding`].
///
/// The fully random assignment, sent by unicasts, always passes (`ubershuffle-planners` has
/// the schemes that choose better):
///
/// ```
/// use ubershuffle_core::pliable::{PliablePlan, PliableRequest, Randomness, verify_pliable};
/// use ubershuffle_core::{GeneratorParams, Part, Plan, seeded};
/// let inst = GeneratorParams { workers: 6, points: 600, alpha: 0.4, seed: 1 }.check()?.generate();
/// let request = PliableRequest::new(inst.clone(), Randomness::Candidates(3), &mut seeded(2))?;
/// let mut plan = Plan::new();
/// for w in 0..inst.workers() {
///     inst.needs(w).into_iter().for_each(|p| plan.push(&[Part::new(p, w)]));
/// }
/// let report = verify_pliable(&request, &PliablePlan::new(inst, plan, "unicasts"))?;
/// assert!(report.is_valid());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify_pliable(
    request: &PliableRequest,
    planned: &PliablePlan,
) -> Result<PliableReport, PliableError> {
    verify_choice(request, &planned.instance, &planned.plan)
}

/// [`verify_pliable`] of the chosen assignment `inst` (with the request's caches) and its
/// `plan`, held apart.
pub fn verify_choice(
    request: &PliableRequest,
    inst: &ShuffleInstance,
    plan: &Plan,
) -> Result<PliableReport, PliableError> {
    if !inst.same_caches(request.fully_random()) {
        return Err(PliableError::OtherCaches);
    }
    for w in 0..inst.workers() {
        let (got, expected) = (inst.assignment(w).len(), request.batch_size(w));
        if got != expected {
            return Err(PliableError::BatchSize { worker: w, got, expected });
        }
    }
    let menu = request.menu();
    for p in 0..inst.points() as u32 {
        let w = inst.owner(p);
        if !menu.allows(p, w) {
            return Err(
                if request.is_fresh() && request.caches(w, p) && request.candidates(p).any(|c| c == w) {
                    PliableError::NotNew { point: p, worker: w }
                } else {
                    PliableError::NotACandidate { point: p, worker: w }
                },
            );
        }
    }
    let decoding = verify(inst, plan)?;
    let base = request.fully_random();
    let n = request.workers();
    let cached = |p: u32, w: usize| request.caches(w, p);
    Ok(PliableReport {
        decoding,
        chosen: RandomnessStats::measure(n, inst.owners(), request.previous(), cached),
        fully_random: RandomnessStats::measure(n, base.owners(), request.previous(), cached),
        uncoded_transmissions: inst.uncoded_transmissions(),
        fully_random_uncoded_transmissions: base.uncoded_transmissions(),
        guaranteed_min_entropy_bits: request.randomness().guaranteed_min_entropy_bits(n),
    })
}
