//! Planners at cluster scale: one generated instance, several schemes, every plan verified and
//! timed, with the lower bound beside them. The `scale` experiment calls
//! [`measure_scale_point`] for each `(n, q, alpha)` of its sweep.
//!
//! Peak memory is a property of a process, not of a call: to report it per scheme, run each
//! point in a process of its own (`ubershuffle plan --json` reports `max_rss_bytes`).

use std::time::Instant;

use crate::bounds::{CliqueFamily, best_lower_bound, clique_family};
use crate::{
    CheckedGeneratorParams, PlannerOptions, UnknownScheme, VerifyError, planner_by_name, rng::seeded_stream,
};

/// What one scheme did on one instance of the sweep.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ScaleRow {
    /// The scheme asked for.
    pub scheme: String,
    /// The scheme that made the plan (for `auto`, the member that won).
    pub made_by: String,
    /// Workers `n`.
    pub workers: usize,
    /// Points `q`.
    pub points: usize,
    /// Storage ratio `alpha`.
    pub alpha: f64,
    /// Transmissions of the verified plan, or `None` when the scheme refused the instance.
    pub transmissions: Option<usize>,
    /// Why the scheme refused the instance (its one-line error), if it did.
    pub refused: Option<String>,
    /// Transmissions of the uncoded scheme.
    pub uncoded: usize,
    /// The best lower bound and its kind.
    pub lower_bound: usize,
    /// Which bound it is.
    pub lower_bound_kind: &'static str,
    /// Seconds to plan (or to refuse).
    pub plan_seconds: f64,
    /// Seconds to verify the plan.
    pub verify_seconds: f64,
    /// Seconds to compute the lower bound (the same on every row of a point).
    pub lower_bound_seconds: f64,
    /// Bytes the instance holds ([`crate::ShuffleInstance::heap_bytes`]).
    pub instance_bytes: usize,
}

impl ScaleRow {
    /// Transmissions as a share of uncoded (`None` when refused or when nothing moves).
    pub fn ratio(&self) -> Option<f64> {
        let t = self.transmissions?;
        (self.uncoded > 0).then(|| t as f64 / self.uncoded as f64)
    }
}

/// Why a point of the sweep could not be measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScaleError {
    /// A scheme name is not built in.
    #[error(transparent)]
    UnknownScheme(#[from] UnknownScheme),
    /// A plan did not verify: a bug in its planner.
    #[error("scheme {scheme}: {error}")]
    Invalid {
        /// The scheme.
        scheme: String,
        /// What `verify` found.
        error: VerifyError,
    },
}

/// Generates the instance of `params`, computes its lower bound, and plans it with each of
/// `schemes` (seeded from `params`' seed, stream 1, as `ubershuffle plan` does), verifying
/// every plan. A scheme that refuses the instance (past its reach) gets a row with its reason.
///
/// ```
/// use ubershuffle_core::{GeneratorParams, PlannerOptions};
/// use ubershuffle_planners::scale::measure_scale_point;
/// let params = GeneratorParams { workers: 40, points: 4000, alpha: 0.3, seed: 1 }.check()?;
/// let rows = measure_scale_point(&params, &["uncoded", "clique-cover"], &PlannerOptions::default())?;
/// assert_eq!(rows[0].transmissions, Some(rows[0].uncoded));
/// assert!(rows[1].ratio().unwrap() < 0.5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn measure_scale_point(
    params: &CheckedGeneratorParams,
    schemes: &[&str],
    options: &PlannerOptions,
) -> Result<Vec<ScaleRow>, ScaleError> {
    let planners = schemes
        .iter()
        .map(|name| planner_by_name(name, options).map(|p| (*name, p)))
        .collect::<Result<Vec<_>, _>>()?;
    let inst = params.generate();
    let started = Instant::now();
    let bound = best_lower_bound(&inst);
    let lower_bound_seconds = started.elapsed().as_secs_f64();
    let p = params.params();
    let mut rows = Vec::with_capacity(planners.len());
    for (scheme, planner) in planners {
        let started = Instant::now();
        let planned = planner.plan_explained(&inst, &mut seeded_stream(p.seed, 1));
        let plan_seconds = started.elapsed().as_secs_f64();
        let mut row = ScaleRow {
            scheme: scheme.to_string(),
            made_by: scheme.to_string(),
            workers: p.workers,
            points: p.points,
            alpha: p.alpha,
            transmissions: None,
            refused: None,
            uncoded: inst.uncoded_transmissions(),
            lower_bound: bound.value,
            lower_bound_kind: bound.kind,
            plan_seconds,
            verify_seconds: 0.0,
            lower_bound_seconds,
            instance_bytes: inst.heap_bytes(),
        };
        match planned {
            Ok(planned) => {
                let started = Instant::now();
                crate::check_plan(&inst, &planned.plan)
                    .map_err(|error| ScaleError::Invalid { scheme: scheme.to_string(), error })?;
                row.verify_seconds = started.elapsed().as_secs_f64();
                row.transmissions = Some(planned.plan.len());
                row.made_by = planned.made_by;
            }
            Err(e) => row.refused = Some(e.to_string()),
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The clique family's figures at one point of the sweep ([`crate::bounds::clique_family`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FamilyPoint {
    /// The bound, its kind, the search's work and the estimate.
    pub family: CliqueFamily,
    /// Requests (the uncoded count).
    pub uncoded: usize,
    /// Seconds to compute the figures, the search included.
    pub seconds: f64,
}

/// Generates the instance of `params` and computes the clique family's figures for it, searching
/// for its largest cliques within `search_work` work units.
///
/// ```
/// use ubershuffle_core::GeneratorParams;
/// use ubershuffle_planners::bounds::DEFAULT_SEARCH_WORK;
/// use ubershuffle_planners::scale::measure_clique_family;
/// let params = GeneratorParams { workers: 40, points: 4000, alpha: 0.3, seed: 1 }.check()?;
/// let point = measure_clique_family(&params, DEFAULT_SEARCH_WORK);
/// assert_eq!(point.family.bound_kind.name(), "search");
/// assert!(point.family.bound <= point.uncoded);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn measure_clique_family(params: &CheckedGeneratorParams, search_work: u64) -> FamilyPoint {
    let inst = params.generate();
    let started = Instant::now();
    let family = clique_family(&inst, &best_lower_bound(&inst), search_work);
    FamilyPoint { family, uncoded: inst.uncoded_transmissions(), seconds: started.elapsed().as_secs_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeneratorParams;

    #[test]
    fn a_scheme_past_its_reach_is_a_row_with_its_reason() {
        let params = GeneratorParams { workers: 130, points: 2600, alpha: 0.05, seed: 2 }.check().unwrap();
        let rows = measure_scale_point(
            &params,
            &["ubershuffle", "clique-cover", "auto"],
            &PlannerOptions::default(),
        )
        .unwrap();
        assert!(rows[0].transmissions.is_none());
        assert!(rows[0].refused.as_deref().unwrap().contains("at most 128 workers"));
        let clique = rows[1].transmissions.unwrap();
        let family = measure_clique_family(&params, crate::bounds::DEFAULT_SEARCH_WORK).family;
        assert!(clique < rows[1].uncoded && clique >= family.bound);
        assert!(family.bound >= rows[1].lower_bound && family.estimate >= family.bound);
        assert_eq!(rows[2].made_by, "clique-cover");
        assert!(measure_scale_point(&params, &["nope"], &PlannerOptions::default()).is_err());
    }
}
