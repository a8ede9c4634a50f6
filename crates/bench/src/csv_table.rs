//! [`CsvTable`]: the rows an experiment measured, written as CSV.

use std::fmt::Display;

/// A header and rows of cells, written as RFC 4180 CSV.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CsvTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl CsvTable {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        CsvTable { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row; it must have one cell per column.
    ///
    /// # Panics
    /// Panics when the row's length differs from the header's (a bug in the experiment).
    pub fn push(&mut self, row: Vec<String>) {
        assert_eq!(row.len(), self.header.len(), "row {row:?} does not match header {:?}", self.header);
        self.rows.push(row);
    }

    /// The rows so far.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The table as CSV text.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = row.iter().map(|c| quote(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }
}

/// A cell from anything printable.
pub fn cell(value: impl Display) -> String {
    value.to_string()
}

fn quote(cell: &str) -> String {
    if cell.contains([',', '"', '\n']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_what_needs_quoting() {
        let mut t = CsvTable::new(&["scheme", "note"]);
        t.push(vec![cell("coded"), cell("a, \"b\"")]);
        assert_eq!(t.to_csv(), "scheme,note\ncoded,\"a, \"\"b\"\"\"\n");
    }
}
