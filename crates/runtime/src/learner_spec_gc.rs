//! The byte form of a gradient-coded descent's parameters (inside [`crate::LearnerSpec`]'s).

use ubershuffle_core::wire::{ByteReader, push_f64, push_u32, push_u64};
use ubershuffle_gradient_codes::{GradientCodeKind, RoleShuffle};
use ubershuffle_learners::gradient_coding::glm::GlmLoss;
use ubershuffle_learners::gradient_coding::learner::CodedDescentParams;

use crate::{ProtocolError, RuntimeError};

const LOSSES: [GlmLoss; 2] = [GlmLoss::LeastSquares, GlmLoss::Logistic];

/// The index of `item` in `all` (as a byte; every list here is short).
fn index_of<T: PartialEq>(all: &[T], item: &T) -> u8 {
    all.iter().position(|x| x == item).unwrap_or(0) as u8
}

/// The item at the byte read, or an error naming `what`.
fn item<T: Copy>(r: &mut ByteReader<'_>, all: &[T], what: &'static str) -> Result<T, RuntimeError> {
    let kind = r.take(1)?[0];
    all.get(kind as usize).copied().ok_or_else(|| ProtocolError::UnknownKind { what, kind }.into())
}

/// Appends the byte form.
pub(super) fn write(out: &mut Vec<u8>, p: &CodedDescentParams) {
    push_u32(out, p.features as u32);
    out.push(index_of(&LOSSES, &p.loss));
    out.push(index_of(&GradientCodeKind::ALL, &p.code));
    push_u32(out, p.workers as u32);
    push_u32(out, p.replication as u32);
    out.push(index_of(&RoleShuffle::ALL, &p.shuffle));
    push_f64(out, p.step_size);
    push_u32(out, p.samples as u32);
    push_u64(out, p.seed);
}

/// Reads the byte form.
pub(super) fn read(r: &mut ByteReader<'_>) -> Result<CodedDescentParams, RuntimeError> {
    let features = r.u32()? as usize;
    let loss = item(r, &LOSSES, "loss")?;
    let code = item(r, &GradientCodeKind::ALL, "gradient code")?;
    let (workers, replication) = (r.u32()? as usize, r.u32()? as usize);
    let shuffle = item(r, &RoleShuffle::ALL, "role shuffle")?;
    let (step_size, samples, seed) = (r.f64()?, r.u32()? as usize, r.u64()?);
    Ok(CodedDescentParams::new(features, loss, code, (workers, replication), step_size, samples)
        .with_shuffle(shuffle)
        .with_seed(seed))
}
