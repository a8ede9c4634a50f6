//! The no-excess storage model of Attia and Tandon ("On the worst-case communication overhead
//! for distributed data shuffling"): every worker caches exactly its previous batch, so the
//! caches `C_i` partition the points and `|C_i| = |D_i|`.
//!
//! Such an epoch is described, up to renaming points, by its [`ShuffleMatrix`]
//! `S[i][j] = |C_i ∩ D_j|` (eq. (11)): the points worker `i` held that worker `j` needs now.
//! This module holds the matrix (parsing, conversion from and to instances, the paper's closed
//! forms eqs. (15), (26), (43) and Theorem 3), the points of every block `C_i ∩ D_j`
//! ([`ShuffleBlocks`], what the `worst-case` and `cycle-packing` planners draw from), random
//! matrices and instances, the ordering search behind Theorem 2's lower bound, and the cycle
//! packing of the `cycle-packing` planner.

mod blocks;
mod closed_forms;
mod cycles;
mod orderings;
mod random;
mod shuffle_matrix;

pub use blocks::{MAX_MATRIX_WORKERS, NoExcessError, ShuffleBlocks};
pub use cycles::{
    CyclePacking, EXACT_SEARCH_MAX_WORKERS, EXACT_SEARCH_NODE_LIMIT, GreedyOrder, WorkerCycle,
    greedy_packing, pack_cycles,
};
pub use orderings::{EXACT_ORDERING_MAX_WORKERS, WorkerOrdering, best_ordering};
pub use random::{random_no_excess_instance, random_permutation_sum};
pub use shuffle_matrix::{ShuffleMatrix, ShuffleMatrixError};
