//! An in-process reference of the master/worker epoch loop for any [`Learner`]: every epoch
//! the master draws a fresh balanced random assignment of the training records to the workers
//! (the data shuffle), each worker that the straggler model lets finish trains on its batch,
//! the master aggregates the updates that arrived and measures the held-out loss.
//!
//! This runs the workers one after the other in one thread and passes models and updates
//! through their byte forms, exactly as the runtime's loop will over a transport; it exists so
//! that learners can be tested and compared epoch by epoch without a network.

use ubershuffle_codes::Records;
use ubershuffle_core::rng::{seeded_stream, shuffle};

use crate::data::record_views;
use crate::{Learner, LearnerError, LocalStep, Model, StragglerModel, Update};

/// One epoch's measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochRecord {
    /// The epoch, from 1 (epoch 0 is the initial model).
    pub epoch: usize,
    /// The learner's loss on the held-out records after the epoch.
    pub held_out_loss: f64,
    /// Workers whose update was dropped this epoch.
    pub stragglers: usize,
}

/// Options of [`train_by_epochs`]: build with [`EpochOptions::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EpochOptions {
    /// Number of workers.
    pub workers: usize,
    /// Number of epochs.
    pub epochs: usize,
    /// Seed of the initial model, the assignments, the local SGD orders and the stragglers.
    pub seed: u64,
}

impl EpochOptions {
    /// `epochs` epochs over `workers` workers, every random choice drawn from `seed`.
    pub fn new(workers: usize, epochs: usize, seed: u64) -> Self {
        EpochOptions { workers, epochs, seed }
    }
}

/// The balanced random assignment of records `0..points` to `workers` batches for one epoch
/// (the first `points mod workers` batches get one more).
pub fn random_assignment(
    points: usize,
    workers: usize,
    rng: &mut ubershuffle_core::rng::SeededRng,
) -> Vec<Vec<u32>> {
    let mut ids: Vec<u32> = (0..points as u32).collect();
    shuffle(rng, &mut ids);
    let (base, extra) = (points / workers.max(1), points % workers.max(1));
    let mut batches = Vec::with_capacity(workers);
    let mut start = 0;
    for w in 0..workers {
        let len = base + usize::from(w < extra);
        batches.push(ids[start..start + len].to_vec());
        start += len;
    }
    batches
}

/// Trains `learner` for `options.epochs` epochs; returns the held-out loss of the initial
/// model (epoch 0) and after every epoch.
pub fn train_by_epochs(
    learner: &dyn Learner,
    train: &Records,
    held_out: &Records,
    options: EpochOptions,
    stragglers: &mut dyn StragglerModel,
) -> Result<Vec<EpochRecord>, LearnerError> {
    if options.workers == 0 || stragglers.workers() != options.workers {
        return Err(LearnerError::InvalidParameter(format!(
            "{} workers, the straggler model has {}",
            options.workers,
            stragglers.workers()
        )));
    }
    for (name, r) in [("training", train), ("held-out", held_out)] {
        if r.width() != learner.record_width() {
            return Err(LearnerError::InvalidParameter(format!(
                "{name} records are {} bytes, the learner's are {}",
                r.width(),
                learner.record_width()
            )));
        }
    }
    let held_out_views = record_views(held_out);
    let mut assignment_rng = seeded_stream(options.seed, 10);
    let mut straggler_rng = seeded_stream(options.seed, 11);
    let mut model = learner.initial_model(options.seed);
    let mut history =
        vec![EpochRecord { epoch: 0, held_out_loss: learner.loss(&model, &held_out_views)?, stragglers: 0 }];
    for epoch in 1..=options.epochs {
        let batches = random_assignment(train.len(), options.workers, &mut assignment_rng);
        let outcome = stragglers.next_iteration(&mut straggler_rng);
        let model_bytes = model.to_bytes();
        let mut updates = Vec::new();
        for (worker, batch) in batches.iter().enumerate() {
            if outcome.is_late(worker) {
                continue;
            }
            let worker_model = Model::from_bytes(&model_bytes, learner.parameter_count())?;
            let records: Vec<&[u8]> = batch.iter().filter_map(|&p| train.get(p)).collect();
            let step = LocalStep { epoch, worker, seed: options.seed };
            let update = learner.local_update(&worker_model, &records, step)?;
            updates.push(Update::from_bytes(&update.to_bytes())?);
        }
        model = learner.aggregate(&model, &updates)?;
        history.push(EpochRecord {
            epoch,
            held_out_loss: learner.loss(&model, &held_out_views)?,
            stragglers: outcome.late_count(),
        });
    }
    Ok(history)
}
