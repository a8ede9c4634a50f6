#![doc = include_str!("../README.md")]

mod error;
mod library;
mod planner;
mod table;
#[doc(hidden)] // for this workspace's tests, benches and examples
pub mod workspace_plugins;

pub use error::PluginError;
pub use library::{PluginLibrary, SchemeInfo};
pub use planner::PluginPlanner;
