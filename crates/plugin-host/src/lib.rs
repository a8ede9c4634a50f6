//! Loads shuffling-scheme plugins, dynamic libraries built against `plugin-api`, and hands out
//! their schemes as [`ubershuffle_core::ShufflePlanner`]s that work wherever a built-in does.
//!
//! ```no_run
//! use ubershuffle_plugin_host::PluginLibrary;
//! use ubershuffle_core::{GeneratorParams, ShufflePlanner, seeded};
//! let plugin = PluginLibrary::load("target/release/libpairwise_xor.so")?;
//! let planner = plugin.planner(None)?; // its only scheme; or Some("pairwise-xor")
//! let inst = GeneratorParams { workers: 10, points: 10_000, alpha: 0.3, seed: 1 }.check()?.generate();
//! let plan = planner.plan(&inst, &mut seeded(1))?; // already verified
//! println!("{}: {} transmissions", planner.name(), plan.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What the host guarantees:
//! - it loads only the path it is given, never a name searched for in system directories;
//! - it checks the plugin's ABI version before calling anything else, with a clear error for a
//!   plugin built for another version;
//! - it never unloads a library, so planners built from it stay valid for the process;
//! - every plan a plugin returns is decoded from bytes with bounds checks and verified by
//!   peeling at every worker before it is handed out;
//! - a panic inside the plugin comes back as an error with its message (the plugin side of
//!   `plugin-api` catches it), and the host process goes on.
//!
//! Why a crate of its own: `shuffle-core` stays a pure library with no FFI and no `unsafe`, a
//! plugin author's build does not compile the loader, and any program (not only `ubershuffle`)
//! can host plugins. The ABI itself is defined once, in `ubershuffle_plugin_api::abi`.

mod error;
mod library;
mod planner;
mod table;
pub mod workspace_plugins;

pub use error::PluginError;
pub use library::{PluginLibrary, SchemeInfo};
pub use planner::PluginPlanner;
