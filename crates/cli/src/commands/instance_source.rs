//! The instance `ubershuffle plan` works on: read from a file, built from a shuffle matrix, or
//! generated from the flags, each checked against the memory and input caps first.

use anyhow::{Context, bail};
use ubershuffle_core::limits::{Limits, instance_bytes};
use ubershuffle_core::{GeneratorParams, ShuffleInstance, cache_size_for, seeded};
use ubershuffle_planners::no_excess::{ShuffleMatrix, random_no_excess_instance};

use crate::cli::InstanceSource;

/// Refuses to generate an instance of `workers` caches of `cache` points over `points` points
/// when it would pass the memory cap ([`Limits`]).
pub fn check_generated(limits: &Limits, workers: usize, points: usize, cache: usize) -> anyhow::Result<()> {
    let what = format!("an instance of {workers} workers and {points} points");
    Ok(limits.check_memory(&what, instance_bytes(workers, points, cache))?)
}

/// Loads or generates the instance the flags describe. Files are read up to the input cap and
/// sizes checked against the memory cap before anything is generated ([`Limits`]).
pub fn load_instance(source: &InstanceSource) -> anyhow::Result<ShuffleInstance> {
    let limits = Limits::from_env()?;
    if let Some(path) = &source.instance {
        let text = limits.read_text(path)?;
        return ShuffleInstance::from_json(&text)
            .with_context(|| format!("instance file {}", path.display()));
    }
    if let Some(text) = &source.shuffle_matrix {
        let s = ShuffleMatrix::parse(text).context("invalid --shuffle-matrix")?;
        let batch = s.points() / s.workers().max(1);
        check_generated(&limits, s.workers(), s.points(), batch).context("--shuffle-matrix")?;
        return Ok(s.to_instance());
    }
    match (source.workers, source.points, source.alpha) {
        (Some(workers), Some(points), Some(alpha)) => {
            let params = GeneratorParams { workers, points, alpha, seed: source.seed }.check()?;
            check_generated(&limits, workers, points, cache_size_for(alpha, points))?;
            Ok(params.generate())
        }
        (Some(workers), Some(points), None) => {
            check_generated(&limits, workers, points, points.div_ceil(workers.max(1)))?;
            Ok(random_no_excess_instance(workers, points, &mut seeded(source.seed))?)
        }
        _ => bail!(
            "give an instance: --instance FILE, --shuffle-matrix S, or --workers N --points Q [--alpha A] [--seed S]"
        ),
    }
}
