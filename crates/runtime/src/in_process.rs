//! Running a whole cluster in one process: the master in the calling thread, one thread per
//! worker, over the in-process transport (optionally an emulated cluster: per-node emulated
//! clocks, links of a given rate, computing charged by thread CPU time or by a cost model).

use ubershuffle_core::ShufflePlanner;
use ubershuffle_transport::in_process::{ComputeTime, InProcessConfig, cluster};

use ubershuffle_learners::StragglerModel;

use crate::checkpoint::ResumePoint;
use crate::{
    CheckedRunConfig, ConfigError, CostModel, EpochMetrics, Master, RunData, RunReport, RuntimeError,
    WorkerOptions, WorkerSummary, run_worker,
};

/// A run on threads of this process: build with [`InProcessRun::new`].
#[non_exhaustive]
pub struct InProcessRun<'a> {
    /// What to run.
    pub config: &'a CheckedRunConfig,
    /// The shuffling scheme.
    pub planner: &'a dyn ShufflePlanner,
    /// Which workers straggle.
    pub stragglers: &'a mut dyn StragglerModel,
    /// The data.
    pub data: &'a RunData,
    /// The transport (timeouts, broadcast method, link shaping).
    pub transport: InProcessConfig,
    /// Fault injection: `(worker, epoch)` makes that worker leave, as if killed, when that
    /// epoch's order reaches it.
    pub faults: Vec<(usize, u32)>,
    /// On an emulated cluster, charge computing by this cost model instead of thread CPU time
    /// (every run then gives identical times).
    pub cost_model: Option<CostModel>,
    /// Continue this matched checkpoint ([`Master::resuming`]) instead of starting afresh.
    pub resume: Option<ResumePoint>,
}

impl<'a> InProcessRun<'a> {
    /// A run of `config` with `planner`, `stragglers` and `data` over an unshaped in-process
    /// transport with its default timeouts, and no injected faults.
    pub fn new(
        config: &'a CheckedRunConfig,
        planner: &'a dyn ShufflePlanner,
        stragglers: &'a mut dyn StragglerModel,
        data: &'a RunData,
    ) -> Self {
        InProcessRun {
            config,
            planner,
            stragglers,
            data,
            transport: InProcessConfig::default(),
            faults: Vec::new(),
            cost_model: None,
            resume: None,
        }
    }

    /// Continues the run of `point` ([`Master::resuming`]) when given.
    pub fn with_resume(mut self, point: Option<ResumePoint>) -> Self {
        self.resume = point;
        self
    }

    /// Runs over `transport` (timeouts, broadcast method, link shaping).
    pub fn with_transport(mut self, transport: InProcessConfig) -> Self {
        self.transport = transport;
        self
    }

    /// Makes each `(worker, epoch)` worker leave, as if killed, when that epoch's order
    /// reaches it.
    pub fn with_faults(mut self, faults: Vec<(usize, u32)>) -> Self {
        self.faults = faults;
        self
    }

    /// Charges every node's computing by `model` (on an emulated cluster: the transport's
    /// clocks are switched to [`ComputeTime::Charged`]), so that two runs give identical times.
    pub fn with_cost_model(mut self, model: CostModel) -> Self {
        self.cost_model = Some(model);
        self
    }
}

/// Runs the master here and every worker on its own thread; returns the master's report and
/// each worker's summary (or its error, as one line).
pub fn run_in_process(
    run: InProcessRun<'_>,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<(RunReport, Vec<Result<WorkerSummary, String>>), RuntimeError> {
    run_in_process_from(run, None, on_epoch)
}

/// [`run_in_process`] from a given starting partition ([`Master::with_start`]) when `start` is
/// given.
pub fn run_in_process_from(
    run: InProcessRun<'_>,
    start: Option<Vec<Vec<u32>>>,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<(RunReport, Vec<Result<WorkerSummary, String>>), RuntimeError> {
    let prices = match &run.cost_model {
        Some(model) => Some(
            model
                .prices(run.planner.name(), &run.config.learner, run.config.workers)
                .map_err(ConfigError::from)?,
        ),
        None => None,
    };
    let mut transport = run.transport.clone();
    if prices.is_some() {
        transport = transport.with_compute_time(ComputeTime::Charged);
    }
    let mut endpoints = cluster(run.config.workers + 1, &transport)?.into_iter();
    let master_end = endpoints.next().ok_or_else(|| RuntimeError::from(ConfigError::NoMasterEndpoint))?;
    let workers: Vec<_> = endpoints
        .enumerate()
        .map(|(w, t)| {
            let exit_at_epoch = run.faults.iter().find(|f| f.0 == w).map(|f| f.1);
            let options = WorkerOptions::default().with_exit_at_epoch(exit_at_epoch).with_prices(prices);
            std::thread::spawn(move || run_worker(t, &options).map_err(|e| e.to_string()))
        })
        .collect();
    let report = Master::new(master_end, run.config, run.planner, run.stragglers, run.data)
        .map(|m| match prices {
            Some(p) => m.with_prices(p),
            None => m,
        })
        .and_then(|m| match start {
            Some(batches) => m.with_start(batches),
            None => Ok(m),
        })
        .and_then(|m| match run.resume {
            Some(point) => m.resuming(point),
            None => Ok(m),
        })
        .and_then(|m| m.run(on_epoch));
    let summaries = workers
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("the worker thread panicked".into())))
        .collect();
    Ok((report?, summaries))
}
