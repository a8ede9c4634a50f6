//! Write a shuffling scheme as a plugin: a dynamic library that `ubershuffle` loads at run time,
//! so a new scheme needs no fork of the workspace.
//!
//! A plugin is a `cdylib` crate that depends on this one, implements
//! [`ubershuffle_core::ShufflePlanner`] as a built-in planner would, and exports it in one line:
//!
//! ```
//! use ubershuffle_plugin_api::shuffle_core::{Part, Plan, PlanError, SeededRng, ShuffleInstance, ShufflePlanner};
//!
//! /// Unicasts every needed point, last worker first.
//! pub struct Backwards;
//!
//! impl ShufflePlanner for Backwards {
//!     fn name(&self) -> &str { "backwards" }
//!     fn description(&self) -> &str { "unicast every needed point, last worker first" }
//!     fn plan(&self, inst: &ShuffleInstance, _rng: &mut SeededRng) -> Result<Plan, PlanError> {
//!         let mut plan = Plan::new();
//!         for worker in (0..inst.workers()).rev() {
//!             for point in inst.needs(worker) {
//!                 plan.push(&[Part::new(point, worker)]);
//!             }
//!         }
//!         Ok(plan)
//!     }
//! }
//!
//! ubershuffle_plugin_api::export_planners!(Backwards);
//! ```
//!
//! with, in its `Cargo.toml`, `[lib] crate-type = ["cdylib"]` and a dependency on this crate.
//! `cargo build --release` then gives `target/release/lib<name>.so` (`.dylib` on macOS,
//! `<name>.dll` on Windows), and `ubershuffle plan --plugin that/file ...` runs it; the host
//! verifies every plan it returns. `examples/plugins/pairwise-xor` is a complete plugin.
//!
//! What crosses the boundary is specified in [`abi`] (the symbols and the function table) and
//! [`wire`] (instances and plans as bytes). Random choices: the host passes a `u64` seed and
//! the plugin side hands the planner `ubershuffle_core::rng::seeded(seed)`, so a plugin is as
//! reproducible as a built-in. A panic in the planner is caught inside the plugin and reported
//! as an error with its message and location; build plugins with the default `panic = "unwind"`
//! (with `panic = "abort"` a panic ends the host process).

pub mod abi;
pub mod export;
mod macros;
/// The byte forms of instances and plans (defined in `shuffle_core`, re-exported here).
pub use ubershuffle_core::wire;

pub use export::PlannerSet;
/// The crate that defines instances, plans and the planner trait, re-exported so that a plugin
/// depends on this one crate and always agrees with it on versions.
pub use ubershuffle_core as shuffle_core;
