//! Executed gradient-coded descent on the master/worker runtime (an emulated cluster of
//! threads), with and without shuffled worker roles.
//!
//! Deadlines are judged on the emulated clocks (computing charged by a cost model), so exactly
//! the workers the straggler model makes late miss the master's deadline, and the losses and
//! decoding errors are determined by the seed. Workers the model kept on time that missed the
//! deadline all the same are reported as a machine column (none on the emulated cluster).

use std::time::Duration;

use serde::Serialize;
use ubershuffle_core::rng::{SeededRng, partial_shuffle, seeded_stream};
use ubershuffle_gradient_codes::{EncodingMatrix, RoleShuffle};
use ubershuffle_learners::data::shipped::ShippedTask;
use ubershuffle_learners::data::{Dataset, record_views};
use ubershuffle_learners::gradient_coding::glm::GlmLoss;
use ubershuffle_learners::gradient_coding::learner::CodedDescentParams;
use ubershuffle_learners::straggler::HeterogeneousStragglers;
use ubershuffle_learners::{IterationOutcome, StragglerModel};
use ubershuffle_runtime::gradient_coding::{coded_job, decoding_errors, run_coded_emulated};

use super::{N, NAME, PAPER, S, Sizes};
use crate::experiments::Context;
use crate::report::{LineChart, Row, Series, markdown_table};

/// The tasks: data, loss, step size.
const TASKS: [(ShippedTask, GlmLoss, f64); 2] = [
    (ShippedTask::DiabetesRegression, GlmLoss::LeastSquares, 0.3),
    (ShippedTask::IrisVirginica, GlmLoss::Logistic, 4.0),
];
/// The fraction of each data set held out.
const HELD_OUT: f64 = 0.2;
/// The master's deadline per iteration.
const DEADLINE: Duration = Duration::from_millis(5);
/// Slow workers of the (n, m) model.
const SLOW_COUNT: usize = 2;
/// The excess loss is averaged over this many last iterations.
const TAIL: usize = 20;
/// Every how many iterations the loss table keeps a point (every one: the figures are drawn
/// from the table and show single-iteration spikes).
const LOSS_STEP: usize = 1;
/// The code of the full-gradient rows of the loss table.
const FULL_GRADIENT: &str = "full-gradient";
/// The seed whose runs the figures show.
const CHART_SEED: u64 = 1;
/// Excess losses below this are rounding (the run matched full-gradient descent so far) and
/// are left out of the log-scale loss figures (the CSV keeps the losses themselves).
const VISIBLE_EXCESS: f64 = 1e-7;

/// One executed run.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Executed {
    task: &'static str,
    code: &'static str,
    replication: usize,
    shuffle: &'static str,
    seed: u64,
    slow_workers: String,
    excess_loss: f64,
    mean_decoding_error: f64,
    held_out_loss: f64,
    unexpected_late: usize,
}

impl Row for Executed {
    const MACHINE_COLUMNS: &'static [&'static str] = &["unexpected_late"];
}

/// The training loss every [`LOSS_STEP`] iterations: full-gradient descent (no shuffle, no
/// seed) and every code and shuffle of [`CHART_SEED`].
#[derive(Clone, Debug, Serialize)]
pub(super) struct Loss {
    task: &'static str,
    code: &'static str,
    shuffle: &'static str,
    seed: Option<u64>,
    iteration: usize,
    train_loss: f64,
}

impl Row for Loss {}

/// Runs every task, code, shuffle and seed.
pub(super) fn measure(ctx: &Context, sizes: Sizes) -> anyhow::Result<(Vec<Executed>, Vec<Loss>)> {
    let codes = [EncodingMatrix::uncoded(N)?, EncodingMatrix::frc(N, S)?, EncodingMatrix::crc(N, S)?];
    let steps = TASKS.len() * codes.len() * RoleShuffle::ALL.len() * sizes.seeds as usize;
    let bar = ctx.progress(steps as u64, NAME);
    let (mut runs, mut losses) = (Vec::new(), Vec::new());
    for (task, loss, step) in TASKS {
        let (train, held) = task.prepare(HELD_OUT, 1)?;
        let full = full_gradient_curve(loss, &train, step, sizes.iterations)?;
        losses.extend(full.iter().enumerate().step_by(LOSS_STEP).map(|(iteration, &train_loss)| Loss {
            task: task.name(),
            code: FULL_GRADIENT,
            shuffle: "",
            seed: None,
            iteration,
            train_loss,
        }));
        for b in &codes {
            for shuffle in RoleShuffle::ALL {
                for seed in 1..=sizes.seeds {
                    let params = CodedDescentParams::new(
                        train.features(),
                        loss,
                        b.kind(),
                        (b.workers(), b.replication()),
                        step,
                        train.len(),
                    )
                    .with_shuffle(shuffle)
                    .with_seed(seed);
                    let (run, history) = run_once(task, &params, sizes.iterations, (&train, &held), &full)?;
                    if seed == CHART_SEED {
                        losses.extend(history.iter().step_by(LOSS_STEP).map(|r| Loss {
                            task: task.name(),
                            code: b.kind().name(),
                            shuffle: shuffle.name(),
                            seed: Some(seed),
                            iteration: r.iteration,
                            train_loss: r.train_loss,
                        }));
                    }
                    runs.push(run);
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    Ok((runs, losses))
}

/// The full-gradient trajectory: train loss after 0..=iterations steps.
fn full_gradient_curve(
    loss: GlmLoss,
    train: &Dataset,
    step: f64,
    iterations: usize,
) -> anyhow::Result<Vec<f64>> {
    let records = train.to_records()?;
    let views = record_views(&records);
    let mut params = vec![0.0; train.features() + 1];
    let mut curve = vec![loss.mean_loss(&params, &views)?];
    let n = views.len() as f64;
    for _ in 0..iterations {
        let g = loss.gradient_sum(&params, &views)?;
        for (p, gi) in params.iter_mut().zip(g) {
            *p -= step * gi / n;
        }
        curve.push(loss.mean_loss(&params, &views)?);
    }
    Ok(curve)
}

/// One iteration of an executed run (iteration 0: the initial model).
struct IterationRecord {
    iteration: usize,
    train_loss: f64,
    decoding_error: f64,
    /// Workers the model kept on time that missed the deadline all the same.
    unexpected_late: usize,
}

/// A straggler model drawing from a stream of its own (the one the thread engine before the
/// runtime used, so that the committed runs carry over) and counting the late workers it drew.
struct OwnStream {
    model: HeterogeneousStragglers,
    rng: SeededRng,
    late: Vec<usize>,
}

impl StragglerModel for OwnStream {
    fn name(&self) -> &'static str {
        self.model.name()
    }

    fn workers(&self) -> usize {
        self.model.workers()
    }

    fn next_iteration(&mut self, _: &mut SeededRng) -> IterationOutcome {
        let outcome = self.model.next_iteration(&mut self.rng);
        self.late.push(outcome.late_count());
        outcome
    }
}

/// One run of `params` for `iterations` steps with [`SLOW_COUNT`] slow workers placed by its
/// seed, on `(train, held)`.
fn run_once(
    task: ShippedTask,
    params: &CodedDescentParams,
    iterations: usize,
    (train, held): (&Dataset, &Dataset),
    full: &[f64],
) -> anyhow::Result<(Executed, Vec<IterationRecord>)> {
    let seed = params.seed;
    let mut workers: Vec<usize> = (0..N).collect();
    partial_shuffle(&mut seeded_stream(seed, 30), &mut workers, SLOW_COUNT);
    let slow = &workers[..SLOW_COUNT];
    let model = HeterogeneousStragglers::with_slow_workers(N, slow, PAPER)?;
    let mut stragglers = OwnStream { model, rng: seeded_stream(seed, 21), late: Vec::new() };
    let records = train.to_records()?;
    // The loss is measured on the training data every iteration (the excess loss's).
    let job = coded_job(*params, iterations, DEADLINE, &records, &records)?;
    let planner = crate::experiments::planner("uncoded", &Default::default())?;
    let report = run_coded_emulated(&job, planner.as_ref(), &mut stragglers, &mut |_| {})?;
    let errors = decoding_errors(&job.learner, &report.epochs);
    let mut h = vec![IterationRecord {
        iteration: 0,
        train_loss: report.initial_loss,
        decoding_error: 0.0,
        unexpected_late: 0,
    }];
    for ((m, error), late) in report.epochs.iter().zip(errors).zip(&stragglers.late) {
        h.push(IterationRecord {
            iteration: m.epoch,
            train_loss: m.loss,
            decoding_error: error,
            unexpected_late: m.stragglers.saturating_sub(*late),
        });
    }
    let held_records = held.to_records()?;
    let held_out_loss = params.loss.mean_loss(&report.model.params, &record_views(&held_records))?;
    let tail = &h[iterations + 1 - TAIL..];
    let mut slow_sorted = slow.to_vec();
    slow_sorted.sort_unstable();
    let run = Executed {
        task: task.name(),
        code: params.code.name(),
        replication: job.learner.code().replication(),
        shuffle: params.shuffle.name(),
        seed,
        slow_workers: slow_sorted.iter().map(usize::to_string).collect::<Vec<_>>().join(" "),
        excess_loss: tail.iter().map(|r| r.train_loss - full[r.iteration]).sum::<f64>() / TAIL as f64,
        mean_decoding_error: h[1..].iter().map(|r| r.decoding_error).sum::<f64>() / iterations as f64,
        held_out_loss,
        unexpected_late: h.iter().map(|r| r.unexpected_late).sum(),
    };
    Ok((run, h))
}

/// One chart per task: the excess loss of [`CHART_SEED`]'s runs without and with random
/// shuffling, from the loss table.
pub(super) fn charts(losses: &[Loss]) -> Vec<(String, LineChart)> {
    TASKS
        .iter()
        .map(|&(task, _, _)| {
            let of_task: Vec<&Loss> = losses.iter().filter(|r| r.task == task.name()).collect();
            let full = |iteration: usize| {
                of_task
                    .iter()
                    .find(|r| r.code == FULL_GRADIENT && r.iteration == iteration)
                    .map(|r| r.train_loss)
            };
            let mut series = Vec::new();
            for code in ["uncoded", "frc", "crc"] {
                for shuffle in [RoleShuffle::None, RoleShuffle::Random] {
                    let points: Vec<(f64, f64)> = of_task
                        .iter()
                        .filter(|r| r.code == code && r.shuffle == shuffle.name())
                        .filter_map(|r| Some((r.iteration as f64, r.train_loss - full(r.iteration)?)))
                        .filter(|&(_, excess)| excess >= VISIBLE_EXCESS)
                        .collect();
                    let name = format!("{code} {}", shuffle.name());
                    let dashed = shuffle == RoleShuffle::None;
                    series.push(if dashed {
                        Series::dashed(name, points)
                    } else {
                        Series::solid(name, points)
                    });
                }
            }
            let chart = LineChart {
                title: format!(
                    "{}: excess training loss over full-gradient descent (seed {CHART_SEED})",
                    task.name()
                ),
                x_label: "iteration".into(),
                y_label: format!("training loss - full-gradient loss (>= {VISIBLE_EXCESS:.0e} shown)"),
                log_y: true,
                series,
                ..Default::default()
            };
            (task.name().to_string(), chart)
        })
        .collect()
}

/// The mean over seeds of `value` at (task, code, shuffle).
fn mean_over_seeds(
    runs: &[Executed],
    task: &str,
    code: &str,
    shuffle: RoleShuffle,
    value: fn(&Executed) -> f64,
) -> f64 {
    let chosen: Vec<f64> = runs
        .iter()
        .filter(|r| r.task == task && r.code == code && r.shuffle == shuffle.name())
        .map(value)
        .collect();
    chosen.iter().sum::<f64>() / chosen.len() as f64
}

pub(super) fn section(runs: &[Executed], sizes: Sizes) -> String {
    let mut pairs: Vec<(&str, &str)> = runs.iter().map(|r| (r.task, r.code)).collect();
    pairs.dedup();
    let table = pairs.iter().map(|&(task, code)| {
        let excess = RoleShuffle::ALL
            .map(|s| format!("{:.2e}", mean_over_seeds(runs, task, code, s, |r| r.excess_loss)));
        let error = RoleShuffle::ALL
            .map(|s| format!("{:.3}", mean_over_seeds(runs, task, code, s, |r| r.mean_decoding_error)));
        [task.to_string(), code.to_string()]
            .into_iter()
            .chain(excess)
            .chain([error.join(" / ")])
            .collect::<Vec<_>>()
    });
    let header = ["task", "code", "none", "cyclic", "random", "mean decoding error (none / cyclic / random)"];
    format!(
        "\n### Executed gradient-coded descent ({N} workers on the runtime, s = {S})\n\n{}\n{}\n{}\n\n{}\n",
        setup(sizes),
        markdown_table(&header, table),
        comparison(runs, &pairs),
        repetitions(runs, sizes),
    )
}

fn setup(sizes: Sizes) -> String {
    let [(t1, _, step1), (t2, _, step2)] = TASKS;
    format!(
        "Real runs on the master/worker runtime (the learner `CodedDescent`, the epoch loop every learner runs; here \
         an emulated cluster of {N} worker threads, 1 Gbit/s links, computing charged by a cost model, so that deadlines \
         are judged on emulated clocks): each worker computes real partial gradients of the role it plays, the master \
         waits {} ms for the coded gradients once every worker holds its role's data, and decodes the roles it heard \
         from. The straggler model is the (n, m) heterogeneous model with m = {SLOW_COUNT} slow workers at a placement \
         drawn from the seed (p_ss = {}, p_as = {}); a late worker holds its result past the deadline (emulated \
         slowness: this machine has no slow nodes) and the master drops it. Shuffled roles move whole role blocks \
         between the workers, delivered by the runtime (uncoded scheme). Linear regression on the diabetes data ({}, \
         least squares, step {step1}) and logistic regression on iris ({}, virginica or not, step {step2}), {:.0} % of \
         each for training. Excess loss = training loss minus that of plain full-gradient descent after the same \
         number of steps, averaged over the last {TAIL} of {} iterations and over {} seeds (placements):\n",
        DEADLINE.as_millis(),
        PAPER.p_slow_straggle,
        PAPER.p_active_straggle,
        t1.name(),
        t2.name(),
        100.0 * (1.0 - HELD_OUT),
        sizes.iterations,
        sizes.seeds,
    )
}

/// How often shuffling lowered the excess loss, on average and run by run.
fn comparison(runs: &[Executed], pairs: &[(&str, &str)]) -> String {
    let lower = |s: RoleShuffle| {
        let excess = |task, code, shuffle| mean_over_seeds(runs, task, code, shuffle, |r| r.excess_loss);
        pairs
            .iter()
            .filter(|&&(task, code)| excess(task, code, s) < excess(task, code, RoleShuffle::None))
            .count()
    };
    let single: Vec<(&Executed, &Executed)> = runs
        .iter()
        .filter(|r| r.shuffle == RoleShuffle::None.name())
        .filter_map(|none| {
            let random = runs.iter().find(|r| {
                r.shuffle == RoleShuffle::Random.name()
                    && (r.task, r.code, r.seed) == (none.task, none.code, none.seed)
            })?;
            Some((none, random))
        })
        .collect();
    let none_better = single.iter().filter(|(none, random)| none.excess_loss < random.excess_loss).count();
    format!(
        "Averaged over the placements, random shuffling gives a lower excess loss than no shuffling for {} of {} \
         (task, code) pairs, cyclic shuffling for {}. Run by run (one task, code and placement), no shuffling ends \
         lower than random shuffling in {none_better} of {} runs: a placement that puts the slow workers on \
         different partitions (e.g. different FRC groups) loses little without shuffling. Per-seed values are in \
         [`{NAME}-executed.csv`]({NAME}-executed.csv).",
        lower(RoleShuffle::Random),
        pairs.len(),
        lower(RoleShuffle::Cyclic),
        single.len(),
    )
}

/// How often workers the model kept on time missed the deadline all the same (a machine figure:
/// none on the emulated cluster).
fn repetitions(runs: &[Executed], sizes: Sizes) -> String {
    let late: usize = runs.iter().map(|r| r.unexpected_late).sum();
    let worker_iterations = runs.len() * sizes.iterations * N;
    format!(
        "Workers the straggler model kept on time that missed the {} ms deadline all the same (dropped; none on \
         the emulated cluster, where only the model's late workers miss it): {late} of {worker_iterations}.",
        DEADLINE.as_millis(),
    )
}
