//! Gradient-coded descent on the master/worker runtime: one run's settings and data from a
//! code and a data set ([`CodedJob`]), for any transport, and a deterministic emulated cluster
//! for experiments and tests ([`run_coded_emulated`]).
//!
//! The learner is [`CodedDescent`]: the data is role-expanded ([`role_data`]), each worker's
//! batch is the block of the role it plays (the learner dictates the assignment; the epoch
//! chain of caches and batches, the plan and the delivery are the runtime's as for every
//! learner), the starting batches are the roles of epoch 0 so that unshuffled roles move no
//! data, and the deadline drops the stragglers' coded gradients. The exchange policy is
//! `local`: it is not consulted, the learner's assignment is.

use std::time::Duration;

use ubershuffle_codes::Records;
use ubershuffle_core::ShufflePlanner;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::StragglerModel;
use ubershuffle_learners::gradient_coding::learner::{
    CodedDescent, CodedDescentParams, plain_role_records, role_data,
};
use ubershuffle_transport::in_process::{InProcessConfig, LinkShaping};

use crate::in_process::{InProcessRun, run_in_process_from};
use crate::{
    CheckedRunConfig, CostModel, EpochMetrics, LearnerSpec, RunConfig, RunData, RunReport, RuntimeError,
    Scaling,
};

/// What a gradient-coded run needs: its checked settings, its data and its starting batches.
#[derive(Clone, Debug)]
pub struct CodedJob {
    /// The run: `params.workers` workers, one epoch per iteration, the deadline, policy local,
    /// the caches the size of the largest role.
    pub config: CheckedRunConfig,
    /// The role-expanded training records, and the records the loss is measured on.
    pub data: RunData,
    /// Worker `w` starts with role `w`'s block ([`crate::Master::with_start`]).
    pub start: Vec<Vec<u32>>,
    /// The learner (the master's copy: roles and decoding for reports).
    pub learner: CodedDescent,
}

/// The job of `iterations` steps of `params` on `train` (samples in
/// [`ubershuffle_learners::sample`]'s layout) with the master's `deadline` per iteration,
/// the loss measured on `measured` after every step.
pub fn coded_job(
    params: CodedDescentParams,
    iterations: usize,
    deadline: Duration,
    train: &Records,
    measured: &Records,
) -> Result<CodedJob, RuntimeError> {
    let learner = params.build()?;
    let roles = role_data(&params, train)?;
    let largest = roles.blocks.iter().map(Vec::len).max().unwrap_or(0);
    let config = RunConfig::new(params.workers, largest, LearnerSpec::GradientCoding(params))
        .with_epochs(iterations)
        .with_seed(params.seed)
        .with_policy(ExchangePolicy::Local)
        .with_deadline(deadline)
        .check(roles.records.len())?;
    let data = RunData { train: roles.records.into(), held_out: plain_role_records(&params, measured)? };
    Ok(CodedJob { config, data, start: roles.blocks, learner })
}

/// The decoding error `||B_S^T a - 1||^2` of each epoch's roles heard from.
pub fn decoding_errors(learner: &CodedDescent, epochs: &[EpochMetrics]) -> Vec<f64> {
    epochs.iter().map(|m| learner.decoding(m.epoch, &m.updated_workers).error).collect()
}

/// The cost model of [`run_coded_emulated`]: a nanosecond per multiply-add of training, free
/// planning and moving of bytes in memory (only the links and the straggler model's holds take
/// time).
pub fn coded_cost_model(planner: &str) -> CostModel {
    let kind = LearnerSpec::GradientCoding(CodedDescentParams::new(
        1,
        ubershuffle_learners::gradient_coding::glm::GlmLoss::LeastSquares,
        ubershuffle_gradient_codes::GradientCodeKind::Uncoded,
        (1, 1),
        1.0,
        1,
    ))
    .kind()
    .to_string();
    CostModel {
        xor_ns_per_byte: 0.0,
        copy_ns_per_byte: 0.0,
        checksum_ns_per_byte: 0.0,
        verify: Scaling::flat(0.0),
        peel: Scaling::flat(0.0),
        plan: [(planner.to_string(), Scaling::flat(0.0))].into(),
        coordinate_ns: [(kind, 1.0)].into(),
        loss_ns: Default::default(),
        draw_ns_per_point: 0.0,
        keep_ns_per_point: 0.0,
    }
}

/// Runs `job` on an emulated cluster of threads (1 Gbit/s links, computing charged by
/// [`coded_cost_model`]): deadlines are judged on emulated clocks, so exactly the workers the
/// straggler model makes late miss them, and a run's numbers depend on its seed only.
pub fn run_coded_emulated(
    job: &CodedJob,
    planner: &dyn ShufflePlanner,
    stragglers: &mut dyn StragglerModel,
    on_epoch: &mut dyn FnMut(&EpochMetrics),
) -> Result<RunReport, RuntimeError> {
    let transport = InProcessConfig::default().with_shaping(Some(LinkShaping::gbit_per_second(1.0)));
    let run = InProcessRun::new(&job.config, planner, stragglers, &job.data)
        .with_transport(transport)
        .with_cost_model(coded_cost_model(planner.name()));
    let (report, workers) = run_in_process_from(run, Some(job.start.clone()), on_epoch)?;
    if let Some((worker, Err(message))) = workers.into_iter().enumerate().find(|(_, w)| w.is_err()) {
        return Err(RuntimeError::WorkerFailed { worker, message });
    }
    Ok(report)
}
