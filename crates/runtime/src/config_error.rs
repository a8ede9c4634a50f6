//! [`ConfigError`]: why a run's configuration is not valid, and [`CostModelError`]: why a cost
//! model cannot price it (this module depends on no other of the crate's).

/// Why a run's configuration is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No workers, or more workers than points.
    #[error("{workers} workers for {points} points: each worker needs at least one point")]
    WorkersForPoints {
        /// Workers asked for.
        workers: usize,
        /// Training records.
        points: usize,
    },
    /// The cache cannot hold a batch, or holds more than every point.
    #[error("the cache holds {cache} points; it must hold a batch ({batch} = q/n) and at most all {points}")]
    CacheSize {
        /// Cache capacity.
        cache: usize,
        /// Batch size `ceil(q / n)`.
        batch: usize,
        /// Training records.
        points: usize,
    },
    /// Zero epochs.
    #[error("a run needs at least one epoch")]
    NoEpochs,
    /// Zero-byte data messages.
    #[error("data messages need a positive size")]
    ZeroChunk,
    /// The data have another size than the configuration was checked for.
    #[error("the configuration was checked for {checked} points, the data have {actual}")]
    DataSize {
        /// Checked for.
        checked: usize,
        /// Given.
        actual: usize,
    },
    /// The master's transport is not rank 0 of `workers + 1` ranks.
    #[error("the master must be rank 0 of {expected} ranks, it is rank {rank} of {size}")]
    MasterRank {
        /// `workers + 1`.
        expected: usize,
        /// The transport's rank.
        rank: usize,
        /// The transport's size.
        size: usize,
    },
    /// The straggler model is for another number of workers.
    #[error("the straggler model has {model} workers, the run {run}")]
    StragglerWorkers {
        /// The model's.
        model: usize,
        /// The run's.
        run: usize,
    },
    /// Records of another width than the learner's.
    #[error("{which} records are {width} bytes, the learner's are {expected}")]
    RecordWidth {
        /// "training" or "held-out".
        which: &'static str,
        /// Their width.
        width: usize,
        /// The learner's.
        expected: usize,
    },
    /// Records of any size for a learner that reads records of one width.
    #[error("the training records are of any size, the learner reads records of {expected} bytes")]
    SizedRecords {
        /// The learner's width.
        expected: usize,
    },
    /// A starting partition that is not one.
    #[error("starting partition: {0}")]
    StartingPartition(String),
    /// The cost model cannot price this run.
    #[error(transparent)]
    CostModel(#[from] CostModelError),
    /// No endpoint for the master (an empty in-process cluster).
    #[error("the in-process cluster has no master endpoint")]
    NoMasterEndpoint,
}

/// Why a cost model cannot price a run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CostModelError {
    /// No calibration for the planner.
    #[error(
        "the cost model has no price for planning with '{planner}' (calibrated: {known}); calibrate it again"
    )]
    Planner {
        /// The planner.
        planner: String,
        /// The planners calibrated, comma-separated.
        known: String,
    },
    /// No calibration for the learner.
    #[error("the cost model has no price for training {learner}; calibrate it again")]
    Learner {
        /// The learner kind.
        learner: String,
    },
}
