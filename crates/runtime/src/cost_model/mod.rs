//! [`CostModel`]: what computing costs on the machine it was calibrated on, so that an emulated
//! cluster can charge its nodes' computing by the work done instead of by measured CPU time,
//! and two runs give identical times.
//!
//! Each phase counts its work ([`Work`]: requests planned, bytes XORed, bytes copied, gradient
//! coordinates, ...); the run's [`Prices`] turn the counts into a duration, which the rank's
//! transport adds to its clock ([`ubershuffle_transport::Transport::charge`]; only an emulated
//! cluster in charged mode listens). The model is linear in each count, with constants measured
//! once on the real kernels (`cargo xtask calibrate` writes `results/cost-model.toml`);
//! planning is priced per planner, and planning, verifying and routing per cluster size, at the
//! sizes calibrated and by the power law through the nearest two in between and beyond.

mod calibrate;
mod check;
mod file;

pub use calibrate::{CalibrationError, LearnerSample, PLANNERS, REPEATS, SIZES, calibrate, ns_per_unit};
pub use check::{BAND, PriceCheck, compare, prices, scaled};
pub use file::{CALIBRATE_COMMAND, CostModelFileError, load, to_toml};

pub use crate::config_error::CostModelError;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::LearnerSpec;

/// Counts of the work a rank did in a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Points to deliver that a planner planned (the uncoded transmissions of an instance).
    pub requests: u64,
    /// Pairs of parts within a transmission that verifying looked at, plus the points it
    /// checked.
    pub verified_pairs: u64,
    /// Parts peeled: routing peels the plan at every worker, a decoder its own sub-plan.
    pub peeled_parts: u64,
    /// Bytes checksummed.
    pub checksummed_bytes: u64,
    /// Bytes XORed into or out of packets.
    pub xored_bytes: u64,
    /// Bytes copied (messages assembled or parsed, caches restored, records stored).
    pub copied_bytes: u64,
    /// Multiply-adds of training and aggregating.
    pub coordinates: u64,
    /// Multiply-adds of the held-out loss ([`LearnerSpec::loss_work`]).
    pub loss_coordinates: u64,
    /// Points handled drawing the next assignment and building its instance: every point once,
    /// and every cached point.
    pub drawn_points: u64,
    /// Points the cache policy looked at choosing next caches: each cache and batch.
    pub kept_points: u64,
}

/// A cost per unit measured at a few cluster sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    /// The cluster sizes measured, increasing.
    pub workers: Vec<usize>,
    /// Nanoseconds per unit at each.
    pub ns_per_unit: Vec<f64>,
}

impl Scaling {
    /// One cost at every size.
    pub fn flat(ns_per_unit: f64) -> Scaling {
        Scaling { workers: vec![1], ns_per_unit: vec![ns_per_unit] }
    }

    /// The cost per unit at `workers`: measured there, or on the power law through the two
    /// nearest sizes measured (a single size: the same everywhere).
    pub fn at(&self, workers: usize) -> f64 {
        let points: Vec<(f64, f64)> = self
            .workers
            .iter()
            .zip(&self.ns_per_unit)
            .filter(|(n, c)| **n > 0 && c.is_finite() && **c > 0.0)
            .map(|(&n, &c)| (n as f64, c))
            .collect();
        match points.as_slice() {
            [] => 0.0,
            [(_, c)] => *c,
            _ => {
                let n = workers.max(1) as f64;
                let i = points.iter().position(|(m, _)| *m >= n).unwrap_or(points.len() - 1).max(1);
                let ((n0, c0), (n1, c1)) = (points[i - 1], points[i]);
                if n0 == n1 {
                    return c1;
                }
                let exponent = (c1 / c0).ln() / (n1 / n0).ln();
                c0 * (n / n0).powf(exponent)
            }
        }
    }
}

/// What computing costs, calibrated on one machine (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CostModel {
    /// Nanoseconds per byte XORed.
    pub xor_ns_per_byte: f64,
    /// Nanoseconds per byte copied.
    pub copy_ns_per_byte: f64,
    /// Nanoseconds per byte checksummed (CRC-32C).
    pub checksum_ns_per_byte: f64,
    /// Nanoseconds per part pair verified, by cluster size.
    pub verify: Scaling,
    /// Nanoseconds per part peeled, by cluster size.
    pub peel: Scaling,
    /// Nanoseconds per request planned, by planner name and cluster size.
    pub plan: BTreeMap<String, Scaling>,
    /// Nanoseconds per multiply-add, by learner ([`LearnerSpec::kind`]).
    pub coordinate_ns: BTreeMap<String, f64>,
    /// Nanoseconds per multiply-add of the held-out loss, by learner (a learner missing here is
    /// priced at its `coordinate_ns`).
    #[serde(default)]
    pub loss_ns: BTreeMap<String, f64>,
    /// Nanoseconds per point drawn into the next instance ([`Work::drawn_points`]).
    #[serde(default)]
    pub draw_ns_per_point: f64,
    /// Nanoseconds per point the cache policy looks at ([`Work::kept_points`]).
    #[serde(default)]
    pub keep_ns_per_point: f64,
}

impl CostModel {
    /// The prices of a run of `planner` training `learner` on `workers` workers.
    pub fn prices(
        &self,
        planner: &str,
        learner: &LearnerSpec,
        workers: usize,
    ) -> Result<Prices, CostModelError> {
        let plan = self.plan.get(planner).ok_or_else(|| CostModelError::Planner {
            planner: planner.to_string(),
            known: self.plan.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
        let coordinate = *self
            .coordinate_ns
            .get(learner.kind())
            .ok_or_else(|| CostModelError::Learner { learner: learner.kind().to_string() })?;
        Ok(Prices {
            request_ns: plan.at(workers),
            verified_pair_ns: self.verify.at(workers),
            peeled_part_ns: self.peel.at(workers),
            checksummed_byte_ns: self.checksum_ns_per_byte,
            xored_byte_ns: self.xor_ns_per_byte,
            copied_byte_ns: self.copy_ns_per_byte,
            coordinate_ns: coordinate,
            loss_coordinate_ns: self.loss_ns.get(learner.kind()).copied().unwrap_or(coordinate),
            drawn_point_ns: self.draw_ns_per_point,
            kept_point_ns: self.keep_ns_per_point,
        })
    }
}

/// A [`CostModel`]'s prices for one run: nanoseconds per unit of each count of [`Work`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// Per request planned.
    pub request_ns: f64,
    /// Per part pair verified.
    pub verified_pair_ns: f64,
    /// Per part peeled.
    pub peeled_part_ns: f64,
    /// Per byte checksummed.
    pub checksummed_byte_ns: f64,
    /// Per byte XORed.
    pub xored_byte_ns: f64,
    /// Per byte copied.
    pub copied_byte_ns: f64,
    /// Per multiply-add.
    pub coordinate_ns: f64,
    /// Per multiply-add of the held-out loss.
    pub loss_coordinate_ns: f64,
    /// Per point drawn into the next instance.
    pub drawn_point_ns: f64,
    /// Per point the cache policy looks at.
    pub kept_point_ns: f64,
}

impl Prices {
    /// What `work` costs (rounded to the nanosecond).
    pub fn cost(&self, work: &Work) -> Duration {
        let ns = work.requests as f64 * self.request_ns
            + work.verified_pairs as f64 * self.verified_pair_ns
            + work.peeled_parts as f64 * self.peeled_part_ns
            + work.checksummed_bytes as f64 * self.checksummed_byte_ns
            + work.xored_bytes as f64 * self.xored_byte_ns
            + work.copied_bytes as f64 * self.copied_byte_ns
            + work.coordinates as f64 * self.coordinate_ns
            + work.loss_coordinates as f64 * self.loss_coordinate_ns
            + work.drawn_points as f64 * self.drawn_point_ns
            + work.kept_points as f64 * self.kept_point_ns;
        Duration::from_nanos(if ns.is_finite() && ns > 0.0 { ns.round() as u64 } else { 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_follows_the_power_law_between_and_beyond_the_sizes_measured() {
        let s = Scaling { workers: vec![20, 80], ns_per_unit: vec![10.0, 40.0] }; // linear in n
        assert!((s.at(20) - 10.0).abs() < 1e-9 && (s.at(80) - 40.0).abs() < 1e-9);
        assert!((s.at(40) - 20.0).abs() < 1e-9);
        assert!((s.at(160) - 80.0).abs() < 1e-9 && (s.at(10) - 5.0).abs() < 1e-9);
        assert_eq!(Scaling::flat(3.0).at(1000), 3.0);
    }

    #[test]
    fn prices_add_up_the_work_and_name_what_is_missing() {
        let learner = LearnerSpec::LinearRegression { features: 3, step_size: 0.1, local_passes: 1 };
        let model = CostModel {
            xor_ns_per_byte: 1.0,
            copy_ns_per_byte: 0.5,
            checksum_ns_per_byte: 0.0,
            verify: Scaling::flat(0.0),
            peel: Scaling::flat(2.0),
            plan: [("uncoded".to_string(), Scaling::flat(100.0))].into(),
            coordinate_ns: [(learner.kind().to_string(), 4.0)].into(),
            loss_ns: [(learner.kind().to_string(), 8.0)].into(),
            draw_ns_per_point: 3.0,
            keep_ns_per_point: 0.0,
        };
        let prices = model.prices("uncoded", &learner, 20).unwrap_or_else(|e| panic!("{e}"));
        let work = Work {
            requests: 2,
            xored_bytes: 10,
            copied_bytes: 4,
            peeled_parts: 1,
            coordinates: 1,
            loss_coordinates: 2,
            drawn_points: 5,
            kept_points: 7,
            ..Work::default()
        };
        assert_eq!(prices.cost(&work), Duration::from_nanos(200 + 10 + 2 + 2 + 4 + 16 + 15));
        let err = model.prices("coded", &learner, 20).unwrap_err().to_string();
        assert!(err.contains("'coded'") && err.contains("uncoded"), "{err}");
    }
}
