//! How much a rank caches, as the sampler takes it (and with it `ShuffleGroup` and the exchange): the papers' `alpha` (the
//! cached share of the whole data set, the rank's own batch included, so at least `1/R` on `R`
//! ranks) or `extra_cache` (the share of the samples outside its batch that a rank also caches,
//! which holds on every number of ranks). One setting of a job goes to every world size an
//! elastic resume brings, so a value that cannot hold on some `R` is refused with what to write.

use ubershuffle_core::cache_size_for;
use ubershuffle_core::epoch_chain::ChainParams;

use crate::errors::{Outcome, bad, bad_error};

/// What each rank caches besides its batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheSetting {
    /// Its batch only.
    Batch,
    /// `floor(alpha N)` samples, its batch included (the papers' storage ratio).
    Alpha(f64),
    /// Its batch and `extra_cache` of the samples outside it ([`ChainParams::with_extra_cache`]).
    Extra(f64),
}

impl CacheSetting {
    /// The setting of `alpha=` and `extra_cache=` (at most one of them), range-checked.
    pub fn new(alpha: Option<f64>, extra_cache: Option<f64>) -> Outcome<Self> {
        match (alpha, extra_cache) {
            (None, None) => Ok(CacheSetting::Batch),
            (Some(a), None) if a > 0.0 && a <= 1.0 => Ok(CacheSetting::Alpha(a)),
            (Some(a), None) => Err(bad(format!("alpha must lie in (0, 1], got {a}"))),
            (None, Some(e)) if (0.0..=1.0).contains(&e) => Ok(CacheSetting::Extra(e)),
            (None, Some(e)) => Err(bad(format!("extra_cache must lie in [0, 1], got {e}"))),
            (Some(_), Some(_)) => Err(bad(
                "pass alpha or extra_cache, not both (extra_cache is the share of the samples outside a \
                 rank's batch that it also caches; alpha the cached share of all samples, the batch included)",
            )),
        }
    }

    /// `alpha`, when the setting is one.
    pub fn alpha(self) -> Option<f64> {
        match self {
            CacheSetting::Alpha(a) => Some(a),
            _ => None,
        }
    }

    /// `extra_cache`, when the setting is one.
    pub fn extra_cache(self) -> Option<f64> {
        match self {
            CacheSetting::Extra(e) => Some(e),
            _ => None,
        }
    }

    /// `params` (over its ranks and samples) with this cache; an `alpha` below a batch is
    /// refused saying what to write instead.
    pub fn apply(self, params: ChainParams) -> Outcome<ChainParams> {
        match self {
            CacheSetting::Batch => Ok(params),
            CacheSetting::Extra(e) => params.with_extra_cache(e).map_err(bad_error),
            CacheSetting::Alpha(a) => {
                let (ranks, samples) = (params.workers, params.points);
                let batch = samples.div_ceil(ranks.max(1));
                if ranks > 0 && cache_size_for(a, samples) < batch {
                    return Err(bad(cannot_hold(a, ranks, batch as f64 / samples as f64)));
                }
                params.with_alpha(a).map_err(bad_error)
            }
        }
    }
}

/// The error of an `alpha` below the batch of `ranks` ranks (`least`: the smallest alpha that
/// holds there).
fn cannot_hold(alpha: f64, ranks: usize, least: f64) -> String {
    format!(
        "alpha={alpha} cannot hold on {ranks} ranks: alpha is the cached share of the data set, the rank's own \
         batch included, so it must be at least {least:.4} here; write extra_cache=E instead, the share of the \
         samples outside a rank's batch that it also caches, which holds on every number of ranks (extra_cache=0 \
         caches the batch only; alpha=A meant for R ranks is extra_cache=(A - 1/R)/(1 - 1/R))"
    )
}
