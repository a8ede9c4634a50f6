//! The one reporter: experiments measure into typed rows ([`Row`]) and compute their summary
//! and headline figures from those rows; this module renders them as CSV (the `csv` crate),
//! Markdown and SVG charts (`plotters`), writes them ([`write`](mod@write)) and compares a fresh run with
//! the committed results ([`check`]).

pub mod cell_expr;
pub mod chart;
pub mod check;
pub mod citation;
pub mod compare;
pub mod digest;
pub mod documents;
pub mod goals;
pub mod headline;
pub mod machine;
pub mod run_seconds;
pub mod sections;
pub mod table;
pub mod write;

pub use chart::{LineChart, Series};
pub use headline::Headline;
pub use table::{Row, Table};

/// Why a report cannot be made or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// An experiment produced no rows for a table.
    #[error("{file}: the experiment produced no rows")]
    Empty {
        /// The table's file.
        file: String,
    },
    /// A machine column that is not a field of the row type.
    #[error("{file}: machine column {column} is not a column of the table")]
    UnknownColumn {
        /// The table's file.
        file: String,
        /// The column named.
        column: String,
    },
    /// CSV could not be written or read.
    #[error("{file}: {reason}")]
    Csv {
        /// The file.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// A chart could not be drawn.
    #[error("chart: {0}")]
    Chart(String),
    /// README lacks the headline markers.
    #[error("README.md lacks the headline table's markers ({})", headline::BEGIN)]
    Markers,
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A figure of a report: `suffix` empty for `NAME.svg`, else `NAME-suffix.svg`.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The file-name suffix.
    pub suffix: String,
    /// The chart.
    pub chart: LineChart,
}

/// What an experiment reports: its tables, figures, a Markdown summary computed from its rows,
/// and headline figures for README.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The tables, each written to its own CSV.
    pub tables: Vec<Table>,
    /// The figures.
    pub figures: Vec<Figure>,
    /// Markdown for the experiment's section of the results README.
    pub summary: String,
    /// Figures for README's headline table.
    pub headlines: Vec<Headline>,
    /// Flags the regenerating command needs besides the experiment's name and `--quick`
    /// (e.g. `--plugin PATH`).
    pub rerun_flags: Vec<String>,
    /// In a sample of a full run (`--check --sample`): the committed files of the experiment it
    /// does not re-run (`headline.csv` for its headline rows); anything else committed must be
    /// produced again.
    pub sample_leaves_out: Vec<String>,
}

impl Report {
    /// A report with this summary and nothing else yet.
    pub fn new(summary: impl Into<String>) -> Self {
        Report { summary: summary.into(), ..Default::default() }
    }

    /// Adds a table of `rows` written to `file`.
    pub fn table<R: Row>(mut self, file: impl Into<String>, rows: &[R]) -> Result<Self, ReportError> {
        self.tables.push(Table::from_rows(file, rows)?);
        Ok(self)
    }

    /// Adds a figure (`suffix` empty for the main one).
    pub fn figure(mut self, suffix: impl Into<String>, chart: LineChart) -> Self {
        self.figures.push(Figure { suffix: suffix.into(), chart });
        self
    }

    /// Adds headline figures.
    pub fn headlines(mut self, headlines: impl IntoIterator<Item = Headline>) -> Self {
        self.headlines.extend(headlines);
        self
    }
}

/// A Markdown table.
pub fn markdown_table<R: AsRef<[String]>>(header: &[&str], rows: impl IntoIterator<Item = R>) -> String {
    let mut text = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(header.len()));
    for row in rows {
        text += &format!("| {} |\n", row.as_ref().join(" | "));
    }
    text
}

/// The median of `values` (NaN when empty).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.into_iter().collect();
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_median() {
        let rows = vec![vec!["a".to_string(), "1".to_string()]];
        assert_eq!(markdown_table(&["x", "y"], rows), "| x | y |\n| --- | --- |\n| a | 1 |\n");
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median([]).is_nan());
    }
}
