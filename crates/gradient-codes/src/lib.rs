#![doc = include_str!("../README.md")]

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
#[non_exhaustive]
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
