//! [`LearnerError`]: what can go wrong in learners, data loading and straggler models.

use std::path::PathBuf;

/// Why a learner, a data set or a straggler model cannot proceed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LearnerError {
    /// A record has the wrong number of bytes for the learner's layout.
    #[error("a record has {len} bytes, the learner's records are {width} bytes")]
    WrongRecordWidth {
        /// Bytes given.
        len: usize,
        /// Bytes expected.
        width: usize,
    },
    /// A rating names a row or column beyond the model.
    #[error("rating ({row}, {col}) is outside the {rows} x {cols} matrix")]
    RatingOutOfRange {
        /// Row.
        row: u32,
        /// Column.
        col: u32,
        /// Rows of the model.
        rows: usize,
        /// Columns of the model.
        cols: usize,
    },
    /// A model's or update's bytes do not parse, or do not fit the learner.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// "model" or "update".
        what: &'static str,
        /// What is wrong, in one line.
        reason: String,
    },
    /// Parameters that cannot work (zero dimension, non-positive step size, ...).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A data file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A data file has a line that does not parse.
    #[error("{path}, line {line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A gradient code cannot be built or decoded.
    #[error(transparent)]
    Code(#[from] ubershuffle_gradient_codes::GradientCodeError),
    /// Records of a bad shape.
    #[error(transparent)]
    Codec(#[from] ubershuffle_codes::CodecError),
    /// A worker thread of an executed run died.
    #[error("worker thread failed: {0}")]
    Worker(String),
}
