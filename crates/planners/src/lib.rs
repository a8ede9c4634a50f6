#![doc = include_str!("../README.md")]

pub mod bounds;
mod carpool;
pub mod no_excess;
mod packing;
pub mod planners;
mod pliable_assigner;
mod pliable_paper;
mod receiver_packing;
mod requests;
pub mod scale;
mod tables;

// The problem's types, as the algorithms below name them (`crate::Plan`, `crate::rng`, ...).
#[allow(unused_imports)]
use ubershuffle_core::*;

pub use planners::{PlannerEntry, UnknownScheme, builtin_names, builtin_planners, planner_by_name};
pub use pliable_paper::PaperSetting;
