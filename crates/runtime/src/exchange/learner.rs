//! [`RecordsLearner`]: the learner of a data-plane run, which trains nothing.

use ubershuffle_learners::{Learner, LearnerError, LocalStep, Model, Update, UpdateBody};

/// A learner that trains nothing: the run only moves records (the caller trains on them, e.g.
/// a Python training loop behind [`super::RecordSink`]). Its model is one number, the records
/// its updates covered (the master's count of what the workers acknowledged); its loss is 0.
/// Its width is the records' (0: records of any size, which it does not read either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordsLearner {
    width: usize,
}

impl RecordsLearner {
    /// A learner over records of `width` bytes (0: of any size).
    pub fn new(width: usize) -> Result<Self, LearnerError> {
        Ok(RecordsLearner { width })
    }
}

impl Learner for RecordsLearner {
    fn name(&self) -> &'static str {
        "records"
    }

    fn record_width(&self) -> usize {
        self.width
    }

    fn parameter_count(&self) -> usize {
        1
    }

    fn initial_model(&self, _seed: u64) -> Model {
        Model::new(vec![0.0])
    }

    fn local_update(
        &self,
        _model: &Model,
        batch: &[&[u8]],
        _step: LocalStep,
    ) -> Result<Update, LearnerError> {
        Ok(Update { points: batch.len() as u64, body: UpdateBody::Dense(vec![batch.len() as f64]) })
    }

    fn aggregate(&self, model: &Model, updates: &[Update]) -> Result<Model, LearnerError> {
        let covered: u64 = updates.iter().map(|u| u.points).sum();
        let before = model.params.first().copied().unwrap_or(0.0);
        Ok(Model::new(vec![before + covered as f64]))
    }

    fn loss(&self, _model: &Model, _points: &[&[u8]]) -> Result<f64, LearnerError> {
        Ok(0.0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_model_counts_the_records_acknowledged() {
        let l = RecordsLearner::new(8).unwrap();
        let records = [[0u8; 8]; 3];
        let batch: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
        let step = LocalStep { epoch: 1, worker: 0, seed: 0 };
        let u = l.local_update(&l.initial_model(0), &batch, step).unwrap();
        let m = l.aggregate(&l.initial_model(0), &[u.clone(), u]).unwrap();
        assert_eq!(m.params, vec![6.0]);
        assert_eq!(l.loss(&m, &batch).unwrap(), 0.0);
    }
}
