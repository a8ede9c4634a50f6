//! `experiment-seconds.csv`: how long each experiment of a run took, beside `headline.csv` (in
//! `results/` for the committed runs, in a run's own folder for the others). README states the
//! quick run's total from the committed file, and a run prints its times beside these.

use std::path::Path;

use serde::{Deserialize, Serialize};
use ubershuffle_runtime::write_atomically;

use super::ReportError;
use super::table::{Row, Table};

/// The file's name.
pub const FILE: &str = "experiment-seconds.csv";

/// One experiment's time in one kind of run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSeconds {
    /// The experiment.
    pub experiment: String,
    /// `quick` or `full`.
    pub run: String,
    /// Seconds from its start to its report (its files not included), on the machine of its
    /// section in the results README.
    pub seconds: f64,
}

impl Row for RunSeconds {
    const MACHINE_COLUMNS: &'static [&'static str] = &["seconds"];
}

/// The records of the file at `path` (none when it is missing or unreadable).
pub fn read(path: &Path) -> Vec<RunSeconds> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    csv::Reader::from_reader(text.as_bytes()).deserialize().collect::<Result<_, _>>().unwrap_or_default()
}

/// The seconds of `experiment` in a `run` (`quick` or `full`) among `records`.
pub fn of(records: &[RunSeconds], experiment: &str, run: &str) -> Option<f64> {
    records.iter().find(|r| r.experiment == experiment && r.run == run).map(|r| r.seconds)
}

/// Replaces the record of (`fresh.experiment`, `fresh.run`) in the file at `path`, keeping the
/// experiments in `order`, full runs first.
pub fn record(path: &Path, fresh: RunSeconds, order: &[&str]) -> Result<(), ReportError> {
    let mut records = read(path);
    records.retain(|r| !(r.experiment == fresh.experiment && r.run == fresh.run));
    records.push(fresh);
    let rank = |r: &RunSeconds| {
        (order.iter().position(|o| *o == r.experiment).unwrap_or(order.len()), r.run != "full")
    };
    records.sort_by_key(|r| rank(r));
    write_atomically(path, Table::from_rows(FILE, &records)?.to_csv()?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_run_replaces_its_own_record_in_order() {
        let dir = std::env::temp_dir().join(format!("run-seconds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE);
        let _ = std::fs::remove_file(&path);
        let order = ["fig3", "msr"];
        let at = |experiment: &str, run: &str, seconds: f64| RunSeconds {
            experiment: experiment.into(),
            run: run.into(),
            seconds,
        };
        record(&path, at("msr", "quick", 7.0), &order).unwrap();
        record(&path, at("fig3", "quick", 111.0), &order).unwrap();
        record(&path, at("fig3", "full", 451.0), &order).unwrap();
        record(&path, at("fig3", "quick", 98.5), &order).unwrap();
        let records = read(&path);
        assert_eq!(records, [at("fig3", "full", 451.0), at("fig3", "quick", 98.5), at("msr", "quick", 7.0)]);
        assert_eq!(of(&records, "fig3", "quick"), Some(98.5));
        assert_eq!(of(&records, "msr", "full"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
