//! The experiments' side of the cost model (`ubershuffle_runtime::cost_model`): the learners it
//! prices (Table 1's), and `cargo xtask calibrate` (measure and write) and `cargo xtask
//! calibrate --check` (measure again and compare). Where the committed model lives is
//! `results/cost-model.toml` (`epoch_runs::COST_MODEL_FILE`), beside the charged runs that read it; this module depends on
//! the experiments, not the other way round.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use ubershuffle_runtime::CostModel;
use ubershuffle_runtime::cost_model::{self, BAND, LearnerSample, PriceCheck, SIZES};

use crate::experiments::epoch_runs::{self, committed, committed_path};
use crate::report::machine::{machine_description, today};

/// Table 1's learners on data of its shape, as the calibration prices them.
fn learners() -> anyhow::Result<Vec<LearnerSample>> {
    let setups = [
        epoch_runs::matrix_completion(10_000, 2000, 100, 20, 0.2, 1)?,
        epoch_runs::linear_regression_setup(10_000, 191, 20, 0.14, 1)?,
    ];
    Ok(setups
        .into_iter()
        .map(|s| LearnerSample { spec: s.learner, data: Arc::unwrap_or_clone(s.data) })
        .collect())
}

/// Measures the cost model on this machine at every size the experiments use.
pub fn measure(progress: &dyn Fn(&str)) -> anyhow::Result<CostModel> {
    Ok(cost_model::calibrate(&SIZES, &learners()?, progress)?)
}

/// Measures the cost model and writes it beside the results; returns the path.
pub fn calibrate(progress: &dyn Fn(&str)) -> anyhow::Result<PathBuf> {
    let model = measure(progress)?;
    let path = committed_path();
    let made_on = format!("{}, {}", machine_description(), today());
    ubershuffle_runtime::write_atomically(&path, cost_model::to_toml(&model, &made_on).as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Measures every price again and compares it with the committed model; `inject` multiplies
/// the measured prices named (see `cost_model::scaled`) to show that the check notices.
/// Returns every check and a printable table of them.
pub fn check(
    inject: Option<(&str, f64)>,
    progress: &dyn Fn(&str),
) -> anyhow::Result<(Vec<PriceCheck>, String)> {
    let committed = committed()?;
    let mut measured = measure(progress)?;
    if let Some((name, factor)) = inject {
        measured = cost_model::scaled(&measured, name, factor);
    }
    let checks = cost_model::compare(&committed, &measured);
    let mut text = format!(
        "{:<36} {:>12} {:>12} {:>16}\n",
        "price (ns per unit)", "charged", "measured", "charged/measured"
    );
    for c in &checks {
        let flag = if c.within_band() { "" } else { "  <- outside" };
        let measured = c.measured.map_or("-".to_string(), |m| format!("{m:.4}"));
        text += &format!("{:<36} {:>12.4} {:>12} {:>16.2}{flag}\n", c.name, c.charged, measured, c.ratio());
    }
    text += &format!(
        "band: {} to {}; measured alone on one thread, the smallest of {} repetitions",
        BAND.0,
        BAND.1,
        cost_model::REPEATS
    );
    Ok((checks, text))
}

/// Where `calibrate --check --record` writes its comparison, from the workspace root.
pub const CHECK_FILE: &str = "results/calibration-check.csv";

/// Writes `checks` to [`CHECK_FILE`] (one row per price and cluster size, empty where a price
/// does not scale: charged and measured nanoseconds per unit, their ratio, whether it lies
/// within the band); returns the path.
pub fn record(checks: &[PriceCheck]) -> anyhow::Result<PathBuf> {
    let mut csv = String::from("price,workers,charged_ns,measured_ns,charged_over_measured,within_band\n");
    for c in checks {
        let (price, workers) = c.name.split_once(" at n = ").unwrap_or((c.name.as_str(), ""));
        let measured = c.measured.map_or(String::new(), |m| m.to_string());
        let (charged, ratio, within) = (c.charged, c.ratio(), u8::from(c.within_band()));
        csv += &format!("{price},{workers},{charged},{measured},{ratio},{within}\n");
    }
    let path = crate::experiments::workspace_root().join(CHECK_FILE);
    ubershuffle_runtime::write_atomically(&path, csv.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
