//! [`ShuffleInstance`]: one epoch's shuffle problem (caches `C_i`, new assignment `D_i`), its
//! validation and its JSON form.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::WorkerSet;
use crate::point_set::{PointSet, StoredPoints};

/// Why a set of caches and assignments is not a valid shuffle instance.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum InstanceError {
    /// The instance has no worker.
    #[error("an instance needs at least one worker")]
    NoWorkers,
    /// Some worker would be assigned no point at all.
    #[error("more workers ({workers}) than points ({points}): every worker needs a batch")]
    MoreWorkersThanPoints {
        /// Number of workers.
        workers: usize,
        /// Number of points.
        points: usize,
    },
    /// `cache` or `assignment` does not have one list per worker.
    #[error("\"{field}\" has {got} lists but there are {workers} workers")]
    ListCount {
        /// `"cache"` or `"assignment"`.
        field: &'static str,
        /// Lists given.
        got: usize,
        /// Workers declared.
        workers: usize,
    },
    /// A point id is not below the number of points.
    #[error("\"{field}\" of worker {worker} names point {point}, but ids run from 0 to {}", .points - 1)]
    PointOutOfRange {
        /// `"cache"` or `"assignment"`.
        field: &'static str,
        /// The worker whose list holds the id.
        worker: usize,
        /// The id.
        point: u64,
        /// Number of points.
        points: usize,
    },
    /// A list names the same point twice.
    #[error("\"{field}\" of worker {worker} names point {point} twice")]
    DuplicateInList {
        /// `"cache"` or `"assignment"`.
        field: &'static str,
        /// The worker.
        worker: usize,
        /// The repeated id.
        point: u32,
    },
    /// A point is assigned to two workers.
    #[error("point {point} is assigned to both worker {first} and worker {second}")]
    AssignedTwice {
        /// The point.
        point: u32,
        /// One worker it is assigned to.
        first: usize,
        /// Another worker it is assigned to.
        second: usize,
    },
    /// A point is assigned to no worker.
    #[error("point {point} is assigned to no worker")]
    Unassigned {
        /// The point.
        point: u32,
    },
    /// Batch sizes differ by more than one.
    #[error(
        "the assignment is not balanced: worker {small_worker} gets {small} points but worker \
         {large_worker} gets {large} (sizes may differ by at most one)"
    )]
    Unbalanced {
        /// A worker with the smallest batch.
        small_worker: usize,
        /// Its batch size.
        small: usize,
        /// A worker with the largest batch.
        large_worker: usize,
        /// Its batch size.
        large: usize,
    },
    /// Too many points for 32-bit ids.
    #[error("{points} points is more than this build supports (ids are 32-bit)")]
    TooManyPoints {
        /// Number of points.
        points: usize,
    },
    /// The JSON text is malformed or has the wrong layout.
    #[error("malformed instance JSON: {0}")]
    Json(String),
}

/// One epoch of the shuffle problem: `n` workers, `q` points with ids `0..q`, the caches `C_i`
/// the workers hold now, and the balanced assignment `D_i` they must hold after the shuffle.
///
/// Construction validates everything ([`ShuffleInstance::new`]); every other part of the
/// workspace trusts an instance. Caches, batches and needs are handed out as [`PointSet`]s in
/// increasing id order. Caches are stored as sorted lists or bitsets, whichever is smaller
/// ([`ShuffleInstance::heap_bytes`] says how much an instance holds), and the points each worker
/// needs are computed once.
///
/// ```
/// use ubershuffle_core::ShuffleInstance;
/// let inst = ShuffleInstance::from_json(
///     r#"{"workers": 2, "points": 4, "cache": [[0, 1, 2], [2, 3]], "assignment": [[0, 3], [1, 2]]}"#,
/// )?;
/// assert_eq!(inst.needs(0), [3]);
/// assert_eq!(inst.uncoded_transmissions(), 2);
/// # Ok::<(), ubershuffle_core::InstanceError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShuffleInstance {
    points: usize,
    cache: Vec<StoredPoints>,
    assignment: Vec<Vec<u32>>,
    needs: Vec<Vec<u32>>,
    owner: Vec<u32>,
}

impl ShuffleInstance {
    /// Validates and builds an instance. Lists may come in any order; they are sorted.
    pub fn new(
        workers: usize,
        points: usize,
        cache: Vec<Vec<u32>>,
        assignment: Vec<Vec<u32>>,
    ) -> Result<Self, InstanceError> {
        Self::from_lists(workers, points, cache, assignment, true)
    }

    /// Validates and builds an instance whose batches may differ in size by any amount: the
    /// segment-level instance of records of uneven size (`ubershuffle_codes::Segmentation`),
    /// where a batch holds as many points as its records have segments. Everything else is
    /// checked as in [`ShuffleInstance::new`]; every planner and [`crate::verify`] take such an
    /// instance, but the papers' closed forms (Theorem 1, the bounds that assume equal batches)
    /// describe balanced instances only, and its JSON form reads back only when balanced.
    pub fn new_uneven(
        workers: usize,
        points: usize,
        cache: Vec<Vec<u32>>,
        assignment: Vec<Vec<u32>>,
    ) -> Result<Self, InstanceError> {
        Self::from_lists(workers, points, cache, assignment, false)
    }

    /// [`ShuffleInstance::new`], the balance of the batches checked when `balanced`.
    fn from_lists(
        workers: usize,
        points: usize,
        cache: Vec<Vec<u32>>,
        assignment: Vec<Vec<u32>>,
        balanced: bool,
    ) -> Result<Self, InstanceError> {
        check_counts(workers, points)?;
        check_assignment_total(&assignment, points)?;
        let cache = check_lists("cache", workers, points, cache)?;
        let cache = cache.into_iter().map(|list| StoredPoints::compact(list, points)).collect();
        Self::build(workers, points, cache, assignment, balanced)
    }

    /// Builds an instance from caches already stored compactly (each sorted, in range and
    /// duplicate-free by construction); validates the assignment.
    pub(crate) fn from_stored(
        workers: usize,
        points: usize,
        cache: Vec<StoredPoints>,
        assignment: Vec<Vec<u32>>,
    ) -> Result<Self, InstanceError> {
        Self::build(workers, points, cache, assignment, true)
    }

    /// [`ShuffleInstance::from_stored`], the balance of the batches checked when `balanced`.
    fn build(
        workers: usize,
        points: usize,
        cache: Vec<StoredPoints>,
        assignment: Vec<Vec<u32>>,
        balanced: bool,
    ) -> Result<Self, InstanceError> {
        check_counts(workers, points)?;
        if cache.len() != workers {
            return Err(InstanceError::ListCount { field: "cache", got: cache.len(), workers });
        }
        check_assignment_total(&assignment, points)?;
        let assignment = check_lists("assignment", workers, points, assignment)?;
        let mut owner = vec![u32::MAX; points];
        for (worker, batch) in assignment.iter().enumerate() {
            for &p in batch {
                let slot = &mut owner[p as usize];
                if *slot != u32::MAX {
                    return Err(InstanceError::AssignedTwice {
                        point: p,
                        first: *slot as usize,
                        second: worker,
                    });
                }
                *slot = worker as u32;
            }
        }
        if let Some(p) = owner.iter().position(|&w| w == u32::MAX) {
            return Err(InstanceError::Unassigned { point: p as u32 });
        }
        let sizes = assignment.iter().map(Vec::len).enumerate();
        let (small_worker, small) = sizes.clone().min_by_key(|&(_, s)| s).unwrap_or((0, 0));
        let (large_worker, large) = sizes.max_by_key(|&(_, s)| s).unwrap_or((0, 0));
        if balanced && large > small + 1 {
            return Err(InstanceError::Unbalanced { small_worker, small, large_worker, large });
        }
        let needs = assignment
            .iter()
            .zip(&cache)
            .map(|(batch, cache)| {
                let cache = cache.view();
                batch.iter().copied().filter(|&p| !cache.contains(p)).collect()
            })
            .collect();
        Ok(ShuffleInstance { points, cache, assignment, needs, owner })
    }

    /// The UberShuffle paper's running example (Examples 1-3: n = 3, q = 9), with the paper's
    /// 1-based point ids `d_1..d_9` converted to 0-based ids `0..8`. Uncoded needs 6
    /// transmissions, coded shuffling 4 and UberShuffle 3.
    ///
    /// ```
    /// use ubershuffle_core::ShuffleInstance;
    /// let inst = ShuffleInstance::paper_example();
    /// assert_eq!(inst.uncoded_transmissions(), 6);
    /// assert_eq!(inst.needs(2), [1, 5, 6]);
    /// ```
    pub fn paper_example() -> Self {
        ShuffleInstance::new(
            3,
            9,
            vec![vec![1, 2, 3, 7], vec![5, 6, 7, 8], vec![0, 2, 3, 4]],
            vec![vec![2, 4, 7], vec![0, 3, 8], vec![1, 5, 6]],
        )
        .unwrap_or_else(|e| unreachable!("the paper's example is a valid instance: {e}"))
    }

    /// Parses and validates the JSON layout
    /// `{"workers": n, "points": q, "cache": [[ids of C_0], ...], "assignment": [[ids of D_0], ...]}`.
    pub fn from_json(text: &str) -> Result<Self, InstanceError> {
        let raw: InstanceJson = serde_json::from_str(text).map_err(|e| InstanceError::Json(e.to_string()))?;
        raw.try_into()
    }

    /// The JSON layout of [`ShuffleInstance::from_json`], on one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("instance JSON cannot fail: {e}"))
    }

    /// Number of workers `n`.
    pub fn workers(&self) -> usize {
        self.cache.len()
    }

    /// Number of points `q`.
    pub fn points(&self) -> usize {
        self.points
    }

    /// The cache `C_i` of worker `i`.
    pub fn cache(&self, worker: usize) -> PointSet<'_> {
        self.cache[worker].view()
    }

    /// The new batch `D_i` of worker `i`.
    pub fn assignment(&self, worker: usize) -> PointSet<'_> {
        PointSet::from_sorted(&self.assignment[worker])
    }

    /// The points worker `i` must receive, `D_i \ C_i`.
    pub fn needs(&self, worker: usize) -> PointSet<'_> {
        PointSet::from_sorted(&self.needs[worker])
    }

    /// The worker the new assignment gives `point` to.
    pub fn owner(&self, point: u32) -> usize {
        self.owner[point as usize] as usize
    }

    /// The owner of every point under the new assignment, indexed by point.
    pub fn owners(&self) -> &[u32] {
        &self.owner
    }

    /// An instance with the same caches and another assignment (validated as usual).
    pub fn with_assignment(&self, assignment: Vec<Vec<u32>>) -> Result<Self, InstanceError> {
        ShuffleInstance::from_stored(self.workers(), self.points, self.cache.clone(), assignment)
    }

    /// Whether `other` has the same workers, points and caches.
    pub(crate) fn same_caches(&self, other: &ShuffleInstance) -> bool {
        self.points == other.points
            && self.workers() == other.workers()
            && self.cache.iter().zip(&other.cache).all(|(a, b)| a.view() == b.view())
    }

    /// The largest cache, `max_i |C_i|` (the cache size `s` for generated instances).
    pub fn cache_size(&self) -> usize {
        self.cache.iter().map(|c| c.view().len()).max().unwrap_or(0)
    }

    /// `|D_i \ C_i|` for every worker.
    pub fn need_counts(&self) -> Vec<usize> {
        self.needs.iter().map(Vec::len).collect()
    }

    /// The number of unicasts of the uncoded scheme, `sum_i |D_i \ C_i|`.
    pub fn uncoded_transmissions(&self) -> usize {
        self.needs.iter().map(Vec::len).sum()
    }

    /// The set of workers caching `point` (one membership test per worker).
    pub fn cachers_of(&self, point: u32) -> WorkerSet {
        (0..self.workers()).filter(|&w| self.cache(w).contains(point)).collect()
    }

    /// Bytes the instance holds on the heap (caches, batches, needs and the owner of every
    /// point), to report the memory of large instances.
    pub fn heap_bytes(&self) -> usize {
        let lists =
            |l: &[Vec<u32>]| l.iter().map(|v| v.capacity() * 4 + size_of::<Vec<u32>>()).sum::<usize>();
        self.cache.iter().map(|c| c.heap_bytes() + size_of::<StoredPoints>()).sum::<usize>()
            + lists(&self.assignment)
            + lists(&self.needs)
            + self.owner.capacity() * 4
    }
}

/// The checks on `n` and `q` alone.
fn check_counts(workers: usize, points: usize) -> Result<(), InstanceError> {
    if workers == 0 {
        return Err(InstanceError::NoWorkers);
    }
    if u32::try_from(points).is_err() {
        return Err(InstanceError::TooManyPoints { points });
    }
    if workers > points {
        return Err(InstanceError::MoreWorkersThanPoints { workers, points });
    }
    Ok(())
}

/// One list per worker, each sorted, in range and duplicate-free.
fn check_lists(
    field: &'static str,
    workers: usize,
    points: usize,
    mut lists: Vec<Vec<u32>>,
) -> Result<Vec<Vec<u32>>, InstanceError> {
    if lists.len() != workers {
        return Err(InstanceError::ListCount { field, got: lists.len(), workers });
    }
    for (worker, list) in lists.iter_mut().enumerate() {
        list.sort_unstable();
        if let Some(&point) = list.last().filter(|&&p| p as usize >= points) {
            return Err(InstanceError::PointOutOfRange { field, worker, point: point.into(), points });
        }
        if let Some(w) = list.windows(2).find(|w| w[0] == w[1]) {
            return Err(InstanceError::DuplicateInList { field, worker, point: w[0] });
        }
    }
    Ok(lists)
}

/// The assignment partitions `0..points`, so its lists hold exactly `points` ids. Checking that
/// sum before anything of size `points` is allocated keeps memory bounded by the input: a
/// declared `points` the lists do not back is found at the cost of the lists themselves.
fn check_assignment_total(assignment: &[Vec<u32>], points: usize) -> Result<(), InstanceError> {
    let assigned: usize = assignment.iter().map(Vec::len).sum();
    if assigned != points {
        return Err(first_partition_error(assignment, points));
    }
    Ok(())
}

/// The first point (in id order) assigned twice or to no worker, for an assignment whose lists
/// do not hold exactly `points` ids; costs memory in the lists' total, not in `points`.
fn first_partition_error(assignment: &[Vec<u32>], points: usize) -> InstanceError {
    let mut pairs: Vec<(u32, usize)> =
        assignment.iter().enumerate().flat_map(|(w, list)| list.iter().map(move |&p| (p, w))).collect();
    pairs.sort_unstable();
    let mut expected = 0u64;
    let mut previous: Option<(u32, usize)> = None;
    for &(point, worker) in &pairs {
        if let Some((p, first)) = previous
            && p == point
        {
            return InstanceError::AssignedTwice { point, first, second: worker };
        }
        if u64::from(point) > expected {
            return InstanceError::Unassigned { point: expected as u32 };
        }
        expected = u64::from(point) + 1;
        previous = Some((point, worker));
    }
    if expected < points as u64 {
        return InstanceError::Unassigned { point: expected as u32 };
    }
    // Unreachable for lists already checked against `points` (sorted, in range, no repeats
    // within a list): a sum that differs from `points` leaves a gap or a repeat.
    InstanceError::Json(format!("the assignment holds {} ids for {points} points", pairs.len()))
}

/// `a \ b` for sorted, duplicate-free slices.
pub(crate) fn sorted_difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j >= b.len() || b[j] != x {
            out.push(x);
        }
    }
    out
}

/// The JSON layout of an instance, before validation.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceJson {
    workers: usize,
    points: usize,
    cache: Vec<Vec<u32>>,
    assignment: Vec<Vec<u32>>,
}

impl TryFrom<InstanceJson> for ShuffleInstance {
    type Error = InstanceError;
    fn try_from(raw: InstanceJson) -> Result<Self, InstanceError> {
        ShuffleInstance::new(raw.workers, raw.points, raw.cache, raw.assignment)
    }
}

#[derive(Serialize)]
struct InstanceJsonRef<'a> {
    workers: usize,
    points: usize,
    cache: Vec<PointSet<'a>>,
    assignment: &'a [Vec<u32>],
}

impl Serialize for ShuffleInstance {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        InstanceJsonRef {
            workers: self.workers(),
            points: self.points,
            cache: self.cache.iter().map(StoredPoints::view).collect(),
            assignment: &self.assignment,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ShuffleInstance {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = InstanceJson::deserialize(deserializer)?;
        raw.try_into().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> ShuffleInstance {
        crate::ShuffleInstance::paper_example()
    }

    #[test]
    fn json_round_trip() {
        let inst = paper();
        let back = ShuffleInstance::from_json(&inst.to_json()).unwrap();
        assert_eq!(inst, back);
    }

    #[test]
    fn needs_and_uncoded_count() {
        let inst = paper();
        assert_eq!(inst.needs(0), [4]);
        assert_eq!(inst.needs(1), [0, 3]);
        assert_eq!(inst.needs(2), [1, 5, 6]);
        assert_eq!(inst.uncoded_transmissions(), 6);
        assert_eq!(inst.cache_size(), 4);
        assert_eq!(inst.owner(8), 1);
    }

    fn err(json: &str) -> String {
        ShuffleInstance::from_json(json).unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_instances_with_a_message_naming_the_problem() {
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0],[1]], "assignment": [[0,1],[1,3]]}"#)
                .contains("point 1 is assigned to both worker 0 and worker 1")
        );
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0],[1]], "assignment": [[0,1],[3]]}"#)
                .contains("point 2 is assigned to no worker")
        );
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0],[9]], "assignment": [[0,1],[2,3]]}"#)
                .contains("names point 9")
        );
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0]], "assignment": [[0,1],[2,3]]}"#)
                .contains("\"cache\" has 1 lists")
        );
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0,0],[1]], "assignment": [[0,1],[2,3]]}"#)
                .contains("twice")
        );
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0],[1]], "assignment": [[0,1,2],[3]]}"#)
                .contains("not balanced")
        );
        assert!(
            err(r#"{"workers": 0, "points": 4, "cache": [], "assignment": []}"#).contains("at least one")
        );
        assert!(
            err(r#"{"workers": 5, "points": 4, "cache": [], "assignment": []}"#).contains("more workers")
        );
        assert!(err(r#"{"workers": 2, "points": 4}"#).contains("malformed"));
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[0],[1]], "assignment": [[0,1],[2,3]], "x": 1}"#)
                .contains("unknown field")
        );
        assert!(err("[1, 2").contains("malformed"));
        assert!(
            err(r#"{"workers": 2, "points": 4, "cache": [[-1],[1]], "assignment": [[0,1],[2,3]]}"#)
                .contains("malformed")
        );
    }

    #[test]
    fn a_declared_size_the_lists_do_not_back_is_refused_without_allocating_it() {
        // The 83-byte file of the issue (with its newline).
        let text = r#"{"workers":3,"points":4294967295,"cache":[[0],[1],[2]],"assignment":[[0],[1],[2]]}"#;
        let started = std::time::Instant::now();
        assert_eq!(err(text), "point 3 is assigned to no worker");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            err(r#"{"workers": 2, "points": 3, "cache": [[0],[1]], "assignment": [[0,1],[1,2]]}"#)
                .contains("point 1 is assigned to both worker 0 and worker 1")
        );
        assert!(
            err(r#"{"workers": 2, "points": 9, "cache": [[0],[1]], "assignment": [[0,1],[2,3]]}"#)
                .contains("point 4 is assigned to no worker")
        );
    }

    #[test]
    fn near_balanced_is_accepted() {
        let inst = ShuffleInstance::new(2, 3, vec![vec![0, 1], vec![2]], vec![vec![0, 2], vec![1]]).unwrap();
        assert_eq!(inst.needs(0), [2]);
    }

    #[test]
    fn difference() {
        assert_eq!(sorted_difference(&[1, 2, 5, 7], &[0, 2, 7, 9]), vec![1, 5]);
        assert_eq!(sorted_difference(&[], &[1]), Vec::<u32>::new());
        assert_eq!(sorted_difference(&[3], &[]), vec![3]);
    }
}
