//! [`CodedDescent`]: gradient-coded gradient descent as a [`Learner`] of the master/worker
//! runtime, so that it runs over every transport (threads, TCP processes, MPI ranks).
//!
//! **Roles are data.** The training set of `q` samples is split into `n` partitions
//! ([`random_assignment`] from the seed's stream 20: the first `q mod n` get one more). The
//! runtime's data set is the *role-expanded* one ([`RoleData`]): for every role `i` (row `i` of
//! the encoding matrix `B`) and every partition `j` of its support, in order, a copy of
//! partition `j`'s samples, each record tagged with `j` and `B[i][j]` ([`ROLE_PREFIX`] bytes
//! before the sample). Role `i`'s records form the contiguous block [`RoleData::blocks`]`[i]`,
//! so about `s q` records in all (`s` = replication): the redundant storage gradient coding
//! costs. Blocks are padded to the largest one's size with [`PADDING`] records (coefficient 0,
//! skipped), since the runtime's assignments are balanced.
//!
//! A worker's batch is the block of the role it plays; its update is `sum_j B[i][j] g_j`,
//! computed from the tags alone (it does not need to know its role). The learner dictates the
//! assignment ([`Learner::assignment`]): in epoch `t` worker `w` holds the block of role
//! `roles_t[w]` ([`RoleShuffle`], drawn from the seed's stream 22), so shuffling the roles moves
//! whole blocks between workers, which the runtime delivers by its shuffling scheme like any
//! other exchange. The master decodes the least-squares combination of the roles of the
//! workers it heard from ([`Learner::aggregate_received`]) and steps
//! `params -= step_size * g_hat / q`.

use ubershuffle_codes::Records;
use ubershuffle_core::rng::{SeededRng, seeded_stream};
use ubershuffle_gradient_codes::{Decoding, EncodingMatrix, GradientCodeKind, RoleShuffle, decode_mask};

use super::glm::GlmLoss;
use crate::epochs::random_assignment;
use crate::learner::{Received, check_model};
use crate::sample::sample_width;
use crate::{Learner, LearnerError, LocalStep, MAX_PARAMETERS, Model, Update, UpdateBody};

/// Bytes before the sample in a role record: the partition (`u32`), 4 zero bytes, the
/// coefficient (`f64`), little endian.
pub const ROLE_PREFIX: usize = 16;

/// The partition tag of a padding record (which every worker skips).
pub const PADDING: u32 = u32::MAX;

/// The seed stream of the partitioning.
const STREAM_PARTITIONS: u64 = 20;
/// The seed stream of the role shuffle.
const STREAM_ROLES: u64 = 22;
/// The seed stream of a real-valued code's coefficients (as `ubershuffle gradient-coding`).
const STREAM_CODE: u64 = 1;

/// What a gradient-coded descent runs: the code, the shuffle, the loss and the step.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct CodedDescentParams {
    /// Input features per sample.
    pub features: usize,
    /// Least squares or logistic.
    pub loss: GlmLoss,
    /// The gradient code.
    pub code: GradientCodeKind,
    /// Workers `n` (= roles = partitions).
    pub workers: usize,
    /// Partitions per role `s`.
    pub replication: usize,
    /// How roles move between workers each epoch.
    pub shuffle: RoleShuffle,
    /// Step size on the mean gradient.
    pub step_size: f64,
    /// Training samples `q` (before the role expansion).
    pub samples: usize,
    /// Seed of the partitioning, the roles and a real-valued code's coefficients.
    pub seed: u64,
}

impl CodedDescentParams {
    /// `code` on `workers` workers with replication `replication` for `loss` on `samples`
    /// samples of `features` features: roles not shuffled, seed 0.
    pub fn new(
        features: usize,
        loss: GlmLoss,
        code: GradientCodeKind,
        (workers, replication): (usize, usize),
        step_size: f64,
        samples: usize,
    ) -> Self {
        CodedDescentParams {
            features,
            loss,
            code,
            workers,
            replication,
            shuffle: RoleShuffle::None,
            step_size,
            samples,
            seed: 0,
        }
    }

    /// Moves roles between workers by `shuffle` every epoch.
    pub fn with_shuffle(mut self, shuffle: RoleShuffle) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Draws the partitioning, the roles and a real code's coefficients from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The encoding matrix.
    pub fn matrix(&self) -> Result<EncodingMatrix, LearnerError> {
        self.code
            .build(self.workers, self.replication, &mut seeded_stream(self.seed, STREAM_CODE))
            .map_err(|e| LearnerError::InvalidParameter(e.to_string()))
    }

    /// The learner (checks the parameters).
    pub fn build(&self) -> Result<CodedDescent, LearnerError> {
        CodedDescent::new(*self)
    }

    /// Bytes per role record.
    pub fn record_width(&self) -> usize {
        ROLE_PREFIX + sample_width(self.features)
    }

    /// The size of every partition: the first `q mod n` hold one sample more.
    fn partition_sizes(&self) -> Vec<usize> {
        let (base, extra) = (self.samples / self.workers, self.samples % self.workers);
        (0..self.workers).map(|j| base + usize::from(j < extra)).collect()
    }
}

/// The role-expanded training data of a run ([`CodedDescentParams`]'s module documentation).
#[derive(Clone, Debug)]
pub struct RoleData {
    /// Every role's records, role by role.
    pub records: Records,
    /// `blocks[i]`: the ids of role `i`'s records (contiguous, increasing), padding included.
    pub blocks: Vec<Vec<u32>>,
}

/// A role record: `sample` tagged with its partition and coefficient.
fn role_record(out: &mut Vec<u8>, partition: usize, coefficient: f64, sample: &[u8]) {
    out.extend_from_slice(&(partition as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&coefficient.to_le_bytes());
    out.extend_from_slice(sample);
}

/// The role-expanded data of `train` (samples in [`crate::sample`]'s layout) for `params`.
pub fn role_data(params: &CodedDescentParams, train: &Records) -> Result<RoleData, LearnerError> {
    let learner = params.build()?;
    if train.len() != params.samples || train.width() != sample_width(params.features) {
        return Err(LearnerError::InvalidParameter(format!(
            "the code was set up for {} samples of {} features, the data has {} records of {} bytes",
            params.samples,
            params.features,
            train.len(),
            train.width()
        )));
    }
    let partitions =
        random_assignment(train.len(), params.workers, &mut seeded_stream(params.seed, STREAM_PARTITIONS));
    let width = params.record_width();
    let mut bytes = Vec::with_capacity(params.workers * learner.block as usize * width);
    let blank = vec![0u8; sample_width(params.features)];
    for role in 0..params.workers {
        let mut len = 0;
        for (j, coefficient) in learner.code.support(role) {
            for &p in &partitions[j] {
                let sample = train.get(p).ok_or(LearnerError::InvalidParameter(format!("no sample {p}")))?;
                role_record(&mut bytes, j, coefficient, sample);
                len += 1;
            }
        }
        for _ in len..learner.block {
            role_record(&mut bytes, PADDING as usize, 0.0, &blank);
        }
    }
    let blocks = (0..params.workers as u32).map(|r| learner.block_of(r as usize)).collect();
    let records =
        Records::from_bytes(width, bytes).map_err(|e| LearnerError::InvalidParameter(e.to_string()))?;
    Ok(RoleData { records, blocks })
}

/// `samples` in the role-record layout (partition 0, coefficient 1): what the loss is measured
/// on (held-out or training samples).
pub fn plain_role_records(params: &CodedDescentParams, samples: &Records) -> Result<Records, LearnerError> {
    let mut bytes = Vec::with_capacity(samples.len() * params.record_width());
    for p in 0..samples.len() as u32 {
        let sample = samples.get(p).ok_or(LearnerError::InvalidParameter(format!("no sample {p}")))?;
        role_record(&mut bytes, 0, 1.0, sample);
    }
    Records::from_bytes(params.record_width(), bytes)
        .map_err(|e| LearnerError::InvalidParameter(e.to_string()))
}

/// Gradient-coded descent: see the module documentation.
#[derive(Clone, Debug)]
pub struct CodedDescent {
    params: CodedDescentParams,
    code: EncodingMatrix,
    /// Records per role block (the largest role's, the others padded).
    block: u32,
}

impl CodedDescent {
    /// The learner of `params` (checked: a code that exists, a positive finite step, at least
    /// one sample per partition).
    pub fn new(params: CodedDescentParams) -> Result<Self, LearnerError> {
        if !(params.step_size > 0.0 && params.step_size.is_finite()) {
            return Err(LearnerError::InvalidParameter(format!("step size {}", params.step_size)));
        }
        let code = params.matrix()?;
        if params.samples < params.workers || params.features == 0 || params.features >= MAX_PARAMETERS {
            return Err(LearnerError::InvalidParameter(format!(
                "need at least {} samples (one per partition) and 1 to 2^27 - 1 features, got {} and {}",
                params.workers, params.samples, params.features
            )));
        }
        let sizes = params.partition_sizes();
        let lengths =
            (0..params.workers).map(|r| code.support(r).iter().map(|&(j, _)| sizes[j]).sum::<usize>());
        let block = lengths.max().unwrap_or(0);
        // Every record of the role-expanded data must have a u32 id.
        let block = u32::try_from(block)
            .ok()
            .filter(|b| b.checked_mul(params.workers as u32).is_some())
            .ok_or_else(|| {
                LearnerError::InvalidParameter(format!(
                    "{} workers x {block} records per role",
                    params.workers
                ))
            })?;
        Ok(CodedDescent { params, code, block })
    }

    /// The ids of role `role`'s block.
    fn block_of(&self, role: usize) -> Vec<u32> {
        let start = role as u32 * self.block;
        (start..start + self.block).collect()
    }

    /// The parameters.
    pub fn params(&self) -> &CodedDescentParams {
        &self.params
    }

    /// The encoding matrix.
    pub fn code(&self) -> &EncodingMatrix {
        &self.code
    }

    /// `roles[w]`: the role worker `w` plays in `epoch` (from 1; epoch 0 is the start, every
    /// worker its own role). Replays the shuffle's draws from the seed.
    pub fn roles(&self, epoch: usize) -> Vec<usize> {
        let n = self.params.workers;
        let mut rng: SeededRng = seeded_stream(self.params.seed, STREAM_ROLES);
        let mut roles: Vec<usize> = (0..n).collect();
        for t in 1..=epoch {
            roles = self.params.shuffle.roles(n, t, &mut rng);
        }
        roles
    }

    /// The least-squares decoding of the roles `workers` played in `epoch`.
    pub fn decoding(&self, epoch: usize, workers: &[usize]) -> Decoding {
        let roles = self.roles(epoch);
        let mask = workers.iter().filter_map(|&w| roles.get(w)).fold(0u64, |m, &r| m | 1 << r);
        decode_mask(&self.code, mask)
    }

    /// The samples of role records.
    fn samples<'r>(&self, records: &[&'r [u8]]) -> Result<Vec<&'r [u8]>, LearnerError> {
        let width = self.params.record_width();
        records
            .iter()
            .map(|r| match r.len() == width {
                true => Ok(&r[ROLE_PREFIX..]),
                false => Err(LearnerError::WrongRecordWidth { len: r.len(), width }),
            })
            .collect()
    }
}

/// The partition and the coefficient of a role record (at least [`ROLE_PREFIX`] bytes).
fn tag(record: &[u8]) -> (u32, f64) {
    let mut p = [0u8; 4];
    p.copy_from_slice(&record[..4]);
    let mut c = [0u8; 8];
    c.copy_from_slice(&record[8..16]);
    (u32::from_le_bytes(p), f64::from_le_bytes(c))
}

impl Learner for CodedDescent {
    fn name(&self) -> &'static str {
        "gradient-coding"
    }

    fn record_width(&self) -> usize {
        self.params.record_width()
    }

    fn parameter_count(&self) -> usize {
        self.params.features + 1
    }

    fn initial_model(&self, _seed: u64) -> Model {
        Model::new(vec![0.0; self.parameter_count()])
    }

    /// `sum_j B[i][j] g_j` over the batch, one partial gradient per run of records of one
    /// partition.
    fn local_update(&self, model: &Model, batch: &[&[u8]], _step: LocalStep) -> Result<Update, LearnerError> {
        check_model(model, self.parameter_count())?;
        let samples = self.samples(batch)?;
        let mut out = vec![0.0; self.parameter_count()];
        let mut start = 0;
        while start < batch.len() {
            let (partition, coefficient) = tag(batch[start]);
            let len = batch[start..].iter().take_while(|r| tag(r).0 == partition).count();
            if partition == PADDING {
                start += len;
                continue;
            }
            let g = self.params.loss.gradient_sum(&model.params, &samples[start..start + len])?;
            for (o, v) in out.iter_mut().zip(g) {
                *o += coefficient * v;
            }
            start += len;
        }
        Ok(Update { points: batch.len() as u64, body: UpdateBody::Dense(out) })
    }

    /// The decoding needs to know who sent what: without it, every update counts once.
    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError> {
        let workers: Vec<usize> = (0..updates.len()).collect();
        self.aggregate_received(model, &Received { epoch: 0, workers: &workers, updates })
    }

    fn aggregate_received(&self, model: &Model, received: &Received<'_>) -> Result<Model, LearnerError> {
        check_model(model, self.parameter_count())?;
        let roles = self.roles(received.epoch);
        let decoding = self.decoding(received.epoch, received.workers);
        let mut estimate = vec![0.0; self.parameter_count()];
        for (&w, update) in received.workers.iter().zip(received.updates) {
            let UpdateBody::Dense(g) = &update.body else {
                return Err(malformed("expected a gradient".into()));
            };
            if g.len() != estimate.len() || w >= roles.len() {
                return Err(malformed(format!("gradient of {} values from worker {w}", g.len())));
            }
            let a = decoding.coefficients[roles[w]];
            for (e, v) in estimate.iter_mut().zip(g) {
                *e += a * v;
            }
        }
        let (step, samples) = (self.params.step_size, self.params.samples as f64);
        let params = model.params.iter().zip(&estimate).map(|(p, e)| p - step * e / samples).collect();
        Ok(Model::new(params))
    }

    fn loss(&self, model: &Model, points: &[&[u8]]) -> Result<f64, LearnerError> {
        check_model(model, self.parameter_count())?;
        self.params.loss.mean_loss(&model.params, &self.samples(points)?)
    }

    fn assignment(&self, epoch: usize) -> Option<Vec<Vec<u32>>> {
        let roles = self.roles(epoch);
        Some(roles.iter().map(|&r| self.block_of(r)).collect())
    }
}

fn malformed(reason: String) -> LearnerError {
    LearnerError::Malformed { what: "update", reason }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::data::record_views;
    use crate::sample::encode_sample;

    fn samples(q: usize) -> Records {
        let bytes: Vec<u8> =
            (0..q).flat_map(|i| encode_sample(&[i as f64, 1.0 - i as f64], (i % 3) as f64)).collect();
        Records::from_bytes(sample_width(2), bytes).unwrap()
    }

    #[test]
    fn role_blocks_are_padded_to_one_size_and_hold_their_partitions_coefficients() {
        let params =
            CodedDescentParams::new(2, GlmLoss::LeastSquares, GradientCodeKind::Crc, (4, 2), 0.1, 11)
                .with_shuffle(RoleShuffle::Cyclic)
                .with_seed(5);
        let data = role_data(&params, &samples(11)).unwrap();
        let learner = params.build().unwrap();
        // Partitions of 3, 3, 3, 2 samples; each role holds two of them, padded to 6.
        assert!(data.blocks.iter().all(|b| b.len() == 6) && data.records.len() == 24);
        for (role, block) in data.blocks.iter().enumerate() {
            let tags: Vec<(u32, f64)> = block.iter().map(|&p| tag(data.records.get(p).unwrap())).collect();
            let real: Vec<(u32, f64)> = tags.iter().copied().filter(|t| t.0 != PADDING).collect();
            let want: usize =
                learner.code().support(role).iter().map(|&(j, _)| if j == 3 { 2 } else { 3 }).sum();
            assert_eq!(real.len(), want);
            assert!(real.iter().all(|&(j, c)| c == learner.code().entry(role, j as usize)));
        }
        // Cyclic shuffling: worker w plays role (w + t) mod n, and holds its block.
        let assignment = learner.assignment(3).unwrap();
        for (w, batch) in assignment.iter().enumerate() {
            assert_eq!(batch, &data.blocks[(w + 3) % 4]);
        }
    }

    #[test]
    fn heard_from_every_worker_the_step_is_the_full_gradient_step() {
        let params = CodedDescentParams::new(2, GlmLoss::Logistic, GradientCodeKind::Frc, (4, 2), 0.5, 10);
        let train = samples(10);
        let data = role_data(&params, &train).unwrap();
        let learner = params.build().unwrap();
        let model = Model::new(vec![0.1, -0.2, 0.3]);
        let step = LocalStep { epoch: 1, worker: 0, seed: 0 };
        let updates: Vec<Update> = data
            .blocks
            .iter()
            .map(|b| {
                let batch: Vec<&[u8]> = b.iter().map(|&p| data.records.get(p).unwrap()).collect();
                learner.local_update(&model, &batch, step).unwrap()
            })
            .collect();
        let workers = [0, 1, 2, 3];
        let next = learner
            .aggregate_received(&model, &Received { epoch: 1, workers: &workers, updates: &updates })
            .unwrap();
        let g = GlmLoss::Logistic.gradient_sum(&model.params, &record_views(&train)).unwrap();
        for ((n, p), g) in next.params.iter().zip(&model.params).zip(g) {
            assert!((n - (p - 0.5 * g / 10.0)).abs() < 1e-12);
        }
        // Heard from nobody: no step, and the decoding error is n.
        let none =
            learner.aggregate_received(&model, &Received { epoch: 1, workers: &[], updates: &[] }).unwrap();
        assert_eq!(none.params, model.params);
        assert_eq!(learner.decoding(1, &[]).error, 4.0);
    }
}
