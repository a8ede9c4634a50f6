//! The expressions that tie a number in prose to committed CSV cells: a cell
//! (`results/table1.csv[setup=mc, gbit=1, scheme=ubershuffle].epoch_s`), an aggregate over the
//! matching rows (`median(...)`, `mean`, `min`, `max`, `sum`, `count`), numbers, and `+ - * /`
//! with parentheses, e.g.
//! `results/pliable.csv[workers=20, scheme=auto, candidates=1].transmissions
//! / results/pliable.csv[workers=20, scheme=pliable-greedy, candidates=4].transmissions`.
//!
//! A bare cell must name one value: every matching row must hold the same one (a figure quoted
//! from several rows says how it aggregates them). Filters compare as numbers where both sides
//! are numbers (`gbit=1` matches `1.0`), else as text; besides `=` a filter may be `!=` (text or
//! number) or `<`, `<=`, `>`, `>=` (numbers only), and a value that names a column compares with
//! that column's cell in the same row (`[cycle_packing<worst_case_eq43]`). `count` may leave out the column and counts
//! rows: `count(results/full/carpool-fresh.csv[within_goal=1])` over
//! `count(results/full/carpool-fresh.csv[])` gives "111 of 116".

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::median;

/// Why an expression has no value.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum CellExprError {
    /// The expression does not parse.
    #[error("cannot parse `{expr}` at byte {at}: {reason}")]
    Syntax {
        /// The expression.
        expr: String,
        /// Where it stops making sense.
        at: usize,
        /// What was expected.
        reason: String,
    },
    /// A CSV cannot be read.
    #[error("{file}: {reason}")]
    Csv {
        /// The file, from the repository's root.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// The filters name no row, a column is missing, or a bare cell names several values.
    #[error("{file}: {reason}")]
    Rows {
        /// The file, from the repository's root.
        file: String,
        /// What is wrong.
        reason: String,
    },
}

/// A parsed CSV: its header and rows.
type Csv = (Vec<String>, Vec<Vec<String>>);

/// How a filter compares a cell with its value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Compare {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Compare {
    /// The operators, longest first so that `<=` is not read as `<`.
    const ALL: [(&'static str, Compare); 6] = [
        ("<=", Compare::LessOrEqual),
        (">=", Compare::GreaterOrEqual),
        ("!=", Compare::NotEqual),
        ("<", Compare::Less),
        (">", Compare::Greater),
        ("=", Compare::Equal),
    ];

    /// Whether `cell` passes against `wanted`.
    fn holds(self, cell: &str, wanted: &str) -> bool {
        let numbers = cell.parse::<f64>().ok().zip(wanted.parse::<f64>().ok());
        match (self, numbers) {
            (Compare::Equal, _) => same(cell, wanted),
            (Compare::NotEqual, _) => !same(cell, wanted),
            (Compare::Less, Some((a, b))) => a < b,
            (Compare::LessOrEqual, Some((a, b))) => a <= b,
            (Compare::Greater, Some((a, b))) => a > b,
            (Compare::GreaterOrEqual, Some((a, b))) => a >= b,
            _ => false,
        }
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = Compare::ALL.iter().find(|(_, c)| *c == self.compare).map_or("=", |(op, _)| op);
        write!(f, "{}{op}{}", self.column, self.value)
    }
}

/// One `column OP value` filter.
#[derive(Clone, Debug)]
struct Filter {
    column: String,
    compare: Compare,
    value: String,
}

impl Filter {
    /// Reads `column=value`, `column<=value`, ...; None when no operator is found.
    fn parse(piece: &str) -> Option<Filter> {
        let at = piece.find(['=', '<', '>', '!'])?;
        let (column, rest) = piece.split_at(at);
        let (op, compare) = Compare::ALL.into_iter().find(|(op, _)| rest.starts_with(op))?;
        Some(Filter {
            column: column.trim().to_string(),
            compare,
            value: rest[op.len()..].trim().to_string(),
        })
    }
}

/// Evaluates expressions against the CSVs under one root, reading each file once.
#[derive(Debug)]
pub struct CellEvaluator {
    root: PathBuf,
    files: HashMap<String, Csv>,
}

impl CellEvaluator {
    /// An evaluator reading CSV paths relative to `root` (the repository's root).
    pub fn new(root: &Path) -> Self {
        CellEvaluator { root: root.to_path_buf(), files: HashMap::new() }
    }

    /// The value of `expr`.
    pub fn evaluate(&mut self, expr: &str) -> Result<f64, CellExprError> {
        let mut parser = Parser { text: expr, at: 0, eval: self };
        let value = parser.sum()?;
        parser.skip_space();
        if parser.at != expr.len() {
            return Err(parser.error("an operator or the end"));
        }
        Ok(value)
    }

    /// The rows of `file` matching `filters`; an error when there are none.
    fn rows(
        &mut self,
        file: &str,
        filters: &[Filter],
    ) -> Result<(&[String], Vec<&Vec<String>>), CellExprError> {
        let rows_error = |reason: String| CellExprError::Rows { file: file.into(), reason };
        let (header, rows) = self.csv(file)?;
        let mut keys = Vec::new();
        for filter in filters {
            let index = header.iter().position(|h| *h == filter.column);
            // A value that names a column compares with that column's cell of the same row.
            let other = header.iter().position(|h| *h == filter.value);
            keys.push((
                index.ok_or_else(|| rows_error(format!("no column {}", filter.column)))?,
                other,
                filter,
            ));
        }
        let passes = |r: &Vec<String>, (i, other, f): &(usize, Option<usize>, &Filter)| {
            let wanted = other.map_or(Some(f.value.as_str()), |o| r.get(o).map(String::as_str));
            matches!((r.get(*i), wanted), (Some(c), Some(w)) if f.compare.holds(c, w))
        };
        let matching: Vec<&Vec<String>> = rows.iter().filter(|r| keys.iter().all(|k| passes(r, k))).collect();
        if matching.is_empty() {
            let named: Vec<String> = filters.iter().map(Filter::to_string).collect();
            return Err(rows_error(format!("no row with {}", named.join(", "))));
        }
        Ok((header, matching))
    }

    /// The values of `column` in the rows of `file` matching `filters`.
    fn column(&mut self, file: &str, filters: &[Filter], column: &str) -> Result<Vec<f64>, CellExprError> {
        let rows_error = |reason: String| CellExprError::Rows { file: file.into(), reason };
        let (header, matching) = self.rows(file, filters)?;
        let wanted = header
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| rows_error(format!("no column {column}")))?;
        matching
            .iter()
            .map(|r| {
                let cell = r.get(wanted).map_or("", String::as_str);
                cell.parse::<f64>().map_err(|_| rows_error(format!("{column} holds {cell:?}, not a number")))
            })
            .collect()
    }

    /// The file, read and parsed once.
    fn csv(&mut self, file: &str) -> Result<&Csv, CellExprError> {
        if !self.files.contains_key(file) {
            let csv_error = |reason: String| CellExprError::Csv { file: file.into(), reason };
            let mut reader =
                csv::Reader::from_path(self.root.join(file)).map_err(|e| csv_error(e.to_string()))?;
            let header: Vec<String> =
                reader.headers().map_err(|e| csv_error(e.to_string()))?.iter().map(String::from).collect();
            let mut rows = Vec::new();
            for record in reader.records() {
                rows.push(record.map_err(|e| csv_error(e.to_string()))?.iter().map(String::from).collect());
            }
            self.files.insert(file.to_string(), (header, rows));
        }
        self.files
            .get(file)
            .ok_or_else(|| CellExprError::Csv { file: file.into(), reason: "not read".into() })
    }
}

/// Whether a cell holds `wanted`: the same text, or the same number.
fn same(cell: &str, wanted: &str) -> bool {
    cell == wanted || matches!((cell.parse::<f64>(), wanted.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
}

/// Combines the values of a cell reference.
fn aggregate(name: &str, values: &[f64], file: &str) -> Result<f64, CellExprError> {
    let rows_error = |reason: String| CellExprError::Rows { file: file.into(), reason };
    Ok(match name {
        "median" => median(values.iter().copied()),
        "mean" => values.iter().sum::<f64>() / values.len() as f64,
        "min" => values.iter().copied().fold(f64::INFINITY, f64::min),
        "max" => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "sum" => values.iter().sum(),
        "count" => values.len() as f64,
        "" => match values {
            [first, rest @ ..] if rest.iter().all(|v| v == first) => *first,
            _ => {
                return Err(rows_error(format!(
                    "{} rows with different values: aggregate them",
                    values.len()
                )));
            }
        },
        other => return Err(rows_error(format!("unknown aggregate {other}"))),
    })
}

/// A recursive-descent parser that evaluates as it goes.
struct Parser<'a, 'e> {
    text: &'a str,
    at: usize,
    eval: &'e mut CellEvaluator,
}

impl Parser<'_, '_> {
    fn error(&self, expected: &str) -> CellExprError {
        CellExprError::Syntax { expr: self.text.into(), at: self.at, reason: format!("expected {expected}") }
    }

    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        self.at = self.text.len() - self.rest().trim_start().len();
    }

    /// Takes `c` if it comes next.
    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        let found = self.rest().starts_with(c);
        if found {
            self.at += c.len_utf8();
        }
        found
    }

    /// Takes the longest prefix whose characters satisfy `keep`.
    fn take(&mut self, keep: impl Fn(char) -> bool) -> String {
        self.skip_space();
        let length = self.rest().find(|c: char| !keep(c)).unwrap_or(self.rest().len());
        let taken = self.rest()[..length].to_string();
        self.at += length;
        taken
    }

    fn sum(&mut self) -> Result<f64, CellExprError> {
        let mut value = self.product()?;
        loop {
            if self.eat('+') {
                value += self.product()?;
            } else if self.eat('-') {
                value -= self.product()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn product(&mut self) -> Result<f64, CellExprError> {
        let mut value = self.factor()?;
        loop {
            if self.eat('*') {
                value *= self.factor()?;
            } else if self.eat('/') {
                value /= self.factor()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn factor(&mut self) -> Result<f64, CellExprError> {
        if self.eat('-') {
            return Ok(-self.factor()?);
        }
        if self.eat('(') {
            let value = self.sum()?;
            return if self.eat(')') { Ok(value) } else { Err(self.error("`)`")) };
        }
        self.skip_space();
        if self.rest().starts_with("results/") {
            return self.cell("");
        }
        let word = self.take(|c| c.is_ascii_alphanumeric() || c == '.');
        if let Ok(number) = word.parse::<f64>() {
            return Ok(number);
        }
        if word.is_empty() || !self.eat('(') {
            return Err(self.error("a number, `(`, a cell or an aggregate"));
        }
        let value = self.cell(&word)?;
        if self.eat(')') { Ok(value) } else { Err(self.error("`)`")) }
    }

    /// `FILE[filters].column`, aggregated by `how` (empty: one value).
    fn cell(&mut self, how: &str) -> Result<f64, CellExprError> {
        let file = self.take(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
        if !file.ends_with(".csv") || !self.eat('[') {
            return Err(self.error("`results/FILE.csv[`"));
        }
        let Some(close) = self.rest().find(']') else {
            return Err(self.error("`]`"));
        };
        let inside = self.rest()[..close].to_string();
        self.at += close + 1;
        let mut filters = Vec::new();
        for piece in inside.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some(filter) = Filter::parse(piece) else {
                return Err(self.error("`column=value` filters (or `!=`, `<`, `<=`, `>`, `>=`)"));
            };
            filters.push(filter);
        }
        if how == "count" && !self.rest().trim_start().starts_with('.') {
            // `count(FILE[filters])` counts the matching rows.
            return Ok(self.eval.rows(&file, &filters)?.1.len() as f64);
        }
        if !self.eat('.') {
            return Err(self.error("`.column`"));
        }
        let column = self.take(|c| c.is_ascii_alphanumeric() || c == '_');
        let values = self.eval.column(&file, &filters, &column)?;
        aggregate(how, &values, &file)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn cells_aggregates_and_arithmetic() {
        let root = std::env::temp_dir().join(format!("cell-expr-{}", std::process::id()));
        std::fs::create_dir_all(root.join("results")).unwrap();
        std::fs::write(
            root.join("results/t.csv"),
            "scheme,gbit,n\ncoded,1.0,10\ncoded,1.0,30\nuncoded,1.0,20\n",
        )
        .unwrap();
        let mut eval = CellEvaluator::new(&root);
        assert_eq!(eval.evaluate("results/t.csv[scheme=uncoded, gbit=1].n"), Ok(20.0));
        assert_eq!(eval.evaluate("median(results/t.csv[scheme=coded].n)"), Ok(20.0));
        assert_eq!(eval.evaluate("max(results/t.csv[].n) / results/t.csv[scheme=uncoded].n"), Ok(1.5));
        assert_eq!(eval.evaluate("(sum(results/t.csv[scheme=coded].n) - 20) * -1"), Ok(-20.0));
        assert_eq!(eval.evaluate("count(results/t.csv[gbit=1.0].n)"), Ok(3.0));
        assert_eq!(eval.evaluate("count(results/t.csv[scheme=coded])"), Ok(2.0));
        assert_eq!(eval.evaluate("count(results/t.csv[n>=20]) / count(results/t.csv[])"), Ok(2.0 / 3.0));
        assert_eq!(eval.evaluate("sum(results/t.csv[n<30, scheme!=uncoded].n)"), Ok(10.0));
        assert_eq!(eval.evaluate("count(results/t.csv[n>10, n<=30])"), Ok(2.0));
        assert_eq!(
            eval.evaluate("count(results/t.csv[n>gbit, gbit=n])"),
            Err(CellExprError::Rows {
                file: "results/t.csv".into(),
                reason: "no row with n>gbit, gbit=n".into()
            })
        );
        assert_eq!(eval.evaluate("count(results/t.csv[gbit<n])"), Ok(3.0));
        assert_eq!(
            eval.evaluate("count(results/t.csv[scheme>1])").unwrap_err().to_string(),
            "results/t.csv: no row with scheme>1"
        );
        let mut err = |e: &str| eval_err(&mut eval, e);
        assert!(err("results/t.csv[scheme=coded].n").contains("aggregate them"));
        assert!(err("results/t.csv[scheme=none].n").contains("no row with scheme=none"));
        assert!(err("results/t.csv[speed=1].n").contains("no column speed"));
        assert!(err("count(results/t.csv[speed<1])").contains("no column speed"));
        assert!(err("max(results/t.csv[n])").contains("filters"));
        assert!(err("max(results/t.csv[n=1].n)").contains("no row with n=1"));
        assert!(err("max(results/t.csv[])").contains("`.column`"));
        assert!(err("results/t.csv[].scheme").contains("not a number"));
        assert!(err("results/gone.csv[].n").contains("gone.csv"));
        assert!(err("max(results/t.csv[].n) +").contains("expected"));
        assert!(err("2 2").contains("the end"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn eval_err(eval: &mut CellEvaluator, expr: &str) -> String {
        eval.evaluate(expr).unwrap_err().to_string()
    }
}
