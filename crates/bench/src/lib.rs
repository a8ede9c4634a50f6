//! The papers' experiments ([`experiments`]) and the one reporter they share ([`report`]:
//! typed rows to CSV, Markdown and SVG; the results READMEs; README's headline table; the
//! `--check` against committed results). The `experiments` binary, run through
//! `cargo xtask experiments`, is a thin layer over it.

pub mod calibration;
pub mod carpool_milp;
pub mod experiments;
pub mod report;
