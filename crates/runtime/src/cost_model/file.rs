//! A [`CostModel`] as a TOML file (`results/cost-model.toml` in the repository): written with a
//! header saying what it is and how it was made, read back with serde.

use std::path::Path;

use super::{CostModel, Scaling};

/// The command that writes the committed cost model.
pub const CALIBRATE_COMMAND: &str = "cargo xtask calibrate";

/// Why a cost-model file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CostModelFileError {
    /// The file cannot be read.
    #[error("cannot read {path} (write it with `{CALIBRATE_COMMAND}`): {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a cost model.
    #[error("{path} is not a cost model: {source}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        source: toml::de::Error,
    },
}

/// Reads a cost model written by [`to_toml`].
pub fn load(path: &Path) -> Result<CostModel, CostModelFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| CostModelFileError::Read { path: shown.clone(), source })?;
    toml::from_str(&text).map_err(|source| CostModelFileError::Parse { path: shown, source })
}

/// Four significant digits, as TOML.
fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0.0".into();
    }
    let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{x:.digits$}");
    if text.contains('.') { text } else { format!("{text}.0") }
}

fn scaling_table(name: &str, s: &Scaling) -> String {
    let workers: Vec<String> = s.workers.iter().map(usize::to_string).collect();
    let costs: Vec<String> = s.ns_per_unit.iter().map(|&c| number(c)).collect();
    format!("[{name}]\nworkers = [{}]\nns_per_unit = [{}]\n", workers.join(", "), costs.join(", "))
}

/// The cost model as TOML, with a header saying what it is and where it was made (`made_on`:
/// the machine and the date).
pub fn to_toml(model: &CostModel, made_on: &str) -> String {
    let mut text = format!(
        "# The cost model of the emulated clusters' computing (ubershuffle_runtime::CostModel):\n\
         # nanoseconds per unit of work, measured on the real kernels. Experiments that run the\n\
         # epoch loop in charged mode price every node's computing with it, so their times repeat\n\
         # exactly. Planning, verifying and peeling are per cluster size (the power law through the\n\
         # nearest two sizes in between and beyond); planning per planner (a planner past its reach\n\
         # at a size has no entry there). `{CALIBRATE_COMMAND} --check` measures every price again.\n\
         # Written by `{CALIBRATE_COMMAND}` on {made_on}.\n\n\
         xor_ns_per_byte = {}\ncopy_ns_per_byte = {}\nchecksum_ns_per_byte = {}\n\
         draw_ns_per_point = {}\nkeep_ns_per_point = {}\n\n",
        number(model.xor_ns_per_byte),
        number(model.copy_ns_per_byte),
        number(model.checksum_ns_per_byte),
        number(model.draw_ns_per_point),
        number(model.keep_ns_per_point),
    );
    text += &scaling_table("verify", &model.verify);
    text += "\n";
    text += &scaling_table("peel", &model.peel);
    for (name, s) in &model.plan {
        text += "\n";
        text += &scaling_table(&format!("plan.{name}"), s);
    }
    for (table, prices) in [("coordinate_ns", &model.coordinate_ns), ("loss_ns", &model.loss_ns)] {
        text += &format!("\n[{table}]\n");
        for (kind, ns) in prices {
            text += &format!("{kind} = {}\n", number(*ns));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_toml_form_reads_back() {
        let model = CostModel {
            xor_ns_per_byte: 0.0312345,
            copy_ns_per_byte: 0.25,
            checksum_ns_per_byte: 0.05,
            verify: Scaling { workers: vec![20, 100], ns_per_unit: vec![12.5, 30.0] },
            peel: Scaling::flat(3.0),
            plan: [("clique-cover".to_string(), Scaling { workers: vec![20], ns_per_unit: vec![4800.0] })]
                .into(),
            coordinate_ns: [("linear-regression".to_string(), 0.75)].into(),
            loss_ns: [("matrix-completion".to_string(), 9.5)].into(),
            draw_ns_per_point: 12.5,
            keep_ns_per_point: 30.25,
        };
        let back: CostModel = toml::from_str(&to_toml(&model, "a test")).unwrap();
        assert_eq!(back.verify, model.verify);
        assert_eq!((&back.plan, &back.loss_ns), (&model.plan, &model.loss_ns));
        assert!((back.xor_ns_per_byte - 0.03123).abs() < 1e-12);
        assert_eq!((back.draw_ns_per_point, back.keep_ns_per_point), (12.5, 30.25));
        assert_eq!(number(4800.0), "4800.0");
        assert_eq!(number(12345.6), "12346.0");
    }
}
