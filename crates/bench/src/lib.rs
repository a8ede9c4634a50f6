//! The papers' experiments and what they share (CSV tables, SVG charts, the
//! `results/README.md` sections). The `experiments` binary, run through
//! `cargo xtask experiments`, is a thin layer over it.

pub mod csv_table;
pub mod experiments;
pub mod svg_chart;
