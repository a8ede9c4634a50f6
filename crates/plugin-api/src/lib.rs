#![doc = include_str!("../README.md")]

pub mod abi;
#[doc(hidden)] // what export_planners! expands to; not for plugin authors
pub mod export;
mod macros;
/// The byte forms of instances and plans (defined in `shuffle_core`, re-exported here).
pub use ubershuffle_core::wire;

#[doc(hidden)]
pub use export::PlannerSet;
/// The crate that defines instances, plans and the planner trait, re-exported so that a plugin
/// depends on this one crate and always agrees with it on versions.
pub use ubershuffle_core as shuffle_core;

/// The repository's plugin author's guide, `docs/adding-a-scheme.md`, compiled and run as doc
/// tests so that its examples keep working (only in this workspace's `cargo test`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/adding-a-scheme.md")]
mod adding_a_scheme_guide {}
