//! `gradient-coding`: approximate gradient coding under heterogeneous stragglers (Johri,
//! Yardi and Bodas): the expected decoding error of FRC and CRC three ways (Theorems 1-2,
//! exact enumeration, Monte Carlo) against p_ss and n, what the paper's quoted numbers
//! correspond to, and executed gradient-coded descent on the master/worker runtime with and
//! without shuffled worker roles.
//!
//! Four parts, one file each, every one measuring into its own table:
//! [`expected_error`] (`gradient-coding.csv`), [`readings`] (`-readings.csv`), [`placements`]
//! (`-placements.csv`) and [`executed`] (`-executed.csv`, `-loss.csv`).

mod executed;
mod expected_error;
mod placements;
mod readings;

use ubershuffle_learners::straggler::HeterogeneousParams;

use super::Context;
use crate::report::{Headline, Report};

/// The experiment's name.
pub const NAME: &str = "gradient-coding";
/// What it shows.
pub const ABOUT: &str = "Approximate gradient coding (FRC, CRC) under heterogeneous stragglers, with and without shuffled worker roles (Johri et al.)";

/// The paper's setting (Section V): n = 8, s = 2, p_hat = 0.3, p_ss = 0.8, p_as = 0.01.
const PAPER: HeterogeneousParams = HeterogeneousParams::new(0.3, 0.8, 0.01);
const N: usize = 8;
const S: usize = 2;
/// The paper's quoted expected errors for that setting (Section V): FRC, then CRC. They are
/// only compared with, never used to compute anything.
const PAPER_FRC: f64 = 1.976;
const PAPER_CRC: f64 = 0.5173;
/// 95 % normal intervals.
const Z95: f64 = 1.96;

/// What a run's size is.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// Monte Carlo runs per point of the p_ss sweep (half of it per point of the n sweep).
    runs: usize,
    /// Iterations of an executed run.
    iterations: usize,
    /// Seeds (slow-worker placements) of the executed runs.
    seeds: u64,
}

const QUICK: Sizes = Sizes { runs: 1500, iterations: 200, seeds: 2 };
const FULL: Sizes = Sizes { runs: 6000, iterations: 300, seeds: 6 };

/// Runs the experiment.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sizes = if ctx.quick { QUICK } else { FULL };
    let errors = expected_error::measure(sizes.runs)?;
    let readings = readings::measure()?;
    let placements = placements::measure()?;
    let (runs, losses) = executed::measure(ctx, sizes)?;
    let summary = [
        expected_error::paper_section(&errors),
        readings::section(&readings, &errors),
        expected_error::p_ss_section(&errors, sizes.runs),
        expected_error::n_section(&errors),
        placements::section(&placements),
        executed::section(&runs, sizes),
        ctx.quick_note(&format!(
            "{} Monte Carlo draws per point and executed runs of {} iterations with {} seeds; the full run has {} \
             draws and {} iterations with {} seeds",
            QUICK.runs, QUICK.iterations, QUICK.seeds, FULL.runs, FULL.iterations, FULL.seeds
        )),
    ]
    .concat();
    let mut report = Report::new(summary)
        .table(format!("{NAME}.csv"), &errors)?
        .table(format!("{NAME}-readings.csv"), &readings)?
        .table(format!("{NAME}-placements.csv"), &placements)?
        .table(format!("{NAME}-executed.csv"), &runs)?
        .table(format!("{NAME}-loss.csv"), &losses)?
        .figure("", expected_error::p_ss_chart(&errors))
        .figure("n", expected_error::n_chart(&errors))
        .headlines(headline(&errors));
    for (task, chart) in executed::charts(&losses) {
        report = report.figure(task, chart);
    }
    Ok(report)
}

fn headline(errors: &[expected_error::ExpectedError]) -> Vec<Headline> {
    let value = |code| expected_error::paper_value(errors, code, "analytic");
    let (Some(frc), Some(crc)) = (value("frc"), value("crc")) else { return Vec::new() };
    vec![Headline {
        what: format!("gradient coding, n = {N}, s = {S}: expected error FRC / CRC"),
        ours: format!("{frc:.4} / {crc:.4}"),
        paper: format!("{PAPER_FRC} / {PAPER_CRC} (see `docs/gradient-coding.md`)"),
        table: format!("{NAME}.csv"),
        rows: "sweep=paper_example, method=analytic, code=frc and code=crc".into(),
        machine: false,
    }]
}
