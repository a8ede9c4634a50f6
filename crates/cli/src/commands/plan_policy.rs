//! Part of `ubershuffle plan`: `--policy local|partial-local|global`, the epochs of the run's
//! [`EpochChain`] planned one after another. It is the chain `ubershuffle run` goes through (the
//! same caches, assignments and planner streams), so for the same flags and seed a run sends
//! exactly the transmissions printed here, as long as no worker is lost.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use ubershuffle_core::ShufflePlanner;
use ubershuffle_core::epoch_chain::{ChainParams, DrawnEpoch, EpochChain, PlannedEpoch};
use ubershuffle_core::exchange_policy::ExchangePolicy;

use crate::cli::{InstanceSource, PolicyArgs};

/// The chain the policy flags describe, or `None` without `--policy`.
pub fn start(source: &InstanceSource, args: &PolicyArgs) -> anyhow::Result<Option<EpochChain>> {
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
    super::instance_source::check_generated(&limits, workers, points, cache)?;
    let params = ChainParams::new(workers, points, policy, source.seed);
    let params = match source.alpha {
        Some(alpha) => params.with_alpha(alpha)?,
        None => params,
    };
    Ok(Some(EpochChain::new(params)?))
}

/// The first epoch of `chain`, drawn over every worker.
pub fn first(chain: &EpochChain) -> anyhow::Result<DrawnEpoch> {
    Ok(chain.draw(&chain.all_workers(), 0)?)
}

/// Plans and verifies the epochs after `first` (already planned) and returns the policy's
/// fields: `policy`, `fraction`, `points_exchanged`, `points_moved` (the first epoch's) and
/// `per_epoch`.
pub fn fields(
    chain: &mut EpochChain,
    first: &PlannedEpoch,
    planner: &dyn ShufflePlanner,
    args: &PolicyArgs,
) -> anyhow::Result<Vec<(&'static str, Value)>> {
    chain.commit(first);
    let mut per_epoch = vec![epoch_json(first)];
    for _ in 1..args.epochs.unwrap_or(1) {
        let epoch = chain.draw(&chain.all_workers(), 0)?.plan(planner, None)?;
        epoch.verify().with_context(|| {
            format!("epoch {}: scheme {} produced a plan that does not decode", epoch.epoch, planner.name())
        })?;
        chain.commit(&epoch);
        per_epoch.push(epoch_json(&epoch));
    }
    let policy = chain.params().policy;
    Ok(vec![
        ("policy", json!(policy.name())),
        ("fraction", json!(policy.fraction())),
        ("points_exchanged", json!(first.points_exchanged)),
        ("points_moved", json!(first.points_moved)),
        ("per_epoch", json!(per_epoch)),
    ])
}

/// One epoch's record in `per_epoch` (every plan counted here passed `verify`).
fn epoch_json(e: &PlannedEpoch) -> Value {
    json!({
        "epoch": e.epoch,
        "points_exchanged": e.points_exchanged,
        "points_moved": e.points_moved,
        "transmissions": e.plan.len(),
        "uncoded_transmissions": e.instance.uncoded_transmissions(),
        "verified": true,
    })
}
