//! [`Requests`]: every needed (point, receiver) pair of an instance with the workers caching
//! its point, as bit matrices: the side information that packing planners, encoding tables
//! and lower bounds read.
//!
//! Requests are numbered by receiver, then point: receiver `w`'s requests are the range
//! [`Requests::of_receiver`]. Two views of the same `n x U` bit matrix (`U` requests):
//! - by worker ([`Requests::cached_by`]): bit `r` of worker `u`'s row is set when `u` caches the
//!   point of request `r`; ANDing rows over a range finds the requests of one receiver cached
//!   by every member of a group;
//! - by request ([`CacherRows`]): the cachers of each request as a worker bitset, for subset
//!   tests and counts.
//!
//! Each view takes `n U / 8` bytes: 112 MB at `n = 1000`, `U = 9e5`. The worker view is built
//! by one pass over every cache, the request view by 64 x 64 bit transposes of it.

use std::ops::Range;

use crate::ShuffleInstance;
use crate::bits;

/// Marks a point no worker needs.
const NOT_NEEDED: u32 = u32::MAX;

/// The needed pairs of an instance and who caches each point (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct Requests {
    workers: usize,
    point: Vec<u32>,
    receiver: Vec<u32>,
    start: Vec<usize>,
    /// Words per worker row (`ceil(U / 64)`).
    row_words: usize,
    by_worker: Vec<u64>,
}

impl Requests {
    /// The requests of `inst`: one pass over the needs and one over every cache.
    pub(crate) fn of(inst: &ShuffleInstance) -> Self {
        let n = inst.workers();
        let total = inst.uncoded_transmissions();
        let mut point = Vec::with_capacity(total);
        let mut receiver = Vec::with_capacity(total);
        let mut start = Vec::with_capacity(n + 1);
        let mut id = vec![NOT_NEEDED; inst.points()];
        for w in 0..n {
            start.push(point.len());
            for p in inst.needs(w) {
                id[p as usize] = point.len() as u32;
                point.push(p);
                receiver.push(w as u32);
            }
        }
        start.push(point.len());
        let row_words = bits::words_for(total);
        let mut by_worker = vec![0u64; n * row_words];
        for (u, row) in by_worker.chunks_exact_mut(row_words.max(1)).enumerate().take(n) {
            for p in inst.cache(u) {
                let r = id[p as usize];
                if r != NOT_NEEDED {
                    bits::set(row, r as usize);
                }
            }
        }
        Requests { workers: n, point, receiver, start, row_words, by_worker }
    }

    /// Requests for explicit pairs, for planners that choose the receivers: `by_receiver[w]`
    /// lists, in increasing order, the points offered to receiver `w`; a point may be offered to
    /// several receivers. The side information is the caches of `inst` (its assignment is not
    /// read). Also returns, for every point, the requests that offer it.
    pub(crate) fn of_pairs(inst: &ShuffleInstance, by_receiver: &[Vec<u32>]) -> (Self, Offers) {
        let n = inst.workers();
        let total: usize = by_receiver.iter().map(Vec::len).sum();
        let mut point = Vec::with_capacity(total);
        let mut receiver = Vec::with_capacity(total);
        let mut start = Vec::with_capacity(n + 1);
        let mut per_point = vec![0u32; inst.points() + 1];
        for (w, offered) in by_receiver.iter().enumerate().take(n) {
            start.push(point.len());
            for &p in offered {
                point.push(p);
                receiver.push(w as u32);
                per_point[p as usize + 1] += 1;
            }
        }
        while start.len() <= n {
            start.push(point.len());
        }
        for p in 1..per_point.len() {
            per_point[p] += per_point[p - 1];
        }
        let mut ids = vec![0u32; total];
        let mut next = per_point.clone();
        for (r, &p) in point.iter().enumerate() {
            ids[next[p as usize] as usize] = r as u32;
            next[p as usize] += 1;
        }
        let offers = Offers { start: per_point, ids };
        let row_words = bits::words_for(total);
        let mut by_worker = vec![0u64; n * row_words];
        for (u, row) in by_worker.chunks_exact_mut(row_words.max(1)).enumerate().take(n) {
            for p in inst.cache(u) {
                for &r in offers.of(p) {
                    bits::set(row, r as usize);
                }
            }
        }
        (Requests { workers: n, point, receiver, start, row_words, by_worker }, offers)
    }

    /// Number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Number of requests `U` (the uncoded count).
    pub(crate) fn len(&self) -> usize {
        self.point.len()
    }

    /// The point of request `r`.
    #[inline]
    pub(crate) fn point(&self, r: usize) -> u32 {
        self.point[r]
    }

    /// The receiver of request `r`.
    #[inline]
    pub(crate) fn receiver(&self, r: usize) -> usize {
        self.receiver[r] as usize
    }

    /// The requests of receiver `w`.
    #[inline]
    pub(crate) fn of_receiver(&self, w: usize) -> Range<usize> {
        self.start[w]..self.start[w + 1]
    }

    /// Words of a worker row.
    pub(crate) fn row_words(&self) -> usize {
        self.row_words
    }

    /// Bit `r` set when worker `u` caches the point of request `r`.
    #[inline]
    pub(crate) fn cached_by(&self, u: usize) -> &[u64] {
        &self.by_worker[u * self.row_words..(u + 1) * self.row_words]
    }

    /// The request view: the cachers of every request as a worker bitset.
    pub(crate) fn cacher_rows(&self) -> CacherRows {
        CacherRows::transpose(self)
    }
}

/// For every point, the requests that offer it ([`Requests::of_pairs`]).
#[derive(Clone, Debug)]
pub(crate) struct Offers {
    start: Vec<u32>,
    ids: Vec<u32>,
}

impl Offers {
    /// The requests of point `p`.
    #[inline]
    pub(crate) fn of(&self, p: u32) -> &[u32] {
        &self.ids[self.start[p as usize] as usize..self.start[p as usize + 1] as usize]
    }
}

/// The cachers of every request, as worker bitsets of [`CacherRows::words`] words each.
#[derive(Clone, Debug)]
pub(crate) struct CacherRows {
    words: usize,
    rows: Vec<u64>,
}

impl CacherRows {
    fn transpose(requests: &Requests) -> Self {
        let n = requests.workers();
        let total = requests.len();
        let words = bits::words_for(n).max(1);
        let mut rows = vec![0u64; total * words];
        let mut block = [0u64; 64];
        for worker_block in 0..bits::words_for(n) {
            for request_block in 0..requests.row_words {
                // block[i] = the 64 request bits of worker 64 worker_block + i.
                for (i, slot) in block.iter_mut().enumerate() {
                    let u = worker_block * 64 + i;
                    *slot = if u < n { requests.cached_by(u)[request_block] } else { 0 };
                }
                transpose64(&mut block);
                // Now block[j] = the 64 worker bits of request 64 request_block + j.
                for (j, &bits) in block.iter().enumerate() {
                    let r = request_block * 64 + j;
                    if r < total {
                        rows[r * words + worker_block] = bits;
                    }
                }
            }
        }
        CacherRows { words, rows }
    }

    /// Words per request.
    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// The workers caching the point of request `r`.
    #[inline]
    pub(crate) fn of(&self, r: usize) -> &[u64] {
        &self.rows[r * self.words..(r + 1) * self.words]
    }
}

/// Transposes a 64 x 64 bit matrix in place: bit `j` of word `i` becomes bit `i` of word `j`
/// (recursive block swaps, 6 rounds of 32 word pairs).
fn transpose64(m: &mut [u64; 64]) {
    let mut width = 32;
    let mut mask: u64 = 0x0000_0000_FFFF_FFFF;
    while width != 0 {
        let mut k = 0;
        while k < 64 {
            for i in k..k + width {
                // Swap the high `width` bits of row i with the low `width` bits of row i + width.
                let t = ((m[i] >> width) ^ m[i + width]) & mask;
                m[i] ^= t << width;
                m[i + width] ^= t;
            }
            k += 2 * width;
        }
        width /= 2;
        mask ^= mask << width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;
    use crate::arbitrary_instance;

    #[test]
    fn pairs_offer_a_point_to_several_receivers() {
        let inst = ShuffleInstance::paper_example();
        // Point 4 offered to workers 0 and 1, point 6 to worker 2.
        let (requests, offers) = Requests::of_pairs(&inst, &[vec![4], vec![4], vec![6]]);
        assert_eq!(requests.len(), 3);
        assert_eq!(offers.of(4), &[0, 1]);
        assert_eq!(offers.of(6), &[2]);
        assert!(offers.of(5).is_empty());
        assert_eq!((requests.point(1), requests.receiver(1)), (4, 1));
        // Worker 2 caches point 4 (requests 0 and 1), not point 6.
        assert!(bits::get(requests.cached_by(2), 0) && bits::get(requests.cached_by(2), 1));
        assert!(!bits::get(requests.cached_by(2), 2));
        // Worker 1 caches point 6.
        assert!(bits::get(requests.cached_by(1), 2));
    }

    #[test]
    fn transpose_moves_every_bit() {
        let mut m = [0u64; 64];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for row in m.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *row = x;
        }
        let original = m;
        transpose64(&mut m);
        for (i, row) in original.iter().enumerate() {
            for (j, column) in m.iter().enumerate() {
                assert_eq!(row >> j & 1, column >> i & 1, "bit ({i}, {j})");
            }
        }
    }

    #[test]
    fn both_views_agree_with_the_caches() {
        for inst in [
            GeneratorParams { workers: 70, points: 3000, alpha: 0.2, seed: 3 }.check().unwrap().generate(),
            arbitrary_instance(5, 200, 0.4, 9),
        ] {
            let requests = Requests::of(&inst);
            let rows = requests.cacher_rows();
            assert_eq!(requests.len(), inst.uncoded_transmissions());
            for r in 0..requests.len() {
                let (p, w) = (requests.point(r), requests.receiver(r));
                assert!(requests.of_receiver(w).contains(&r));
                assert!(inst.needs(w).contains(p));
                for u in 0..inst.workers() {
                    let caches = inst.cache(u).contains(p);
                    assert_eq!(bits::get(requests.cached_by(u), r), caches);
                    assert_eq!(bits::get(rows.of(r), u), caches);
                }
            }
        }
    }
}
