//! [`RunFingerprint`]: what decides a run's numbers, written into its checkpoint (and a front
//! end's summary).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::CheckedRunConfig;
use crate::run_data::RunData;

/// The key of the data's digest.
const DATA: &str = "data";

/// The settings that decide a run's numbers (workers, points, cache, seed, policy, learner,
/// planner and its search budget, candidates) and a digest of its data, as `key = value` text. Epochs, the chunk
/// size, timeouts and transports do not change the numbers, so a resumed run may change them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunFingerprint(BTreeMap<String, String>);

impl RunFingerprint {
    /// The fingerprint of a run of `config` planned by `planner` over `data`.
    pub fn of(config: &CheckedRunConfig, planner: &str, data: &RunData) -> RunFingerprint {
        let mut keys = BTreeMap::new();
        let mut put = |k: &str, v: String| keys.insert(k.to_string(), v);
        put("workers", config.workers.to_string());
        put("points", config.points().to_string());
        put("cache", config.cache_capacity.to_string());
        put("seed", config.seed.to_string());
        put("policy", format!("{}:{}", config.policy.name(), config.policy.fraction()));
        put("learner", format!("{:?}", config.learner));
        put("planner", planner.to_string());
        put("plan-budget", format!("{}s", config.plan_budget.as_secs_f64()));
        put("candidates", config.candidates.map_or_else(|| "none".to_string(), |c| c.to_string()));
        let held_out = crate::run_data::fixed_digest(&data.held_out);
        put(DATA, format!("train {}, held-out {held_out}", data.train.digest()));
        RunFingerprint(keys)
    }

    /// The first setting on which `saved` (another run's) differs from this one, as
    /// `key: SAVED there, THIS here`.
    pub fn difference(&self, saved: &RunFingerprint) -> Option<String> {
        let mut keys: Vec<&String> = self.0.keys().chain(saved.0.keys()).collect();
        // The settings first: a changed setting changes the data too, and is the better news.
        keys.sort_by_key(|k| (k.as_str() == DATA, k.as_str()));
        keys.dedup();
        keys.into_iter().find(|k| self.0.get(*k) != saved.0.get(*k)).map(|k| {
            let show = |v: Option<&String>| v.map_or("unset", |v| v.as_str()).to_string();
            format!("{k}: {} there, {} here", show(saved.0.get(k)), show(self.0.get(k)))
        })
    }
}

impl fmt::Display for RunFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(" "))
    }
}
