//! Part of `ubershuffle plan`: `--policy local|partial-local|global`, the exchange of
//! partitioned data planned epoch by epoch.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use ubershuffle_core::exchange_policy::{ExchangeEpoch, ExchangePolicy, ExchangeRun};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{ShufflePlanner, check_plan};

use crate::cli::{InstanceSource, PolicyArgs};

/// The run the policy flags describe, or `None` without `--policy`.
pub fn start(source: &InstanceSource, args: &PolicyArgs) -> anyhow::Result<Option<ExchangeRun>> {
    let Some(kind) = args.policy else { return Ok(None) };
    let policy = ExchangePolicy::new(kind.name(), args.fraction)?;
    let (Some(workers), Some(points)) = (source.workers, source.points) else {
        bail!("--policy needs --workers N --points Q [--alpha A]");
    };
    if args.epochs == Some(0) {
        bail!("--epochs must be at least 1");
    }
    let limits = ubershuffle_core::limits::Limits::from_env()?;
    let cache =
        source.alpha.map_or(points.div_ceil(workers.max(1)), |a| ubershuffle_core::cache_size_for(a, points));
    super::plan::check_generated(&limits, workers, points, cache)?;
    Ok(Some(ExchangeRun::new(policy, workers, points, source.alpha, source.seed)?))
}

/// One planned epoch.
struct EpochCounts {
    epoch: usize,
    points_exchanged: usize,
    points_moved: usize,
    transmissions: usize,
    uncoded: usize,
}

/// Plans and verifies the epochs after the first (epoch `e`'s planner draws from stream `e`
/// of the seed) and returns the policy's fields: `policy`, `fraction`, `points_exchanged`,
/// `points_moved` (the first epoch's) and `per_epoch`.
pub fn fields(
    run: &mut ExchangeRun,
    first: &ExchangeEpoch,
    first_transmissions: usize,
    planner: &dyn ShufflePlanner,
    args: &PolicyArgs,
    seed: u64,
) -> anyhow::Result<Vec<(&'static str, Value)>> {
    let counts = |e: &ExchangeEpoch, transmissions: usize| EpochCounts {
        epoch: e.epoch,
        points_exchanged: e.points_exchanged,
        points_moved: e.points_moved,
        transmissions,
        uncoded: e.instance.uncoded_transmissions(),
    };
    let mut epochs = vec![counts(first, first_transmissions)];
    for _ in 1..args.epochs.unwrap_or(1) {
        let epoch = run.next_epoch();
        let plan = planner.plan(&epoch.instance, &mut seeded_stream(seed, epoch.epoch as u64))?;
        check_plan(&epoch.instance, &plan).with_context(|| {
            format!("epoch {}: scheme {} produced a plan that does not decode", epoch.epoch, planner.name())
        })?;
        epochs.push(counts(&epoch, plan.len()));
    }
    let per_epoch: Vec<Value> = epochs
        .iter()
        .map(|e| {
            json!({
                "epoch": e.epoch,
                "points_exchanged": e.points_exchanged,
                "points_moved": e.points_moved,
                "transmissions": e.transmissions,
                "uncoded_transmissions": e.uncoded,
                "verified": true,
            })
        })
        .collect();
    let policy = run.policy();
    Ok(vec![
        ("policy", json!(policy.name())),
        ("fraction", json!(policy.fraction())),
        ("points_exchanged", json!(first.points_exchanged)),
        ("points_moved", json!(first.points_moved)),
        ("per_epoch", json!(per_epoch)),
    ])
}
