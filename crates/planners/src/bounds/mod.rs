//! Lower bounds on the number of transmissions any scheme needs for an instance, printed beside
//! every plan's count ([`clique_family`] apart: a bound and an estimate for the clique family
//! only, not in [`BOUNDS`]). Each bound is one file; [`best_lower_bound`] takes the largest that
//! applies. Adding a bound: write `bounds/<name>.rs` with a function
//! `fn(&ShuffleInstance) -> Option<LowerBound>` and add it to [`BOUNDS`].

pub(crate) mod acyclic;
mod attia_tandon;
mod clique_family;
mod largest_cliques;
mod max_need;

pub use acyclic::{EXACT_MAX_WORKERS, acyclic_subgraph_bound};
pub use attia_tandon::{THEOREM2_KIND, THEOREM2_LOCAL_KIND, attia_tandon_bound, theorem2_ordering};
pub use clique_family::{
    CliqueBoundKind, CliqueFamily, DEFAULT_SEARCH_WORK, SEARCH_WORK_PER_SECOND, clique_family,
};
pub use max_need::max_need_bound;

use crate::ShuffleInstance;

/// A lower bound on the transmissions of every scheme for one instance, and which bound it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LowerBound {
    /// The bound, in point-sized transmissions.
    pub value: usize,
    /// Which bound gave it (`max-need`, ...).
    pub kind: &'static str,
}

/// A bound: `None` when it does not apply to the instance (or would take too long).
pub type BoundFn = fn(&ShuffleInstance) -> Option<LowerBound>;

/// Every bound this crate knows; on a tie the first listed names the bound. On no-excess
/// instances (each point cached by exactly its previous owner) the acyclic-subgraph bound and
/// Attia-Tandon's Theorem 2 coincide (both sum the shuffle matrix over an ordering of the
/// workers), and the paper's name is kept.
pub static BOUNDS: &[BoundFn] =
    &[|inst| Some(max_need_bound(inst)), attia_tandon_bound, acyclic_subgraph_bound];

/// Every bound that applies to `inst`.
pub fn all_lower_bounds(inst: &ShuffleInstance) -> Vec<LowerBound> {
    BOUNDS.iter().filter_map(|bound| bound(inst)).collect()
}

/// The largest bound that applies to `inst` (the first listed wins ties).
pub fn best_lower_bound(inst: &ShuffleInstance) -> LowerBound {
    all_lower_bounds(inst)
        .into_iter()
        .reduce(|best, b| if b.value > best.value { b } else { best })
        .unwrap_or(LowerBound { value: 0, kind: "none" })
}
