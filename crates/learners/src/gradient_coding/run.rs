//! An executed gradient-coded gradient descent: one thread per worker, real partial gradients,
//! a wall-clock deadline at the master.
//!
//! Each iteration the master sends every worker the model and its role; the worker computes
//! `sum_j B[role][j] g_j` over its role's partitions (real gradients on the records) and replies
//! with the bytes of that vector. The master takes the replies sent before the deadline,
//! decodes the least-squares combination of the roles it got, and steps
//! `params -= step_size * g_hat / N`.
//!
//! Stragglers: the straggler model decides which workers are late. This machine has no slow
//! hardware, so lateness is **emulated**: a late worker computes its result like the others
//! but holds it back for [`straggler_hold`](crate::straggler::straggler_hold) (twice the
//! deadline; it drops it if the next iteration's request comes first). Its result then really misses the master's deadline and is discarded, never faked.
//! The master waits for every worker the model keeps on time, however long this machine takes
//! (up to [`ON_TIME_SAFETY`](crate::gradient_coding::run::ON_TIME_SAFETY)), so a run's
//! numbers depend on its seed only, not on the host's load; an on-time reply sent after the deadline is counted in
//! [`IterationRecord::unexpected_late`](crate::gradient_coding::run::IterationRecord::unexpected_late)
//! (a machine-dependent figure) and still used.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use ubershuffle_codes::Records;
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_gradient_codes::{Decoding, EncodingMatrix, RoleShuffle, decode_mask};

use super::glm::GlmLoss;
use crate::data::{Dataset, record_views};
use crate::epochs::random_assignment;
use crate::{LearnerError, StragglerModel, Update, UpdateBody};

/// How long the master waits for a worker the straggler model keeps on time before it gives up
/// on the run (a hung worker, not a slow machine).
pub const ON_TIME_SAFETY: Duration = Duration::from_secs(120);

/// What to run.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CodedRunConfig {
    /// The gradient code (`n` = number of worker threads).
    pub code: EncodingMatrix,
    /// How roles move between workers each iteration.
    pub shuffle: RoleShuffle,
    /// Least squares (linear regression) or logistic regression.
    pub loss: GlmLoss,
    /// Gradient steps.
    pub iterations: usize,
    /// Step size on the mean gradient.
    pub step_size: f64,
    /// The master's wall-clock deadline per iteration.
    pub deadline: Duration,
    /// Seed of the partitioning, the roles and the straggler draws.
    pub seed: u64,
}

impl CodedRunConfig {
    /// `iterations` steps of `step_size` with `code` on `loss`: roles not shuffled, a deadline
    /// of 10 ms per iteration, seed 0, unless set otherwise.
    pub fn new(code: EncodingMatrix, loss: GlmLoss, iterations: usize, step_size: f64) -> Self {
        CodedRunConfig {
            code,
            shuffle: RoleShuffle::None,
            loss,
            iterations,
            step_size,
            deadline: Duration::from_millis(10),
            seed: 0,
        }
    }

    /// Moves roles between workers by `shuffle` every iteration.
    pub fn with_shuffle(mut self, shuffle: RoleShuffle) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The master waits `deadline` per iteration.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Draws the partitioning, the roles and the stragglers from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// One iteration's measurements (iteration 0 is the initial model, before any step).
#[derive(Clone, Debug, PartialEq)]
pub struct IterationRecord {
    /// The iteration.
    pub iteration: usize,
    /// Mean loss over the training data after the step.
    pub train_loss: f64,
    /// Mean loss over the held-out data after the step.
    pub held_out_loss: f64,
    /// The decoding error `||B_S^T a - 1||^2` of the roles received.
    pub decoding_error: f64,
    /// Workers the straggler model made late.
    pub late_by_model: usize,
    /// Workers whose reply arrived in time.
    pub received: usize,
    /// Workers the model left on time whose reply was sent after the deadline (this machine
    /// was slow); their results are used all the same.
    pub unexpected_late: usize,
}

/// A finished run.
#[derive(Clone, Debug, PartialEq)]
pub struct CodedRunTrace {
    /// The final parameters `[w..., b]`.
    pub params: Vec<f64>,
    /// Iterations 0..=iterations.
    pub history: Vec<IterationRecord>,
}

enum Command {
    Compute { iteration: usize, role: usize, params: Arc<Vec<f64>>, late: bool },
    Stop,
}

struct Reply {
    iteration: usize,
    worker: usize,
    /// When the worker sent it: the master drops results sent after its deadline, even if
    /// it reads them late itself (a descheduled master must not accept late results).
    sent: Instant,
    bytes: Vec<u8>,
}

/// Shared, read-only state of the workers: the records, the partitions, the code.
struct SharedData {
    records: Records,
    partitions: Vec<Vec<u32>>,
    code: EncodingMatrix,
    loss: GlmLoss,
}

impl SharedData {
    fn coded_gradient(&self, role: usize, params: &[f64]) -> Result<Vec<f64>, LearnerError> {
        let mut out = vec![0.0; params.len()];
        for (partition, coefficient) in self.code.support(role) {
            let views: Vec<&[u8]> =
                self.partitions[partition].iter().filter_map(|&p| self.records.get(p)).collect();
            let g = self.loss.gradient_sum(params, &views)?;
            for (o, v) in out.iter_mut().zip(g) {
                *o += coefficient * v;
            }
        }
        Ok(out)
    }
}

fn worker_loop(
    worker: usize,
    data: Arc<SharedData>,
    commands: Receiver<Command>,
    replies: Sender<Reply>,
    hold: Duration,
) {
    let mut pending = None;
    loop {
        let command = match pending.take() {
            Some(c) => c,
            None => match commands.recv() {
                Ok(c) => c,
                Err(_) => return,
            },
        };
        let Command::Compute { iteration, role, params, late } = command else { return };
        let bytes = match data.coded_gradient(role, &params) {
            Ok(g) => Update { points: 0, body: UpdateBody::Dense(g) }.to_bytes(),
            Err(_) => Vec::new(), // the master rejects an empty reply as malformed
        };
        if late {
            // Emulated slowness: hold the result past the deadline, unless the next request comes.
            match commands.recv_timeout(hold) {
                Ok(next) => {
                    pending = Some(next);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        if replies.send(Reply { iteration, worker, sent: Instant::now(), bytes }).is_err() {
            return;
        }
    }
}

/// Runs gradient-coded GD on `train` with one thread per worker; losses are measured on
/// `train` and `held_out` after every step.
pub fn run_coded_gd(
    config: &CodedRunConfig,
    train: &Dataset,
    held_out: &Dataset,
    stragglers: &mut dyn StragglerModel,
) -> Result<CodedRunTrace, LearnerError> {
    let n = config.code.workers();
    if stragglers.workers() != n {
        return Err(LearnerError::InvalidParameter(format!(
            "the code has {n} workers, the straggler model {}",
            stragglers.workers()
        )));
    }
    if train.len() < n
        || !(config.step_size > 0.0 && config.step_size.is_finite())
        || config.deadline.is_zero()
    {
        return Err(LearnerError::InvalidParameter(format!(
            "need at least {n} training samples, a positive step size and deadline"
        )));
    }
    let records = train.to_records()?;
    let held_records = held_out.to_records()?;
    let partitions = random_assignment(records.len(), n, &mut seeded_stream(config.seed, 20));
    let data = Arc::new(SharedData { records, partitions, code: config.code.clone(), loss: config.loss });
    let (reply_tx, reply_rx) = mpsc::channel();
    let mut command_txs = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for worker in 0..n {
        let (tx, rx) = mpsc::channel();
        command_txs.push(tx);
        let (data, reply_tx) = (Arc::clone(&data), reply_tx.clone());
        let hold = crate::straggler::straggler_hold(config.deadline);
        handles.push(
            thread::Builder::new()
                .name(format!("gc-worker-{worker}"))
                .spawn(move || worker_loop(worker, data, rx, reply_tx, hold))
                .map_err(|e| LearnerError::Worker(e.to_string()))?,
        );
    }
    drop(reply_tx);
    let result = master_loop(config, &data, &held_records, stragglers, &command_txs, &reply_rx);
    for tx in &command_txs {
        let _ = tx.send(Command::Stop);
    }
    for h in handles {
        h.join().map_err(|_| LearnerError::Worker("a worker thread panicked".into()))?;
    }
    result
}

fn master_loop(
    config: &CodedRunConfig,
    data: &SharedData,
    held_records: &Records,
    stragglers: &mut dyn StragglerModel,
    command_txs: &[Sender<Command>],
    replies: &Receiver<Reply>,
) -> Result<CodedRunTrace, LearnerError> {
    let n = config.code.workers();
    let train_views = record_views(&data.records);
    let held_views = record_views(held_records);
    let dim = data.records.width() / 8;
    let mut params = vec![0.0; dim];
    let mut straggler_rng = seeded_stream(config.seed, 21);
    let mut role_rng = seeded_stream(config.seed, 22);
    let mut decodings: HashMap<u64, Decoding> = HashMap::new();
    let points = train_views.len() as f64;
    let mut history = vec![IterationRecord {
        iteration: 0,
        train_loss: config.loss.mean_loss(&params, &train_views)?,
        held_out_loss: config.loss.mean_loss(&params, &held_views)?,
        decoding_error: 0.0,
        late_by_model: 0,
        received: 0,
        unexpected_late: 0,
    }];
    for iteration in 1..=config.iterations {
        let outcome = stragglers.next_iteration(&mut straggler_rng);
        let roles = config.shuffle.roles(n, iteration, &mut role_rng);
        let shared = Arc::new(params.clone());
        // The deadline runs from the moment the master starts sending.
        let closes = Instant::now() + config.deadline;
        for (w, tx) in command_txs.iter().enumerate() {
            let command = Command::Compute {
                iteration,
                role: roles[w],
                params: Arc::clone(&shared),
                late: outcome.is_late(w),
            };
            tx.send(command).map_err(|_| LearnerError::Worker(format!("worker {w} stopped")))?;
        }
        let mut gradients: Vec<Option<Vec<f64>>> = vec![None; n];
        let mut waiting = (0..n).filter(|&w| !outcome.is_late(w)).count();
        let mut unexpected_late = 0;
        while waiting > 0 {
            let reply = match replies.recv_timeout(ON_TIME_SAFETY) {
                Ok(reply) => reply,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(LearnerError::Worker(format!(
                        "an on-time worker sent nothing within {} s",
                        ON_TIME_SAFETY.as_secs()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(LearnerError::Worker("all workers stopped".into()));
                }
            };
            // Late workers' results, and those of earlier iterations, are dropped.
            if reply.iteration != iteration
                || outcome.is_late(reply.worker)
                || gradients[reply.worker].is_some()
            {
                continue;
            }
            gradients[reply.worker] = Some(dense_gradient(&reply.bytes, dim)?);
            unexpected_late += usize::from(reply.sent > closes);
            waiting -= 1;
        }
        let received = gradients.iter().filter(|g| g.is_some()).count();
        let mask = gradients
            .iter()
            .enumerate()
            .filter(|(_, g)| g.is_some())
            .fold(0u64, |m, (w, _)| m | 1 << roles[w]);
        let decoding = decodings.entry(mask).or_insert_with(|| decode_mask(&config.code, mask));
        let mut estimate = vec![0.0; dim];
        for (w, g) in gradients.iter().enumerate() {
            if let Some(g) = g {
                let a = decoding.coefficients[roles[w]];
                for (e, v) in estimate.iter_mut().zip(g) {
                    *e += a * v;
                }
            }
        }
        for (p, e) in params.iter_mut().zip(&estimate) {
            *p -= config.step_size * e / points;
        }
        history.push(IterationRecord {
            iteration,
            train_loss: config.loss.mean_loss(&params, &train_views)?,
            held_out_loss: config.loss.mean_loss(&params, &held_views)?,
            decoding_error: decoding.error,
            late_by_model: outcome.late_count(),
            received,
            unexpected_late,
        });
    }
    Ok(CodedRunTrace { params, history })
}

/// The gradient in a worker's reply, checked to have `dim` values.
fn dense_gradient(bytes: &[u8], dim: usize) -> Result<Vec<f64>, LearnerError> {
    let UpdateBody::Dense(g) = Update::from_bytes(bytes)?.body else {
        return Err(LearnerError::Malformed { what: "update", reason: "expected a gradient".into() });
    };
    if g.len() != dim {
        return Err(LearnerError::Malformed {
            what: "update",
            reason: format!("gradient of {} values", g.len()),
        });
    }
    Ok(g)
}
