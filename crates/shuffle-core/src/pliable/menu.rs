//! What each point may be given to under a pliable request ([`Menu`]) and who caches what
//! ([`CacherBits`]): what verification and every pliable planner read. The assignment under
//! construction is the planners crate's.
use crate::ShuffleInstance;
use crate::bits;

/// For every point, the workers caching it, as a bitset of `words` words.
#[derive(Clone, Debug)]
pub struct CacherBits {
    words: usize,
    rows: Vec<u64>,
}

impl CacherBits {
    /// The cachers of every point of `inst`: one pass over every cache.
    pub fn of(inst: &ShuffleInstance) -> Self {
        let words = bits::words_for(inst.workers()).max(1);
        let mut rows = vec![0u64; inst.points() * words];
        for w in 0..inst.workers() {
            for p in inst.cache(w) {
                bits::set(&mut rows[p as usize * words..(p as usize + 1) * words], w);
            }
        }
        CacherBits { words, rows }
    }

    /// Whether worker `w` caches point `p`.
    #[inline]
    pub fn caches(&self, w: usize, p: u32) -> bool {
        bits::get(self.row(p), w)
    }

    /// The workers caching point `p`.
    #[inline]
    pub fn row(&self, p: u32) -> &[u64] {
        let start = p as usize * self.words;
        &self.rows[start..start + self.words]
    }
}

/// What the assignment may be: batch sizes, who caches what, each point's candidates, and
/// whether a batch may hold points its worker caches.
pub struct Menu<'a> {
    /// Workers `n`.
    pub workers: usize,
    /// Every worker's batch size.
    pub sizes: Vec<usize>,
    /// The cachers of every point.
    pub cachers: &'a CacherBits,
    /// Each layer names one candidate per point; empty: every worker is a candidate.
    pub layers: Vec<&'a [u32]>,
    /// Batches must hold only points their workers do not cache (the paper's model).
    pub fresh: bool,
    /// Every point's previous owner, when known: free placements avoid it when they can.
    pub previous: Option<&'a [u32]>,
}

/// The candidates of one point, possibly with repeats.
pub enum Candidates<'m> {
    /// Every worker.
    All(std::ops::Range<usize>),
    /// One per layer.
    Layers {
        /// Every layer's owner of every point.
        layers: &'m [&'m [u32]],
        /// The point.
        point: usize,
        /// The next layer to read.
        next: usize,
    },
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        match self {
            Candidates::All(range) => range.next(),
            Candidates::Layers { layers, point, next } => {
                let layer = layers.get(*next)?;
                *next += 1;
                Some(layer[*point] as usize)
            }
        }
    }
}

impl Menu<'_> {
    /// Points `q`.
    pub fn points(&self) -> usize {
        self.cachers.rows.len() / self.cachers.words
    }

    /// The candidates of point `p` (repeats possible).
    pub fn candidates(&self, p: u32) -> Candidates<'_> {
        if self.layers.is_empty() {
            Candidates::All(0..self.workers)
        } else {
            Candidates::Layers { layers: &self.layers, point: p as usize, next: 0 }
        }
    }

    /// The most distinct candidates a point has.
    pub fn candidates_per_point(&self) -> usize {
        if self.layers.is_empty() { self.workers } else { self.layers.len().min(self.workers) }
    }

    /// Whether worker `w` may take point `p`: a candidate, and new to it if batches must be.
    #[inline]
    pub fn allows(&self, p: u32, w: usize) -> bool {
        let candidate = self.layers.is_empty() && w < self.workers
            || self.layers.iter().any(|layer| layer[p as usize] as usize == w);
        candidate && !(self.fresh && self.cachers.caches(w, p))
    }
}
