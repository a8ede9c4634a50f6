//! README's headline table: a few figures per experiment, each computed from the experiment's
//! own rows and naming the CSV row it comes from.
//!
//! Every run of an experiment into the default results folders replaces its rows of
//! `results/headline.csv` (keyed by experiment and run, quick or full); README's table between
//! [`BEGIN`] and [`END`] is then rendered from that file, the full run's row where an
//! experiment has both. `--check` renders it again and compares it with README.

use serde::{Deserialize, Serialize};

use super::ReportError;
use super::table::{Row, Table, parse_csv};

/// The marker line before README's headline table.
pub const BEGIN: &str =
    "<!-- headline table: written by `cargo xtask experiments` from results/headline.csv -->";
/// The marker line after it.
pub const END: &str = "<!-- end of headline table -->";

/// One headline figure, as an experiment computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Headline {
    /// What is measured, e.g. "coded / UberShuffle packets, n = 20, q = 1e6, alpha = 0.55".
    pub what: String,
    /// Our figure, formatted.
    pub ours: String,
    /// The paper's figure (or "(ours)" where the paper has none).
    pub paper: String,
    /// The experiment's CSV it comes from, e.g. `fig3.csv`.
    pub table: String,
    /// The row(s) of that CSV it comes from, as `column=value` pairs.
    pub rows: String,
    /// Whether the figure depends on the machine (a time); `--check` skips those.
    pub machine: bool,
}

/// A line of `results/headline.csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadlineRecord {
    /// The experiment's name.
    pub experiment: String,
    /// `quick` or `full`.
    pub run: String,
    /// What is measured.
    pub what: String,
    /// Our figure.
    pub ours: String,
    /// The paper's figure.
    pub paper: String,
    /// The CSV file (from the workspace root) and the rows.
    pub source: String,
    /// The command that regenerates it.
    pub command: String,
    /// Whether it depends on the machine.
    pub machine: bool,
}

impl Row for HeadlineRecord {}

/// The records of a `headline.csv` text (empty text: none).
pub fn parse_records(text: &str) -> Result<Vec<HeadlineRecord>, ReportError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    reader
        .deserialize()
        .collect::<Result<Vec<HeadlineRecord>, _>>()
        .map_err(|e| ReportError::Csv { file: "headline.csv".into(), reason: e.to_string() })
}

/// The records after replacing those of (`experiment`, `run`) with `fresh`, ordered by the
/// experiments' `order`, full runs first, keeping each experiment's own order.
pub fn merge(
    mut records: Vec<HeadlineRecord>,
    experiment: &str,
    run: &str,
    fresh: Vec<HeadlineRecord>,
    order: &[&str],
) -> Vec<HeadlineRecord> {
    records.retain(|r| !(r.experiment == experiment && r.run == run));
    records.extend(fresh);
    let rank = |r: &HeadlineRecord| {
        (order.iter().position(|o| *o == r.experiment).unwrap_or(order.len()), r.run != "full")
    };
    records.sort_by_key(|r| rank(r));
    records
}

/// `headline.csv`'s text.
pub fn to_csv(records: &[HeadlineRecord]) -> Result<String, ReportError> {
    if records.is_empty() {
        return Ok(String::new());
    }
    Table::from_rows("headline.csv", records)?.to_csv()
}

/// README's table: per experiment, its full run's records where it has any, else its quick
/// run's.
pub fn render(records: &[HeadlineRecord]) -> String {
    let has_full = |e: &str| records.iter().any(|r| r.experiment == e && r.run == "full");
    let mut text =
        String::from("| what | ours | the paper | from | run it |\n| --- | --- | --- | --- | --- |\n");
    for r in records.iter().filter(|r| r.run == "full" || !has_full(&r.experiment)) {
        let (file, rows) = r.source.split_once(": ").unwrap_or((&r.source, ""));
        let rows = if rows.is_empty() { String::new() } else { format!(" ({rows})") };
        text += &format!(
            "| {} | {} | {} | [`{file}`]({file}){rows} | `{}` |\n",
            r.what, r.ours, r.paper, r.command
        );
    }
    text
}

/// `readme` with the text between the markers replaced by `table`; an error when the markers
/// are missing.
pub fn replace_block(readme: &str, table: &str) -> Result<String, ReportError> {
    let (Some(start), Some(stop)) = (readme.find(BEGIN), readme.find(END)) else {
        return Err(ReportError::Markers);
    };
    if stop < start {
        return Err(ReportError::Markers);
    }
    Ok(format!("{}{BEGIN}\n{table}{}", &readme[..start], &readme[stop..]))
}

/// The text between the markers.
pub fn current_block(readme: &str) -> Result<&str, ReportError> {
    let (Some(start), Some(stop)) = (readme.find(BEGIN), readme.find(END)) else {
        return Err(ReportError::Markers);
    };
    readme.get(start + BEGIN.len() + 1..stop).ok_or(ReportError::Markers)
}

/// Parses `headline.csv` into a table (for `--check`).
pub fn parse_table(text: &str) -> Result<(Vec<String>, Vec<Vec<String>>), ReportError> {
    parse_csv("headline.csv", text.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn record(experiment: &str, run: &str, what: &str) -> HeadlineRecord {
        HeadlineRecord {
            experiment: experiment.into(),
            run: run.into(),
            what: what.into(),
            ours: "1".into(),
            paper: "2".into(),
            source: format!("results/{experiment}.csv: a=1"),
            command: format!("cargo xtask experiments {experiment}"),
            machine: false,
        }
    }

    #[test]
    fn a_run_replaces_its_own_rows_and_full_runs_win_in_the_readme() {
        let order = ["fig3", "msr"];
        let records = merge(Vec::new(), "msr", "quick", vec![record("msr", "quick", "load")], &order);
        let records = merge(records, "fig3", "quick", vec![record("fig3", "quick", "ratio q")], &order);
        let records = merge(records, "fig3", "full", vec![record("fig3", "full", "ratio f")], &order);
        let records = merge(records, "msr", "quick", vec![record("msr", "quick", "load 2")], &order);
        let whats: Vec<&str> = records.iter().map(|r| r.what.as_str()).collect();
        assert_eq!(whats, ["ratio f", "ratio q", "load 2"]);
        let table = render(&records);
        assert!(table.contains("ratio f") && !table.contains("ratio q") && table.contains("load 2"));
        assert!(table.contains("[`results/fig3.csv`](results/fig3.csv) (a=1)"));
        let text = to_csv(&records).unwrap();
        assert_eq!(parse_records(&text).unwrap(), records);
    }

    #[test]
    fn the_block_between_the_markers_is_replaced() {
        let readme = format!("intro\n{BEGIN}\nold\n{END}\nrest\n");
        let new = replace_block(&readme, "| new |\n").unwrap();
        assert_eq!(new, format!("intro\n{BEGIN}\n| new |\n{END}\nrest\n"));
        assert_eq!(current_block(&new).unwrap(), "| new |\n");
        assert!(matches!(replace_block("no markers", "x"), Err(ReportError::Markers)));
    }
}
