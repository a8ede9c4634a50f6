//! Typed result rows, and the CSV tables written from them with the `csv` crate.

use serde::Serialize;

use super::ReportError;

/// One row of an experiment's results: a flat struct whose field names are the CSV columns
/// (`Option` fields become empty cells).
pub trait Row: Serialize {
    /// Columns whose values depend on the machine or its load (times, rates, memory), which
    /// `--check` leaves out when it compares a fresh run with the committed results.
    const MACHINE_COLUMNS: &'static [&'static str] = &[];
}

/// A results table: a header, rows of cells, and which columns are machine-dependent.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// File name in the results folder, e.g. `fig3.csv`.
    pub file: String,
    /// Column names.
    pub header: Vec<String>,
    /// Rows of cells, one per header column.
    pub rows: Vec<Vec<String>>,
    /// The columns `--check` skips.
    pub machine_columns: Vec<String>,
}

impl Table {
    /// The table of `rows`, written to `file`. Fails when there are no rows (an experiment that
    /// measured nothing has a bug) or when a machine column is not a field of the row.
    pub fn from_rows<R: Row>(file: impl Into<String>, rows: &[R]) -> Result<Table, ReportError> {
        let file = file.into();
        if rows.is_empty() {
            return Err(ReportError::Empty { file });
        }
        let mut writer = csv::Writer::from_writer(Vec::new());
        for row in rows {
            writer
                .serialize(row)
                .map_err(|e| ReportError::Csv { file: file.clone(), reason: e.to_string() })?;
        }
        let bytes = writer
            .into_inner()
            .map_err(|e| ReportError::Csv { file: file.clone(), reason: e.to_string() })?;
        let (header, cells) = parse_csv(&file, &bytes)?;
        for column in R::MACHINE_COLUMNS {
            if !header.iter().any(|h| h == column) {
                return Err(ReportError::UnknownColumn { file, column: (*column).to_string() });
            }
        }
        let machine_columns = R::MACHINE_COLUMNS.iter().map(|c| (*c).to_string()).collect();
        Ok(Table { file, header, rows: cells, machine_columns })
    }

    /// The table as CSV text (RFC 4180, header first).
    pub fn to_csv(&self) -> Result<String, ReportError> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        let fail = |e: csv::Error| ReportError::Csv { file: self.file.clone(), reason: e.to_string() };
        writer.write_record(&self.header).map_err(fail)?;
        for row in &self.rows {
            writer.write_record(row).map_err(fail)?;
        }
        let bytes = writer
            .into_inner()
            .map_err(|e| ReportError::Csv { file: self.file.clone(), reason: e.to_string() })?;
        String::from_utf8(bytes)
            .map_err(|e| ReportError::Csv { file: self.file.clone(), reason: e.to_string() })
    }

    /// The index of `column`.
    pub fn column(&self, column: &str) -> Option<usize> {
        self.header.iter().position(|h| h == column)
    }
}

/// Parses CSV text into its header and rows of cells.
pub fn parse_csv(file: &str, bytes: &[u8]) -> Result<(Vec<String>, Vec<Vec<String>>), ReportError> {
    let fail = |e: csv::Error| ReportError::Csv { file: file.to_string(), reason: e.to_string() };
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header = reader.headers().map_err(fail)?.iter().map(str::to_string).collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        rows.push(record.map_err(fail)?.iter().map(str::to_string).collect());
    }
    Ok((header, rows))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(Serialize)]
    struct Sample {
        scheme: &'static str,
        note: &'static str,
        count: usize,
        ratio: Option<f64>,
        seconds: f64,
    }

    impl Row for Sample {
        const MACHINE_COLUMNS: &'static [&'static str] = &["seconds"];
    }

    #[test]
    fn rows_become_quoted_csv_with_their_field_names() {
        let rows = [
            Sample { scheme: "coded", note: "a, \"b\"", count: 3, ratio: Some(0.5), seconds: 1.25 },
            Sample { scheme: "uncoded", note: "", count: 7, ratio: None, seconds: 0.5 },
        ];
        let table = Table::from_rows("t.csv", &rows).unwrap();
        assert_eq!(table.header, ["scheme", "note", "count", "ratio", "seconds"]);
        assert_eq!(table.machine_columns, ["seconds"]);
        assert_eq!(
            table.to_csv().unwrap(),
            "scheme,note,count,ratio,seconds\ncoded,\"a, \"\"b\"\"\",3,0.5,1.25\nuncoded,,7,,0.5\n"
        );
        let (header, cells) = parse_csv("t.csv", table.to_csv().unwrap().as_bytes()).unwrap();
        assert_eq!((header, cells), (table.header.clone(), table.rows.clone()));
    }

    #[derive(Serialize)]
    struct Typo {
        seconds: f64,
    }

    impl Row for Typo {
        const MACHINE_COLUMNS: &'static [&'static str] = &["secs"];
    }

    #[test]
    fn empty_tables_and_unknown_machine_columns_are_errors() {
        assert!(matches!(Table::from_rows::<Sample>("e.csv", &[]), Err(ReportError::Empty { .. })));
        let typo = Table::from_rows("t.csv", &[Typo { seconds: 1.0 }]);
        assert!(matches!(typo, Err(ReportError::UnknownColumn { column, .. }) if column == "secs"));
    }
}
