//! Gradient codes: encoding matrices, least-squares decoding, shuffled worker roles.
//!
//! Convention (as in Tandon et al.): the encoding matrix `B` is `n x n` with one **row per
//! worker role** and one **column per data partition**; role `i` sends the coded gradient
//! `sum_j B[i][j] g_j` of the partial gradients `g_j` of the partitions in its support. Johri,
//! Yardi and Bodas (approximate gradient coding for heterogeneous nodes) write the transpose
//! (rows = data sets, columns = workers); their "shuffling the columns of B" is our permuting
//! which worker plays which role ([`RoleShuffle`]).
//!
//! The replication factor `s` is the number of partitions per worker (and of workers per
//! partition): the papers' "(s-1)-tolerant" schemes. `s = 1` is uncoded.
//!
//! - [`EncodingMatrix::frc`]: fractional repetition (groups of `s` roles share `s` partitions),
//! - [`EncodingMatrix::crc`]: cyclic repetition with 0/1 entries (role `i` holds `i..i+s-1 mod n`),
//! - [`EncodingMatrix::crc_exact`]: Tandon et al.'s real-valued cyclic scheme (exact recovery
//!   from any `n-s+1` roles),
//! - [`decode`]: the least-squares combination `a` minimising `||B_S^T a - 1||^2` over the
//!   available roles `S`, and the optimal decoding error (Johri et al. eq. (2)),
//! - [`cycle_classes`]: the cycle classes of binary words used by Johri et al.'s Theorem 2.

mod cycle_classes;
mod decode;
mod matrix;
mod shuffle;

pub use cycle_classes::{CycleClass, cycle_class_count, cycle_classes};
pub use decode::{Decoding, ErrorTable, decode, decode_mask};
pub use matrix::{EncodingMatrix, GradientCodeKind};
pub use shuffle::{RoleShuffle, roles_mask};

/// Why a gradient code cannot be built or decoded.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GradientCodeError {
    /// Fewer than one worker, or more than the code supports.
    #[error("the number of workers must be between 1 and {max}, got {workers}")]
    BadWorkerCount {
        /// Workers asked for.
        workers: usize,
        /// The largest supported.
        max: usize,
    },
    /// The replication factor must be between 1 and n.
    #[error(
        "the replication factor s (partitions per worker) must be between 1 and n = {workers}, got {replication}"
    )]
    BadReplication {
        /// Workers.
        workers: usize,
        /// Replication asked for.
        replication: usize,
    },
    /// FRC groups `s` workers, so `s` must divide `n`.
    #[error("fractional repetition needs s to divide n: n = {workers} workers, s = {replication}")]
    NotDivisible {
        /// Workers.
        workers: usize,
        /// Replication.
        replication: usize,
    },
    /// A role index beyond the matrix.
    #[error("role {role} is out of range for {workers} workers")]
    RoleOutOfRange {
        /// The role.
        role: usize,
        /// Workers.
        workers: usize,
    },
    /// A name that is no known code.
    #[error("unknown gradient code '{0}': known codes are uncoded, frc, crc, crc-exact")]
    UnknownCode(String),
    /// A name that is no known role shuffle.
    #[error("unknown shuffle '{0}': known shuffles are none, cyclic, random")]
    UnknownShuffle(String),
}
