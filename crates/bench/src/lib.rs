//! The library half of the `bench` crate: the papers' experiments and what they share (CSV
//! tables, SVG charts, the `results/README.md` sections, atomic writes). The `ubershuffle`
//! and `experiments` binaries are thin layers over it.

pub mod broadcast_demo;
pub mod cluster_job;
pub mod csv_table;
pub mod experiments;
pub mod files;
pub mod svg_chart;
