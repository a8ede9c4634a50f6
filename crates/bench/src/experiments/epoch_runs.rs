//! Shared by the experiments that run the real epoch loop (`table1`, `fig4`, `partial-local`):
//! the scaled-down setups of the UberShuffle paper's Table 1, and one run of
//! [`ubershuffle_runtime::in_process::run_in_process`] over emulated links.
//!
//! Every run is the real thing on one machine: the master and `n` worker threads exchange real
//! records through the real encoder and decoders over the in-process transport, emulating a
//! cluster of single-ported nodes at the given rate. Each node has its own emulated clock (see
//! `ubershuffle_transport::in_process`): links advance it by the link model, computing by the
//! cost model's price of the work done ([`Compute::Charged`], so that every run gives the same
//! times on any host) or by the node's thread CPU time ([`Compute::ThreadCpu`]). Host wall time
//! never enters, so 100 emulated nodes on 2 cores report what 100 nodes would see.
//!
//! Runs are remembered for the life of the process: `table1` and `fig4` share their 1 Gbit/s
//! runs when they run together.
//!
//! Data order. The training records are stored sorted (regression samples by label, user rows
//! by their mean rating), as data collected by category or over time often is, and every run
//! starts from the partition of the data into contiguous blocks in that order. Shuffling
//! policies mix the blocks from the first epoch on; "no shuffling" (the local policy) keeps
//! them, so its workers train on biased samples, the situation shuffling is meant to cure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use ubershuffle_codes::Records;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;
use ubershuffle_learners::MatrixCompletionParams;
use ubershuffle_learners::data::synthetic::{linear_regression, low_rank};
use ubershuffle_learners::sample::{RatingRowView, SampleView};
use ubershuffle_runtime::in_process::{InProcessRun, run_in_process_from};
use ubershuffle_runtime::spec::{GivenData, RunSpec};
use ubershuffle_runtime::{CostModel, LearnerSpec, PreparedRun, RunData, RunReport};
use ubershuffle_transport::in_process::{ComputeTime, InProcessConfig, LinkShaping};

/// Largest payload of one data message (a broadcast chunk or a point-to-point message).
const CHUNK_BYTES: usize = 1 << 20;

/// A scaled-down setup of the UberShuffle paper's Table 1.
pub(crate) struct Setup {
    /// Its row in the paper's Table 1: "(a)" or "(d)".
    pub row: &'static str,
    /// Short name for tables and file names ("mc", "lr").
    pub key: &'static str,
    /// What the workers train, in words.
    pub learner_name: &'static str,
    /// What the workers train.
    pub learner: LearnerSpec,
    /// Training and held-out records.
    pub data: Arc<RunData>,
    /// Workers `n`.
    pub workers: usize,
    /// Storage ratio `alpha`.
    pub alpha: f64,
    /// The width the record stands for, in words ("m = 100 ratings").
    pub width_note: String,
}

impl Setup {
    /// Data points `q`.
    pub fn points(&self) -> usize {
        self.data.train.len()
    }

    /// Bytes per data point (a learner's records are all of one width).
    pub fn record_bytes(&self) -> usize {
        self.data.train.fixed().map_or(0, |r| r.width())
    }
}

/// Matrix completion on a synthetic rank-`rank` matrix with `users` rows (the data points, one
/// row of `per_row` observed ratings each, as in the paper) and `items` columns; 4 more ratings
/// per row are held out for the loss.
pub(crate) fn matrix_completion(
    users: usize,
    items: usize,
    per_row: usize,
    workers: usize,
    alpha: f64,
    seed: u64,
) -> anyhow::Result<Setup> {
    const HELD_OUT_PER_ROW: usize = 4;
    const RANK: usize = 5;
    let all = low_rank(users, items, RANK, per_row + HELD_OUT_PER_ROW, 0.05, seed)?;
    let (train, held) = all.split_within_rows(HELD_OUT_PER_ROW, seed + 1);
    let params =
        MatrixCompletionParams::new(users, items, RANK, 0.02).with_regularization(0.001).with_init_scale(0.3);
    Ok(Setup {
        row: "(a)",
        key: "mc",
        learner_name: "matrix completion (synthetic, rank 5)",
        learner: LearnerSpec::MatrixCompletionRows { params, slots: per_row },
        data: Arc::new(RunData {
            train: sorted_by(&train.to_row_records(per_row)?, |r| {
                let v = RatingRowView::new(r, per_row).ok()?;
                Some(v.ratings().map(|x| x.value).sum::<f64>() / v.len().max(1) as f64)
            })?
            .into(),
            held_out: held.to_row_records(per_row)?,
        }),
        workers,
        alpha,
        width_note: format!("m = {per_row} ratings"),
    })
}

/// Linear regression by parallel SGD on `points` synthetic samples of `features` features
/// (plus a held-out tenth for the loss).
pub(crate) fn linear_regression_setup(
    points: usize,
    features: usize,
    workers: usize,
    alpha: f64,
    seed: u64,
) -> anyhow::Result<Setup> {
    linear_regression_stepped(points, features, workers, alpha, seed, 0.002)
}

/// [`linear_regression_setup`] with the local SGD step `step_size`.
pub(crate) fn linear_regression_stepped(
    points: usize,
    features: usize,
    workers: usize,
    alpha: f64,
    seed: u64,
    step_size: f64,
) -> anyhow::Result<Setup> {
    let held = points / 10;
    let (all, _) = linear_regression(points + held, features, 0.1, seed)?;
    let (train, held_out) = all.split(held as f64 / (points + held) as f64, seed + 1);
    Ok(Setup {
        row: "(d)",
        key: "lr",
        learner_name: "linear regression (synthetic, parallel SGD)",
        learner: LearnerSpec::LinearRegression { features, step_size, local_passes: 1 },
        data: Arc::new(RunData {
            train: sorted_by(&train.to_records()?, |r| SampleView::new(r, features).ok().map(|v| v.label()))?
                .into(),
            held_out: held_out.to_records()?,
        }),
        workers,
        alpha,
        width_note: format!("m = {features} features"),
    })
}

/// `records` reordered by increasing `key` (records without a key first).
fn sorted_by(records: &Records, key: impl Fn(&[u8]) -> Option<f64>) -> anyhow::Result<Records> {
    let views = ubershuffle_learners::data::record_views(records);
    let mut order: Vec<(f64, usize)> =
        views.iter().enumerate().map(|(i, r)| (key(r).unwrap_or(f64::NEG_INFINITY), i)).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let bytes: Vec<u8> = order.iter().flat_map(|&(_, i)| views[i].iter().copied()).collect();
    Ok(Records::from_bytes(records.width(), bytes)?)
}

/// The data in storage order cut into `workers` contiguous blocks (the first `q mod n` one
/// point larger).
pub(crate) fn storage_blocks(points: usize, workers: usize) -> Vec<Vec<u32>> {
    let (base, extra) = (points / workers, points % workers);
    let mut start = 0u32;
    (0..workers)
        .map(|w| {
            let len = (base + usize::from(w < extra)) as u32;
            let block = (start..start + len).collect();
            start += len;
            block
        })
        .collect()
}

/// How an emulated cluster counts its nodes' computing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Compute<'a> {
    /// The cost model's price of the work done: identical times in every run.
    Charged(&'a CostModel),
    /// Each node's thread CPU time.
    ThreadCpu,
}

impl Compute<'_> {
    fn name(&self) -> &'static str {
        match self {
            Compute::Charged(_) => ComputeTime::Charged.name(),
            Compute::ThreadCpu => ComputeTime::ThreadCpu.name(),
        }
    }

    /// The mode and, when charged, every price of its model (runs under different prices are
    /// different runs).
    fn key(&self) -> String {
        match self {
            Compute::Charged(model) => {
                let prices: Vec<String> = ubershuffle_runtime::cost_model::prices(model)
                    .iter()
                    .map(|(n, c)| format!("{n}={c}"))
                    .collect();
                format!("{}[{}]", self.name(), prices.join(","))
            }
            Compute::ThreadCpu => self.name().to_string(),
        }
    }
}

/// Where the committed cost model lives, from the workspace root.
pub const COST_MODEL_FILE: &str = "results/cost-model.toml";

/// The committed cost model's path.
pub fn committed_path() -> std::path::PathBuf {
    super::workspace_root().join(COST_MODEL_FILE)
}

/// The committed cost model, which the charged runs price their computing with.
pub fn committed() -> anyhow::Result<CostModel> {
    Ok(ubershuffle_runtime::cost_model::load(&committed_path())?)
}

/// How one run of a [`Setup`] goes (made a runtime [`RunSpec`] by [`run_choosing`]).
pub(crate) struct EpochRun<'a> {
    /// The shuffling scheme (a planner name).
    pub scheme: &'a str,
    /// How batches change between epochs.
    pub policy: ExchangePolicy,
    /// Epochs.
    pub epochs: usize,
    /// Emulated link rate in Gbit/s; `None`: unshaped (real time).
    pub gbit: Option<f64>,
    /// Seed of every random choice of the run.
    pub seed: u64,
    /// How emulated nodes count their computing.
    pub compute: Compute<'a>,
}

/// What identifies a run (for [`run`]'s memory): the setup, the spec, the compute mode.
fn run_key(setup: &Setup, spec: &EpochRun<'_>) -> String {
    format!(
        "{} n={} q={} width={} alpha={} scheme={} policy={}:{} epochs={} gbit={:?} seed={} compute={}",
        setup.key,
        setup.workers,
        setup.points(),
        setup.record_bytes(),
        setup.alpha,
        spec.scheme,
        spec.policy.name(),
        spec.policy.fraction(),
        spec.epochs,
        spec.gbit,
        spec.seed,
        spec.compute.key(),
    )
}

/// Runs already made in this process, by [`run_key`] (charged runs only: they repeat exactly).
fn remembered() -> &'static Mutex<HashMap<String, RunReport>> {
    static RUNS: OnceLock<Mutex<HashMap<String, RunReport>>> = OnceLock::new();
    RUNS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Runs the epoch loop of `setup` as `spec` says, every worker a thread of this process,
/// starting from [`storage_blocks`]. A charged run made before in this process is not made
/// again (it would give the same report).
pub(crate) fn run(setup: &Setup, spec: &EpochRun<'_>) -> anyhow::Result<RunReport> {
    let key = run_key(setup, spec);
    let charged = matches!(spec.compute, Compute::Charged(_));
    if charged && let Some(report) = remembered().lock().ok().and_then(|runs| runs.get(&key).cloned()) {
        return Ok(report);
    }
    let report = run_afresh(setup, spec)?;
    if charged && let Ok(mut runs) = remembered().lock() {
        runs.insert(key, report.clone());
    }
    Ok(report)
}

/// Runs the epoch loop of `setup` as `spec` says, without [`run`]'s memory.
pub(crate) fn run_afresh(setup: &Setup, spec: &EpochRun<'_>) -> anyhow::Result<RunReport> {
    run_choosing(setup, spec, None, Duration::from_secs(2))
}

/// [`run_afresh`], with a pliable scheme choosing every epoch's assignment within `candidates`
/// (`None`: the policy's assignment) and every planner's search budget `budget`.
pub(crate) fn run_choosing(
    setup: &Setup,
    run: &EpochRun<'_>,
    candidates: Option<Randomness>,
    budget: Duration,
) -> anyhow::Result<RunReport> {
    let mut spec = RunSpec::default();
    spec.workers = setup.workers;
    spec.epochs = run.epochs;
    spec.alpha = Some(setup.alpha);
    (spec.policy, spec.fraction) = (run.policy.kind(), run.policy.given_fraction());
    spec.scheme = Some(run.scheme.to_string());
    spec.candidates = candidates;
    spec.seed = run.seed;
    spec.time_budget = Some(budget.as_secs_f64());
    spec.chunk_bytes = CHUNK_BYTES;
    let checked = spec
        .check_given(setup.learner, GivenData::new(Arc::clone(&setup.data)))
        .with_context(|| format!("the {} run of {}", run.scheme, setup.key))?;
    let PreparedRun { planner, mut stragglers, data, .. } = checked.prepare()?;
    let transport = InProcessConfig::default()
        .with_timeout(Duration::from_secs(120))
        .with_shaping(run.gbit.map(LinkShaping::gbit_per_second));
    let mut in_process = InProcessRun::new(&checked.config, planner.as_ref(), stragglers.as_mut(), &data)
        .with_transport(transport);
    if let Compute::Charged(model) = run.compute {
        in_process = in_process.with_cost_model(model.clone());
    }
    let start = storage_blocks(setup.points(), setup.workers);
    let (report, workers) = run_in_process_from(in_process, Some(start), &mut |_| {})
        .with_context(|| format!("{} run of {}", run.scheme, setup.key))?;
    for w in workers {
        w.map_err(|e| anyhow::anyhow!("a worker of the {} run failed: {e}", run.scheme))?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn losses(report: &RunReport) -> Vec<f64> {
        std::iter::once(report.initial_loss).chain(report.epochs.iter().map(|e| e.loss)).collect()
    }

    #[test]
    fn storage_blocks_partition_the_points_in_order() {
        let blocks = storage_blocks(10, 3);
        assert_eq!(blocks, vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
    }

    #[test]
    fn schemes_train_alike_and_coding_sends_less() -> anyhow::Result<()> {
        let setups =
            [linear_regression_setup(600, 8, 4, 0.5, 7)?, matrix_completion(600, 50, 10, 4, 0.5, 7)?];
        for setup in &setups {
            let spec = |scheme| EpochRun {
                scheme,
                policy: ExchangePolicy::Global,
                epochs: 2,
                gbit: None,
                seed: 3,
                compute: Compute::ThreadCpu,
            };
            let uncoded = run(setup, &spec("uncoded"))?;
            let uber = run(setup, &spec("ubershuffle"))?;
            assert_eq!(losses(&uncoded), losses(&uber), "{}: same assignments, same training", setup.key);
            let bytes = |r: &RunReport| r.epochs.iter().map(|e| e.payload_bytes).sum::<u64>();
            assert!(bytes(&uber) < bytes(&uncoded), "{}: coding moves fewer bytes", setup.key);
            assert!(uncoded.epochs.iter().all(|e| e.loss.is_finite()));
        }
        Ok(())
    }

    #[test]
    fn no_shuffling_moves_nothing_and_keeps_the_sorted_blocks() -> anyhow::Result<()> {
        let setup = linear_regression_setup(600, 8, 4, 0.5, 7)?;
        let local = EpochRun {
            scheme: "uncoded",
            policy: ExchangePolicy::Local,
            epochs: 2,
            gbit: None,
            seed: 3,
            compute: Compute::ThreadCpu,
        };
        let report = run(&setup, &local)?;
        assert!(report.epochs.iter().all(|e| e.payload_bytes == 0 && e.uncoded_transmissions == 0));
        // Sorted by label: the first record's label is the smallest.
        let label = |i: usize| {
            setup
                .data
                .train
                .fixed()
                .and_then(|t| t.get(i as u32))
                .and_then(|r| SampleView::new(r, 8).ok())
                .map(|v| v.label())
        };
        assert!(label(0) <= label(setup.points() - 1));
        Ok(())
    }
}
