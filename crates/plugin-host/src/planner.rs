//! [`PluginPlanner`]: one scheme of a loaded plugin as a [`ShufflePlanner`], whose every plan is
//! verified before it is returned.

use std::path::Path;
use std::sync::Arc;

use rand_core::Rng;
use ubershuffle_core::{Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner, verify};
use ubershuffle_plugin_api::wire::{decode_plan, encode_instance};

use crate::SchemeInfo;
use crate::table::PluginFunctions;

/// One scheme of a loaded plugin, usable wherever a built-in planner is.
///
/// [`ShufflePlanner::plan`] sends the instance to the plugin with a seed drawn from the `rng`
/// it is given (the plugin plans with `ubershuffle_core::rng::seeded(seed)`, so the same `rng`
/// state gives the same plan), then decodes the plan it returns and runs it through
/// [`verify`]: a plan that is malformed or that some worker cannot decode is an error naming
/// the plugin and the first worker that cannot decode, never a plan.
#[derive(Clone)]
pub struct PluginPlanner {
    path: Arc<Path>,
    functions: PluginFunctions,
    index: u32,
    info: SchemeInfo,
}

impl std::fmt::Debug for PluginPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginPlanner").field("path", &self.path).field("scheme", &self.info.name).finish()
    }
}

impl PluginPlanner {
    pub(crate) fn new(path: Arc<Path>, functions: PluginFunctions, index: u32, info: SchemeInfo) -> Self {
        PluginPlanner { path, functions, index, info }
    }

    /// The path of the plugin that exports this scheme, as given when it was loaded.
    pub fn plugin_path(&self) -> &Path {
        &self.path
    }

    fn failed(&self, reason: String) -> PlanError {
        PlanError::Failed {
            planner: self.info.name.clone(),
            reason: format!("plugin {} {reason}", self.path.display()),
        }
    }
}

impl ShufflePlanner for PluginPlanner {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn description(&self) -> &str {
        &self.info.description
    }

    fn plan(&self, inst: &ShuffleInstance, rng: &mut SeededRng) -> Result<Plan, PlanError> {
        let seed = rng.next_u64();
        let bytes = self.functions.plan(self.index, &encode_instance(inst), seed).map_err(|e| {
            self.failed(match e.status {
                Some(ubershuffle_plugin_api::abi::Status::Panicked) => e.to_string(),
                _ => format!("failed: {e}"),
            })
        })?;
        let plan = decode_plan(&bytes)
            .map_err(|e| self.failed(format!("returned bytes that are not a plan: {e}")))?;
        let report =
            verify(inst, &plan).map_err(|e| self.failed(format!("returned a malformed plan: {e}")))?;
        report
            .ensure_valid()
            .map_err(|e| self.failed(format!("returned a plan that does not decode: {e}")))?;
        Ok(plan)
    }
}
